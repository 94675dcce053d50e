"""Extrinsic rewards divided by the running spread of the discounted return (``normalize_rewards``).

As Stable-Baselines3's ``VecNormalize(norm_reward=True)``, which the RL-Zoo uses for MuJoCo:
every agent keeps a discounted return ``G ← γ·G + r`` (0 again after its episode ends); the
running variance of all those returns scales every reward, ``r / sqrt(var + 1e-8)``, clipped
to ±10. The value heads then learn returns of order one whatever the task's reward scale.
The running statistics are checkpointed with the trainer; the returns of episodes in flight
are not (after a resume they start again at 0).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from kerasrl._kernels import discounted_returns

CLIP = 10.0
EPSILON = 1e-8


class RewardNormalizer(tf.Module):
    """Scales one behavior's rewards, trajectory by trajectory, in the order they closed."""

    def __init__(self, gamma: float) -> None:
        super().__init__(name="reward_normalizer")
        self.gamma = float(gamma)
        # SB3's RunningMeanStd starts from count 1e-4, mean 0, variance 1.
        self.count = tf.Variable(1e-4, dtype=tf.float64, trainable=False, name="count")
        self.mean = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="mean")
        self.var = tf.Variable(1.0, dtype=tf.float64, trainable=False, name="var")
        self._returns: dict[int, float] = {}

    def _update(self, values: np.ndarray) -> None:
        """Merge ``values`` into the running mean and variance (parallel-variance formula)."""
        count, mean, var = float(self.count.numpy()), float(self.mean.numpy()), float(self.var.numpy())
        n, batch_mean, batch_var = len(values), float(np.mean(values)), float(np.var(values))
        total = count + n
        delta = batch_mean - mean
        m2 = var * count + batch_var * n + delta ** 2 * count * n / total
        self.count.assign(total)
        self.mean.assign(mean + delta * n / total)
        self.var.assign(m2 / total)

    def __call__(self, agent_id: int, rewards: np.ndarray, episode_ended: bool) -> np.ndarray:
        """The trajectory's rewards, scaled; updates the statistics with its discounted returns."""
        rewards = np.ascontiguousarray(rewards, np.float64)
        if len(rewards) == 0:
            return rewards.astype(np.float32)
        returns = np.empty_like(rewards)
        g = discounted_returns(rewards, self.gamma, self._returns.get(agent_id, 0.0), returns)
        self._returns[agent_id] = 0.0 if episode_ended else g
        self._update(returns)
        scale = np.sqrt(float(self.var.numpy()) + EPSILON)
        return np.clip(rewards / scale, -CLIP, CLIP).astype(np.float32)
