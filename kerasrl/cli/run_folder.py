"""The run's folder: checked before anything is written, and what each start of a run records in it."""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import yaml

from kerasrl import __version__
from kerasrl.exception import TrainerError


def record_run(args: argparse.Namespace, context: Any, trainers: dict[str, Any]) -> None:
    """Save what this start of the run used in its folder: ``configuration.yaml`` (the command
    line, seed, each behavior's target step count (``target_steps``), versions and every
    behavior's resolved settings, rewritten atomically at each start of training) and one line
    per start in ``commands.log``. An ``--inference`` start only adds its line: the record stays
    the training run's, which ``--resume`` continues."""
    run_dir = os.path.join(args.results_dir, args.run_id)
    argv = getattr(args, "argv", None)
    words = [os.path.basename(sys.argv[0]) or "kerasrl-learn", *sys.argv[1:]] if argv is None else argv
    command = " ".join(map(shlex.quote, words))
    if not args.inference:
        record = {"command_line": command, "seed": context.seed,
                  "target_steps": {name: int(t.get_max_steps) for name, t in trainers.items()},
                  "kerasrl_version": __version__, "run_context": asdict(context),
                  "behaviors": {name: t.parameters for name, t in trainers.items()}}
        tmp = os.path.join(run_dir, "configuration.yaml.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            yaml.safe_dump(record, f, sort_keys=False)
        os.replace(tmp, os.path.join(run_dir, "configuration.yaml"))
    with open(os.path.join(run_dir, "commands.log"), "a", encoding="utf-8") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {command}\n")


@dataclass
class RecordedRun:
    """What a run's ``configuration.yaml`` says its training started with: the seed and each
    behavior's target step count (``--steps``, else the config's ``max_steps``)."""

    seed: Optional[int] = None
    targets: dict[str, int] = field(default_factory=dict)


def recorded_run(run_dir: str) -> RecordedRun:
    """The seed and targets recorded in ``run_dir/configuration.yaml`` (older folders: the
    behaviors' ``max_steps``); nothing for a folder without the file. A file that cannot be read
    is a one-line error: ``--steps`` and ``--seed`` resume without it."""
    path = os.path.join(run_dir, "configuration.yaml")
    if not os.path.exists(path):
        return RecordedRun()
    try:
        with open(path, encoding="utf-8") as f:
            record = yaml.safe_load(f)
        behaviors = record.get("behaviors") or {}
        targets = record.get("target_steps") or {name: b["max_steps"] for name, b in behaviors.items()}
        seed = record.get("seed")
        return RecordedRun(None if seed is None else int(seed), {str(k): int(v) for k, v in targets.items()})
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as e:
        raise TrainerError(f"--resume: {path} cannot be read ({type(e).__name__}); give --steps and --seed to "
                           "continue without it.") from e


def prepare_run_dir(args: argparse.Namespace) -> str:
    """The run's folder, checked: an existing run is continued only with ``--resume`` (or run
    with ``--inference``) and replaced only with ``--force``; it must be writable."""
    run_dir = os.path.join(args.results_dir, args.run_id)
    exists = os.path.isdir(run_dir) and bool(os.listdir(run_dir))
    if args.inference and not exists:
        raise TrainerError(f"--inference: there is no trained model in {run_dir}; train run {args.run_id} first.")
    if exists and not (args.load or args.inference or args.force):
        raise TrainerError(f"The run folder {run_dir} already exists: continue it with --resume, or start it "
                           "afresh with --force (which deletes it).")
    try:
        if args.force and os.path.exists(run_dir):
            shutil.rmtree(run_dir)
        os.makedirs(run_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=run_dir):
            pass
    except OSError as e:
        raise TrainerError(f"The run folder {run_dir} cannot be written: {e.strerror or e}.") from e
    return run_dir


def initial_models(args: argparse.Namespace) -> Optional[str]:
    """The models folder of the run named by ``--initialize-from`` (which must exist)."""
    if args.initialize_from is None:
        return None
    if args.initialize_from == args.run_id:
        raise TrainerError("--initialize-from names this run; continue it with --resume instead.")
    models = os.path.join(args.results_dir, args.initialize_from, "models")
    if not os.path.isdir(models):
        raise TrainerError(f"--initialize-from {args.initialize_from}: there is no run folder {models}.")
    return models
