"""Typed, frozen trainer settings, built once from an ML-Agents trainer config.

A trainer config is ML-Agents 0.9's YAML: a ``default`` section, per-behavior sections that
override it shallowly (a behavior's ``reward_signals`` replaces the default block whole), and
string aliases (``MyBehavior: OtherSection``). Every flat key of a section belongs to one
typed group: the trainer itself (``trainer``, ``max_steps``, ``time_horizon``, ...), the network
(:class:`NetworkSettings`), the PPO hyper-parameters (:class:`PPOSettings`), the reward signals
(:class:`RewardSignalSettings` and its subclasses) and behavioral cloning
(:class:`BehavioralCloningSettings`). The defaults live in these classes and nowhere else.

Loading is strict: an unknown key names the key, its section and the closest known key; a
wrong type or an out-of-range value names the key and the value; YAML's ``1e-5`` (read as a
string) becomes a number here, once. What a run adds (paths, run id, seed, a ``--steps``
override) is a :class:`RunContext`, kept apart from the hyper-parameters.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

import yaml

from kerasrl.exception import TrainerConfigError, one_line

logger = logging.getLogger("kerasrl")

Check = Callable[[Any], Optional[str]]

TRAINER_TYPES = ("ppo", "offline_bc", "online_bc")
#: Trainer types of ML-Agents 0.9 that kerasrl does not provide yet.
UNAVAILABLE_TRAINER_TYPES: tuple[str, ...] = ()
#: Keys the stand-alone BC trainers need beyond those with defaults.
BC_TRAINER_REQUIRED_KEYS = {"offline_bc": ("batches_per_epoch", "demo_path"),
                            "online_bc": ("batches_per_epoch", "brain_to_imitate")}
VIS_ENCODE_TYPES = ("simple", "nature_cnn", "resnet")
CONV_STYLES = ("mlagents", "network")
ACTIVATIONS = ("swish", "tanh", "relu")
INITIALIZERS = ("variance_scaling", "orthogonal")
ADAM_EPSILON_STYLES = ("keras", "torch")
INFERENCE_MODES = ("auto", "tf", "numpy")
GAUSSIAN_STYLES = ("mlagents", "sb3")
RECURRENT_STYLES = ("mlagents", "sb3")
ADVANTAGE_NORMALIZATIONS = ("buffer", "minibatch")


def at_least(low: float) -> Check:
    return lambda v: None if v >= low else f"must be >= {low}"


def positive(v: float) -> Optional[str]:
    return None if v > 0 else "must be > 0"


def unit_interval(v: float) -> Optional[str]:
    return None if 0.0 <= v <= 1.0 else "must be in [0, 1]"


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {list(choices)}"


def setting(default: Any = dataclasses.MISSING, check: Optional[Check] = None, doc: str = "") -> Any:
    """A settings field with its default, its value check and a one-line meaning."""
    return field(default=default, metadata={"check": check, "doc": doc})


class _Checked:
    """Settings built directly in Python are checked as those read from a config are."""

    def __post_init__(self) -> None:
        for name, (f, hint) in _fields(type(self)).items():
            if "check" in f.metadata:
                object.__setattr__(self, name, _convert(type(self).__name__, f, hint, getattr(self, name)))
        self._check()

    def _check(self) -> None:
        """Checks that span several fields."""


@dataclass(frozen=True, kw_only=True)
class NetworkSettings(_Checked):
    """The actor-critic's shape (``models.ActorCritic``)."""

    hidden_units: int = setting(128, at_least(1), "units per hidden layer")
    num_layers: int = setting(2, at_least(1), "hidden layers per stream")
    normalize: bool = setting(False, doc="running mean/variance normalisation of vector observations")
    vis_encode_type: str = setting("simple", one_of(*VIS_ENCODE_TYPES), "visual encoder")
    conv_style: str = setting(
        "mlagents", one_of(*CONV_STYLES),
        "visual encoders' convolutions. mlagents: ML-Agents 0.9's fixed ELU (resnet: ReLU) and Glorot-uniform init; "
        "network: the activation and initializer keys (relu + orthogonal: SB3's NatureCNN)")
    use_recurrent: bool = setting(False, doc="LSTM memory")
    memory_size: int = setting(256, at_least(0), "LSTM state size (cell + hidden), divisible by 4")
    sequence_length: int = setting(64, at_least(1), "steps per training sequence (recurrent only)")
    recurrent_style: str = setting(
        "mlagents", one_of(*RECURRENT_STYLES),
        "where the LSTM sits. mlagents: hidden layers, then the LSTM (discrete actions: with the previous action's "
        "one-hot), then the heads; sb3: the LSTM on the observations, then the hidden layers, then the heads "
        "(sb3-contrib RecurrentPPO's MlpLstmPolicy; vector observations only)")
    activation: str = setting("swish", one_of(*ACTIVATIONS), "hidden units' activation")
    initializer: str = setting("variance_scaling", one_of(*INITIALIZERS), "or Stable-Baselines3's orthogonal gains")
    separate_value_network: Optional[bool] = setting(
        None, doc="separate policy and value streams (default: continuous actions only)")
    gaussian_style: str = setting(
        "mlagents", one_of(*GAUSSIAN_STYLES),
        "continuous actions. mlagents: trainable log σ², entropy averaged over dimensions; sb3: trainable log σ "
        "(Stable-Baselines3's), entropy summed over dimensions")
    log_std_init: float = setting(0.0, lambda v: None if -20.0 <= v <= 5.0 else "must be in [-20, 5]",
                                  "initial log σ of continuous actions (SB3's log_std_init)")
    action_scale: Optional[float] = setting(
        None, positive, "continuous actions: the sample is clipped at ±action_scale and divided by it, giving [-1, 1] "
        "(default 3 for mlagents, 1 for sb3; the Box's half-range puts μ and σ in the env's units, as SB3)")

    def _check(self) -> None:
        if self.use_recurrent and (self.memory_size <= 0 or self.memory_size % 4):
            raise TrainerConfigError(
                f"memory_size must be > 0 and divisible by 4 with use_recurrent (it holds the LSTM cell and hidden "
                f"state of up to two streams), got {self.memory_size}.")


@dataclass(frozen=True, kw_only=True)
class PPOSettings(_Checked):
    """PPO's hyper-parameters and how its update runs (``ppo.PPOLearner``)."""

    batch_size: int = setting(1024, at_least(1), "experiences per gradient step")
    buffer_size: int = setting(10240, at_least(1), "update when the update buffer holds more than this")
    beta: float = setting(5.0e-3, at_least(0.0), "entropy bonus (decays linearly to beta_end)")
    beta_end: float = setting(1.0e-5, at_least(0.0), "where the entropy bonus decays to (SB3's is constant: beta)")
    epsilon: float = setting(0.2, positive, "PPO clip range (decays linearly to epsilon_end)")
    epsilon_end: float = setting(0.1, at_least(0.0), "where the clip range decays to")
    lambd: float = setting(0.95, unit_interval, "GAE lambda")
    learning_rate: float = setting(3.0e-4, positive, "Adam's step size (decays linearly to 1e-10)")
    num_epoch: int = setting(3, at_least(1), "passes over the update buffer")
    clip_value_loss: bool = setting(True, doc="PPO value clipping with the same epsilon")
    max_grad_norm: Optional[float] = setting(None, positive, "clip the global gradient norm (PyTorch's formula)")
    adam_epsilon: float = setting(1.0e-7, positive, "Adam's epsilon")
    adam_epsilon_style: str = setting("keras", one_of(*ADAM_EPSILON_STYLES),
                                      "keras: eps added to sqrt(v); torch: to the bias-corrected sqrt(v)")
    fused_update: bool = setting(True, doc="every epoch and mini-batch of an update in one compiled call")
    jit_compile: Optional[bool] = setting(
        None, doc="compile the update with XLA (default: where measured faster, kerasrl.common.fast_path)")
    flush_on_update: bool = setting(False, doc="cut every trajectory when an update is due (SB3's rollouts)")
    normalize_advantages: str = setting(
        "buffer", one_of(*ADVANTAGE_NORMALIZATIONS),
        "advantages normalised over the update buffer (ML-Agents) or also per mini-batch (SB3)")

    def _check(self) -> None:
        if self.batch_size > self.buffer_size + 1:
            raise TrainerConfigError(
                f"batch_size ({self.batch_size}) is larger than an update (buffer_size + 1 = "
                f"{self.buffer_size + 1}): no mini-batch could be drawn.")


@dataclass(frozen=True, kw_only=True)
class RewardSignalSettings(_Checked):
    """A reward signal: ``strength`` scales it, ``gamma`` discounts it."""

    strength: float = setting(check=at_least(0.0), doc="scale of the reward")
    gamma: float = setting(check=unit_interval, doc="discount factor")


@dataclass(frozen=True, kw_only=True)
class CuriositySettings(RewardSignalSettings):
    encoding_size: int = setting(check=at_least(1), doc="size of the state encoding")
    learning_rate: float = setting(3.0e-4, positive, "the curiosity model's Adam step size")
    num_epoch: int = setting(3, at_least(1), "passes over the update buffer")


@dataclass(frozen=True, kw_only=True)
class GAILSettings(RewardSignalSettings):
    demo_path: str = setting(doc="expert demonstrations (.demo file or folder)")
    encoding_size: int = setting(64, at_least(1), "size of the visual encodings")
    learning_rate: float = setting(3.0e-4, positive, "the discriminator's Adam step size")
    num_epoch: int = setting(3, at_least(1), "passes per update")
    samples_per_update: int = setting(0, at_least(0), "samples per update (0: all)")
    use_actions: bool = setting(False, doc="the discriminator also sees actions and done flags")
    use_vail: bool = setting(False, doc="variational bottleneck (VAIL)")


REWARD_SIGNAL_SETTINGS: dict[str, type[RewardSignalSettings]] = {
    "extrinsic": RewardSignalSettings, "curiosity": CuriositySettings, "gail": GAILSettings,
}


@dataclass(frozen=True, kw_only=True)
class BehavioralCloningSettings(_Checked):
    """The ``pretraining`` section: behavioral cloning from demonstrations inside PPO."""

    demo_path: str = setting(doc="expert demonstrations (.demo file or folder)")
    strength: float = setting(check=at_least(0.0), doc="BC learning rate relative to PPO's")
    steps: int = setting(check=at_least(0), doc="steps over which BC decays to 0 (0: constant)")
    batch_size: Optional[int] = setting(None, at_least(1), "demonstration rows per batch (default: PPO's)")
    num_epoch: Optional[int] = setting(None, at_least(1), "passes per update (default: PPO's)")
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


def _default_reward_signals() -> dict[str, RewardSignalSettings]:
    return {"extrinsic": RewardSignalSettings(strength=1.0, gamma=0.99)}


@dataclass(frozen=True, kw_only=True)
class TrainerSettings(_Checked):
    """Everything one behavior's trainer is configured with."""

    trainer: str = setting("ppo", one_of(*TRAINER_TYPES, *UNAVAILABLE_TRAINER_TYPES), "trainer type")
    max_steps: int = setting(50_000, at_least(1), "steps to train for (every agent's step counted)")
    time_horizon: int = setting(64, at_least(1), "steps after which a trajectory is cut and bootstrapped")
    summary_freq: int = setting(1000, at_least(1), "steps (every agent's) between summaries")
    inference: str = setting("auto", one_of(*INFERENCE_MODES), "act in numpy (vector policies, MLP or LSTM) or tf")
    network: NetworkSettings = field(default_factory=NetworkSettings)
    hyperparameters: PPOSettings = field(default_factory=PPOSettings)
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


_GROUPS: dict[str, type] = {"network": NetworkSettings, "hyperparameters": PPOSettings,
                            "behavioral_cloning": BCTrainerSettings}
_TOP_LEVEL = tuple(f.name for f in dataclasses.fields(TrainerSettings)
                   if f.name not in _GROUPS and f.name not in ("reward_signals", "pretraining"))
#: Flat YAML key → the group holding it ("" for the trainer itself).
KEY_GROUPS: dict[str, str] = {
    **{k: "" for k in _TOP_LEVEL},
    **{f.name: group for group, cls in _GROUPS.items() for f in dataclasses.fields(cls)},
    "reward_signals": "", "pretraining": "",
}


# -- value conversion ---------------------------------------------------------------------
def _fail(where: str, key: str, value: Any, what: str) -> TrainerConfigError:
    return TrainerConfigError(f"{key} in {where} {what}, got {value!r}.")


def _as_float(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _fail(where, key, value, "must be a number")
    try:
        number = float(value)  # YAML 1.1 reads ``1e-5`` (no dot) as a string
    except ValueError:
        raise _fail(where, key, value, "must be a number") from None
    if not math.isfinite(number):
        raise _fail(where, key, value, "must be a finite number")
    return number


def _as_int(where: str, key: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = _as_float(where, key, value)  # ML-Agents writes ``max_steps: 5.0e5``
    if not number.is_integer():
        raise _fail(where, key, value, "must be a whole number")
    return int(number)


def _as_bool(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        kind = " (a string: write true or false without quotes)" if isinstance(value, str) else ""
        raise _fail(where, key, value, f"must be true or false{kind}")
    return value


def _as_str(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(where, key, value, "must be a string")
    return value


_CONVERTERS: dict[Any, Callable[[str, str, Any], Any]] = {int: _as_int, float: _as_float, bool: _as_bool, str: _as_str}


def _convert(where: str, f: dataclasses.Field, hint: Any, value: Any) -> Any:
    """``value`` for field ``f`` (type ``hint``) converted and checked; errors name key and value."""
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (Union, types.UnionType) and type(None) in args
    if value is None:
        if optional:
            return None
        raise _fail(where, f.name, value, "must be given a value")
    base = next(a for a in args if a is not type(None)) if optional else hint
    converted = _CONVERTERS[base](where, f.name, value)
    check = f.metadata.get("check")
    problem = check(converted) if check is not None else None
    if problem:
        raise _fail(where, f.name, value, problem)
    return converted


_HINTS: dict[type, dict[str, Any]] = {}


def _fields(cls: type) -> dict[str, tuple[dataclasses.Field, Any]]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return {f.name: (f, _HINTS[cls][f.name]) for f in dataclasses.fields(cls)}


def _closest(key: str, known: Any) -> str:
    match = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    return f": did you mean {match[0]}?" if match else f" (known: {', '.join(sorted(map(str, known)))})"


def _build(cls: type, where: str, raw: Mapping[str, Any], what: str) -> Any:
    """A settings dataclass from ``raw``: unknown and missing keys are errors naming them."""
    fields = _fields(cls)
    for key in raw:
        if key not in fields:
            raise TrainerConfigError(f"Unknown parameter {key} for {what} in {where}{_closest(key, fields)}")
    missing = [n for n, (f, _) in fields.items() if n not in raw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise TrainerConfigError(f"The hyper-parameter {missing[0]} could not be found for {what} in {where}.")
    return cls(**{k: _convert(where, fields[k][0], fields[k][1], v) for k, v in raw.items()})


def _mapping(where: str, key: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(where, key, value, "must be a mapping of names to parameters")
    return value


def _reward_signals(where: str, value: Any) -> dict[str, RewardSignalSettings]:
    signals = _mapping(where, "reward_signals", value)
    if not signals:
        raise TrainerConfigError(f"No reward signals were defined in {where}. At least one must be used.")
    out: dict[str, RewardSignalSettings] = {}
    for name, params in signals.items():
        cls = REWARD_SIGNAL_SETTINGS.get(name)
        if cls is None:
            raise TrainerConfigError(f"Unknown reward signal type {name} in {where}{_closest(name, REWARD_SIGNAL_SETTINGS)}")
        out[name] = _build(cls, where, _mapping(where, f"reward_signals.{name}", params), f"reward signal {name}")
    return out


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
    if out.get("trainer") in UNAVAILABLE_TRAINER_TYPES:
        raise TrainerConfigError(
            f"trainer in {where} is {out['trainer']!r}, which this version of kerasrl does not provide "
            f"(available: {', '.join(TRAINER_TYPES)}).")
    return out


def _build_settings(values: Mapping[str, Any], where: str) -> TrainerSettings:
    """Settings from converted flat values; a check that spans several keys names the section."""
    try:
        groups = {g: cls(**{k: v for k, v in values.items() if KEY_GROUPS[k] == g}) for g, cls in _GROUPS.items()}
        return TrainerSettings(**{k: v for k, v in values.items() if KEY_GROUPS[k] == ""}, **groups)
    except TrainerConfigError as e:
        raise TrainerConfigError(f"In {where}: {e}") from None


# -- whole configs --------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainerConfig:
    """A whole trainer config: the settings of ``default`` and of every behavior section."""

    sections: Mapping[str, TrainerSettings]
    source: str = "<dict>"

    @property
    def default(self) -> TrainerSettings:
        return self.sections["default"]

    @property
    def behavior_sections(self) -> list[str]:
        return [name for name in self.sections if name != "default"]

    def settings_for(self, behavior: str) -> TrainerSettings:
        """The behavior's own section, else ``default``."""
        return self.sections.get(behavior, self.sections["default"])

    def check_behaviors(self, behaviors: Any) -> None:
        """Sections that match no behavior of the environment.

        A lone section that matches nothing is an error (a misspelled behavior name), and so
        is, beside sections that do match, one whose name is close to a behavior without a
        section. Otherwise unmatched sections are taken for a config shared across
        environments (as ML-Agents' own): a warning names them.
        """
        names = list(behaviors)
        unmatched = [s for s in self.behavior_sections if s not in names]
        if not unmatched:
            return
        listed = f"(behaviors: {', '.join(names)})"
        if len(self.behavior_sections) == 1:
            close = difflib.get_close_matches(unmatched[0], names, n=1, cutoff=0.6)
            hint = f": did you mean {close[0]}?" if close else "."
            raise TrainerConfigError(f"Section {unmatched[0]} of {self.source} matches no behavior {listed}{hint}")
        if len(unmatched) < len(self.behavior_sections):
            without_section = [n for n in names if n not in self.sections]
            for section in unmatched:
                close = difflib.get_close_matches(section, without_section, n=1, cutoff=0.75)
                if close:
                    raise TrainerConfigError(
                        f"Section {section} of {self.source} matches no behavior {listed}: did you mean {close[0]}?")
        logger.warning("Sections %s of %s match no behavior of this environment %s: ignored, as in a config shared "
                       "across environments.", ", ".join(unmatched), self.source, listed)


def _resolve(config: Mapping[str, Any], name: str, source: str) -> Mapping[str, Any]:
    """A section's mapping, following string aliases (loops and missing targets are errors)."""
    seen = [name]
    section = config[name]
    while isinstance(section, str):
        if section not in config:
            raise TrainerConfigError(f"Section {seen[-1]} of {source} aliases {section!r}, which is not a section.")
        if section in seen:
            raise TrainerConfigError(f"Sections of {source} alias in a loop: {' -> '.join(seen + [section])}.")
        seen.append(section)
        section = config[section]
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise TrainerConfigError(
            f"Section {seen[-1]} of {source} must be a mapping of parameters or the name of another section, "
            f"got {section!r}.")
    return section


def trainer_config_from_dict(config: Mapping[str, Any], source: str = "the trainer config") -> TrainerConfig:
    """Every section of ``config`` as settings: ``default`` over the built-in defaults, each
    behavior section over ``default`` (shallowly)."""
    if not isinstance(config, Mapping):
        raise TrainerConfigError(f"{source} must hold a mapping of sections, got {type(config).__name__}.")
    bad = [k for k in config if not isinstance(k, str)]
    if bad:
        raise TrainerConfigError(f"Section names of {source} must be strings, got {bad[0]!r}.")
    default_values = _convert_section(f"section default of {source}", _resolve(config, "default", source)) \
        if "default" in config else {}
    sections = {"default": _build_settings(default_values, f"section default of {source}")}
    for name in config:
        if name == "default":
            continue
        where = f"section {name} of {source}"
        values = {**default_values, **_convert_section(where, _resolve(config, name, source))}
        sections[name] = _build_settings(values, where)
    return TrainerConfig(sections, source)


def read_yaml(path: Union[str, os.PathLike[str]]) -> Any:
    """A YAML file's content; a missing, unreadable or malformed file raises ``TrainerConfigError``."""
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise TrainerConfigError(f"Config file {path} could not be read: {e}") from e
    except yaml.YAMLError as e:
        raise TrainerConfigError(f"Config file {path} is not valid YAML: {one_line(e)}") from e


def load_trainer_config(
    config: Union[str, os.PathLike[str], Mapping[str, Any], TrainerConfig, None] = None,
) -> TrainerConfig:
    """A :class:`TrainerConfig` from a YAML path, a dict in ML-Agents' form, or one already
    built; ``None`` gives the defaults."""
    if isinstance(config, TrainerConfig):
        return config
    if config is None:
        return trainer_config_from_dict({}, "the default trainer config")
    if isinstance(config, Mapping):
        return trainer_config_from_dict(config)
    data = read_yaml(config)
    return trainer_config_from_dict({} if data is None else data, f"config file {os.fspath(config)}")


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What a run adds to the hyper-parameters: where it writes, its id and seed, whether it
    trains or resumes, and a ``max_steps`` override (``--steps``). Never merged into settings."""

    run_id: str = "ppo"
    summaries_dir: str = "results/ppo/summaries"
    model_path: str = "results/ppo/models"
    keep_checkpoints: int = 5
    train_model: bool = True
    load_model: bool = False
    seed: int = 0
    max_steps: Optional[int] = None
    #: Where the per-behavior metrics CSV goes (``<metrics_dir>/<behavior>.csv``); None:
    #: beside the TensorBoard folder, ``<summary_path>.csv`` (ML-Agents' TrainerMetrics path).
    metrics_dir: Optional[str] = None
    #: Another run's models folder to start from (its newest checkpoint: weights, normalizer,
    #: optimizer), with the step counted from 0 (``--initialize-from``).
    initialize_from: Optional[str] = None

    def __post_init__(self) -> None:
        if self.keep_checkpoints < 1:
            raise TrainerConfigError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}.")
        if self.max_steps is not None and self.max_steps < 1:
            raise TrainerConfigError(f"max_steps must be >= 1, got {self.max_steps}.")
        if self.initialize_from is not None and self.load_model:
            raise TrainerConfigError("initialize_from starts a new run from another one; it cannot be combined "
                                     "with load_model (which continues this run).")

    @classmethod
    def in_results_dir(cls, results_dir: str, run_id: str, **kwargs: Any) -> "RunContext":
        """Models in ``results_dir/run_id/models``, summaries in ``results_dir/run_id/summaries``,
        the metrics CSVs in ``results_dir/run_id``."""
        run_dir = os.path.join(results_dir, run_id)
        return cls(run_id=run_id, model_path=os.path.join(run_dir, "models"),
                   summaries_dir=os.path.join(run_dir, "summaries"), metrics_dir=run_dir, **kwargs)

    def summary_path(self, behavior: str) -> str:
        return f"{self.summaries_dir}/{self.run_id}_{behavior}"

    def metrics_path(self, behavior: str) -> str:
        """The behavior's metrics CSV."""
        if self.metrics_dir is None:
            return f"{self.summary_path(behavior)}.csv"
        return os.path.join(self.metrics_dir, f"{behavior}.csv")

    def behavior_model_path(self, behavior: str) -> str:
        return f"{self.model_path}/{behavior}"

    def max_steps_for(self, settings: TrainerSettings) -> int:
        return settings.max_steps if self.max_steps is None else self.max_steps
