"""The arguments of ``kerasrl.PPO`` and ``kerasrl.SAC`` and of their ``fit``: the trainer config with
keyword overrides, the environment, integers, callbacks, and the run folder (a new temporary one,
or a given one that must not hold a run yet)."""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from typing import Any, Mapping, Optional, Union

import gymnasium
import keras
import numpy as np

from kerasrl.configs import config_source
from kerasrl.envs.base import Environment
from kerasrl.envs.env_manager import EnvManager, SimpleEnvManager
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.registry import make_env
from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.settings import RunContext, TrainerSettings, read_trainer_config, trainer_config_from_dict
from kerasrl.settings.layout import flat_sections, is_behaviors_layout
from kerasrl.settings.run_context import HIDDEN_PREFIX

logger = logging.getLogger("kerasrl")

ConfigArg = Union[str, os.PathLike, Mapping[str, Any], None]


# -- configuration ---------------------------------------------------------------------
def raw_config(config: ConfigArg) -> dict[str, Any]:
    """The trainer config as a plain dict: a path, a shipped config's name, a dict or None."""
    if config is None:
        return {"default": {}}
    if isinstance(config, Mapping):
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in config.items()}
    raw = read_trainer_config(config_source(os.fspath(config)))
    if not isinstance(raw, Mapping):
        raise TrainerConfigError(f"The trainer config {config} is not a mapping of sections.")
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in raw.items()}


def config_name(config: ConfigArg, algorithm: str) -> str:
    """How errors name the config: the file given, else the API's own argument."""
    if isinstance(config, (str, os.PathLike)):
        return f"config file {os.fspath(config)}"
    return f"kerasrl.{algorithm}'s config"


def flat_config(raw: dict[str, Any], trainer: str, source: str) -> dict[str, Any]:
    """A config of either ML-Agents layout as flat sections (``default`` and per behavior), with
    ``trainer`` (the algorithm's type) where the config names none. Today's layout's run blocks
    are for ``kerasrl-learn``: the Python API warns that it leaves them out."""
    if not is_behaviors_layout(raw):
        if isinstance(raw.get("default", {}), Mapping):
            raw["default"] = {"trainer": trainer, **(raw.get("default") or {})}
        return raw
    default = raw.get("default_settings") or {}
    if isinstance(default, Mapping):
        raw["default_settings"] = {"trainer_type": trainer, **default}
    sections, run_options = flat_sections(raw, source)
    if run_options:
        logger.warning("%s: the Python API leaves out %s (kerasrl-learn applies them).", source,
                       ", ".join(run_options))
    return sections


def behavior_settings(config: ConfigArg, behavior: str, overrides: Mapping[str, Any],
                      source: str = "kerasrl.PPO's config") -> TrainerSettings:
    """``behavior``'s settings from ``config`` with ``overrides`` (ML-Agents keys) applied to its
    section (or to ``default`` when it has none), checked as a YAML file is; errors name ``source``."""
    raw = raw_config(config)
    raw.setdefault("default", {})
    name = behavior if behavior in raw else "default"
    section, seen = raw[name], {name}
    while isinstance(section, str) and section not in seen and isinstance(raw.get(section), (str, dict)):
        seen.add(section)
        section = raw[section]  # an alias section: ``Behavior: OtherSection``
    if isinstance(section, dict):
        raw[name] = {**section, **overrides}
    elif overrides:  # an alias that does not resolve: the config's own error names it
        trainer_config_from_dict(raw, source)
        raise TrainerConfigError(f"Section {name} of the config is not a mapping; cannot apply {sorted(overrides)}.")
    return trainer_config_from_dict(raw, source).settings_for(behavior)


# -- environments ----------------------------------------------------------------------
def as_env_manager(env: Any, num_envs: Optional[int], seed: int) -> Any:
    """An env manager for a Gymnasium id or env, a built-in name, a kerasrl environment or manager."""
    if isinstance(env, EnvManager):
        return env
    if isinstance(env, Environment):
        return SimpleEnvManager(env)
    if isinstance(env, str):
        return SimpleEnvManager(make_env(env, num_envs, seed, names=("env", "num_envs")))
    if isinstance(env, (gymnasium.Env, gymnasium.vector.VectorEnv)):
        return SimpleEnvManager(GymnasiumEnv(env, seed=seed))
    raise TrainerError(f"env must be a Gymnasium id or env, or a kerasrl environment or env manager; got {env!r}.")


def callback_list(callbacks: Any) -> list[keras.callbacks.Callback]:
    """``fit``'s ``callbacks`` as a list: one callback alone is taken as Keras's ``fit`` takes it."""
    if callbacks is None:
        return []
    if isinstance(callbacks, keras.callbacks.Callback):
        return [callbacks]
    return list(callbacks)


def checked_int(name: str, value: Any, allow_none: bool = True) -> Optional[int]:
    """An integer argument (a Python or NumPy integer), else one ``TrainerError`` line naming it."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TrainerError(f"{name} must be an integer, got {value!r}.")
    return int(value)


def temporary_run_dir(agent: Any) -> str:
    """A new temporary run folder for ``agent`` (``PPO`` or ``SAC`` without ``run_dir``):
    ``agent._remove_run_dir`` removes it when called (``close``), when the agent is
    garbage-collected or when Python exits; ``fit`` detaches it once a Ctrl-C, SIGTERM or SIGHUP saved into it."""
    path = tempfile.mkdtemp(prefix="kerasrl-")
    agent._remove_run_dir = weakref.finalize(agent, shutil.rmtree, path, ignore_errors=True)
    return path


def check_run_dir_is_new(run_dir: str, context: RunContext, behavior: str, algorithm: str) -> None:
    """Refuse a ``run_dir`` that already holds a run (a ``fit``'s or ``kerasrl-learn``'s: checkpoints,
    summaries, the metrics CSV, kerasrl's ``.kerasrl-*`` marker and lock): training there would
    delete that run's checkpoints (only the newest two are kept) and mix its summaries and CSV rows
    with the new ones. A missing or empty folder, or one holding only other files, is fine."""
    if not os.path.lexists(run_dir):
        return
    try:
        names = os.listdir(run_dir)
    except OSError as e:
        raise TrainerError(f"kerasrl.{algorithm}: run_dir {run_dir} cannot be used: {e.strerror or e}.") from e
    own = {os.path.basename(p) for p in (context.model_path, context.summaries_dir, context.metrics_path(behavior))}
    found = sorted(n for n in names if n in own or n.startswith(HIDDEN_PREFIX))
    if found:
        raise TrainerError(f"kerasrl.{algorithm}: run_dir {run_dir} already holds a run ({', '.join(found)}); training "
                           "in it would delete that run's checkpoints and mix its summaries with the new ones. Give a "
                           "new or empty run_dir; to train a saved agent on, kerasrl.load(archive, env=..., "
                           "run_dir=<a new folder>). Nothing was changed.")
