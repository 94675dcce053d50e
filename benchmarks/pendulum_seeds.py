"""Pendulum-v1 final returns, kerasrl's ``pendulum_sb3`` against SB3 PPO with the same settings,
over many seeds, with a Mann-Whitney U rank test.

    python benchmarks/pendulum_seeds.py --seeds 300-319 --json pendulum.json --sb3-json sb3.json

Each seed runs kerasrl then SB3 (``bench_ppo.py --task pendulum``'s runs: 4 envs, 102,400
steps); the final return is the mean of the last 100 episodes. Results are written to the JSON
files (``{seed: return}``) after every run and read back at the start, so an interrupted
comparison resumes where it stopped (``--sb3-json`` can be shared by other comparisons).
The U test is two-sided; its p-value comes from the normal approximation with a tie
correction (scipy is not needed).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_ppo  # noqa: E402
from bench_tasks import TASKS  # noqa: E402
from seed_args import parse_seeds  # noqa: E402


def mann_whitney_u(a: list[float], b: list[float]) -> tuple[float, float]:
    """(U of ``a``, two-sided p) by the normal approximation with tie correction and continuity
    correction; U of ``a`` counts the pairs where ``a``'s value is larger (ties count ½)."""
    n1, n2 = len(a), len(b)
    pooled = sorted((v, i) for i, v in enumerate(a + b))
    ranks = [0.0] * (n1 + n2)
    ties = 0.0
    k = 0
    while k < len(pooled):
        j = k
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[k][0]:
            j += 1
        for m in range(k, j + 1):
            ranks[pooled[m][1]] = (k + j) / 2 + 1
        t = j - k + 1
        ties += t ** 3 - t
        k = j + 1
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return u, 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    return u, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def load(path: str) -> dict[str, float]:
    if path and os.path.exists(path):
        with open(path) as f:
            return {str(k): float(v) for k, v in json.load(f).items()}
    return {}


def save(path: str, results: dict[str, float]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(sorted(results.items(), key=lambda kv: int(kv[0]))), f, indent=1)
    os.replace(tmp, path)


def run_seeds(task, seeds: list[int], steps: int, paths: tuple[str, str], peer: str = "SB3",
              only: str | None = None, curves: Any = None) -> tuple[dict[str, float], dict[str, float]]:
    """Each seed's final return for kerasrl and for the SB3 peer (``only``: ``kerasrl`` or ``sb3``),
    resumed from and saved after every run to the JSON files ``paths`` (kerasrl's, the peer's).
    ``curves`` (a ``bench_ppo.CurveWriter``) also records each run's learning curve, the peer's
    under its name ``peer``."""
    ours, theirs = load(paths[0]), load(paths[1])
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            key = str(seed)
            if key not in ours and only != "sb3":
                curve: Any = [] if curves else None
                ours[key] = bench_ppo.run_kerasrl(steps, seed, os.path.join(tmp, key), task=task, curve=curve)["final"]
                save(paths[0], ours)
                if curves:
                    curves.write("kerasrl", seed, curve)
            if key not in theirs and only != "kerasrl":
                curve = [] if curves else None
                theirs[key] = bench_ppo.run_sb3(steps, seed, task, curve=curve)["final"]
                save(paths[1], theirs)
                if curves:
                    curves.write(peer, seed, curve)
            print(f"seed {seed}: kerasrl {ours.get(key, float('nan')):.1f}  {peer} {theirs.get(key, float('nan')):.1f}",
                  flush=True)
    return ours, theirs


def count_transitions() -> None:
    """An experiment (``--count-transitions``): ``flush_on_update`` rollouts count the transitions
    they store, not agent steps, so that each holds SB3's ``n_steps × n_envs`` (4,096: 64 whole
    mini-batches). By default the step after an episode's end (Gymnasium's NEXT_STEP reset step,
    which stores nothing) counts too: 4,072–4,076 rows, 63 mini-batches, 44–40 rows left out per
    epoch. ``benchmarks/lockstep_sb3.py`` finds this the one difference from SB3's run beyond
    float rounding."""
    from kerasrl.ppo.trainer import PPOTrainer

    init = PPOTrainer.__init__

    def patched(self: PPOTrainer, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)
        processor, add_step = self.processor, self.processor.add_step

        def counted(curr, nxt, outputs):  # noqa: ANN001, ANN202 - AgentProcessor.add_step's
            if processor.rollout is not None and curr is not None and len(curr):
                processor.rollout.steps -= int(curr.done.sum())  # agents acting on a final observation
            add_step(curr, nxt, outputs)

        processor.add_step = counted

    PPOTrainer.__init__ = patched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="300-319")
    parser.add_argument("--steps", type=int, default=102_400)
    parser.add_argument("--json", default="pendulum_kerasrl.json", help="kerasrl's {seed: return}")
    parser.add_argument("--sb3-json", default="pendulum_sb3.json", help="SB3's {seed: return}")
    parser.add_argument("--count-transitions", action="store_true",
                        help="kerasrl's rollouts hold 4,096 stored transitions, as SB3's (count_transitions)")
    parser.add_argument("--only", choices=("kerasrl", "sb3"), help="run one library only")
    args = parser.parse_args()

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    if args.count_transitions:
        count_transitions()
    task = TASKS["pendulum"]
    bench_ppo.TARGET = task.threshold
    seeds = parse_seeds(args.seeds)
    ours, theirs = run_seeds(task, seeds, args.steps, (args.json, args.sb3_json), only=args.only)
    if args.only:
        return 0
    a = [ours[str(s)] for s in seeds]
    b = [theirs[str(s)] for s in seeds]
    u, p = mann_whitney_u(a, b)
    ahead = sum(x > y for x, y in zip(a, b))
    print(f"{len(seeds)} seeds: median kerasrl {statistics.median(a):.1f}, SB3 {statistics.median(b):.1f}; "
          f"kerasrl ahead on {ahead} of {len(seeds)} paired seeds; Mann-Whitney U = {u:.1f} "
          f"(of {len(a) * len(b)}), two-sided p = {p:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
