"""Everything one behavior's trainer is configured with (:class:`TrainerSettings`), and the
conversion of one flat config section into it.

Every flat key of a section belongs to one typed group: the trainer itself (``trainer``,
``max_steps``, ``time_horizon``, ...), the network, the trainer type's hyper-parameters (the
settings class its registration names, ``kerasrl.settings.registry``), the stand-alone BC
trainers' keys, the reward signals or ``pretraining``. A key of another trainer type's
hyper-parameters is an error in a section's own keys and left out when inherited from ``default``.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol, Union

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.behavioral_cloning import BCTrainerSettings, BehavioralCloningSettings
from kerasrl.settings.checks import _build, _Checked, _closest, _convert, _fields, _mapping, at_least, one_of, setting
from kerasrl.settings.network import NetworkSettings
from kerasrl.settings.registry import trainer_type, trainer_types
from kerasrl.settings.reward_signals import RewardSignalSettings, _default_reward_signals, _reward_signals
from kerasrl.settings.self_play import SELF_PLAY_RENAMED, SelfPlaySettings

INFERENCE_MODES = ("auto", "tf", "numpy")
#: Keys that ML-Agents' own published configs hold and its trainers ignored: read, warned about, dropped.
IGNORED_KEYS = {"gamma": "the discount is each reward signal's gamma (reward_signals.<signal>.gamma)",
                "output_path": "a run writes under --results-dir/--run-id", "framework": "kerasrl trains with TensorFlow"}
logger = logging.getLogger("kerasrl")


class Hyperparameters(Protocol):
    """What every trainer type's hyper-parameters give the parts all trainers share (the reward
    signals' models train with them)."""

    @property
    def batch_size(self) -> int: ...

    @property
    def learning_rate(self) -> float: ...


def registered_type(value: str) -> Optional[str]:
    """The value check of ``trainer``: a registered trainer type (``kerasrl.trainer_types()``)."""
    known = trainer_types()
    return None if value in known else f"must be one of {list(known)}"


@dataclass(frozen=True, kw_only=True)
class TrainerSettings(_Checked):
    """Everything one behavior's trainer is configured with."""

    trainer: str = setting("ppo", registered_type,
                           "trainer type: a registered name (kerasrl.trainer_types(); plugins add theirs)")
    max_steps: int = setting(50_000, at_least(1), "steps to train for (every agent's step counted)")
    time_horizon: int = setting(64, at_least(1), "steps after which a trajectory is cut and bootstrapped")
    summary_freq: int = setting(1000, at_least(1), "steps (every agent's) between summaries")
    inference: str = setting("auto", one_of(*INFERENCE_MODES), "act in numpy (vector policies, MLP or LSTM) or tf")
    threaded: Union[bool, str] = setting(False, doc="update in a thread of its own while acting goes on (data one "
                                                    "update old); auto: where the environment steps in other processes")
    keep_checkpoints: Optional[int] = setting(None, at_least(1), "checkpoints kept (default: the run's "
                                                                  "--keep-checkpoints, 5)")
    checkpoint_interval: Optional[int] = setting(None, at_least(1), "steps between checkpoints (default: the run's "
                                                                     "--save-freq)")
    even_checkpoints: bool = setting(False, doc="space the keep_checkpoints checkpoints evenly over max_steps "
                                                "(checkpoint_interval = max_steps / keep_checkpoints)")
    init_path: Optional[str] = setting(None, doc="a checkpoint folder (a run's models/<behavior>) to start from")
    network: NetworkSettings = field(default_factory=NetworkSettings)
    #: The trainer type's hyper-parameters: an instance of its registered settings class (its defaults when not given).
    hyperparameters: Any = field(default=None, metadata={"group": "the trainer type's settings class"})
    behavioral_cloning: BCTrainerSettings = field(default_factory=BCTrainerSettings)
    reward_signals: Mapping[str, RewardSignalSettings] = field(default_factory=_default_reward_signals)
    pretraining: Optional[BehavioralCloningSettings] = None
    self_play: Optional[SelfPlaySettings] = None

    def _check(self) -> None:
        settings_cls = trainer_type(self.trainer).settings_cls
        if self.hyperparameters is None:
            object.__setattr__(self, "hyperparameters", settings_cls())
        elif not isinstance(self.hyperparameters, settings_cls):
            raise TrainerConfigError(f"The {self.trainer} trainer's hyperparameters must be {settings_cls.__name__}, got "
                                     f"{type(self.hyperparameters).__name__}.")
        if not self.reward_signals:
            raise TrainerConfigError("No reward signals were defined. At least one must be used.")
        if self.even_checkpoints:
            object.__setattr__(self, "checkpoint_interval", max(self.max_steps // (self.keep_checkpoints or 5), 1))
        check_section = getattr(self.hyperparameters, "check_section", None)
        if check_section is not None:
            check_section(self)

    def to_dict(self) -> dict[str, Any]:
        """The flat ML-Agents form (``from_dict`` of it gives these settings back)."""
        flat: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "behavioral_cloning":  # only the BC trainers' keys that are set
                flat.update({k: v for k, v in dataclasses.asdict(value).items() if v is not None})
            elif f.name == "hyperparameters":
                legacy = getattr(value, "LEGACY_KEYS", ())
                flat.update({k: v for k, v in dataclasses.asdict(value).items() if k not in legacy})
            elif f.name == "network":
                flat.update(dataclasses.asdict(value))
            elif f.name == "reward_signals":
                flat[f.name] = {n: dataclasses.asdict(s) for n, s in value.items()}
            elif f.name in ("pretraining", "self_play"):
                if value is not None:
                    flat[f.name] = dataclasses.asdict(value)
            else:
                flat[f.name] = value
        return flat

    @classmethod
    def from_dict(cls, section: Mapping[str, Any], name: str = "the trainer settings") -> "TrainerSettings":
        """Settings from one flat section (keys not given take their defaults)."""
        return _build_settings(_convert_section(name, section), name)


#: The groups every trainer type has, beside its hyper-parameters.
_GROUPS: dict[str, type] = {"network": NetworkSettings, "behavioral_cloning": BCTrainerSettings}
#: Keys whose value is a mapping of its own (``behavioral_cloning:`` is ``pretraining`` under its later name).
_BLOCKS = ("reward_signals", "pretraining", "self_play")
_TOP_LEVEL = tuple(f.name for f in dataclasses.fields(TrainerSettings)
                   if f.name not in _GROUPS and f.name not in ("hyperparameters", *_BLOCKS))
_SHARED_KEYS: dict[str, str] = {
    **{k: "" for k in _TOP_LEVEL},
    **{f.name: group for group, cls in reversed(_GROUPS.items()) for f in dataclasses.fields(cls)},
    **{k: "" for k in _BLOCKS}, "behavioral_cloning": "",
}


def key_groups() -> dict[str, str]:
    """Every flat YAML key → the group holding it ("" for the trainer itself; "hyperparameters" for
    a key of any registered trainer type's hyper-parameters)."""
    own = {f.name: "hyperparameters" for t in trainer_types().values() for f in dataclasses.fields(t.settings_cls)}
    return {**own, **_SHARED_KEYS}


def _group_of(key: str, trainer: str) -> Optional[str]:
    """The group of ``key`` in a section of ``trainer`` (None: a key of no group)."""
    if key in _SHARED_KEYS:
        return _SHARED_KEYS[key]
    return "hyperparameters" if key in key_groups() else None


def _owners(key: str) -> list[str]:
    """The trainer types whose hyper-parameters include ``key``."""
    return [name for name, t in trainer_types().items() if key in _fields(t.settings_cls)]


def _foreign(key: str, trainer: str) -> bool:
    """Whether ``key`` is a hyper-parameter of other trainer types only, not of ``trainer``."""
    return _group_of(key, trainer) == "hyperparameters" and trainer not in _owners(key)


def inherited_values(default_values: Mapping[str, Any], trainer: str) -> dict[str, Any]:
    """The ``default`` section's values that a section of ``trainer`` takes (another trainer's
    hyper-parameters are left out: a ``default`` of PPO keys under a SAC behavior)."""
    return {k: v for k, v in default_values.items() if not _foreign(k, trainer)}


def section_trainer(where: str, section: Mapping[str, Any], inherited: Optional[str] = None) -> str:
    """The trainer type a raw section trains with (its own ``trainer``, else ``inherited``, else the default)."""
    value = section.get("trainer", inherited if inherited is not None else TrainerSettings.trainer)
    f, hint = _fields(TrainerSettings)["trainer"]
    return str(_convert(where, f, hint, value))


def _field_of(key: str, group: str, trainer: str) -> tuple[dataclasses.Field, Any]:
    if group == "":
        return _fields(TrainerSettings)[key]
    if group != "hyperparameters":
        return _fields(_GROUPS[group])[key]
    owners = _owners(key)
    owner = trainer if trainer in owners else owners[0]
    return _fields(trainer_type(owner).settings_cls)[key]


def _convert_section(where: str, section: Mapping[str, Any], inherited_trainer: Optional[str] = None) -> dict[str, Any]:
    """One raw section's values, converted and checked (each error names the key and section)."""
    trainer = section_trainer(where, section, inherited_trainer)
    out: dict[str, Any] = {}
    for key, value in section.items():
        group = _group_of(key, trainer)
        if key in IGNORED_KEYS:
            logger.warning("%s in %s is ignored, as ML-Agents ignored it: %s.", key, where, IGNORED_KEYS[key])
            continue
        if group is None:
            raise TrainerConfigError(f"Unknown parameter {key} in {where}{_closest(key, key_groups())}")
        if key == "reward_signals":
            out[key] = _reward_signals(where, value)
        elif key in ("pretraining", "behavioral_cloning"):
            if "pretraining" in out:
                raise TrainerConfigError(f"{where} has both pretraining and behavioral_cloning (its later name): keep one.")
            raw = _mapping(where, key, value)
            out["pretraining"] = _build(BehavioralCloningSettings, where, raw, key) if raw else None
        elif key == "self_play":
            out[key] = _self_play(where, value)
        else:
            f, hint = _field_of(key, group, trainer)
            out[key] = _convert(where, f, hint, value)
    return out


def _self_play(where: str, value: Any) -> Optional[SelfPlaySettings]:
    """A ``self_play`` mapping (an empty one: every default); ``null``: no self-play."""
    if value is None:
        return None
    raw = {SELF_PLAY_RENAMED.get(k, k): v for k, v in _mapping(where, "self_play", value).items()}
    return _build(SelfPlaySettings, where, raw, "self_play")


def _build_settings(values: Mapping[str, Any], where: str) -> TrainerSettings:
    """Settings from converted flat values; a check that spans several keys names the section."""
    trainer = values.get("trainer", TrainerSettings.trainer)
    foreign = [k for k in values if _foreign(k, trainer)]
    if foreign:
        owner, *others = _owners(foreign[0])
        also = f" (also of {', '.join(others)})" if others else ""
        raise TrainerConfigError(f"{foreign[0]} in {where} is a hyper-parameter of the {owner} trainer{also}, which the "
                                 f"{trainer} trainer does not use: remove it (or set the trainer it belongs to).")
    try:
        groups = {g: cls(**{k: v for k, v in values.items() if _group_of(k, trainer) == g}) for g, cls in _GROUPS.items()}
        hyperparameters = trainer_type(trainer, where).settings_cls(
            **{k: v for k, v in values.items() if _group_of(k, trainer) == "hyperparameters"})
        return TrainerSettings(**{k: v for k, v in values.items() if _group_of(k, trainer) == ""}, **groups,
                               hyperparameters=hyperparameters)
    except TrainerConfigError as e:
        raise TrainerConfigError(f"In {where}: {e}") from None
