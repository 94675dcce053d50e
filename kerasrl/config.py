"""Loading ML-Agents-style trainer configs (YAML) with errors that name the file and key."""
from __future__ import annotations

import os
from typing import Any, Union

import yaml

from kerasrl.exception import TrainerConfigError

DEFAULT_TRAINER_CONFIG: dict[str, Any] = {
    "trainer": "ppo",
    "batch_size": 1024,
    "beta": 5.0e-3,
    "buffer_size": 10240,
    "epsilon": 0.2,
    "hidden_units": 128,
    "lambd": 0.95,
    "learning_rate": 3.0e-4,
    "max_steps": 5.0e4,
    "memory_size": 256,
    "normalize": False,
    "num_epoch": 3,
    "num_layers": 2,
    "time_horizon": 64,
    "sequence_length": 64,
    "summary_freq": 1000,
    "use_recurrent": False,
    "vis_encode_type": "simple",
    "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}},
}


def load_config(path: Union[str, os.PathLike[str]]) -> dict[str, Any]:
    """Read a trainer config; a missing, unreadable or malformed file raises ``TrainerConfigError``."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise TrainerConfigError(f"Config file {path} could not be read: {e}") from e
    except yaml.YAMLError as e:
        raise TrainerConfigError(f"Config file {path} is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise TrainerConfigError(f"Config file {path} must hold a mapping of sections, got {type(data).__name__}.")
    return data


def with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """A config whose ``default`` section is completed from ``DEFAULT_TRAINER_CONFIG``."""
    out = dict(config)
    out["default"] = {**DEFAULT_TRAINER_CONFIG, **(config.get("default") or {})}
    return out
