"""Benchmark: what curricula and export add to a run.

* ``export``: ``kerasrl.export.export_trainers`` (weights.h5 + SavedModel + ONNX when tf2onnx is
  installed) of a CartPole policy, the first call in the process (tracing included) and a
  second one; paid once at the end of every ``kerasrl-learn`` run that trains.
* ``curriculum``: ``TrainerController.reset_env_if_ready`` per env-manager step with a reward
  curriculum whose behavior has a full buffer of 100 returns (the median of ``--runs`` rounds
  of 20,000 calls); paid every step only when ``--curriculum`` or ``--sampler`` is given.

Run: ``python benchmarks/bench_ops.py [--runs 5]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import deque

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def bench_export() -> list[float]:
    import kerasrl
    from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
    from kerasrl.export import export_trainers

    env = SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=2, seed=0))
    context = kerasrl.RunContext.in_results_dir(tempfile.mkdtemp(), "r", seed=0)
    trainer = kerasrl.create_trainers({"default": {"hidden_units": 64}}, env.behavior_specs, context)["CartPole-v1"]
    times = []
    for _ in range(2):
        start = time.perf_counter()
        export_trainers({"CartPole-v1": trainer})
        times.append(time.perf_counter() - start)
    return times


class _Trainer:
    reward_buffer = deque(range(100), maxlen=100)
    get_step, get_max_steps = 0, 10


def bench_curriculum(runs: int) -> float:
    from kerasrl.curriculum import MetaCurriculum
    from kerasrl.trainers import TrainerController

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "B.json"), "w") as f:
        json.dump({"measure": "reward", "thresholds": [1e9], "min_lesson_length": 100, "signal_smoothing": True,
                   "parameters": {"length": [0.5, 0.6]}}, f)
    tc = TrainerController({"B": _Trainer()}, folder, folder, "r", 10, meta_curriculum=MetaCurriculum(folder))
    rounds = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(20000):
            tc.reset_env_if_ready(None, 0)
        rounds.append((time.perf_counter() - start) / 20000)
    return statistics.median(rounds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    first, second = bench_export()
    print(f"export_trainers: first {first:.2f} s, second {second:.2f} s")
    print(f"reset_env_if_ready with a reward curriculum: {bench_curriculum(args.runs) * 1e6:.1f} us per step")


if __name__ == "__main__":
    main()
