"""The reward_signals section of a trainer config: one settings class per signal type."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _build, _Checked, _closest, _mapping, at_least, positive, setting, unit_interval


@dataclass(frozen=True, kw_only=True)
class RewardSignalSettings(_Checked):
    """A reward signal: ``strength`` scales it, ``gamma`` discounts it."""

    strength: float = setting(check=at_least(0.0), doc="scale of the reward")
    gamma: float = setting(check=unit_interval, doc="discount factor")


@dataclass(frozen=True, kw_only=True)
class CuriositySettings(RewardSignalSettings):
    """Curiosity (an intrinsic curiosity module): a reward for steps its forward model predicts badly."""

    encoding_size: int = setting(check=at_least(1), doc="size of the state encoding")
    learning_rate: float = setting(3.0e-4, positive, "the curiosity model's Adam step size")
    num_epoch: int = setting(3, at_least(1), "passes over the update buffer")


@dataclass(frozen=True, kw_only=True)
class GAILSettings(RewardSignalSettings):
    """GAIL: a reward from a discriminator trained to tell the agent's steps from a demonstration's."""

    demo_path: str = setting(doc="expert demonstrations (.demo file or folder)")
    encoding_size: int = setting(64, at_least(1), "size of the visual encodings")
    learning_rate: float = setting(3.0e-4, positive, "the discriminator's Adam step size")
    num_epoch: int = setting(3, at_least(1), "passes per update")
    samples_per_update: int = setting(0, at_least(0), "samples per update (0: all)")
    use_actions: bool = setting(False, doc="the discriminator also sees actions and done flags")
    use_vail: bool = setting(False, doc="variational bottleneck (VAIL)")


@dataclass(frozen=True, kw_only=True)
class RNDSettings(RewardSignalSettings):
    """RND (random network distillation): a reward for observations a trained predictor has not yet
    learned to map to a fixed random network's encoding of them."""

    encoding_size: int = setting(128, at_least(1), "size of the random encoding (the networks' hidden units)")
    learning_rate: float = setting(1.0e-4, positive, "the predictor's Adam step size")
    num_epoch: int = setting(3, at_least(1), "passes over the update buffer")


REWARD_SIGNAL_SETTINGS: dict[str, type[RewardSignalSettings]] = {
    "extrinsic": RewardSignalSettings, "curiosity": CuriositySettings, "gail": GAILSettings, "rnd": RNDSettings,
}


def _default_reward_signals() -> dict[str, RewardSignalSettings]:
    return {"extrinsic": RewardSignalSettings(strength=1.0, gamma=0.99)}


def _reward_signals(where: str, value: Any) -> dict[str, RewardSignalSettings]:
    signals = _mapping(where, "reward_signals", value)
    if not signals:
        raise TrainerConfigError(f"No reward signals were defined in {where}. At least one must be used.")
    out: dict[str, RewardSignalSettings] = {}
    for name, params in signals.items():
        cls = REWARD_SIGNAL_SETTINGS.get(name)
        if cls is None:
            raise TrainerConfigError(f"Unknown reward signal type {name} in {where}{_closest(name, REWARD_SIGNAL_SETTINGS)}")
        raw = _mapping(where, f"reward_signals.{name}", params)
        try:
            out[name] = _build(cls, where, raw, f"reward signal {name}")
        except TrainerConfigError as e:
            if f"reward signal {name}" in str(e):
                raise
            raise TrainerConfigError(f"reward_signals.{name}: {e}") from None  # a value's error names its signal
    return out
