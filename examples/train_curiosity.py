"""Curiosity: PPO with and without the ICM reward, 3 seeds each.

    python examples/train_curiosity.py                     # CombinationLock-v0, 3 seeds x 300k steps, both variants
    python examples/train_curiosity.py --env mountaincar   # MountainCar-v0, 3 seeds x 500k steps
    python examples/train_curiosity.py --variants curiosity --seeds 1 --steps 100000

``lock`` (the default) is kerasrl's ``CombinationLock-v0``: 20 positions, each opened by one of
two actions (a wrong one sends the agent back to the start), the only reward on opening the lock
(at most 0.7, within 60 steps). PPO runs with ML-Agents' default keys (2048-step buffer, 4 env
copies, ``beta`` 0.01), curiosity strength 1. A run reaches the target when the rolling mean
return is 0.63 or more (most episodes open the lock, near the fastest way). With the defaults,
curiosity reached it on seeds 0, 1 and 2 (at steps 35,864, 36,928 and 33,832), extrinsic reward
alone on none: ``final curiosity_solved=3/3 extrinsic_solved=0/3``.

``mountaincar``: MountainCar-v0, whose reward is −1 per step until the flag (200 steps: −200 if
never reached), with the RL-Zoo hyper-parameters of MountainCar-v0 (16 envs × 16 steps,
normalised observations, λ 0.98, 4 epochs, no entropy bonus) in ML-Agents terms. The target is a
rolling mean above −200 (the flag reached in at least one of the last 100 episodes); plain PPO
reaches it too, so curiosity does not matter there.

``curiosity`` adds ``reward_signals.curiosity`` beside the extrinsic reward, nothing else changes.
Reported per run: the first step at which the rolling mean return (last ≤ 100 episodes) reached
the target, and the rolling mean at the end.

The last line is machine-readable: ``final curiosity_solved=<n>/<seeds> extrinsic_solved=<n>/<seeds>``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, NamedTuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MOUNTAIN_CAR = {
    "trainer": "ppo", "batch_size": 64, "buffer_size": 255, "time_horizon": 15, "flush_on_update": True,
    "num_epoch": 4, "learning_rate": 3.0e-4, "epsilon": 0.2, "epsilon_end": 0.0, "beta": 0.0, "lambd": 0.98,
    "hidden_units": 64, "num_layers": 2, "normalize": True, "use_recurrent": False, "summary_freq": 10**9,
    "separate_value_network": True, "initializer": "orthogonal", "activation": "tanh", "clip_value_loss": False,
    "max_grad_norm": 0.5, "adam_epsilon": 1.0e-5, "adam_epsilon_style": "torch", "fused_update": True,
    "jit_compile": True,
}
LOCK = {
    "trainer": "ppo", "batch_size": 256, "buffer_size": 2048, "time_horizon": 128, "num_epoch": 3,
    "learning_rate": 3.0e-4, "beta": 0.01, "epsilon": 0.2, "lambd": 0.95, "hidden_units": 128, "num_layers": 2,
    "normalize": True, "summary_freq": 10**9,
}
EXTRINSIC = {"strength": 1.0, "gamma": 0.99}


class Task(NamedTuple):
    """What one ``--env`` trains: its Gymnasium id, PPO keys, curiosity keys, env copies, the
    rolling mean return that counts as solved and the default budget."""

    env_id: str
    section: dict[str, Any]
    curiosity: dict[str, Any]
    num_envs: int
    target: float
    steps: int


TASKS = {
    "lock": Task("CombinationLock-v0", LOCK, {"strength": 1.0, "gamma": 0.99, "encoding_size": 64,
                                              "learning_rate": 3.0e-4}, 4, 0.63, 300_000),
    "mountaincar": Task("MountainCar-v0", MOUNTAIN_CAR, {"strength": 1.0, "gamma": 0.99, "encoding_size": 64,
                                                         "learning_rate": 1.0e-3}, 16, -199.0, 500_000),
}


def run(task: Task, variant: str, seed: int, steps: int, workdir: str) -> dict[str, Any]:
    from _harness import mean_return, train

    signals = {"extrinsic": EXTRINSIC, **({"curiosity": task.curiosity} if variant == "curiosity" else {})}
    start = time.perf_counter()
    trainer, reached = train({**task.section, "reward_signals": signals}, task.env_id, steps, seed,
                             os.path.join(workdir, f"{variant}-{seed}"), num_envs=task.num_envs, target=task.target)
    return {"reached": reached, "final": mean_return(trainer), "wall": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", choices=sorted(TASKS), default="lock")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: 300k for lock, 500k for mountaincar)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["curiosity", "extrinsic"], choices=["curiosity", "extrinsic"])
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    from _harness import in_workdir

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    return in_workdir(args.workdir, "train_curiosity_", lambda workdir: run_all(args, workdir))


def run_all(args: argparse.Namespace, workdir: str) -> int:
    """Every seed of every variant, each run in a folder of ``workdir``."""
    solved = {v: 0 for v in args.variants}
    task = TASKS[args.env]
    for seed in range(args.seeds):
        for variant in args.variants:
            r = run(task, variant, seed, args.steps or task.steps, workdir)
            solved[variant] += r["reached"] is not None
            print(f"{variant:10s} seed {seed}: rolling mean >= {task.target:g} first at step {r['reached']}, "
                  f"final rolling mean {r['final']:.1f} ({r['wall']:.0f} s)", flush=True)
    print("final " + " ".join(f"{v}_solved={n}/{args.seeds}" for v, n in solved.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
