"""The hyper-parameters of ``trainer: sac`` (Soft Actor-Critic), with ML-Agents' SAC keys and defaults.

ML-Agents' first SAC release configured updates with ``train_interval`` (agent steps between
updates) and ``num_update`` (gradient steps per update); later ones with ``steps_per_update``
(agent steps per gradient step). The older keys are still read, as
``steps_per_update = train_interval / num_update``, with a warning naming the new key.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar, Optional

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _Checked, at_least, one_of, positive, setting, unit_interval

logger = logging.getLogger("kerasrl")

LEARNING_RATE_SCHEDULES = ("constant", "linear")
#: Keys of :class:`SACSettings` that only an older ML-Agents release used.
SAC_LEGACY_KEYS = ("train_interval", "num_update")
#: Keras dtype policies the networks' hidden layers can compute in (the weights stay float32).
DTYPE_POLICIES = ("float32", "mixed_bfloat16")


@dataclass(frozen=True, kw_only=True)
class SACSettings(_Checked):
    """Soft Actor-Critic's hyper-parameters and how its updates run (``sac.SACLearner``)."""

    #: Keys only an older ML-Agents release used (read, then folded into ``steps_per_update``).
    LEGACY_KEYS: ClassVar[tuple[str, ...]] = SAC_LEGACY_KEYS

    batch_size: int = setting(128, at_least(1), "transitions per gradient step, drawn uniformly from the replay")
    buffer_size: int = setting(50_000, at_least(1), "the replay buffer's capacity (oldest transitions dropped first)")
    buffer_init_steps: int = setting(0, at_least(0), "agent steps of random actions before the first update")
    init_entcoef: float = setting(1.0, positive, "initial entropy coefficient (tuned automatically afterwards)")
    learning_rate: float = setting(3.0e-4, positive, "Adam's step size of the actor, the critics and the entropy coefficient")
    learning_rate_schedule: str = setting("constant", one_of(*LEARNING_RATE_SCHEDULES),
                                          "constant, or linear decay to 0 at max_steps")
    tau: float = setting(0.005, unit_interval, "soft (Polyak) update rate of the target critics")
    steps_per_update: Optional[float] = setting(None, positive, "agent steps per gradient step (default 1)")
    reward_signal_steps_per_update: Optional[float] = setting(
        None, positive, "agent steps per mini-batch of the reward signals' models (default: steps_per_update)")
    save_replay_buffer: bool = setting(False, doc="checkpoint the replay buffer with the model (--resume continues with it)")
    train_interval: Optional[int] = setting(None, at_least(1), "older ML-Agents: agent steps between updates")
    num_update: Optional[int] = setting(None, at_least(1), "older ML-Agents: gradient steps per update")
    target_entropy_scale: float = setting(1.0, positive, "continuous: target entropy = -scale × action size")
    discrete_target_entropy_scale: float = setting(0.2, positive, "discrete: target entropy = scale × log(branch size)")
    adam_epsilon: float = setting(1.0e-8, positive, "Adam's epsilon (PyTorch-style, as Stable-Baselines3's)")
    jit_compile: Optional[bool] = setting(
        None, doc="compile the update with XLA (default: with use_recurrent only, where it runs the LSTMs about "
                  "twice as fast)")
    dtype_policy: str = setting(
        "float32", one_of(*DTYPE_POLICIES),
        "the Keras dtype policy of the hidden layers and camera encoders: mixed_bfloat16 computes them in "
        "bfloat16 (weights, heads and losses stay float32), whose matrix products CPUs with AMX and recent GPUs "
        "run several times faster")

    def _check(self) -> None:
        legacy = self.train_interval is not None or self.num_update is not None
        if legacy and self.steps_per_update is None:
            object.__setattr__(self, "steps_per_update", (self.train_interval or 1) / (self.num_update or 1))
            logger.warning("train_interval/num_update are older ML-Agents SAC keys: read as steps_per_update = %g "
                           "(write steps_per_update instead).", self.steps_per_update)
        elif legacy:
            logger.warning("train_interval/num_update (older ML-Agents SAC keys) are ignored beside steps_per_update.")
        object.__setattr__(self, "train_interval", None)
        object.__setattr__(self, "num_update", None)
        if self.steps_per_update is None:
            object.__setattr__(self, "steps_per_update", 1.0)
        if self.batch_size > self.buffer_size:
            raise TrainerConfigError(
                f"batch_size ({self.batch_size}) is larger than the replay buffer (buffer_size = {self.buffer_size}).")

    @property
    def agent_steps_per_update(self) -> float:
        """``steps_per_update`` as resolved (never None once the settings are built)."""
        return float(self.steps_per_update or 1.0)

    @property
    def agent_steps_per_signal_update(self) -> float:
        """``reward_signal_steps_per_update``, else ``steps_per_update``."""
        return float(self.reward_signal_steps_per_update or self.agent_steps_per_update)
