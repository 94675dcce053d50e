"""The Unity protocol's cost per step: one exchange with the stand-in player for 1, 16 and 64 agents.

For each agent count, the stand-in player (tests/unity_standin; the Simple1D scene, a Python
gRPC client) is stepped through ``UnityEnvironment`` with fixed actions, and the same scene is
stepped in process as many ``Simple1DEnvironment``s as there are agents (no protocol). Rounds
alternate (protocol, in process) so that a noisy neighbour hits both alike; the table gives the
median time of one step of all agents, and of one exchange minus the in-process scene.
The stand-in's own Python (building and reading the messages on the player's side) is part of
the exchange: a Unity player does that in C#.

With ``--train-steps N`` (the default 3000; 0: off; vector scene only) it also trains PPO with
``kerasrl-learn`` for N steps on the stand-in player and on the built-in Simple1D (the same
scene in process, the same config), alternating, and gives the median steps/s of each.

    python benchmarks/bench_unity.py --agents 1 16 64 --steps 300 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kerasrl.envs.simple import Simple1DEnvironment  # noqa: E402
from kerasrl.envs.unity import UnityEnvironment  # noqa: E402

STANDIN = os.path.join(ROOT, "tests", "unity_standin", "StandIn")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def time_protocol(agents: int, steps: int, visual: bool) -> float:
    """Seconds per step of all ``agents`` through the protocol."""
    scene = ["--scene", "visual"] if visual else []
    env = UnityEnvironment(STANDIN, base_port=_free_port(), additional_args=["--agents", str(agents), *scene])
    try:
        name = next(iter(env.behavior_specs))
        result = env.reset()[name]
        start = time.perf_counter()
        for _ in range(steps):
            result = env.step({name: np.ones((len(result), 1), np.int32)})[name]
        return (time.perf_counter() - start) / steps
    finally:
        env.close()


def time_in_process(agents: int, steps: int) -> float:
    """Seconds per step of ``agents`` Simple1D environments in this process."""
    envs = [Simple1DEnvironment(use_discrete=True, seed=i) for i in range(agents)]
    action = {"Simple1D": np.ones((1, 1), np.int32)}
    for env in envs:
        env.reset()
    start = time.perf_counter()
    for _ in range(steps):
        for env in envs:
            env.step(action)
    return (time.perf_counter() - start) / steps


CONFIG = "default:\n  batch_size: 16\n  buffer_size: 64\n  learning_rate: 5.0e-3\n  hidden_units: 16\n  summary_freq: 1000\n"


def time_training(env: str, steps: int, config: str, workdir: str) -> float:
    """Steps/s of ``kerasrl-learn`` training PPO on ``env`` for ``steps`` steps (its own summary line)."""
    command = [sys.executable, "-m", "kerasrl.cli", config, "--env", env, "--steps", str(steps), "--seed", "1",
               "--results-dir", workdir, "--run-id", "bench", "--force", "--progress-every", str(steps)]
    if env == STANDIN:
        command += ["--base-port", str(_free_port())]
    proc = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=600)
    m = re.search(r"^final steps=\d+ mean_return=\S+ steps_per_sec=(\S+)", proc.stdout, re.M)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"kerasrl-learn --env {env} failed: {proc.stderr[-2000:]}")
    return float(m.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--visual", action="store_true", help="the visual scene (20x20 PNG per agent)")
    parser.add_argument("--train-steps", type=int, default=3000, help="PPO steps per training run (0: none)")
    args = parser.parse_args()
    times: dict[tuple[str, int], list[float]] = {}
    for r in range(args.rounds):
        for n in args.agents:
            times.setdefault(("protocol", n), []).append(time_protocol(n, args.steps, args.visual))
            times.setdefault(("local", n), []).append(time_in_process(n, args.steps))
            print(f"round {r} agents={n}: protocol {1e3 * times[('protocol', n)][-1]:.3f} ms, in process "
                  f"{1e3 * times[('local', n)][-1]:.3f} ms", flush=True)
    scene = "visual (20x20 PNG)" if args.visual else "vector"
    print(f"\nSimple1D {scene}, {args.steps} steps x {args.rounds} rounds (medians, ms per step of all agents)")
    print(f"{'agents':>6s}{'protocol':>10s}{'in process':>12s}{'overhead':>10s}{'per agent':>11s}{'agent-steps/s':>15s}")
    for n in args.agents:
        proto, local = statistics.median(times[("protocol", n)]), statistics.median(times[("local", n)])
        print(f"{n:>6d}{1e3 * proto:>10.3f}{1e3 * local:>12.3f}{1e3 * (proto - local):>10.3f}"
              f"{1e3 * (proto - local) / n:>11.4f}{n / proto:>15.0f}")
    if args.train_steps and not args.visual:
        train_times(args.train_steps, args.rounds)
    return 0


def train_times(steps: int, rounds: int) -> None:
    """PPO through ``kerasrl-learn`` on the stand-in player and on the built-in Simple1D, alternating."""
    sps: dict[str, list[float]] = {"stand-in player": [], "built-in Simple1D": []}
    with tempfile.TemporaryDirectory() as workdir:
        config = os.path.join(workdir, "config.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        for r in range(rounds):
            for label, env in (("stand-in player", STANDIN), ("built-in Simple1D", "Simple1D")):
                sps[label].append(time_training(env, steps, config, workdir))
                print(f"round {r} {label}: {sps[label][-1]:.0f} steps/s", flush=True)
    player, builtin = (statistics.median(v) for v in sps.values())
    print(f"\nPPO, {steps} steps x {rounds} rounds (medians): stand-in player {player:.0f} steps/s, built-in "
          f"Simple1D {builtin:.0f} steps/s, ratio {player / builtin:.2f}")


if __name__ == "__main__":
    sys.exit(main())
