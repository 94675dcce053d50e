"""Whole trainer configs: ML-Agents 0.9's YAML read into a :class:`TrainerConfig` (0.4–0.7's
keys too, :mod:`kerasrl.settings.legacy`).

A config has a ``default`` section, per-behavior sections that override it shallowly (a
behavior's ``reward_signals`` replaces the default block whole), and string aliases
(``MyBehavior: OtherSection``).
"""
from __future__ import annotations

import difflib
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

import yaml

from kerasrl.exception import TrainerConfigError, one_line
from kerasrl.settings.layout import LAYOUT, flat_sections, is_behaviors_layout
from kerasrl.settings.legacy import LEGACY_LAYOUT, is_legacy, renamed_trainers, with_reward_signals
from kerasrl.settings.trainer import TrainerSettings, _build_settings, _convert_section, inherited_values

logger = logging.getLogger("kerasrl")

#: The key that marks the record kerasrl-learn writes into a run folder (``configuration.yaml``).
RUN_RECORD_KEY = "kerasrl_version"


@dataclass(frozen=True)
class TrainerConfig:
    """A whole trainer config: the settings of ``default`` and of every behavior section."""

    sections: Mapping[str, TrainerSettings]
    source: str = "<dict>"
    #: The run's blocks of a config in today's layout (``env_settings``, ``checkpoint_settings``, ...), as written.
    run_options: Mapping[str, Any] = field(default_factory=dict)
    #: Which ML-Agents layout the config was written in.
    layout: str = "the 0.9–0.15 layout"

    @property
    def default(self) -> TrainerSettings:
        return self.sections["default"]

    @property
    def behavior_sections(self) -> list[str]:
        return [name for name in self.sections if name != "default"]

    def settings_for(self, behavior: str) -> TrainerSettings:
        """The behavior's own section, else ``default``. A Unity behavior of a team
        (``Striker?team=1``) trains with the section of its name without the suffix."""
        return self.sections.get(behavior) or self.sections.get(_without_team(behavior), self.sections["default"])

    def check_behaviors(self, behaviors: Any) -> None:
        """Sections that match no behavior of the environment.

        A lone section that matches nothing is an error (a misspelled behavior name), and so
        is, beside sections that do match, one whose name is close to a behavior without a
        section. Otherwise unmatched sections are taken for a config shared across
        environments (as ML-Agents' own): a warning names them and the behavior each likely meant.
        """
        names = list(dict.fromkeys(_without_team(b) for b in behaviors))
        unmatched = [s for s in self.behavior_sections if s not in names and s not in behaviors]
        if not unmatched:
            return
        listed = f"(behaviors: {', '.join(names)})"
        if len(self.behavior_sections) == 1:
            guess = _likely_behavior(unmatched[0], names, names)
            hint = f": did you mean {guess}?" if guess else "."
            raise TrainerConfigError(f"Section {unmatched[0]} of {self.source} matches no behavior {listed}{hint}")
        without_section = [n for n in names if n not in self.sections]
        if len(unmatched) < len(self.behavior_sections):
            for section in unmatched:
                close = difflib.get_close_matches(section, without_section, n=1, cutoff=0.75)
                if close:
                    raise TrainerConfigError(
                        f"Section {section} of {self.source} matches no behavior {listed}: did you mean {close[0]}?")
        guesses = {s: _likely_behavior(s, names, without_section) for s in unmatched}
        hints = "".join(f" Section {s}: did you mean {g}?" for s, g in guesses.items() if g)
        logger.warning("Sections %s of %s match no behavior of this environment %s: ignored, as in a config shared "
                       "across environments.%s", ", ".join(unmatched), self.source, listed, hints)


def _likely_behavior(section: str, names: list[str], without_section: list[str]) -> Optional[str]:
    """The behavior a section most likely meant: one whose name differs only in letter case, else
    a close name among the behaviors without their own section (others are already configured)."""
    folded = [n for n in names if n.casefold() == section.casefold()]
    if folded:
        return folded[0]
    close = difflib.get_close_matches(section, without_section, n=1, cutoff=0.6)
    return close[0] if close else None


def _without_team(behavior: str) -> str:
    """A Unity behavior's name without its team suffix (``Striker?team=1`` -> ``Striker``)."""
    return behavior.split("?team=", 1)[0]


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
    if RUN_RECORD_KEY in config and isinstance(config.get("behaviors"), Mapping):
        # a run folder's configuration.yaml: each behavior's resolved settings, in the flat layout
        return trainer_config_from_dict(config["behaviors"], source)
    if is_behaviors_layout(config):
        return _from_behaviors_layout(config, source)
    layout = TrainerConfig.layout
    config = renamed_trainers(config)
    if is_legacy(config):  # ML-Agents 0.4–0.7: gamma and use_curiosity before reward_signals
        config, layout = with_reward_signals(config, source), LEGACY_LAYOUT
    default_values = _convert_section(f"section default of {source}", _resolve(config, "default", source)) \
        if "default" in config else {}
    sections = {"default": _build_settings(default_values, f"section default of {source}")}
    for name in config:
        if name == "default":
            continue
        where = f"section {name} of {source}"
        own = _convert_section(where, _resolve(config, name, source), default_values.get("trainer"))
        trainer = own.get("trainer", default_values.get("trainer", TrainerSettings.trainer))
        values = {**inherited_values(default_values, trainer), **own}
        sections[name] = _build_settings(values, where)
    return TrainerConfig(sections, source, layout=layout)


def _from_behaviors_layout(config: Mapping[str, Any], source: str) -> TrainerConfig:
    """A config in today's layout: each behavior's whole section (``default_settings`` merged in)."""
    flat, run_options = flat_sections(config, source)
    sections = {}
    for name, section in flat.items():
        where = f"default_settings of {source} ({LAYOUT})" if name == "default" else \
            f"behavior {name} of {source} ({LAYOUT})"
        sections[name] = _build_settings(_convert_section(where, section), where)
    return TrainerConfig(sections, source, run_options, LAYOUT)


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping of a YAML file holds the same key twice (PyYAML would keep the last silently)."""

    def __init__(self, key: Any, line: int) -> None:
        super().__init__(problem=f"the key {key!r} appears twice (again on line {line})")
        self.key, self.line = key, line


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding the same key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    raise DuplicateKeyError(key, key_node.start_mark.line + 1)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Union[str, os.PathLike[str]]) -> Any:
    """A YAML file's content; a missing, unreadable, malformed or empty file, or one with a key
    twice in a mapping, raises ``TrainerConfigError`` naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=StrictLoader)  # noqa: S506 (a SafeLoader)
    except (OSError, UnicodeDecodeError) as e:
        raise TrainerConfigError(f"Config file {path} could not be read: {e}") from e
    except DuplicateKeyError as e:
        raise TrainerConfigError(f"Config file {path} has the key {e.key!r} twice (again on line {e.line}): "
                                 f"remove one.") from e
    except yaml.YAMLError as e:
        raise TrainerConfigError(f"Config file {path} is not valid YAML: {one_line(e)}") from e
    if data is None:
        raise TrainerConfigError(f"Config file {path} is empty: give at least a default section.")
    return data


#: Where a section names demonstration files: top-level keys, and keys of one nested block.
_DEMO_PATH_KEYS = (("demo_path",), ("pretraining", "demo_path"), ("reward_signals", "gail", "demo_path"))


def resolve_demo_paths(config: Any, folder: str) -> Any:
    """``config`` with each relative ``demo_path`` that exists under ``folder`` (the config file's)
    made a path there; one that does not stays as written (relative to the working directory)."""
    if not isinstance(config, Mapping):
        return config
    out: dict[Any, Any] = dict(config)
    for name, section in config.items():
        for keys in _DEMO_PATH_KEYS:
            parents, node = [], section
            for key in keys[:-1]:
                parents.append(node)
                node = node.get(key) if isinstance(node, Mapping) else None
            value = node.get(keys[-1]) if isinstance(node, Mapping) else None
            if not isinstance(value, str) or os.path.isabs(value) or not os.path.exists(os.path.join(folder, value)):
                continue
            replaced: Any = {**node, keys[-1]: os.path.join(folder, value)}
            for parent, key in zip(reversed(parents), reversed(keys[:-1])):
                replaced = {**parent, key: replaced}
            section = replaced
        out[name] = section
    return out


def read_trainer_config(path: Union[str, os.PathLike[str]]) -> Any:
    """A trainer config file's content (:func:`read_yaml`), relative ``demo_path`` values resolved
    against the file's folder when they exist there (:func:`resolve_demo_paths`)."""
    return resolve_demo_paths(read_yaml(path), os.path.dirname(os.path.abspath(path)))


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
    return trainer_config_from_dict(read_trainer_config(config), f"config file {os.fspath(config)}")
