"""ML-Agents 0.4–0.7's flat config keys, read as the 0.8–0.15 layout writes them.

Before reward signals (ML-Agents 0.8), a section discounted with a top-level ``gamma`` and turned
curiosity on with ``use_curiosity`` (``curiosity_strength``, ``curiosity_enc_size``); ML-Agents
0.4–0.5 named the online BC trainer ``imitation``. A config with no ``reward_signals`` in any
section but these keys is such a file: each section's values (over ``default``'s, as the flat
layout inherits) become its ``reward_signals`` block (``extrinsic`` with that ``gamma``, and
``curiosity`` with the same ``gamma`` when on), which 0.8's migration notes give as the same
training. A config that has ``reward_signals`` anywhere keeps ignoring a stray ``gamma``, as 0.8
and later did.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _convert, _fields
from kerasrl.settings.reward_signals import CuriositySettings, RewardSignalSettings

LEGACY_LAYOUT = "the 0.4–0.7 layout"
#: The keys reward_signals replaced, with ML-Agents 0.7's defaults (its trainer_config.yaml's ``default``).
SIGNAL_KEYS = {"gamma": 0.99, "use_curiosity": False, "curiosity_strength": 0.01, "curiosity_enc_size": 128}
#: The field each numeric key becomes, whose check it takes (an error names the key as written).
TARGETS = {"gamma": (RewardSignalSettings, "gamma"), "curiosity_strength": (CuriositySettings, "strength"),
           "curiosity_enc_size": (CuriositySettings, "encoding_size")}
#: Trainer names that releases before 0.6 used, and the trainer each is now.
RENAMED_TRAINERS = {"imitation": "online_bc"}


def is_legacy(config: Mapping[str, Any]) -> bool:
    """Whether a flat config is in 0.4–0.7's keys: one of :data:`SIGNAL_KEYS` somewhere, and
    ``reward_signals`` nowhere."""
    sections = [s for s in config.values() if isinstance(s, Mapping)]
    return not any("reward_signals" in s for s in sections) and \
        any(k in s for s in sections for k in SIGNAL_KEYS)


def renamed_trainers(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with each section's pre-0.6 trainer name (``imitation``) as today's."""
    return {name: _renamed(s) if isinstance(s, Mapping) else s for name, s in config.items()}


def _renamed(section: Mapping[str, Any]) -> Mapping[str, Any]:
    trainer = section.get("trainer")
    if isinstance(trainer, str) and trainer in RENAMED_TRAINERS:
        return {**section, "trainer": RENAMED_TRAINERS[trainer]}
    return section


def with_reward_signals(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A 0.4–0.7 flat config with each section's signal keys as its ``reward_signals`` block
    (sections without such keys of their own or in ``default`` are left as written)."""
    default = config.get("default")
    inherited = {k: v for k, v in default.items() if k in SIGNAL_KEYS} if isinstance(default, Mapping) else {}
    out: dict[str, Any] = {}
    for name, section in config.items():
        if not isinstance(section, Mapping):
            out[name] = section  # an alias of another section, or an error the loader reports
            continue
        own = {k: v for k, v in section.items() if k in SIGNAL_KEYS}
        values = own if name == "default" else {**inherited, **own}
        if not values:
            out[name] = section
            continue
        rest = {k: v for k, v in section.items() if k not in SIGNAL_KEYS}
        out[name] = {**rest, "reward_signals": _signals(values, f"section {name} of {source} ({LEGACY_LAYOUT})")}
    return out


def _signals(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The ``reward_signals`` block that a section's 0.4–0.7 keys mean."""
    keys = {**SIGNAL_KEYS, **{k: _checked(k, v, where) for k, v in values.items()}}
    signals: dict[str, Any] = {"extrinsic": {"strength": 1.0, "gamma": keys["gamma"]}}
    if keys["use_curiosity"]:
        signals["curiosity"] = {"strength": keys["curiosity_strength"], "gamma": keys["gamma"],
                                "encoding_size": keys["curiosity_enc_size"]}
    return signals


def _checked(key: str, value: Any, where: str) -> Any:
    """A 0.4–0.7 key's value, converted and checked as the field it becomes (errors name ``key``)."""
    if key == "use_curiosity":
        if not isinstance(value, bool):
            raise TrainerConfigError(f"use_curiosity in {where} must be true or false, got {value!r}.")
        return value
    cls, name = TARGETS[key]
    field, hint = _fields(cls)[name]
    renamed = copy.copy(field)
    renamed.name = key
    return _convert(where, renamed, hint, value)
