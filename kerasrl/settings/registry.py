"""The registry of trainer types: the name a config gives (``trainer: ppo``), the trainer class
that trains it and the settings class of its hyper-parameters.

Installed plugins add theirs through the entry-point group ``kerasrl.trainer_type`` (the shape of
ML-Agents' ``mlagents.trainer_type``): each entry point is a callable returning
``({name: trainer class}, {name: settings class})``. kerasrl's own algorithm packages have the same
hook, read first and without the package metadata (so a source checkout has them too). A trainer class may also
be an import path, ``"package.module:Class"``, loaded when first used, so that reading a config
does not load TensorFlow. :func:`register_trainer_type` adds a type in the running process.

A name belongs to its registration, not to its class: one class may train several names (the
stand-alone BC trainers share their settings class, for example).
"""
from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping, Union

from kerasrl.exception import TrainerConfigError

logger = logging.getLogger("kerasrl")

#: The entry-point group that installed packages register trainer types in.
ENTRY_POINT_GROUP = "kerasrl.trainer_type"
#: kerasrl's own algorithm packages' hooks, of the entry points' shape.
BUILTIN_PLUGINS = ("kerasrl.ppo.plugin:trainer_types", "kerasrl.sac.plugin:trainer_types",
                   "kerasrl.bc.plugin:trainer_types", "kerasrl.poca.plugin:trainer_types")

TrainerClass = Union[type, str]


@dataclass(frozen=True)
class TrainerType:
    """One registered trainer type."""

    name: str
    settings_cls: type
    trainer: TrainerClass
    source: str = "register_trainer_type"

    @property
    def trainer_cls(self) -> Any:
        """The trainer class (an import path is loaded here, once): a ``kerasrl.trainers.Trainer``."""
        if isinstance(self.trainer, type):
            return self.trainer
        loaded = load_object(self.trainer, f"trainer type {self.name}")
        if not isinstance(loaded, type):
            raise TrainerConfigError(f"Trainer type {self.name}: {self.trainer} is not a class.")
        object.__setattr__(self, "trainer", loaded)
        return loaded


def load_object(path: str, what: str) -> Any:
    """The object an import path ``"package.module:attribute"`` names."""
    module_name, _, attribute = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        raise TrainerConfigError(f"{what}: {path} cannot be loaded ({e}).") from e


_registry: dict[str, TrainerType] = {}
_plugins_loaded = False
_lock = threading.RLock()


def register_trainer_type(name: str, trainer_cls: TrainerClass, settings_cls: type, *, source: str = "") -> TrainerType:
    """Registers (or replaces) trainer type ``name``: configs with ``trainer: <name>`` are read into
    ``settings_cls`` (a settings dataclass of ``kerasrl.settings``' kind) and trained by ``trainer_cls``."""
    if not isinstance(name, str) or not name.strip():
        raise TrainerConfigError(f"A trainer type's name must be a non-empty string, got {name!r}.")
    if not isinstance(settings_cls, type):
        raise TrainerConfigError(f"Trainer type {name}: its settings class must be a class, got {settings_cls!r}.")
    if not isinstance(trainer_cls, (type, str)):
        raise TrainerConfigError(f"Trainer type {name}: its trainer must be a class or an import path, got {trainer_cls!r}.")
    with _lock:
        _load_plugins()
        entry = TrainerType(name, settings_cls, trainer_cls, source or "register_trainer_type")
        _registry[name] = entry
    return entry


def trainer_types() -> dict[str, TrainerType]:
    """Every registered trainer type by name (the entry points' first, then those registered in Python)."""
    with _lock:
        _load_plugins()
        return dict(_registry)


def trainer_type(name: str, where: str = "the trainer config") -> TrainerType:
    """The registered type ``name``; an unknown one is an error naming the known types."""
    known = trainer_types()
    if name not in known:
        raise TrainerConfigError(f"trainer in {where} must be one of {sorted(known)}, got {name!r}.")
    return known[name]


def type_of_record(recorded: str) -> str:
    """The registered name a checkpoint's record means: a name, or (runs saved before names were
    recorded) the trainer's class name, also of a subclass of a registered class or one its
    own ``recorded_names`` lists (a class that no longer exists)."""
    known = trainer_types()
    if recorded in known:
        return recorded
    for name, entry in known.items():
        cls = entry.trainer_cls
        if recorded in {c.__name__ for c in (cls, *_subclasses(cls))} | set(vars(cls).get("recorded_names", ())):
            return name
    raise TrainerConfigError(f"The checkpoint was written by trainer {recorded!r}, which no registered trainer type "
                             f"trains (registered: {sorted(known)}); install the package that provides it.")


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    subs: list[type] = type.__subclasses__(cls)
    for sub in subs:
        out += [sub, *_subclasses(sub)]
    return out


def _load_plugins() -> None:
    """Adds kerasrl's own types, then every entry point of ``ENTRY_POINT_GROUP``, once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for path in BUILTIN_PLUGINS:
        hook: Callable[[], Any] = load_object(path, "kerasrl's trainer types")
        _add_plugin(path, *hook())
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        if ep.value in BUILTIN_PLUGINS:
            continue
        try:
            hook = ep.load()
            trainers, settings = hook()
        except Exception as e:  # a broken plugin must not take the other types down with it
            logger.warning("Trainer plugin %s (%s) could not be loaded and is skipped: %s", ep.name, ep.value, e)
            continue
        _add_plugin(ep.value, trainers, settings)


def _add_plugin(source: str, trainers: Mapping[str, TrainerClass], settings: Mapping[str, type]) -> None:
    missing = sorted(set(trainers) ^ set(settings))
    if missing:
        logger.warning("Trainer plugin %s gives a trainer or a settings class alone for %s: skipped.", source, missing)
    for name in trainers:
        if name in settings:
            _registry[name] = TrainerType(name, settings[name], trainers[name], source)
