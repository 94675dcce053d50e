"""What self-play and POCA cost per agent step against PPO on the same scene.

Each variant is one ``kerasrl-learn`` run (a subprocess) of ``--steps N``, its time per agent step
taken from the run's ``wall_s`` (set-up and compilation included, the same for every variant), and
its steady-state time per agent step: the same less the run's tracing and compilation (its first
calls of the compiled functions, which ``steps_per_sec`` of the run's last line leaves out, as
``bench_ppo.py`` does), the fixed cost that weighs most on a short run:

* ``duel``: Duel1D with ``--agents`` arenas (two agents each, one per team behavior):
  ``ppo`` trains the two teams as two behaviors (2N agent steps), ``selfplay`` one learning team
  against snapshots (its N steps count the learning team only: 2N agent steps too);
* ``group``: GroupSimple1D with ``--agents`` agents in one group: ``ppo`` (the group reward unread)
  against ``poca`` (N agent steps each; ``poca`` only where the trainer type is registered); on the
  unity path ``--groups G`` plays G such groups side by side, as a Unity scene's training areas.

``--path unity`` plays the scenes through the Unity protocol (the stand-in player of the tests:
``--scene duel`` / ``--scene group``), ``--path local`` in this process. Variants alternate within
each repeat (the order turning from repeat to repeat); the table gives the medians and the ratio
to PPO. Run it on a quiet machine, under the benchmark lock:

    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_multi_agent.py --path unity --agents 32
    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_multi_agent.py --scene group --agents 64 --steps 20000
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDIN = os.path.join(ROOT, "tests", "unity_standin", "StandIn")
FINAL = re.compile(r"^final steps=(?P<steps>\d+) .*steps_per_sec=(?P<sps>[\d.]+) wall_s=(?P<wall>[\d.]+)$", re.M)
NETWORK = {"hidden_units": 64, "num_layers": 2}
HYPER = {"batch_size": 256, "buffer_size": 2048, "learning_rate": 3.0e-4}
SELF_PLAY = {"save_steps": 2000, "swap_steps": 1000, "team_change": 8000, "window": 5}
VARIANTS = {"duel": ("ppo", "selfplay"), "group": ("ppo", "poca")}
BEHAVIOR = {"duel": "Duel1D", "group": "GroupSimple1D"}


def config(scene: str, variant: str, threaded: str = "false") -> dict:
    section = {"trainer_type": "poca" if variant == "poca" else "ppo", "hyperparameters": HYPER,
               "network_settings": NETWORK, "summary_freq": 10**9,
               "threaded": threaded if threaded == "auto" else threaded == "true"}
    if variant == "selfplay":
        section["self_play"] = SELF_PLAY
    return {"behaviors": {BEHAVIOR[scene]: section}}


def command(args: argparse.Namespace, scene: str, path: str, folder: str, run_id: str) -> list[str]:
    base = [sys.executable, "-m", "kerasrl.cli", path, "--steps", str(args.steps), "--seed", "1",
            "--results-dir", folder, "--run-id", run_id]
    if args.path == "unity":
        groups = ["--groups", str(args.groups)] if scene == "group" and args.groups > 1 else []
        return base + ["--env", STANDIN, "--env-args", "--scene", scene, "--agents", str(args.agents), *groups]
    if scene == "duel":
        return base + ["--env", "Duel1D"]
    return base + ["--env", "GroupSimple1D"]


def run(args: argparse.Namespace, scene: str, variant: str, folder: str, index: int) -> tuple[float, float]:
    """Seconds per agent step of one run: all of it, and without its tracing and compilation."""
    path = os.path.join(folder, f"{variant}-{index}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config(scene, variant, args.threaded), f)
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(command(args, scene, path, folder, f"{variant}-{index}"), capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=3600)
    match = FINAL.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"{variant} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    agent_steps = 2 * args.steps if scene == "duel" else args.steps
    wall = float(match["wall"])
    steady = int(match["steps"]) / max(float(match["sps"]), 1e-9)  # the wall time less the tracing
    return wall / agent_steps, min(steady, wall) / agent_steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scene", choices=sorted(VARIANTS), default="duel")
    parser.add_argument("--path", choices=("local", "unity"), default="local")
    parser.add_argument("--agents", type=int, default=32, help="Duel1D arenas / GroupSimple1D agents (unity path)")
    parser.add_argument("--groups", type=int, default=1,
                        help="unity path, group scene: areas side by side, each with --agents agents in a group")
    parser.add_argument("--steps", type=int, default=30000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threaded", choices=("false", "true", "auto"), default="false",
                        help="every variant's threaded key (auto: an update thread where the environment is in another "
                             "process, as on the unity path)")
    args = parser.parse_args()
    variants = list(VARIANTS[args.scene])
    times: dict[str, list[float]] = {v: [] for v in variants}
    steady: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.repeats):
            for variant in variants if i % 2 == 0 else variants[::-1]:
                whole, without = run(args, args.scene, variant, folder, i)
                times[variant].append(whole)
                steady[variant].append(without)
                print(f"repeat {i} {variant}: {1e6 * whole:.1f} us per agent step ({1e6 * without:.1f} without "
                      "tracing and compilation)", flush=True)
    reference, steady_reference = statistics.median(times["ppo"]), statistics.median(steady["ppo"])
    size = args.agents * args.groups if args.path == "unity" else (16 if args.scene == "duel" else 3)  # built-ins' own
    print(f"\n{args.scene} ({args.path} path, {size} {'arenas' if args.scene == 'duel' else 'agents'}, "
          f"{args.steps} steps, {args.repeats} repeats, threaded: {args.threaded})")
    print("| variant | us per agent step (median) | ratio to ppo | steady state: us per agent step | ratio to ppo |\n"
          "|---|---|---|---|---|")
    for variant in variants:
        median, without = statistics.median(times[variant]), statistics.median(steady[variant])
        print(f"| {variant} | {1e6 * median:.1f} | {median / reference:.2f} | {1e6 * without:.1f} | "
              f"{without / steady_reference:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
