"""The environment's own reward, scaled by ``strength``."""
from __future__ import annotations

import numpy as np

from kerasrl.envs.base import StepResult
from kerasrl.rewards.base import RewardSignal, RewardSignalResult


class ExtrinsicRewardSignal(RewardSignal):
    short_name = "Extrinsic"

    def evaluate(self, current: StepResult, next_result: StepResult, next_rows: np.ndarray) -> RewardSignalResult:
        unscaled = next_result.rewards[next_rows]
        return RewardSignalResult(unscaled * np.float32(self.strength), unscaled)
