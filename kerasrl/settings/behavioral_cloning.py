"""Behavioral cloning's settings: the ``pretraining`` section (BC inside PPO or SAC) and the keys of
the stand-alone ``offline_bc`` / ``online_bc`` trainers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _Checked, at_least, setting
from kerasrl.settings.hyperparameters import PPOSettings


@dataclass(frozen=True, kw_only=True)
class BehavioralCloningSettings(_Checked):
    """The ``pretraining`` section: behavioral cloning from demonstrations inside PPO or SAC."""

    demo_path: str = setting(doc="expert demonstrations (.demo file or folder)")
    strength: float = setting(check=at_least(0.0), doc="BC learning rate relative to the trainer's (PPO's or SAC's)")
    steps: int = setting(check=at_least(0), doc="steps over which BC decays to 0 (0: constant)")
    batch_size: Optional[int] = setting(None, at_least(1), "demonstration rows per batch (default: the trainer's)")
    num_epoch: Optional[int] = setting(None, at_least(1), "passes per update (default: PPO's num_epoch; SAC: 1)")
    samples_per_update: int = setting(0, at_least(0), "samples per update (0: all)")


@dataclass(frozen=True, kw_only=True)
class BCTrainerSettings(_Checked):
    """The ``offline_bc`` / ``online_bc`` trainers' own keys; they take
    ``batch_size`` and ``learning_rate`` from :class:`PPOSettings` and the network's keys from
    :class:`NetworkSettings`. Required by those trainers (a missing one is an error naming it),
    ignored by ``ppo``."""

    batches_per_epoch: Optional[int] = setting(None, at_least(1), "mini-batches per update (BC trainers)")
    demo_path: Optional[str] = setting(None, doc="demonstrations to imitate (offline_bc)")
    brain_to_imitate: Optional[str] = setting(None, doc="the teacher behavior (online_bc)")


@dataclass(frozen=True, kw_only=True)
class OfflineBCSettings(PPOSettings):
    """The ``offline_bc`` trainer's hyper-parameters: PPO's keys (it uses ``batch_size``,
    ``learning_rate`` and its schedule, ``num_epoch``), with ``batches_per_epoch`` and
    ``demo_path`` of :class:`BCTrainerSettings` required."""

    REQUIRED_KEYS: ClassVar[tuple[str, ...]] = ("batches_per_epoch", "demo_path")

    def check_section(self, settings: Any) -> None:
        """The BC keys this trainer needs (a missing one is an error naming it)."""
        for key in self.REQUIRED_KEYS:
            if getattr(settings.behavioral_cloning, key) is None:
                raise TrainerConfigError(f"The hyper-parameter {key} could not be found for the {settings.trainer} "
                                         "trainer.")


@dataclass(frozen=True, kw_only=True)
class OnlineBCSettings(OfflineBCSettings):
    """The ``online_bc`` trainer's hyper-parameters: as ``offline_bc``'s, with ``brain_to_imitate``
    (the teacher behavior) required in place of ``demo_path``."""

    REQUIRED_KEYS: ClassVar[tuple[str, ...]] = ("batches_per_epoch", "brain_to_imitate")
