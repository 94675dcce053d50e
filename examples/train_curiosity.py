"""Curiosity on MountainCar-v0: PPO with and without the ICM reward, 3 seeds each.

    python examples/train_curiosity.py                     # 3 seeds x 500k steps, both variants
    python examples/train_curiosity.py --variants curiosity --seeds 1 --steps 100000

MountainCar's reward is −1 per step until the flag (200 steps: −200 if never reached). PPO
runs with the RL-Zoo hyper-parameters of MountainCar-v0 (16 envs × 16 steps, normalised
observations, λ 0.98, 4 epochs, no entropy bonus) in ML-Agents terms; ``curiosity`` adds
``reward_signals.curiosity`` beside the extrinsic reward. Reported per run: the best rolling
mean return (last ≤ 100 episodes) at the end and the first step at which it was above −200
(−199 or more: the flag reached in at least one of the last 100 episodes).

The last line is machine-readable: ``final curiosity_solved=<n>/<seeds> extrinsic_solved=<n>/<seeds>``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

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
EXTRINSIC = {"strength": 1.0, "gamma": 0.99}
CURIOSITY = {"strength": 1.0, "gamma": 0.99, "encoding_size": 64, "learning_rate": 1.0e-3}


def run(variant: str, seed: int, steps: int, workdir: str) -> dict[str, Any]:
    import numpy as np
    from _harness import train

    signals = {"extrinsic": EXTRINSIC, **({"curiosity": CURIOSITY} if variant == "curiosity" else {})}
    start = time.perf_counter()
    trainer, reached = train({**MOUNTAIN_CAR, "reward_signals": signals}, "MountainCar-v0", steps, seed,
                             os.path.join(workdir, f"{variant}-{seed}"), num_envs=16, target=-199.0)
    returns = list(trainer.recent_returns)
    final = float(np.mean(returns)) if returns else float("nan")
    return {"reached": reached, "final": final, "wall": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["curiosity", "extrinsic"], choices=["curiosity", "extrinsic"])
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    workdir = args.workdir or tempfile.mkdtemp(prefix="train_curiosity_")
    solved = {v: 0 for v in args.variants}
    for seed in range(args.seeds):
        for variant in args.variants:
            r = run(variant, seed, args.steps, workdir)
            solved[variant] += r["reached"] is not None
            print(f"{variant:10s} seed {seed}: rolling mean > -200 first at step {r['reached']}, "
                  f"final rolling mean {r['final']:.1f} ({r['wall']:.0f} s)", flush=True)
    print("final " + " ".join(f"{v}_solved={n}/{args.seeds}" for v, n in solved.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
