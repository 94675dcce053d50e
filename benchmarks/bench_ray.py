"""Ray actors against worker processes: PPO steps/s on SlowCartPole-v1 with W = 1, 2, 4 of each.

Both managers step the same 8 copies (split evenly) of CartPole whose every step costs 1 ms of
busy CPU (kerasrl/envs/slow.py), with the Zoo hyper-parameters and one policy call per step in
the training process. Runs alternate (subprocess, ray) for every W and seed, so that a noisy
neighbour hits both alike; the table gives medians and the ratio ray / subprocess.

    pip install "kerasrl[ray]"
    python benchmarks/bench_ray.py --steps 20000 --seeds 2 --workers 1 2 4
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ppo import median, run_kerasrl  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--ray-address", default=None, help="a Ray cluster to use (default: a local Ray)")
    args = parser.parse_args()
    import ray

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))
    ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    sps: dict[tuple[str, int], list[float]] = {}
    for seed in range(args.seeds):
        for w in args.workers:
            for manager in ("subprocess", "ray"):
                with tempfile.TemporaryDirectory() as workdir:
                    r = run_kerasrl(args.steps, seed, workdir, "SlowCartPole-v1", w, env_manager=manager)
                sps.setdefault((manager, w), []).append(r["sps"])
                print(f"seed {seed} W={w} {manager:>10s}: {r['sps']:.0f} steps/s", flush=True)
    print(f"\nSlowCartPole-v1 (1 ms busy per copy step), 8 copies, {args.steps} steps, {args.seeds} seeds (medians)")
    print(f"{'W':>3s}{'subprocess':>12s}{'ray':>10s}{'ray/sub':>9s}")
    for w in args.workers:
        sub, ray_sps = median(sps[("subprocess", w)]), median(sps[("ray", w)])
        print(f"{w:>3d}{sub:>12.0f}{ray_sps:>10.0f}{ray_sps / sub:>9.2f}")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
