"""The environment's own reward, scaled by ``strength``."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from kerasrl.fields import Field
from kerasrl.rewards.base import RewardSignal, RewardSignalResult
from kerasrl.spec import StepResult


class ExtrinsicRewardSignal(RewardSignal):
    short_name = "Extrinsic"

    def evaluate(self, current: StepResult, next_result: StepResult, next_rows: np.ndarray) -> RewardSignalResult:
        unscaled = next_result.rewards[next_rows]
        return RewardSignalResult(unscaled * np.float32(self.strength), unscaled)

    @property
    def batch_fields(self) -> list[str]:
        return [Field.ENVIRONMENT_REWARDS]

    def evaluate_batch(self, batch: Mapping[str, np.ndarray]) -> RewardSignalResult:
        unscaled = np.asarray(batch[Field.ENVIRONMENT_REWARDS], np.float32)
        return RewardSignalResult(unscaled * np.float32(self.strength), unscaled)
