"""Compare PPO between two kerasrl source trees, on CartPole-v1 (RL-Zoo config) or any ``bench_ppo.py --task``.

Each run is one tree's own ``benchmarks/bench_ppo.py --no-sb3 --seeds 1 --first-seed S
--steps N --task T``, started as a subprocess with its working directory and PYTHONPATH set to that
tree (build its Cython extensions in place first: ``python3 setup.py build_ext --inplace``).
Seeds alternate between the trees, and which tree goes first alternates from seed to seed
(baseline, current | current, baseline | ...), so slow drift of the machine cancels.

From each run's stdout line ``kerasrl seed S: X steps/s (Y with compile), T reached at R,
final mean F`` it takes X (env steps/s without tracing/compilation), Y (counting it, and the
set-up) and R (env steps until the rolling-100 mean return first reaches the task's threshold T,
475 on CartPole, ``None`` if never). A run that exits non-zero, times out or prints no such
line is reported, with its stderr tail, and counted as failed.

The table gives per tree the medians of X, Y and R (a seed that never reached it counts as
infinitely many steps, as in bench_ppo.py), how many seeds reached the threshold, the ratio
current / baseline of the steps/s medians and a two-sided Mann–Whitney U p-value for the R
samples (never reached = ranked above every reached run, tied with each other; scipy's test
if scipy is importable, else the normal approximation with tie and continuity corrections).

    git worktree add --detach /tmp/kerasrl_base <rev> && (cd /tmp/kerasrl_base && python3 setup.py build_ext --inplace)
    python benchmarks/bench_compare.py                              # /tmp/kerasrl_base vs this checkout, 20 seeds
    python benchmarks/bench_compare.py --baseline ../old --seeds 10 --steps 100000
    python benchmarks/bench_compare.py --current /tmp/kerasrl_base --seeds 1 --steps 20000   # smoke test
    python benchmarks/bench_compare.py --current-flags=--threaded --seeds 5   # this checkout threaded
    python benchmarks/bench_compare.py --baseline . --baseline-flags="--workers 2" --current-flags="--workers 2 --threaded"
    python benchmarks/bench_compare.py --task hopper --seeds 3 --steps 100000  # MuJoCo: acting with one env

Exits 1 if any run failed.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional, Sequence

THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BASELINE = "/tmp/kerasrl_base"
TREES = ("baseline", "current")
LINE = re.compile(
    r"^kerasrl seed (?P<seed>-?\d+): (?P<sps>[\d.]+) steps/s \((?P<sps_all>[\d.]+) with compile[^)]*\), "
    r"(?P<threshold>[\d.e+-]+) reached at (?P<reach>\w+)(?:, final mean (?P<final>\S+))?",
    re.MULTILINE,
)


@dataclass
class Run:
    tree: str
    seed: int
    wall: float
    sps: float = math.nan
    sps_all: float = math.nan
    reach: Optional[int] = None
    final: float = math.nan
    threshold: str = "475"
    error: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"baseline tree (default {DEFAULT_BASELINE})")
    p.add_argument("--current", default=THIS_TREE, help=f"current tree (default this checkout, {THIS_TREE})")
    p.add_argument("--seeds", type=int, default=20, help="seeds per tree (default 20)")
    p.add_argument("--first-seed", type=int, default=0, help="seeds run are first-seed .. first-seed+seeds-1")
    p.add_argument("--steps", type=int, default=100_000, help="env steps per run (default 100000)")
    p.add_argument("--task", default="cartpole", help="bench_ppo.py's --task (default cartpole)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it counts as failed")
    p.add_argument("--tail", type=int, default=20, help="stderr lines shown for a failed run")
    p.add_argument("--current-flags", default="", metavar="FLAGS",
                   help="extra bench_ppo.py flags for the current tree's runs, e.g. --current-flags=--threaded")
    p.add_argument("--baseline-flags", default="", metavar="FLAGS",
                   help="extra bench_ppo.py flags for the baseline tree's runs, e.g. --baseline-flags='--workers 2'")
    args = p.parse_args(argv)
    args.baseline, args.current = os.path.abspath(args.baseline), os.path.abspath(args.current)
    return args


def describe_tree(path: str) -> str:
    """``path (commit[, dirty])`` from git, or just the path."""
    try:
        head = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", path, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return f"{path} ({head}{', uncommitted changes' if dirty else ''})"
    except (OSError, subprocess.CalledProcessError):
        return path


def tail(text: str, n: int) -> str:
    """The last ``n`` lines of ``text``, indented, after a newline; empty if there are none."""
    lines = text.rstrip().splitlines()[-n:]
    return "".join("\n    | " + line for line in lines)


def parse_output(run: Run, stdout: str) -> Run:
    m = next((m for m in LINE.finditer(stdout) if int(m["seed"]) == run.seed), None)
    if m is None:
        run.error = "no 'kerasrl seed ...' result line in stdout"
        return run
    run.sps, run.sps_all, run.threshold = float(m["sps"]), float(m["sps_all"]), m["threshold"]
    run.reach = None if m["reach"] == "None" else int(m["reach"])
    run.final = float(m["final"]) if m["final"] else math.nan
    return run


def run_once(tree: str, path: str, seed: int, args: argparse.Namespace) -> Run:
    """One seed of ``path``'s own bench_ppo.py in a subprocess."""
    cmd = [sys.executable, os.path.join(path, "benchmarks", "bench_ppo.py"), "--no-sb3", "--seeds", "1",
           "--first-seed", str(seed), "--steps", str(args.steps), "--task", args.task]
    cmd += (args.current_flags if tree == "current" else args.baseline_flags).split()
    env = dict(os.environ, PYTHONPATH=path)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=path, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Run(tree, seed, time.perf_counter() - start,
                   error=f"timed out after {args.timeout:.0f} s{tail(err, args.tail)}")
    run = Run(tree, seed, time.perf_counter() - start)
    if proc.returncode != 0:
        run.error = f"exit status {proc.returncode}{tail(proc.stderr, args.tail)}"
        return run
    parse_output(run, proc.stdout)
    if run.error:
        run.error += tail(proc.stdout + proc.stderr, args.tail)
    return run


def format_run(run: Run, index: int, total: int) -> str:
    head = f"[{index}/{total}] {run.tree:8s} seed {run.seed}: "
    if not run.ok:
        return head + f"FAILED ({run.wall:.1f} s): {run.error}"
    return head + (f"{run.sps:.0f} steps/s ({run.sps_all:.0f} with compile), {run.threshold} reached at {run.reach}, "
                   f"final mean {run.final:.1f}, wall {run.wall:.1f} s")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, str]:
    """Two-sided Mann–Whitney U test of x against y: (U of x, p-value, method)."""
    if not x or not y:
        return math.nan, math.nan, "n/a"
    try:
        from scipy.stats import mannwhitneyu

        res = mannwhitneyu(x, y, alternative="two-sided")
        return float(res.statistic), float(res.pvalue), "scipy"
    except ImportError:
        return (*_mann_whitney_normal(x, y), "normal approx.")


def _mann_whitney_normal(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """U with average ranks for ties; normal approximation with tie and continuity corrections."""
    n1, n2 = len(x), len(y)
    values = sorted(list(x) + list(y))
    n = n1 + n2
    rank: dict[float, float] = {}
    tie_term, i = 0.0, 0
    while i < n:
        j = i
        while j + 1 < n and values[j + 1] == values[i]:
            j += 1
        rank[values[i]] = (i + j) / 2 + 1
        tie_term += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u1 = sum(rank[v] for v in x) - n1 * (n1 + 1) / 2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))) if n > 1 else 0.0
    if sigma == 0:
        return u1, 1.0
    z = max(abs(u1 - n1 * n2 / 2) - 0.5, 0.0) / sigma
    return u1, min(1.0, math.erfc(z / math.sqrt(2)))


def reach_sample(runs: Sequence[Run], steps: int) -> list[float]:
    """Steps to the threshold of the successful runs; never reached counts as ``steps + 1`` (ties above all)."""
    return [float(r.reach) if r.reach is not None else float(steps + 1) for r in runs if r.ok]


def summarize(runs: Sequence[Run], args: argparse.Namespace) -> None:
    by = {t: [r for r in runs if r.tree == t] for t in TREES}
    ok = {t: [r for r in by[t] if r.ok] for t in TREES}
    med = {t: {k: median([getattr(r, k) for r in ok[t]]) for k in ("sps", "sps_all")} for t in TREES}
    reach = {t: median([r.reach if r.reach is not None else math.inf for r in ok[t]]) for t in TREES}
    reached = {t: sum(r.reach is not None for r in ok[t]) for t in TREES}
    print()
    threshold = next((r.threshold for r in runs if r.ok), "threshold")
    print(f"--task {args.task}, {args.steps} steps, seeds {args.first_seed}..{args.first_seed + args.seeds - 1} "
          f"(medians over successful runs)")
    print(f"{'':36s}{'baseline':>14s}{'current':>14s}{'cur/base':>10s}")
    print(f"{'runs ok / run':36s}" + "".join(f"{f'{len(ok[t])}/{len(by[t])}':>14s}" for t in TREES))
    for label, key in (("env steps/s (no compile)", "sps"), ("env steps/s (compile counted)", "sps_all")):
        a, b = med["baseline"][key], med["current"][key]
        ratio = b / a if a and not math.isnan(a) and not math.isnan(b) else math.nan
        print(f"{label:36s}{a:>14.0f}{b:>14.0f}{ratio:>9.3f}x")
    cells = [f"{reach[t]:.0f} ({reached[t]}/{len(ok[t])})" for t in TREES]
    print(f"{f'steps to rolling mean {threshold} (reached)':36s}{cells[0]:>14s}{cells[1]:>14s}")
    u, p, method = mann_whitney_u(reach_sample(by["baseline"], args.steps), reach_sample(by["current"], args.steps))
    print(f"{f'Mann-Whitney U, steps to {threshold}':36s}U={u:.1f}, two-sided p={p:.3g} ({method})")
    failed = [r for r in runs if not r.ok]
    if failed:
        print(f"{len(failed)} failed run(s): " + ", ".join(f"{r.tree} seed {r.seed}" for r in failed))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    paths = {"baseline": args.baseline, "current": args.current}
    for t in TREES:
        script = os.path.join(paths[t], "benchmarks", "bench_ppo.py")
        if not os.path.isfile(script):
            print(f"error: {t} tree has no {script}", file=sys.stderr)
            return 2
        print(f"{t:8s} {describe_tree(paths[t])}")
    if args.baseline == args.current:
        print("note: baseline and current are the same tree")
    runs: list[Run] = []
    total = 2 * args.seeds
    for k, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        for t in (TREES if k % 2 == 0 else TREES[::-1]):
            runs.append(run_once(t, paths[t], seed, args))
            print(format_run(runs[-1], len(runs), total), flush=True)
    summarize(runs, args)
    return 1 if any(not r.ok for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
