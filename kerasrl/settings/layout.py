"""Today's ML-Agents config layout (``behaviors:``, ML-Agents 0.17 and every release since) read
into the same flat sections as the 0.9–0.15 layout, so both load into one settings model.

A behavior's block nests what the flat layout keeps in one section: ``trainer_type``,
``hyperparameters:``, ``network_settings:`` (with ``memory:``), ``reward_signals:`` (each with its
own ``network_settings``), ``behavioral_cloning:`` and ``self_play:``. ``default_settings`` is merged
under every behavior (nested blocks merged key by key, as ML-Agents does), and keys a file leaves
out take today's ML-Agents defaults (``max_steps`` 500000, ``summary_freq`` 50000, memory 128 × 64,
a reward signal's ``gamma`` 0.99 and ``strength`` 1.0, its model's 128 units). The run's own blocks
(``env_settings``, ``engine_settings``, ``checkpoint_settings``, ``torch_settings``,
``environment_parameters``, ``debug``; and ML-Agents 0.17–0.19's ``curriculum`` and
``parameter_randomization``, which ``environment_parameters`` replaced; 0.17's drafts kept a
behavior's ``curriculum`` in its block, read as the top-level one's) are checked here and kept for
the command line.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any, Mapping

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _closest, _fields, _mapping
from kerasrl.settings.network import NetworkSettings
from kerasrl.settings.registry import trainer_type

logger = logging.getLogger("kerasrl")

LAYOUT = "today's ML-Agents layout"
#: The top-level blocks of a config in today's layout.
RUN_BLOCKS = ("env_settings", "engine_settings", "checkpoint_settings", "torch_settings", "environment_parameters",
              "debug", "curriculum", "parameter_randomization")
TOP_LEVEL = ("behaviors", "default_settings", *RUN_BLOCKS)
#: A behavior block's own keys (kerasrl's flat trainer keys are read too).
SECTION_KEYS = ("trainer_type", "hyperparameters", "network_settings", "reward_signals", "behavioral_cloning",
                "self_play", "summary_freq", "time_horizon", "max_steps", "keep_checkpoints", "even_checkpoints",
                "checkpoint_interval", "init_path", "threaded")
#: Today's defaults where they differ from the flat layout's.
SECTION_DEFAULTS = {"max_steps": 500_000, "summary_freq": 50_000}
MEMORY_DEFAULTS = {"memory_size": 128, "sequence_length": 64}
SIGNAL_DEFAULTS = {"gamma": 0.99, "strength": 1.0}
SIGNAL_HIDDEN_UNITS = 128
#: ``network_settings`` keys with no counterpart in kerasrl's network, and the values that mean "as kerasrl does".
NETWORK_ACCEPTED = {"goal_conditioning_type": ("hyper", "none"), "deterministic": (False,), "max_num_agents": None}


def is_behaviors_layout(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` is in today's layout (a ``behaviors`` or ``default_settings`` block)."""
    return any(isinstance(config.get(key), Mapping) for key in ("behaviors", "default_settings"))


def deep_merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``over``, nested mappings merged key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = deep_merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flat_sections(config: Mapping[str, Any], source: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``({"default" or behavior: flat section}, {run block: value})`` of a config in today's layout;
    every behavior's section is whole (``default_settings`` merged in)."""
    unknown = [k for k in config if k not in TOP_LEVEL]
    if unknown:
        raise TrainerConfigError(f"Unknown block {unknown[0]} in {source} ({LAYOUT}){_closest(unknown[0], TOP_LEVEL)}")
    default = dict(_mapping(source, "default_settings", config.get("default_settings")))
    behaviors = _mapping(source, "behaviors", config.get("behaviors"))
    sections = {"default": flat_section(default, f"default_settings of {source} ({LAYOUT})")}
    run = {k: config[k] for k in RUN_BLOCKS if k in config}
    for name, block in behaviors.items():
        if not isinstance(name, str):
            raise TrainerConfigError(f"Behavior names of {source} must be strings, got {name!r}.")
        where = f"behavior {name} of {source} ({LAYOUT})"
        block = dict(_mapping(where, name, block))
        if "curriculum" in block:  # ML-Agents 0.17's drafts: a behavior's own curriculum, as the top-level block's
            _hoist_curriculum(run, name, block.pop("curriculum"), where)
        sections[name] = flat_section(deep_merged(_default_for(default, block), block), where)
    return sections, run


def _hoist_curriculum(run: dict[str, Any], name: str, curriculum: Any, where: str) -> None:
    """A behavior block's ``curriculum`` (ML-Agents 0.17's drafts kept it there) added to the
    top-level ``curriculum`` block under the behavior's name."""
    top = run.get("curriculum")
    if top is not None and not isinstance(top, Mapping):
        raise TrainerConfigError(f"curriculum in {where}: the top-level curriculum block must be a mapping of "
                                 f"behaviors, got {top!r}.")
    if top is not None and name in top:
        raise TrainerConfigError(f"curriculum in {where}: the top-level curriculum block has one for {name} too; "
                                 "give it once.")
    run["curriculum"] = {**(top or {}), name: curriculum}


def _default_for(default: Mapping[str, Any], block: Mapping[str, Any]) -> Mapping[str, Any]:
    """``default_settings`` as a behavior of another trainer type takes it: without the other
    type's hyper-parameters (those both types have stay), as the flat layout's ``default``."""
    own = block.get("trainer_type", default.get("trainer_type", "ppo"))
    hyper = default.get("hyperparameters")
    if own == default.get("trainer_type", "ppo") or not isinstance(hyper, Mapping) or not isinstance(own, str):
        return default
    keys = {f.name for f in dataclasses.fields(trainer_type(own).settings_cls)}
    keys |= {f"{k}_schedule" for k in ("beta", "epsilon") if f"{k}_end" in keys}
    return {**default, "hyperparameters": {k: v for k, v in hyper.items() if k in keys}}


def flat_section(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One behavior block as a flat section."""
    flat: dict[str, Any] = dict(SECTION_DEFAULTS)
    trainer = block.get("trainer_type", block.get("trainer", "ppo"))
    for key, value in block.items():
        if key == "trainer_type":
            flat["trainer"] = value
        elif key == "hyperparameters":
            flat.update(hyperparameters(_mapping(where, key, value), where, trainer))
        elif key == "network_settings":
            flat.update(network(_mapping(where, key, value), where))
        elif key == "reward_signals":
            flat[key] = reward_signals(_mapping(where, key, value), where)
        else:
            flat[key] = value  # a section key (the flat loader checks it, naming this behavior)
    return flat


def hyperparameters(block: Mapping[str, Any], where: str, trainer: Any) -> dict[str, Any]:
    """``hyperparameters:`` as flat keys: ``beta_schedule``/``epsilon_schedule`` (default: the
    learning rate's schedule) as where the entropy bonus and clip range end; ``shared_critic`` as
    ``separate_value_network``."""
    flat = {k: v for k, v in block.items() if k not in ("beta_schedule", "epsilon_schedule", "shared_critic")}
    settings_cls = trainer_type(str(trainer), where).settings_cls if isinstance(trainer, str) else None
    fields = {f.name: f.default for f in dataclasses.fields(settings_cls)} if settings_cls is not None else {}
    unknown = [k for k in flat if fields and k not in fields]
    if unknown:
        raise TrainerConfigError(f"Unknown key {unknown[0]} in hyperparameters of {where} (the {trainer} trainer's keys)"
                                 f"{_closest(unknown[0], [*fields, 'beta_schedule', 'epsilon_schedule'])}")
    lr_schedule = block.get("learning_rate_schedule", fields.get("learning_rate_schedule"))
    for value_key, schedule_key in (("beta", "beta_schedule"), ("epsilon", "epsilon_schedule")):
        schedule = block.get(schedule_key, lr_schedule)
        if schedule_key in block and f"{value_key}_end" not in fields:
            raise TrainerConfigError(f"{schedule_key} in {where}: the {trainer} trainer has no {value_key} to schedule.")
        if schedule not in ("constant", "linear", None):
            raise TrainerConfigError(f"{schedule_key} in {where} must be constant or linear, got {schedule!r}.")
        if schedule == "constant" and f"{value_key}_end" in fields:
            flat[f"{value_key}_end"] = block.get(value_key, fields[value_key])
    if "shared_critic" in block:
        if not isinstance(block["shared_critic"], bool):
            raise TrainerConfigError(f"shared_critic in {where} must be true or false, got {block['shared_critic']!r}.")
        flat["separate_value_network"] = not block["shared_critic"]
    return flat


def network(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``network_settings:`` as flat keys: ``memory:`` as ``use_recurrent`` with its sizes."""
    known = _fields(NetworkSettings)
    flat: dict[str, Any] = {}
    for key, value in block.items():
        if key == "memory":
            memory = _mapping(where, "network_settings.memory", value)
            bad = [k for k in memory if k not in MEMORY_DEFAULTS]
            if bad:
                raise TrainerConfigError(f"Unknown key {bad[0]} in network_settings.memory of {where}"
                                         f"{_closest(bad[0], MEMORY_DEFAULTS)}")
            if value is not None:
                flat.update({"use_recurrent": True, **MEMORY_DEFAULTS, **memory})
        elif key in NETWORK_ACCEPTED:
            _check_accepted(key, value, where)
        elif key in known:
            flat[key] = value
        else:
            options = [*known, "memory", *NETWORK_ACCEPTED]
            raise TrainerConfigError(f"Unknown key {key} in network_settings of {where}{_closest(key, options)}")
    return flat


def _check_accepted(key: str, value: Any, where: str) -> None:
    allowed = NETWORK_ACCEPTED[key]
    if allowed is not None and value not in allowed:
        raise TrainerConfigError(f"network_settings.{key}: {value!r} in {where} is not supported by kerasrl "
                                 f"(it takes {' or '.join(map(str, allowed))}).")


#: ML-Agents' defaults of a reward signal's ``network_settings`` beyond ``hidden_units`` (which kerasrl reads).
SIGNAL_NETWORK_DEFAULTS = {"normalize": False, "num_layers": 2, "vis_encode_type": "simple", "memory": None,
                           "goal_conditioning_type": "hyper", "deterministic": False}


def _warn_unused(name: str, net: Mapping[str, Any], where: str) -> None:
    """A warning naming a model signal's ``network_settings`` that differ from ML-Agents' defaults
    (kerasrl's signal models take ``hidden_units`` only: two layers, its trainer's encoder)."""
    unused = {k: v for k, v in net.items() if k in SIGNAL_NETWORK_DEFAULTS and v != SIGNAL_NETWORK_DEFAULTS[k]}
    if unused:
        logger.warning("reward_signals.%s.network_settings of %s: %s not used (kerasrl's %s model takes hidden_units "
                       "only, with two layers); ignored.", name, where,
                       ", ".join(f"{k}: {v}" for k, v in unused.items()), name)


def reward_signals(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Each signal with today's defaults; a model signal's ``network_settings.hidden_units`` (or
    the older ``encoding_size``) as its encoding size."""
    out: dict[str, Any] = {}
    for name, raw in block.items():
        signal = dict(_mapping(where, f"reward_signals.{name}", raw))
        net = _mapping(where, f"reward_signals.{name}.network_settings", signal.pop("network_settings", None))
        bad = [k for k in net if k not in _fields(NetworkSettings) and k not in ("memory", *NETWORK_ACCEPTED)]
        if bad:
            raise TrainerConfigError(f"Unknown key {bad[0]} in reward_signals.{name}.network_settings of {where}"
                                     f"{_closest(bad[0], _fields(NetworkSettings))}")
        if name != "extrinsic":
            size = net.get("hidden_units", signal.get("encoding_size") or SIGNAL_HIDDEN_UNITS)
            signal["encoding_size"] = size
            _warn_unused(name, net, where)
        out[name] = {**SIGNAL_DEFAULTS, **signal}
    return out
