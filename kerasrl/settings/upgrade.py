"""A trainer config in today's ML-Agents layout, written from settings (``kerasrl upgrade-config``):
the inverse of :mod:`kerasrl.settings.layout`, so that the file loads back into the same settings.

Each behavior's block holds what differs from its trainer type's defaults; ``default_settings``
holds the ``default`` section, and a behavior block only what differs from it (a behavior whose
reward signals are not the default's keeps them in its own block, since nested blocks merge).
The run's blocks are kept, ML-Agents 0.17–0.19's ``curriculum`` and ``parameter_randomization``
written as ``environment_parameters`` (:mod:`kerasrl.settings.upgrade_parameters`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.config import TrainerConfig, trainer_config_from_dict
from kerasrl.settings.layout import MEMORY_DEFAULTS, SECTION_DEFAULTS
from kerasrl.settings.network import NetworkSettings
from kerasrl.settings.trainer import TrainerSettings
from kerasrl.settings.upgrade_parameters import environment_parameters

_MEMORY_KEYS = ("use_recurrent", *MEMORY_DEFAULTS)


def behavior_block(settings: TrainerSettings) -> dict[str, Any]:
    """One behavior's block in today's layout."""
    block: dict[str, Any] = {"trainer_type": settings.trainer}
    block["hyperparameters"] = _hyperparameters(settings.hyperparameters)
    block["network_settings"] = _network(settings.network)
    block["reward_signals"] = {name: _signal(s) for name, s in settings.reward_signals.items()}
    if settings.pretraining is not None:
        block["behavioral_cloning"] = dataclasses.asdict(settings.pretraining)
    if settings.self_play is not None:
        block["self_play"] = dataclasses.asdict(settings.self_play)
    for f in dataclasses.fields(TrainerSettings):
        value = getattr(settings, f.name)
        if f.name in ("trainer", "hyperparameters", "network", "reward_signals", "pretraining", "self_play"):
            continue
        if f.name == "behavioral_cloning":
            block.update({k: v for k, v in dataclasses.asdict(value).items() if v is not None})
        elif f.name in SECTION_DEFAULTS or value != f.default:
            block[f.name] = value
    return block


def _hyperparameters(hp: Any) -> dict[str, Any]:
    defaults = type(hp)()
    legacy = getattr(hp, "LEGACY_KEYS", ())
    out = {f.name: getattr(hp, f.name) for f in dataclasses.fields(hp)
           if f.name not in legacy and getattr(hp, f.name) != getattr(defaults, f.name)}
    for key in ("beta", "epsilon"):  # today's schedules say whether they decay; the end stays kerasrl's key
        if hasattr(hp, f"{key}_end"):
            constant = getattr(hp, f"{key}_end") == getattr(hp, key)
            out[f"{key}_schedule"] = "constant" if constant else "linear"
            out.pop(f"{key}_end", None) if constant else None
    return out


def _network(net: NetworkSettings) -> dict[str, Any]:
    defaults = NetworkSettings()
    out = {f.name: getattr(net, f.name) for f in dataclasses.fields(net)
           if getattr(net, f.name) != getattr(defaults, f.name) and (f.name not in _MEMORY_KEYS or not net.use_recurrent)}
    out["memory"] = {k: getattr(net, k) for k in MEMORY_DEFAULTS} if net.use_recurrent else None
    return out


def _signal(signal: Any) -> dict[str, Any]:
    out = dataclasses.asdict(signal)
    if "encoding_size" in out:
        out["network_settings"] = {"hidden_units": out.pop("encoding_size")}
    return out


def _difference(block: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """What ``block`` sets beyond ``base`` (nested blocks key by key)."""
    out: dict[str, Any] = {}
    for key, value in block.items():
        if key not in base:
            out[key] = value
        elif isinstance(value, Mapping) and isinstance(base[key], Mapping):
            nested = _difference(value, base[key])
            if nested:
                out[key] = nested
        elif value != base[key]:
            out[key] = value
    return out


def todays_layout(config: TrainerConfig) -> dict[str, Any]:
    """``config`` in today's layout; it loads back into the same settings (checked here: a config
    that today's layout cannot say is one error naming the behavior)."""
    default = behavior_block(config.default)
    blocks = {name: behavior_block(config.sections[name]) for name in config.behavior_sections}
    if any(set(b["reward_signals"]) != set(default["reward_signals"]) for b in blocks.values()):
        default.pop("reward_signals")  # nested blocks merge: a behavior could not drop a default signal
    out = {"default_settings": default, "behaviors": {n: _difference(b, default) for n, b in blocks.items()}}
    loaded = trainer_config_from_dict(out, config.source)
    for name in config.sections:
        if loaded.settings_for(name) != config.settings_for(name):
            raise TrainerConfigError(f"{'Section default' if name == 'default' else f'Behavior {name}'} of "
                                     f"{config.source} cannot be written in today's layout unchanged (its reward "
                                     "signals differ from other sections' in kind, which default_settings would merge "
                                     "in): give every behavior its own section.")
    return {**out, **environment_parameters(config.run_options, config.source)}
