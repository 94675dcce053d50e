"""Reward-signal base class (behaviour.md §10)."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kerasrl.envs.base import StepResult
from kerasrl.exception import TrainerConfigError


class RewardSignalResult(NamedTuple):
    scaled_reward: np.ndarray
    unscaled_reward: np.ndarray


class RewardSignal:
    """A source of reward with its own discount; ``strength`` scales it.

    ``use_terminal_states``: whether a terminated episode bootstraps from 0 (extrinsic) or
    keeps the value estimate (intrinsic signals).
    """

    short_name = "Base"
    required_keys: tuple[str, ...] = ("strength", "gamma")
    optional_keys: tuple[str, ...] = ()
    use_terminal_states = True
    needs_next_observations = False

    def __init__(self, strength: float, gamma: float) -> None:
        self.strength = float(strength)
        self.gamma = float(gamma)
        if not 0.0 <= self.gamma <= 1.0:
            raise TrainerConfigError(f"gamma of the {self.short_name} reward signal must be in [0, 1], got {gamma}.")
        self.stat_name = f"Policy/{self.short_name} Reward"
        self.value_name = f"Policy/{self.short_name} Value Estimate"

    @classmethod
    def check_config(cls, name: str, config: dict[str, Any]) -> None:
        for key in cls.required_keys:
            if key not in config:
                raise TrainerConfigError(f"The hyper-parameter {key} could not be found for {cls.__name__}.")
        unknown = set(config) - set(cls.required_keys) - set(cls.optional_keys)
        if unknown:
            raise TrainerConfigError(f"Unknown parameters given for reward signal {name}: {sorted(unknown)}")

    def evaluate(self, current: StepResult, next_result: StepResult, next_rows: np.ndarray) -> RewardSignalResult:
        """Rewards for the transitions into ``next_rows`` of ``next_result``."""
        zeros = np.zeros(len(next_rows), np.float32)
        return RewardSignalResult(zeros, zeros)

    def update(self, update_buffer: Any, n_sequences: int) -> dict[str, float]:
        return {}
