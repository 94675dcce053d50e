"""Reward-signal base class (ML-Agents 0.9's ``reward_signals``)."""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from kerasrl.settings import NetworkSettings, RewardSignalSettings
from kerasrl.spec import BehaviorSpec, StepResult


class RewardSignalResult(NamedTuple):
    scaled_reward: np.ndarray
    unscaled_reward: np.ndarray


class RewardSignal:
    """A source of reward with its own value head and discount; ``strength`` scales it.

    ``use_terminal_states``: whether a terminated episode bootstraps from 0 (extrinsic) or
    keeps the value estimate (intrinsic signals).
    ``per_step``: rewards come from ``evaluate`` while experience is collected (cheap numpy,
    the environment's reward); otherwise from ``evaluate_batch`` over whole trajectories when
    they close, one compiled call for every trajectory closed at once.
    ``needs_next_observations``: the agent processor stores the next observations
    (``Field.NEXT_VECTOR_OBS``, ``Field.next_visual_obs(j)``) for this signal.
    """

    short_name = "Base"
    use_terminal_states = True
    needs_next_observations = False
    per_step = True

    def __init__(self, settings: RewardSignalSettings, spec: Optional[BehaviorSpec] = None,
                 network: Optional[NetworkSettings] = None, seed: int = 0, jit_compile: bool = False) -> None:
        self.settings = settings
        self.spec = spec
        self.network = network if network is not None else NetworkSettings()
        self.seed = int(seed)
        self.strength = settings.strength
        self.gamma = settings.gamma
        self.stat_name = f"Policy/{self.short_name} Reward"
        self.value_name = f"Policy/{self.short_name} Value Estimate"

    @property
    def sequence_length(self) -> int:
        """Rows per training sequence of the update buffer (1 without LSTM memory)."""
        return self.network.sequence_length if self.network.use_recurrent else 1

    def evaluate(self, current: StepResult, next_result: StepResult, next_rows: np.ndarray) -> RewardSignalResult:
        """Rewards for the transitions into ``next_rows`` of ``next_result`` (``per_step`` signals)."""
        zeros = np.zeros(len(next_rows), np.float32)
        return RewardSignalResult(zeros, zeros)

    def evaluate_batch(self, batch: Mapping[str, np.ndarray]) -> RewardSignalResult:
        """Rewards for a batch of stored transitions (``Field`` names → arrays, one row each)."""
        n = len(batch[next(iter(batch))]) if batch else 0
        zeros = np.zeros(n, np.float32)
        return RewardSignalResult(zeros, zeros)

    @property
    def batch_fields(self) -> list[str]:
        """The stored fields ``evaluate_batch`` reads."""
        return []

    def use_normalizer(self, normalizer: Optional[Any]) -> None:
        """Read vector observations through the policy's running normalizer (``None``: raw). The
        trainer calls it once with its model's normalizer; only GAIL's discriminator uses it."""

    def checkpoint_state(self) -> Optional[Any]:
        """A trackable object with the signal's training state (model, optimizer), saved in the
        trainer's checkpoints; ``None`` for signals without one."""
        return None

    def update(self, update_buffer: Any, n_sequences: int) -> dict[str, float]:
        """Train the signal's own model on the update buffer; returns its loss statistics
        (TensorBoard keys). Called once per policy update; signals without a model return ``{}``."""
        return {}
