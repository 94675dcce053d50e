"""How busy kerasrl keeps a Unity player whose every step costs simulation time.

The stand-in player of the tests (tests/unity_standin; ``--agents`` walkers of Simple1D) is given
``--step-cost-ms`` of busy CPU per step, as a physics step costs, and trained with PPO through
``kerasrl-learn``, unthreaded and threaded, seed after seed, the modes alternating. The player
measures where its wall time went after its first ``--report-after`` exchanges (start-up and the
first compilation left out): simulating, its own message building and parsing, and waiting for
the trainer inside the exchange call. Its **busy share** is 1 - waiting / wall: 1.0 when the
trainer costs nothing, so that the simulation alone sets the pace.

The trainer's side comes from the run's ``timers.json`` (whole run, start-up included), per
exchange: acting (the policy for all agents), encoding the actions, waiting for the player,
decoding its message, recording the step (agent processor, trajectories) and updates in the
acting thread (unthreaded: the update; threaded: waiting for the update thread).

``--modes transport`` adds the floor that no trainer can go below: kerasrl's Unity environment
alone, answering every exchange with fixed actions (decoding the player's message and encoding
the answer, no policy, no trainer), so the player's wait is the transport (Python gRPC on both
sides) and that decoding and encoding.

``--trainer-tree DIR`` trains with another checkout's kerasrl (the player stays this tree's),
to compare two versions on the same player. Run it on a quiet machine, under the benchmark lock:

    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_player_busy.py --seeds 3
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDIN = os.path.join(ROOT, "tests", "unity_standin", "StandIn")
#: The trainer configs (``--config``): a small PPO, and ML-Agents' own 3DBall settings (a 12,000-step
#: buffer, 128x128 units, normalised observations), whose updates weigh more beside acting.
CONFIGS = {
    "small": """behaviors:
  Simple1D:
    trainer_type: ppo
    hyperparameters: {batch_size: 64, buffer_size: 1024, learning_rate: 3.0e-4}
    network_settings: {hidden_units: 64, num_layers: 2}
    summary_freq: 100000
""",
    "3dball": """behaviors:
  Simple1D:
    trainer_type: ppo
    hyperparameters: {batch_size: 64, buffer_size: 12000, learning_rate: 3.0e-4, beta: 1.0e-3, epsilon: 0.2,
                      lambd: 0.99, num_epoch: 3}
    network_settings: {normalize: true, hidden_units: 128, num_layers: 2}
    time_horizon: 1000
    summary_freq: 100000
""",
}
FINAL = re.compile(r"^final steps=\d+ mean_return=\S+ steps_per_sec=(?P<sps>\S+)", re.M)
#: Trainer timers (name in timers.json -> column), summed wherever they appear in the tree.
TIMERS = {"SimpleEnvManager._take_step": "acting", "unity.encode": "encode", "unity.wait": "wait for player",
          "unity.decode": "decode", "process_step": "record step", "update_policy": "update (acting thread)"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def _timer_totals(node: dict[str, Any], totals: dict[str, float]) -> None:
    if node.get("name") in TIMERS:
        key = TIMERS[node["name"]]
        totals[key] = totals.get(key, 0.0) + float(node.get("total", 0.0))
    for child in node.get("children", []):
        _timer_totals(child, totals)


#: ``--modes transport``: the Unity environment answering with fixed actions, no trainer.
TRANSPORT = """
import sys
import numpy as np
from kerasrl.envs.unity import UnityEnvironment
player, port, steps, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
env = UnityEnvironment(file_name=player, base_port=port, no_graphics=True, additional_args=extra)
results, done = env.reset(), 0
branches = {name: len(spec.discrete_branches) for name, spec in env.behavior_specs.items()}
while done < steps:
    actions = {name: np.zeros((len(result.agent_ids), branches[name]), np.int32) for name, result in results.items()}
    results = env.step(actions)
    done += sum(len(result.agent_ids) for result in results.values())
env.close()
print("final steps=%d mean_return=0 steps_per_sec=0" % done)
"""


def run_transport(args: argparse.Namespace, workdir: str) -> dict[str, float]:
    """The player against kerasrl's Unity environment alone (``TRANSPORT``): its report."""
    report = os.path.join(workdir, "report.json")
    command = [sys.executable, "-c", TRANSPORT, STANDIN, str(_free_port()), str(args.steps),
               "--agents", str(args.agents), "--step-cost-ms", str(args.step_cost_ms), "--step-mode", args.step_mode,
               "--report", report, "--report-after", str(args.report_after)]
    env = dict(os.environ, PYTHONPATH=args.trainer_tree, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, cwd=workdir)
    if proc.returncode != 0 or not os.path.exists(report):
        raise SystemExit(f"the transport run failed: {proc.stderr[-2000:]}")
    with open(report) as f:
        out: dict[str, float] = json.load(f)
    os.remove(report)
    out["steps/s"] = out["steps"] * args.agents / max(out["wall_s"], 1e-9)
    return out


def run(args: argparse.Namespace, seed: int, threaded: bool, workdir: str) -> dict[str, float]:
    """One training run; the player's report and the trainer's per-exchange breakdown (ms)."""
    report, run_id = os.path.join(workdir, "report.json"), f"busy_{seed}_{int(threaded)}"
    command = [sys.executable, "-m", "kerasrl.cli", os.path.join(workdir, "config.yaml"), "--env", STANDIN,
               "--steps", str(args.steps), "--seed", str(seed), "--results-dir", workdir, "--run-id", run_id,
               "--force", "--base-port", str(_free_port()), *(["--threaded"] if threaded else []),
               "--env-args", "--agents", str(args.agents), "--step-cost-ms", str(args.step_cost_ms),
               "--step-mode", args.step_mode,
               "--report", report, "--report-after", str(args.report_after)]
    env = dict(os.environ, PYTHONPATH=args.trainer_tree, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, cwd=workdir)
    final = FINAL.search(proc.stdout)
    if proc.returncode != 0 or final is None or not os.path.exists(report):
        raise SystemExit(f"run seed {seed} threaded={threaded} failed: {proc.stderr[-2000:]}")
    with open(report) as f:
        out: dict[str, float] = json.load(f)
    os.remove(report)
    with open(os.path.join(workdir, run_id, "timers.json")) as f:
        timers = json.load(f)
    totals: dict[str, float] = {}
    _timer_totals(timers, totals)
    exchanges = args.steps / args.agents
    out.update({key: 1e3 * value / exchanges for key, value in totals.items()})
    out["steps/s"] = float(final.group("sps"))
    return out


def table(results: dict[str, list[dict[str, float]]]) -> None:
    columns = ["steps/s", "busy_share", "simulating_ms", "own_messages_ms", "waiting_ms", *TIMERS.values()]
    print(f"{'':24s}" + "".join(f"{mode:>14s}" for mode in results))
    for column in columns:
        cells = [statistics.median(r.get(column, 0.0) for r in runs) for runs in results.values()]
        print(f"{column:24s}" + "".join(f"{cell:>14.3f}" for cell in cells))
    speed = [statistics.median(r["steps/s"] for r in runs) for runs in results.values()]
    if list(results)[:2] == ["unthreaded", "threaded"]:
        print(f"threaded / unthreaded steps/s: {speed[1] / speed[0]:.2f}x")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--step-cost-ms", type=float, default=3.0, help="the player's busy CPU per step")
    p.add_argument("--step-mode", choices=("busy", "sleep"), default="busy",
                   help="the player's step cost as busy CPU (one core) or sleeping (physics on cores of its own)")
    p.add_argument("--config", choices=sorted(CONFIGS), default="small", help="the trainer's config (see CONFIGS)")
    p.add_argument("--steps", type=int, default=16000, help="agent steps per run")
    p.add_argument("--report-after", type=int, default=500, help="exchanges left out of the player's report")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--modes", nargs="+", choices=("unthreaded", "threaded", "transport"),
                   default=["unthreaded", "threaded"])
    p.add_argument("--trainer-tree", default=ROOT, help="the checkout whose kerasrl trains (default this one)")
    args = p.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in args.modes}
    with tempfile.TemporaryDirectory(prefix="kerasrl-busy-") as workdir:
        with open(os.path.join(workdir, "config.yaml"), "w") as f:
            f.write(CONFIGS[args.config])
        for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
            for mode in (args.modes if i % 2 == 0 else args.modes[::-1]):
                r = run_transport(args, workdir) if mode == "transport" else run(args, seed, mode == "threaded", workdir)
                results[mode].append(r)
                print(f"seed {seed} {mode}: {r['steps/s']:.0f} steps/s, busy share {r['busy_share']:.3f} "
                      f"(waiting {r['waiting_ms']:.3f} ms per exchange)", flush=True)
    print(f"\n{args.agents} agents, {args.step_cost_ms:g} ms per step ({args.step_mode}), config {args.config}, "
          f"{args.steps} steps, {args.seeds} seeds "
          f"(medians; the player's columns per exchange after its first {args.report_after}; the trainer's "
          f"per exchange over the whole run), trainer {args.trainer_tree}")
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
