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


class RewardStatistics(tf.Module):
    """The checkpointed copy of a :class:`RewardNormalizer`'s running statistics."""

    def __init__(self, count: float, mean: float, var: float) -> None:
        super().__init__(name="reward_normalizer")
        self.count = tf.Variable(count, dtype=tf.float64, trainable=False, name="count")
        self.mean = tf.Variable(mean, dtype=tf.float64, trainable=False, name="mean")
        self.var = tf.Variable(var, dtype=tf.float64, trainable=False, name="var")


class RewardNormalizer:
    """Scales one behavior's rewards, trajectory by trajectory, in the order they closed.

    The statistics are Python floats, updated once per trajectory without a TensorFlow call;
    ``statistics`` holds them as variables for checkpoints (``write_variables`` before a save,
    ``read_variables`` after a restore).
    """

    def __init__(self, gamma: float) -> None:
        self.gamma = float(gamma)
        # SB3's RunningMeanStd starts from count 1e-4, mean 0, variance 1.
        self.count, self.mean, self.var = 1e-4, 0.0, 1.0
        self.statistics = RewardStatistics(self.count, self.mean, self.var)
        self._returns: dict[int, float] = {}

    def write_variables(self) -> None:
        for variable, value in zip(self._variables(), (self.count, self.mean, self.var)):
            variable.assign(value)

    def read_variables(self) -> None:
        self.count, self.mean, self.var = (float(v.numpy()) for v in self._variables())

    def _variables(self) -> tuple[tf.Variable, tf.Variable, tf.Variable]:
        return self.statistics.count, self.statistics.mean, self.statistics.var

    def _update(self, values: np.ndarray) -> None:
        """Merge ``values`` into the running mean and variance (parallel-variance formula)."""
        count, mean = self.count, self.mean
        n, batch_mean, batch_var = len(values), float(np.mean(values)), float(np.var(values))
        total = count + n
        delta = batch_mean - mean
        m2 = self.var * count + batch_var * n + delta ** 2 * count * n / total
        self.count, self.mean, self.var = total, mean + delta * n / total, m2 / total

    def __call__(self, agent_id: int, rewards: np.ndarray, episode_ended: bool) -> np.ndarray:
        """The trajectory's rewards, scaled; updates the statistics with its discounted returns."""
        rewards = np.ascontiguousarray(rewards, np.float64)
        if len(rewards) == 0:
            return rewards.astype(np.float32)
        returns = np.empty_like(rewards)
        g = discounted_returns(rewards, self.gamma, self._returns.get(agent_id, 0.0), returns)
        self._returns[agent_id] = 0.0 if episode_ended else g
        self._update(returns)
        scaled = rewards / np.sqrt(self.var + EPSILON)
        return np.minimum(np.maximum(scaled, -CLIP), CLIP).astype(np.float32)
