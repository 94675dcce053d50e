"""The sample trainer configs shipped with kerasrl (ML-Agents' YAML format).

They are package data, so they are there after ``pip install kerasrl`` too::

    from kerasrl.configs import available_configs, config_path

    available_configs()           # ["acrobot", "cartpole_zoo", ..., "trainer_config"]
    config_path("cartpole_zoo")   # .../kerasrl/configs/cartpole_zoo.yaml

* ``trainer_config``: the ``default`` section is the built-in defaults (ML-Agents 0.9's), a
  starting point to copy and edit;
* ``cartpole_zoo``: PPO on CartPole-v1 with Stable-Baselines3's RL-Zoo hyper-parameters (the
  default config of ``examples/train_ppo.py``);
* ``pendulum_sb3``: Pendulum-v1 with SB3's Zoo settings and SB3's Gaussian (its update equals
  SB3's); ``visual_sb3``: SB3's ``CnnPolicy`` (NatureCNN) on small images (its update equals SB3's);
  ``lstm_sb3``: sb3-contrib's ``RecurrentPPO`` (``MlpLstmPolicy``) with the Zoo CartPole keys
  (its update equals RecurrentPPO's);
  ``pendulum``, ``acrobot``, ``lunarlander``: tuned configs for those Gymnasium tasks
  (figures in docs/benchmarks/learning.md);
* ``halfcheetah_ppo``, ``hopper_ppo``: PPO with Stable-Baselines3's RL-Zoo settings for those
  MuJoCo tasks (v5), observations normalised (``bench_ppo.py --task halfcheetah|hopper``);
* ``sac_pendulum``, ``sac_halfcheetah``: SAC (``trainer: sac``) with Stable-Baselines3's RL-Zoo
  settings for Pendulum-v1 and HalfCheetah-v5 (MuJoCo), in ML-Agents' SAC keys;
  ``sac_cartpole``: discrete SAC on CartPole-v1 (its figures: ``benchmarks/sac_cartpole_seeds.py``);
* ``offline_bc``: behavioral cloning alone on the built-in Simple1D from a recorded demo
  (``demos/Simple1D.demo``; its comments say how to record one). ``online_bc`` has no sample: it
  needs an environment with a second, teacher behavior that reports its actions, which no
  built-in environment has.

To get one to edit: ``cp "$(python3 -c 'from kerasrl.configs import config_path;
print(config_path("trainer_config"))')" my_config.yaml``.
"""
from __future__ import annotations

import difflib
import os
from importlib.resources import files
from typing import Optional, overload

from kerasrl.exception import TrainerConfigError

__all__ = ["available_configs", "config_path", "config_source"]

_SUFFIX = ".yaml"


def available_configs() -> list[str]:
    """The names of the shipped configs (without ``.yaml``), sorted."""
    return sorted(
        entry.name[: -len(_SUFFIX)]
        for entry in files(__name__).iterdir()
        if entry.name.endswith(_SUFFIX) and entry.is_file()
    )


def config_path(name: str) -> str:
    """The file path of the shipped config ``name`` (``"cartpole_zoo"`` or ``"cartpole_zoo.yaml"``).

    Raises ``TrainerConfigError`` (one line, listing the available names) for an unknown name.
    """
    available = available_configs()
    stem = name[: -len(_SUFFIX)] if isinstance(name, str) and name.endswith(_SUFFIX) else name
    if stem not in available:
        raise TrainerConfigError(
            f"unknown sample config {name!r}: available configs are {', '.join(available)}"
        )
    return str(files(__name__) / f"{stem}{_SUFFIX}")


@overload
def config_source(path_or_name: str) -> str: ...


@overload
def config_source(path_or_name: None) -> None: ...


def config_source(path_or_name: Optional[str]) -> Optional[str]:
    """A config file path, or the name of a shipped sample config (``cartpole_zoo``,
    ``trainer_config``) when no such file exists; a missing name close to a shipped one (``cartpole_zo``)
    is a ``TrainerConfigError`` suggesting it."""
    if not path_or_name or os.path.exists(path_or_name):
        return path_or_name
    available = available_configs()
    if path_or_name in available:
        return config_path(path_or_name)
    stem = os.path.basename(path_or_name)
    stem = stem[: -len(_SUFFIX)] if stem.endswith(_SUFFIX) else stem
    close = difflib.get_close_matches(stem, available, n=1, cutoff=0.6)
    if close and os.sep not in path_or_name:
        raise TrainerConfigError(f"No config file {path_or_name}, nor a shipped config of that name: did you mean "
                                 f"{close[0]}? (shipped: {', '.join(available)})")
    return path_or_name
