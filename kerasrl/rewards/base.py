"""Reward-signal base class (behaviour.md §10)."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kerasrl.envs.base import StepResult
from kerasrl.settings import RewardSignalSettings


class RewardSignalResult(NamedTuple):
    scaled_reward: np.ndarray
    unscaled_reward: np.ndarray


class RewardSignal:
    """A source of reward with its own value head and discount; ``strength`` scales it.

    ``use_terminal_states``: whether a terminated episode bootstraps from 0 (extrinsic) or
    keeps the value estimate (intrinsic signals).
    """

    short_name = "Base"
    use_terminal_states = True
    needs_next_observations = False

    def __init__(self, settings: RewardSignalSettings) -> None:
        self.settings = settings
        self.strength = settings.strength
        self.gamma = settings.gamma
        self.stat_name = f"Policy/{self.short_name} Reward"
        self.value_name = f"Policy/{self.short_name} Value Estimate"

    def evaluate(self, current: StepResult, next_result: StepResult, next_rows: np.ndarray) -> RewardSignalResult:
        """Rewards for the transitions into ``next_rows`` of ``next_result``."""
        zeros = np.zeros(len(next_rows), np.float32)
        return RewardSignalResult(zeros, zeros)

    def update(self, update_buffer: Any, n_sequences: int) -> dict[str, float]:
        """Train the signal's own model on the update buffer; returns its loss statistics
        (TensorBoard keys). Called once per policy update; signals without a model return ``{}``."""
        return {}
