"""SAC throughput and final return against Stable-Baselines3's ``SAC`` on Pendulum-v1 or HalfCheetah-v5.

Both libraries train with the RL-Zoo's hyper-parameters for the task, one env, alternating in
this process, seed after seed (``--first-seed`` onwards, so a run can be extended later):

* ``--task pendulum`` (default; config ``sac_pendulum``): lr 1e-3, batch 256, replay 1e6, 100
  random steps first, tau 0.005, gamma 0.99, one gradient step per environment step, 256×256
  ReLU, entropy coefficient tuned from 1 towards -(action size).
* ``--task halfcheetah`` (config ``sac_halfcheetah``, HalfCheetah-v5): SB3's defaults, lr 3e-4,
  batch 256, replay 1e6, 10k uniformly random steps first (``--warmup`` overrides it on both
  sides, for quick checks), tau 0.005, gamma 0.99, one gradient step per environment step,
  256×256 ReLU, entropy coefficient tuned from 1 towards -6. Episodes are 1000 steps (time
  limit only), so 50k steps give 50 episodes and the final return covers the last 10k steps.

Both sides start updating after the warm-up and then take exactly one gradient step per
environment step (steps − warm-up in all); warm-up actions are uniform over the action bounds
on both. kerasrl's transitions reach the replay when a trajectory closes (``--time-horizon``,
default the config's 64) and the gradient steps due by then run in one compiled call; SB3 takes
one gradient step after every environment step. The other remaining difference: each library
initialises its weights its own way.

SB3 runs with one torch thread by default (``--torch-threads``): on a busy machine torch's
default thread pool makes its small matrix products many times slower. Printed per library
and seed, then medians: env steps/s (kerasrl's without its one-time
tracing, and counting it), the mean return of the last 10 episodes, and the ratio
kerasrl / SB3 of the medians.

    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_sac.py --seeds 2 --steps 5000
    python3 benchmarks/bench_sac.py --seeds 5 --steps 20000          # the issue's comparison
    python3 benchmarks/bench_sac.py --task halfcheetah --seeds 3 --steps 50000
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from kerasrl.configs import config_path
from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
from kerasrl.settings import read_yaml
from kerasrl.trainers import TrainerController, initialize_trainers
from kerasrl.trainers.sac_trainer import SACTrainer

#: Per task: the environment, kerasrl's config and SB3's ``SAC`` keywords (the same values).
TASKS: dict[str, dict[str, Any]] = {
    "pendulum": {"env": "Pendulum-v1", "config": "sac_pendulum",
                 "sb3": {"learning_rate": 1e-3, "learning_starts": 100}},
    "halfcheetah": {"env": "HalfCheetah-v5", "config": "sac_halfcheetah",
                    "sb3": {"learning_rate": 3e-4, "learning_starts": 10_000}},
}
SB3_COMMON = {"batch_size": 256, "buffer_size": 1_000_000, "tau": 0.005, "gamma": 0.99, "train_freq": 1,
              "gradient_steps": 1, "ent_coef": "auto_1.0", "target_entropy": "auto",
              "policy_kwargs": {"net_arch": [256, 256]}}


def run_kerasrl(task: str, steps: int, seed: int, time_horizon: int | None, warmup: int | None) -> dict[str, Any]:
    config = read_yaml(config_path(TASKS[task]["config"]))
    if time_horizon is not None:
        config["default"]["time_horizon"] = time_horizon
    if warmup is not None:
        config["default"]["buffer_init_steps"] = warmup
    workdir = tempfile.mkdtemp(prefix="bench-sac-")
    manager = SimpleEnvManager(GymnasiumEnv(TASKS[task]["env"], num_envs=1, seed=seed))
    trainers = initialize_trainers(config, manager.behavior_specs, workdir, "bench", workdir, 1, True, False, seed,
                                   max_steps=steps)
    controller = TrainerController(trainers, workdir, workdir, "bench", save_freq=10**9, meta_curriculum=None,
                                   train=True, training_seed=seed, fast_simulation=True, sampler_manager=None,
                                   resampling_interval=None)
    start = time.perf_counter()
    controller.start_learning(manager)
    wall = time.perf_counter() - start
    trainer = next(iter(trainers.values()))
    assert isinstance(trainer, SACTrainer), type(trainer)
    trace = trainer.learner.trace_seconds
    return {"steps_per_s": trainer.step / max(wall - trace, 1e-9), "steps_per_s_all": trainer.step / wall,
            "return": float(np.mean(list(trainer.recent_returns)[-10:])), "trace_s": trace}


def run_sb3(task: str, steps: int, seed: int, torch_threads: int, warmup: int | None) -> dict[str, Any]:
    import gymnasium
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.monitor import Monitor

    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    env = Monitor(gymnasium.make(TASKS[task]["env"]))
    keys = {**SB3_COMMON, **TASKS[task]["sb3"]}
    if warmup is not None:
        keys["learning_starts"] = warmup
    model = SAC("MlpPolicy", env, seed=seed, device="cpu", **keys)
    start = time.perf_counter()
    model.learn(steps)
    wall = time.perf_counter() - start
    returns = env.get_episode_rewards()
    return {"steps_per_s": steps / wall, "steps_per_s_all": steps / wall, "return": float(np.mean(returns[-10:])),
            "trace_s": 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="pendulum")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from here (to extend an earlier run)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="random steps before the first update, both sides (default: the config's)")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--time-horizon", type=int, default=None, help="kerasrl's time_horizon (default: the config's)")
    parser.add_argument("--no-sb3", action="store_true")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="SB3's torch threads (0: torch's default; on a busy machine its default thread pool "
                             "is many times slower than one thread, so one is the fairer peer)")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {"kerasrl": [], "sb3": []}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        names = ["kerasrl"] if args.no_sb3 else ["kerasrl", "sb3"]
        for name in names if seed % 2 == 0 else names[::-1]:  # alternate which library goes first
            if name == "kerasrl":
                out = run_kerasrl(args.task, args.steps, seed, args.time_horizon, args.warmup)
            else:
                out = run_sb3(args.task, args.steps, seed, args.torch_threads, args.warmup)
            results[name].append(out)
            print(f"{name:8s} seed {seed}: {out['steps_per_s']:7.1f} steps/s ({out['steps_per_s_all']:7.1f} with "
                  f"tracing {out['trace_s']:.1f} s), return of the last 10 episodes {out['return']:8.1f}", flush=True)
    threads = args.torch_threads or "default"
    print(f"\n{TASKS[args.task]['env']}, {args.steps} steps, medians over {args.seeds} seeds (SB3 torch threads: {threads}):")
    medians = {}
    for name, runs in results.items():
        if runs:
            medians[name] = {k: statistics.median(r[k] for r in runs) for k in ("steps_per_s", "steps_per_s_all",
                                                                               "return")}
            m = medians[name]
            print(f"  {name:8s} {m['steps_per_s']:7.1f} steps/s ({m['steps_per_s_all']:7.1f} with tracing), "
                  f"return {m['return']:8.1f}")
    if len(medians) == 2:
        ratio = medians["kerasrl"]["steps_per_s"] / medians["sb3"]["steps_per_s"]
        ratio_all = medians["kerasrl"]["steps_per_s_all"] / medians["sb3"]["steps_per_s_all"]
        print(f"  ratio kerasrl / SB3: {ratio:.2f}x steps/s ({ratio_all:.2f}x with tracing)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
