"""Make the kerasrl 0.1 checkpoint-compatibility fixture (tests/data/checkpoints_v0_1/).

Trains PPO briefly on ``Simple1DEnvironment`` with the *baseline* kerasrl (commit ea1fa61,
kerasrl 0.1 before the settings refactor) and keeps, per case, only what a later test needs to
restore the checkpoint with the current code and compare:

    checkpoints_v0_1/<case>/config.json       the trainer config dict passed to initialize_trainers
    checkpoints_v0_1/<case>/meta.json         seed, env kwargs, behavior name, source commit, versions
    checkpoints_v0_1/<case>/expected.npz      the trained actor-critic's variables, step, updates
    checkpoints_v0_1/<case>/<behavior>/       the TF checkpoint: checkpoint, model-N.index,
                                              model-N.data-00000-of-00001

``<case>`` is the ``model_path`` given to ``initialize_trainers`` (which appends the behavior
name), so a test can restore with ``initialize_trainers(config, specs, ..., model_path=<case>,
load_model=True, ...)`` (copy the case folder to a temporary one first if the code under test
might write there).

expected.npz keys (see also README.md):

    "step", "updates"     int64 scalars: trainer.get_step and trainer.update_count at the save
    "paths"               str array: variable.path of trainer.learner.actor_critic.weights, in order
    "trainable"           bool array, same order: whether the variable is trainable
    "var/<variable.path>" the value of each variable (paths are unique; checked here)

Run it with the baseline tree on ``sys.path`` (it inserts ``--source`` first, default
/tmp/kerasrl_base, and refuses to run if kerasrl is imported from anywhere else):

    git worktree add --detach /tmp/kerasrl_base ea1fa61
    (cd /tmp/kerasrl_base && python3 setup.py build_ext --inplace -q)
    cd /tmp/kerasrl_base && python3 /work/main/tests/data/make_v0_1_checkpoints.py
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "checkpoints_v0_1")
DEFAULT_SOURCE = "/tmp/kerasrl_base"
SEED = 0
COMMON: dict[str, Any] = {
    "hidden_units": 8, "num_layers": 1, "batch_size": 16, "buffer_size": 32, "max_steps": 100,
}
CASES: dict[str, dict[str, Any]] = {
    "discrete": {
        "env": {"use_discrete": True, "seed": SEED},
        "trainer": dict(COMMON, normalize=True),
    },
    "continuous_recurrent": {
        "env": {"use_discrete": False, "seed": SEED},
        "trainer": dict(COMMON, use_recurrent=True, sequence_length=4, memory_size=8),
    },
}
KEEP_PREFIXES = ("checkpoint", "model-")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source_pos", nargs="?", metavar="SOURCE", help="same as --source")
    p.add_argument("--source", default=None, help=f"baseline kerasrl tree (default {DEFAULT_SOURCE})")
    p.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: checkpoints_v0_1 beside this script)")
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = p.parse_args()
    args.source = os.path.abspath(args.source or args.source_pos or DEFAULT_SOURCE)
    return args


def import_baseline(source: str) -> None:
    """Put ``source`` first on sys.path and check that kerasrl really comes from it."""
    sys.path.insert(0, source)
    import kerasrl

    where = os.path.realpath(os.path.dirname(kerasrl.__file__))
    if os.path.dirname(where) != os.path.realpath(source):
        raise SystemExit(f"kerasrl was imported from {where}, not from {source}")


def source_commit(source: str) -> str:
    try:
        out = subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def train(case: dict[str, Any], work: str) -> tuple[dict[str, Any], Any, str]:
    """Train one case in ``work``; returns (trainer config, trainer, behavior name)."""
    from kerasrl.config import with_defaults
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.trainer_controller import TrainerController
    from kerasrl.trainer_util import initialize_trainers

    config = with_defaults({"default": dict(case["trainer"])})
    env = Simple1DEnvironment(**case["env"])
    manager = SimpleEnvManager(env)
    summaries, models = os.path.join(work, "summaries"), os.path.join(work, "models")
    trainers = initialize_trainers(
        config, manager.external_brains, summaries_dir=summaries, run_id="v0_1", model_path=models,
        keep_checkpoints=1, train_model=True, load_model=False, seed=SEED, meta_curriculum=None, multi_gpu=False,
    )
    (behavior, trainer), = trainers.items()
    tc = TrainerController(trainers, models, summaries, "v0_1", save_freq=10**9, meta_curriculum=None, train=True,
                           training_seed=SEED, fast_simulation=True, sampler_manager=None, resampling_interval=None)
    tc.start_learning(manager)
    return config, trainer, behavior


def expected_arrays(trainer: Any) -> dict[str, Any]:
    import numpy as np

    weights = trainer.learner.actor_critic.weights
    paths = [v.path for v in weights]
    if len(set(paths)) != len(paths):
        raise SystemExit(f"variable paths are not unique: {paths}")
    out: dict[str, Any] = {
        "step": np.int64(trainer.get_step),
        "updates": np.int64(trainer.update_count),
        "paths": np.array(paths, dtype=str),
        "trainable": np.array([bool(v.trainable) for v in weights]),
    }
    for v in weights:
        out[f"var/{v.path}"] = np.asarray(v.numpy())
    return out


def write_case(name: str, case: dict[str, Any], out_dir: str, commit: str) -> None:
    import numpy as np
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as work:
        config, trainer, behavior = train(case, work)
        src = os.path.join(work, "models", behavior)
        dest = os.path.join(out_dir, name)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(os.path.join(dest, behavior))
        for f in sorted(os.listdir(src)):
            if f.startswith(KEEP_PREFIXES):
                shutil.copy2(os.path.join(src, f), os.path.join(dest, behavior, f))
    arrays = expected_arrays(trainer)
    np.savez_compressed(os.path.join(dest, "expected.npz"), **arrays)
    with open(os.path.join(dest, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    import keras

    meta = {
        "case": name, "behavior_name": behavior, "seed": SEED, "env": "Simple1DEnvironment", "env_kwargs": case["env"],
        "source_commit": commit, "tensorflow": tf.__version__, "keras": keras.__version__,
        "checkpoint_prefix": f"{behavior}/model-{int(arrays['step'])}",
        "initialize_trainers": {"run_id": "v0_1", "keep_checkpoints": 1, "seed": SEED},
    }
    with open(os.path.join(dest, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"{name}: behavior {behavior}, step {int(arrays['step'])}, updates {int(arrays['updates'])}, "
          f"{len(arrays['paths'])} variables -> {dest}")


def main() -> int:
    args = parse_args()
    import_baseline(args.source)
    commit = source_commit(args.source)
    if not commit.startswith("ea1fa61"):
        print(f"warning: {args.source} is at {commit}, not ea1fa61", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    for name in args.cases:
        write_case(name, CASES[name], args.out, commit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
