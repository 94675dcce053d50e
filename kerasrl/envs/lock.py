"""A combination lock: a sparse-reward task on which exploration, not luck, finds the reward.

``CombinationLock-v0`` is registered with Gymnasium when this module is imported (which
``import kerasrl.envs`` does, and so do ``kerasrl-learn`` and ``kerasrl.PPO``).
"""
from __future__ import annotations

from typing import Any, Optional

import gymnasium
import numpy as np

__all__ = ["ACTIONS", "CODE_SEED", "COMBINATION_LOCK", "LENGTH", "MAX_STEPS", "CombinationLock"]

COMBINATION_LOCK = "CombinationLock-v0"
LENGTH, ACTIONS, MAX_STEPS = 20, 2, 60
#: Seeds the lock's code, the same in every run whatever the run's seed.
CODE_SEED = 12345


class CombinationLock(gymnasium.Env):
    """A lock of ``length`` positions, each opened by one of ``actions`` actions.

    The code is drawn once from ``CODE_SEED``: the same in every run whatever the run's seed.
    The right action moves the agent one position on, a wrong one back to the start, without
    ending the episode. Opening the lock (reaching the last position) ends the episode with the
    only reward, ``1 − 0.9 · steps / max_steps``; an episode stops, unopened, after
    ``max_steps`` steps. The observation is the position, one-hot (``length + 1`` numbers).

    No action is right more often than the others, so a policy that ignores its position stays
    near the start: a uniformly random one opens the default lock (20 positions, 2 actions, 60
    steps) in about 2 of 100,000 episodes. A novelty bonus such as the curiosity reward signal
    pays for each position reached for the first time, which leads the agent on position by
    position. ``gymnasium.make("CombinationLock-v0", length=12, actions=3, max_steps=36)`` makes
    another lock.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = LENGTH, actions: int = ACTIONS, max_steps: int = MAX_STEPS,
                 render_mode: Optional[str] = None) -> None:
        for name, value, least in (("length", length, 1), ("actions", actions, 2), ("max_steps", max_steps, 1)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
                raise ValueError(f"{COMBINATION_LOCK}: {name} must be an integer >= {least}, got {value!r}.")
        self.code = np.random.default_rng(CODE_SEED).integers(actions, size=length)
        self.length, self.max_steps = int(length), int(max_steps)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (self.length + 1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(int(actions))
        self.position = self.steps = 0

    def _observe(self) -> np.ndarray:
        obs = np.zeros(self.length + 1, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self, *, seed: Optional[int] = None,
              options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = self.steps = 0
        return self._observe(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        self.position = self.position + 1 if int(action) == self.code[self.position] else 0
        opened = self.position == self.length
        reward = 1.0 - 0.9 * self.steps / self.max_steps if opened else 0.0
        return self._observe(), reward, opened, self.steps >= self.max_steps and not opened, {}


def register_lock() -> None:
    """Register ``CombinationLock-v0`` with Gymnasium (once)."""
    if COMBINATION_LOCK not in gymnasium.registry:
        gymnasium.register(COMBINATION_LOCK, entry_point="kerasrl.envs.lock:CombinationLock")


register_lock()
