"""Everything one behavior's trainer is configured with (:class:`TrainerSettings`), and the
conversion of one flat config section into it.

Every flat key of a section belongs to one typed group: the trainer itself (``trainer``,
``max_steps``, ``time_horizon``, ...), the network, the PPO hyper-parameters, the SAC
hyper-parameters, the stand-alone BC trainers' keys, the reward signals or ``pretraining``;
:data:`KEY_GROUPS` maps each key to its group. Keys that PPO and SAC share (``batch_size``,
``buffer_size``, ``learning_rate``, ...) go to the group of the section's trainer; a key of the
other trainer's group is an error in a section's own keys and left out when inherited from
``default``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.behavioral_cloning import BCTrainerSettings, BehavioralCloningSettings
from kerasrl.settings.checks import _build, _Checked, _closest, _convert, _fields, _mapping, at_least, one_of, setting
from kerasrl.settings.hyperparameters import PPOSettings
from kerasrl.settings.network import NetworkSettings
from kerasrl.settings.reward_signals import RewardSignalSettings, _default_reward_signals, _reward_signals
from kerasrl.settings.sac import SAC_LEGACY_KEYS, SACSettings

TRAINER_TYPES = ("ppo", "sac", "offline_bc", "online_bc")
#: Trainer types of ML-Agents 0.9 that kerasrl does not provide yet.
#: Keys the stand-alone BC trainers need beyond those with defaults.
BC_TRAINER_REQUIRED_KEYS = {"offline_bc": ("batches_per_epoch", "demo_path"),
                            "online_bc": ("batches_per_epoch", "brain_to_imitate")}
INFERENCE_MODES = ("auto", "tf", "numpy")


@dataclass(frozen=True, kw_only=True)
class TrainerSettings(_Checked):
    """Everything one behavior's trainer is configured with."""

    trainer: str = setting("ppo", one_of(*TRAINER_TYPES), "trainer type")
    max_steps: int = setting(50_000, at_least(1), "steps to train for (every agent's step counted)")
    time_horizon: int = setting(64, at_least(1), "steps after which a trajectory is cut and bootstrapped")
    summary_freq: int = setting(1000, at_least(1), "steps (every agent's) between summaries")
    inference: str = setting("auto", one_of(*INFERENCE_MODES), "act in numpy (vector policies, MLP or LSTM) or tf")
    threaded: bool = setting(False, doc="update in a thread of its own while acting goes on (data one update old)")
    network: NetworkSettings = field(default_factory=NetworkSettings)
    hyperparameters: PPOSettings = field(default_factory=PPOSettings)
    sac: SACSettings = field(default_factory=SACSettings)
    behavioral_cloning: BCTrainerSettings = field(default_factory=BCTrainerSettings)
    reward_signals: Mapping[str, RewardSignalSettings] = field(default_factory=_default_reward_signals)
    pretraining: Optional[BehavioralCloningSettings] = None

    def _check(self) -> None:
        if not self.reward_signals:
            raise TrainerConfigError("No reward signals were defined. At least one must be used.")
        for key in BC_TRAINER_REQUIRED_KEYS.get(self.trainer, ()):
            if getattr(self.behavioral_cloning, key) is None:
                raise TrainerConfigError(f"The hyper-parameter {key} could not be found for the {self.trainer} trainer.")

    def to_dict(self) -> dict[str, Any]:
        """The flat ML-Agents form (``from_dict`` of it gives these settings back)."""
        flat: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "behavioral_cloning":  # only the BC trainers' keys that are set
                flat.update({k: v for k, v in dataclasses.asdict(value).items() if v is not None})
            elif f.name in _GROUPS:
                if f.name == _hyperparameter_group(self.trainer):
                    flat.update({k: v for k, v in dataclasses.asdict(value).items()
                                 if not (f.name == "sac" and k in SAC_LEGACY_KEYS)})
                elif f.name not in _HYPERPARAMETER_GROUPS:
                    flat.update(dataclasses.asdict(value))
            elif f.name == "reward_signals":
                flat[f.name] = {n: dataclasses.asdict(s) for n, s in value.items()}
            elif f.name == "pretraining":
                if value is not None:
                    flat[f.name] = dataclasses.asdict(value)
            else:
                flat[f.name] = value
        return flat

    @classmethod
    def from_dict(cls, section: Mapping[str, Any], name: str = "the trainer settings") -> "TrainerSettings":
        """Settings from one flat section (keys not given take their defaults)."""
        return _build_settings(_convert_section(name, section), name)


_GROUPS: dict[str, type] = {"network": NetworkSettings, "hyperparameters": PPOSettings, "sac": SACSettings,
                            "behavioral_cloning": BCTrainerSettings}
#: The groups of one trainer's hyper-parameters (a section uses one of them).
_HYPERPARAMETER_GROUPS = ("hyperparameters", "sac")
_TOP_LEVEL = tuple(f.name for f in dataclasses.fields(TrainerSettings)
                   if f.name not in _GROUPS and f.name not in ("reward_signals", "pretraining"))
#: Flat YAML key → the group holding it ("" for the trainer itself).
KEY_GROUPS: dict[str, str] = {
    **{k: "" for k in _TOP_LEVEL},
    **{f.name: group for group, cls in reversed(_GROUPS.items()) for f in dataclasses.fields(cls)},
    "reward_signals": "", "pretraining": "",
}
_SAC_KEYS = frozenset(f.name for f in dataclasses.fields(SACSettings))


def _hyperparameter_group(trainer: str) -> str:
    return "sac" if trainer == "sac" else "hyperparameters"


def _group_of(key: str, trainer: str) -> str:
    """The group of ``key`` in a section of ``trainer`` (shared PPO/SAC keys: the trainer's own)."""
    if trainer == "sac" and key in _SAC_KEYS:
        return "sac"
    return KEY_GROUPS[key]


def _foreign(key: str, trainer: str) -> bool:
    """Whether ``key`` is a hyper-parameter of another trainer than ``trainer``."""
    group = _group_of(key, trainer)
    return group in _HYPERPARAMETER_GROUPS and group != _hyperparameter_group(trainer)


def inherited_values(default_values: Mapping[str, Any], trainer: str) -> dict[str, Any]:
    """The ``default`` section's values that a section of ``trainer`` takes (another trainer's
    hyper-parameters are left out: a ``default`` of PPO keys under a SAC behavior)."""
    return {k: v for k, v in default_values.items() if not _foreign(k, trainer)}


def _convert_section(where: str, section: Mapping[str, Any]) -> dict[str, Any]:
    """One raw section's values, converted and checked (each error names the key and section)."""
    top = _fields(TrainerSettings)
    group_fields = {group: _fields(cls) for group, cls in _GROUPS.items()}
    out: dict[str, Any] = {}
    for key, value in section.items():
        group = KEY_GROUPS.get(key)
        if group is None:
            raise TrainerConfigError(f"Unknown parameter {key} in {where}{_closest(key, KEY_GROUPS)}")
        if key == "reward_signals":
            out[key] = _reward_signals(where, value)
        elif key == "pretraining":
            raw = _mapping(where, key, value)
            out[key] = _build(BehavioralCloningSettings, where, raw, "pretraining") if raw else None
        else:
            f, hint = (group_fields[group] if group else top)[key]
            out[key] = _convert(where, f, hint, value)
    return out


def _build_settings(values: Mapping[str, Any], where: str) -> TrainerSettings:
    """Settings from converted flat values; a check that spans several keys names the section."""
    trainer = values.get("trainer", TrainerSettings.trainer)
    foreign = [k for k in values if _foreign(k, trainer)]
    if foreign:
        owner = "PPO" if _group_of(foreign[0], trainer) == "hyperparameters" else "SAC"
        raise TrainerConfigError(f"{foreign[0]} in {where} is a {owner} hyper-parameter, which the {trainer} trainer "
                                 f"does not use: remove it (or set the trainer it belongs to).")
    try:
        groups = {g: cls(**{k: v for k, v in values.items() if _group_of(k, trainer) == g})
                  for g, cls in _GROUPS.items()}
        return TrainerSettings(**{k: v for k, v in values.items() if KEY_GROUPS[k] == ""}, **groups)
    except TrainerConfigError as e:
        raise TrainerConfigError(f"In {where}: {e}") from None
