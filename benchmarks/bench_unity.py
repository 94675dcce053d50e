"""The Unity protocol's cost per step: one exchange with the stand-in player for 1, 16 and 64 agents.

For each agent count, the stand-in player (tests/unity_standin; the Simple1D scene, a Python
gRPC client) is stepped through ``UnityEnvironment`` with fixed actions, and the same scene is
stepped in process as many ``Simple1DEnvironment``s as there are agents (no protocol). Rounds
alternate (protocol, in process) so that a noisy neighbour hits both alike; the table gives the
median time of one step of all agents, and of one exchange minus the in-process scene.
The stand-in's own Python (building and reading the messages on the player's side) is part of
the exchange: a Unity player does that in C#.

    python benchmarks/bench_unity.py --agents 1 16 64 --steps 300 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--visual", action="store_true", help="the visual scene (20x20 PNG per agent)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
