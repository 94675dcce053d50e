"""The hyper-parameters of ``trainer: poca`` (MA-POCA, ML-Agents' multi-agent posthumous credit
assignment): ML-Agents' ``POCASettings``, which are PPO's keys and defaults, with kerasrl's ends of
the linear decays (``beta_end``, ``epsilon_end``) as PPO has them, and ``jit_compile`` as PPO's.
PPO's other keys (reward normalisation, SB3's options) are not POCA's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _Checked, at_least, one_of, positive, setting, unit_interval
from kerasrl.settings.sac import LEARNING_RATE_SCHEDULES


@dataclass(frozen=True, kw_only=True)
class POCASettings(_Checked):
    """MA-POCA's hyper-parameters (``poca.POCALearner``), ML-Agents' keys and defaults."""

    batch_size: int = setting(1024, at_least(1), "experiences per gradient step")
    buffer_size: int = setting(10240, at_least(1), "update when the update buffer holds more than this")
    beta: float = setting(5.0e-3, at_least(0.0), "entropy bonus (decays linearly to beta_end)")
    beta_end: float = setting(1.0e-5, at_least(0.0), "where the entropy bonus decays to")
    epsilon: float = setting(0.2, positive, "clip range of the policy, value and baseline losses "
                                            "(decays linearly to epsilon_end)")
    epsilon_end: float = setting(0.1, at_least(0.0), "where the clip range decays to")
    lambd: float = setting(0.95, unit_interval, "TD(λ) lambda of the returns")
    learning_rate: float = setting(3.0e-4, positive, "Adam's step size (see learning_rate_schedule)")
    learning_rate_schedule: str = setting("linear", one_of(*LEARNING_RATE_SCHEDULES),
                                          "linear: decays to 1e-10 at max_steps (ML-Agents); constant")
    num_epoch: int = setting(3, at_least(1), "passes over the update buffer")
    jit_compile: Optional[bool] = setting(
        None, doc="compile the update with XLA (default: where measured faster, kerasrl.common.fast_path)")

    def _check(self) -> None:
        if self.batch_size > self.buffer_size + 1:
            raise TrainerConfigError(
                f"batch_size ({self.batch_size}) is larger than an update (buffer_size + 1 = "
                f"{self.buffer_size + 1}): no mini-batch could be drawn.")
