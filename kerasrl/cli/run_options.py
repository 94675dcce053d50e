"""The run blocks of a config in today's ML-Agents layout (``env_settings``, ``engine_settings``,
``checkpoint_settings``, ``torch_settings``, ``debug``) as defaults of ``kerasrl-learn``'s flags: a
flag given on the command line wins, as with ``mlagents-learn``."""
from __future__ import annotations

import argparse
import os
import shlex
from typing import Any, Mapping, Optional, Sequence

from kerasrl.exception import TrainerConfigError

#: Block → {ML-Agents key: the dest of kerasrl-learn's flag}.
FLAG_OF: dict[str, dict[str, str]] = {
    "env_settings": {"env_path": "env", "env_args": "env_args", "base_port": "base_port", "num_envs": "num_envs",
                     "seed": "seed", "timeout_wait": "timeout_wait", "num_areas": "num_areas",
                     "max_lifetime_restarts": "max_lifetime_restarts", "restarts_rate_limit_n": "restarts_rate_limit_n",
                     "restarts_rate_limit_period_s": "restarts_rate_limit_period_s"},
    "engine_settings": {"width": "width", "height": "height", "quality_level": "quality_level",
                        "time_scale": "time_scale", "target_frame_rate": "target_frame_rate",
                        "capture_frame_rate": "capture_frame_rate", "no_graphics": "no_graphics",
                        "no_graphics_monitor": ""},  # ML-Agents 1.0's: accepted as false, kerasrl's only mode
    "checkpoint_settings": {"run_id": "run_id", "initialize_from": "initialize_from", "load_model": "load",
                            "resume": "load", "force": "force", "train_model": "train", "inference": "inference",
                            "results_dir": "results_dir"},
    "torch_settings": {"device": "torch_device"},
}
_UNSET = object()


def given_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The dests of the flags ``argv`` gives (argparse fills only the dests a namespace lacks)."""
    dests = {a.dest for a in parser._actions if a.dest != argparse.SUPPRESS}
    namespace = argparse.Namespace(**{d: _UNSET for d in dests})
    parsed = parser.parse_args(list(argv), namespace=namespace)
    return {d for d in dests if getattr(parsed, d, _UNSET) is not _UNSET}


def apply_run_options(args: argparse.Namespace, parser: argparse.ArgumentParser, options: Mapping[str, Any],
                      given: set[str], source: str) -> None:
    """Sets each flag the config's run blocks set and the command line does not."""
    actions = {a.dest: a for a in parser._actions}
    for block, keys in FLAG_OF.items():
        values = options.get(block) or {}
        if not isinstance(values, Mapping):
            raise TrainerConfigError(f"{block} in {source} must be a mapping of keys, got {values!r}.")
        for key, value in values.items():
            if key not in keys:
                raise TrainerConfigError(f"Unknown key {key} in {block} of {source} (known: {', '.join(keys)}).")
            dest = keys[key]
            if not dest and value not in (None, False):
                raise TrainerConfigError(f"{block}.{key} in {source}: {value!r} is not supported by kerasrl (false).")
            if value is not None and dest and dest not in given:
                setattr(args, dest, _flag_value(actions[dest], value, f"{block}.{key} in {source}"))
    if options.get("debug") is not None and "debug" not in given:
        args.debug = _flag_value(actions["debug"], options["debug"], f"debug in {source}")


def _flag_value(action: argparse.Action, value: Any, where: str) -> Any:
    """``value`` as the flag's own parsing would give it (one line naming ``where`` when it cannot)."""
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise TrainerConfigError(f"{where} must be true or false, got {value!r}.")
        return value
    if action.nargs == argparse.REMAINDER:
        return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
    try:
        return action.type(str(value)) if action.type is not None else str(value)  # type: ignore[operator]
    except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
        raise TrainerConfigError(f"{where}: {value!r} is not a valid value ({e}).") from None


def apply_torch_device(device: Optional[str]) -> None:
    """``--torch-device`` / ``torch_settings.device`` as TensorFlow's devices (before TensorFlow
    loads): ``cpu`` hides the GPUs, ``cuda:N`` shows GPU N only, ``cuda`` changes nothing. A
    ``CUDA_VISIBLE_DEVICES`` set by the user wins."""
    if device is None or device == "cuda" or "CUDA_VISIBLE_DEVICES" in os.environ:
        return
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    elif device.startswith("cuda:") and device[5:].isdigit():
        os.environ["CUDA_VISIBLE_DEVICES"] = device[5:]
    else:
        raise TrainerConfigError(f"--torch-device {device!r}: expected cpu, cuda or cuda:N.")
