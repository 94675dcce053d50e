"""SAC throughput and final return against Stable-Baselines3's ``SAC`` on Pendulum-v1 or HalfCheetah-v5.

Both libraries train with the RL-Zoo's hyper-parameters for the task, one env, alternating in
this process, seed after seed (``--first-seed`` onwards, so a run can be extended later):

* ``--task pendulum`` (default; config ``sac_pendulum``): lr 1e-3, batch 256, replay 1e6, 100
  random steps first, tau 0.005, gamma 0.99, one gradient step per environment step, 256×256
  ReLU, entropy coefficient tuned from 1 towards -(action size).
* ``--task halfcheetah`` (config ``sac_halfcheetah``, HalfCheetah-v5): SB3's defaults, lr 3e-4,
  batch 256, replay 1e6, 10k uniformly random steps first (``--warmup`` overrides it on both
  sides, for quick checks), tau 0.005, gamma 0.99, one gradient step per environment step,
  256×256 ReLU initialised as torch's ``Linear`` (``initializer: torch``), entropy
  coefficient tuned from 1 towards -6. Episodes are 1000 steps (time
  limit only), so 50k steps give 50 episodes and the final return covers the last 10k steps.

Both sides start updating after the warm-up and then take exactly one gradient step per
environment step (steps − warm-up in all); warm-up actions are uniform over the action bounds
on both. kerasrl's transitions reach the replay when a trajectory closes (``--time-horizon``,
default the config's 64) and the gradient steps due by then run in one compiled call; SB3 takes
one gradient step after every environment step. The other remaining difference: the
initial weights (on Pendulum each library's own; on HalfCheetah the same distribution for the
kernels, but kerasrl's biases start at zero, torch's uniform).

SB3 runs with one torch thread by default (``--torch-threads``): on a busy machine torch's
default thread pool makes its small matrix products many times slower. Printed per library
and seed, then medians: env steps/s (kerasrl's without its one-time
tracing, and counting it), the mean return of the last 10 episodes, the ratio kerasrl / SB3
of the medians, and a two-sided Mann-Whitney U test of the returns. With ``--json FILE`` every
run is kept in the file, seeds already there are skipped, and the summary covers all of them,
so a comparison can be extended seed by seed.

    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_sac.py --seeds 2 --steps 5000
    python3 benchmarks/bench_sac.py --seeds 5 --steps 20000          # the issue's comparison
    python3 benchmarks/bench_sac.py --task halfcheetah --seeds 3 --steps 50000

``--update-only`` times the gradient steps alone, which bound the steps/s ratio from above:
each library fills its replay with ``--warmup`` random steps (default 1,000), then, alternating
for ``--rounds`` rounds, kerasrl runs one compiled call of ``--calls-steps`` gradient steps
(sampling its mini-batches counted) and SB3 ``train(gradient_steps=...)``. Printed: the median
milliseconds per gradient step of each, the ratio, and the arithmetic rate the step's matrix
products reach (their multiply-adds counted from the layer sizes).

    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_sac.py --task halfcheetah --update-only

``--dtype-policy mixed_bfloat16`` trains kerasrl's side with its hidden layers in bfloat16 (the
``dtype_policy`` key; SB3 stays float32), in either mode.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ppo import CurveWriter
from pendulum_seeds import mann_whitney_u

from kerasrl.configs import config_path
from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
from kerasrl.sac.trainer import SACTrainer
from kerasrl.settings import DTYPE_POLICIES, read_yaml
from kerasrl.trainers import TrainerController, initialize_trainers

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


def kerasrl_config(task: str, dtype_policy: str | None) -> dict[str, Any]:
    """kerasrl's config of ``task``, with ``dtype_policy`` when given."""
    config = read_yaml(config_path(TASKS[task]["config"]))
    if dtype_policy is not None:
        config["default"]["dtype_policy"] = dtype_policy
    return config


def run_kerasrl(task: str, steps: int, seed: int, time_horizon: int | None, warmup: int | None,
                dtype_policy: str | None = None, curve: list[tuple[int, float]] | None = None) -> dict[str, Any]:
    config = kerasrl_config(task, dtype_policy)
    if time_horizon is not None:
        config["default"]["time_horizon"] = time_horizon
    if warmup is not None:
        config["default"]["buffer_init_steps"] = warmup
    workdir = tempfile.mkdtemp(prefix="bench-sac-")
    manager = SimpleEnvManager(GymnasiumEnv(TASKS[task]["env"], num_envs=1, seed=seed))
    trainers = initialize_trainers(config, manager.behavior_specs, workdir, "bench", workdir, 1, True, False, seed,
                                   max_steps=steps)
    trainer = next(iter(trainers.values()))
    progress = None if curve is None else _curve_recorder(trainer, curve)
    controller = TrainerController(trainers, workdir, workdir, "bench", save_freq=10**9, meta_curriculum=None,
                                   train=True, training_seed=seed, fast_simulation=True, sampler_manager=None,
                                   resampling_interval=None, progress=progress, progress_freq=1)
    start = time.perf_counter()
    controller.start_learning(manager)
    wall = time.perf_counter() - start
    assert isinstance(trainer, SACTrainer), type(trainer)
    trace = trainer.learner.trace_seconds
    return {"steps_per_s": trainer.step / max(wall - trace, 1e-9), "steps_per_s_all": trainer.step / wall,
            "return": float(np.mean(list(trainer.recent_returns)[-10:])), "trace_s": trace}


def _curve_recorder(trainer: Any, curve: list[tuple[int, float]]) -> Any:
    """A controller ``progress`` hook appending ``(step, mean of the last 10 returns)`` at every episode end."""
    seen = [0]

    def progress(controller: Any) -> None:
        if trainer.episodes_completed != seen[0]:
            seen[0] = trainer.episodes_completed
            curve.append((trainer.get_step, float(np.mean(list(trainer.recent_returns)[-10:]))))
    return progress


def sb3_curve(returns: list[float], lengths: list[int]) -> list[tuple[int, float]]:
    """``(step, mean of the last 10 returns)`` at every episode end of a ``Monitor``'s record."""
    ends = np.cumsum(lengths)
    return [(int(ends[i]), float(np.mean(returns[max(0, i - 9):i + 1]))) for i in range(len(returns))]


def run_sb3(task: str, steps: int, seed: int, torch_threads: int, warmup: int | None,
            curve: list[tuple[int, float]] | None = None) -> dict[str, Any]:
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
    if curve is not None:
        curve.extend(sb3_curve(returns, env.get_episode_lengths()))
    return {"steps_per_s": steps / wall, "steps_per_s_all": steps / wall, "return": float(np.mean(returns[-10:])),
            "trace_s": 0.0}


def dense_flops(sizes: list[int], rows: int) -> float:
    """Multiply-add FLOPs of one forward pass of a dense stack with layer sizes ``sizes``."""
    return 2.0 * rows * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))


def gradient_step_flops(obs: int, act: int, hidden: list[int], batch: int) -> float:
    """FLOPs of one SAC gradient step's matrix products, the least the step needs: the actor
    forward and backward at the batch and forward at the next observations, the two target
    critics forward, the two critics forward and backward (weights and inputs) for their loss,
    and forward and back to the actions (inputs only) for the actor's."""
    actor = dense_flops([obs, *hidden, 2 * act], batch)
    critic = dense_flops([obs + act, *hidden, 1], batch)
    return 3 * actor + actor + 2 * critic + 2 * 3 * critic + 2 * 2 * critic


def time_updates(task: str, seed: int, warmup: int, rounds: int, calls_steps: int, torch_threads: int,
                 dtype_policy: str | None = None) -> None:
    """Milliseconds per gradient step of kerasrl's compiled update and SB3's ``train``, alternating."""
    import gymnasium
    import torch
    from stable_baselines3 import SAC

    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    config = kerasrl_config(task, dtype_policy)
    config["default"]["buffer_init_steps"] = warmup
    workdir = tempfile.mkdtemp(prefix="bench-sac-")
    manager = SimpleEnvManager(GymnasiumEnv(TASKS[task]["env"], num_envs=1, seed=seed))
    trainers = initialize_trainers(config, manager.behavior_specs, workdir, "bench", workdir, 1, True, False, seed,
                                   max_steps=warmup + 1)
    TrainerController(trainers, workdir, workdir, "bench", save_freq=10**9, meta_curriculum=None, train=True,
                      training_seed=seed, fast_simulation=True, sampler_manager=None,
                      resampling_interval=None).start_learning(manager)
    trainer = next(iter(trainers.values()))
    assert isinstance(trainer, SACTrainer), type(trainer)
    if calls_steps > trainer.steps_per_call:
        raise SystemExit(f"--calls-steps {calls_steps}: one compiled call takes at most {trainer.steps_per_call}")
    keys = {**SB3_COMMON, **TASKS[task]["sb3"], "learning_starts": warmup}
    model = SAC("MlpPolicy", gymnasium.make(TASKS[task]["env"]), seed=seed, device="cpu", **keys)
    model.learn(warmup + 1)

    def kerasrl_call() -> None:
        trainer.learner.update(trainer.learning_batches(calls_steps), calls_steps, 3e-4)

    def sb3_call() -> None:
        model.train(gradient_steps=calls_steps, batch_size=keys["batch_size"])

    kerasrl_call()  # traces and compiles
    sb3_call()
    times: dict[str, list[float]] = {"kerasrl": [], "sb3": []}
    for r in range(rounds):
        for name, call in (("kerasrl", kerasrl_call), ("sb3", sb3_call))[:: 1 if r % 2 == 0 else -1]:
            start = time.perf_counter()
            call()
            times[name].append(1e3 * (time.perf_counter() - start) / calls_steps)
    spec = trainer.spec
    flops = gradient_step_flops(spec.vector_observation_size, spec.action_size, [256, 256], keys["batch_size"])
    print(f"{TASKS[task]['env']}: one gradient step (batch {keys['batch_size']}, 256x256), {rounds} alternating "
          f"rounds of {calls_steps} steps, ~{flops / 1e6:.0f} MFLOP of matrix products per step:")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, ms in medians.items():
        print(f"  {name:8s} {ms:6.2f} ms per gradient step ({flops / ms / 1e6:5.1f} GFLOP/s)")
    print(f"  ratio SB3 / kerasrl: {medians['sb3'] / medians['kerasrl']:.2f}x faster per gradient step")


def load_results(path: str | None) -> dict[str, dict[str, dict[str, Any]]]:
    """``{library: {seed: run}}`` from ``--json`` (empty without one, or before its first run)."""
    if path and os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        return {"kerasrl": saved.get("kerasrl", {}), "sb3": saved.get("sb3", {})}
    return {"kerasrl": {}, "sb3": {}}


def save_results(path: str, results: dict[str, dict[str, dict[str, Any]]]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, path)


def summarise(task: str, steps: int, torch_threads: int, results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Medians of each library's runs, the steps/s ratio and, on the seeds both ran, a rank test
    of the returns."""
    threads = torch_threads or "default"
    print(f"\n{TASKS[task]['env']}, {steps} steps (SB3 torch threads: {threads}):")
    medians = {}
    for name, runs in results.items():
        if runs:
            medians[name] = {k: statistics.median(r[k] for r in runs.values())
                             for k in ("steps_per_s", "steps_per_s_all", "return")}
            m = medians[name]
            print(f"  {name:8s} medians over {len(runs)} seeds: {m['steps_per_s']:7.1f} steps/s "
                  f"({m['steps_per_s_all']:7.1f} with tracing), return {m['return']:8.1f}")
    if len(medians) < 2:
        return
    ratio = medians["kerasrl"]["steps_per_s"] / medians["sb3"]["steps_per_s"]
    ratio_all = medians["kerasrl"]["steps_per_s_all"] / medians["sb3"]["steps_per_s_all"]
    print(f"  ratio kerasrl / SB3: {ratio:.2f}x steps/s ({ratio_all:.2f}x with tracing)")
    seeds = sorted(set(results["kerasrl"]) & set(results["sb3"]), key=int)
    ours = [results["kerasrl"][s]["return"] for s in seeds]
    theirs = [results["sb3"][s]["return"] for s in seeds]
    u, p = mann_whitney_u(ours, theirs)
    ahead = sum(x > y for x, y in zip(ours, theirs))
    print(f"  returns on the {len(seeds)} seeds both ran: median kerasrl {statistics.median(ours):.1f}, SB3 "
          f"{statistics.median(theirs):.1f}; kerasrl ahead on {ahead}; Mann-Whitney U = {u:.1f} "
          f"(of {len(ours) * len(theirs)}), two-sided p = {p:.3f}")


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
    parser.add_argument("--dtype-policy", choices=DTYPE_POLICIES, default=None,
                        help="kerasrl's dtype_policy (default: the config's, float32)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="SB3's torch threads (0: torch's default; on a busy machine its default thread pool "
                             "is many times slower than one thread, so one is the fairer peer)")
    parser.add_argument("--json", default=None,
                        help="keep each run in this file ({library: {seed: run}}): seeds already in it are not run "
                             "again, and the medians and the rank test cover all of its seeds")
    parser.add_argument("--curves", default=None, metavar="FILE",
                        help="append every run's learning curve (mean of the last 10 returns at each episode end) to "
                             "this CSV (benchmarks/plot_curves.py draws it)")
    parser.add_argument("--update-only", action="store_true", help="time the gradient steps alone (see above)")
    parser.add_argument("--rounds", type=int, default=10, help="--update-only: alternating rounds")
    parser.add_argument("--calls-steps", type=int, default=64, help="--update-only: gradient steps per timed call")
    args = parser.parse_args()
    if args.update_only:
        time_updates(args.task, args.first_seed, 1_000 if args.warmup is None else args.warmup, args.rounds,
                     args.calls_steps, args.torch_threads, args.dtype_policy)
        return 0
    results = load_results(args.json)
    curves = CurveWriter(args.curves, TASKS[args.task]["env"], f"sac, {args.task}") if args.curves else None
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        names = ["kerasrl"] if args.no_sb3 else ["kerasrl", "sb3"]
        for name in names if seed % 2 == 0 else names[::-1]:  # alternate which library goes first
            if str(seed) in results[name]:
                continue
            curve: list[tuple[int, float]] | None = [] if curves else None
            if name == "kerasrl":
                out = run_kerasrl(args.task, args.steps, seed, args.time_horizon, args.warmup, args.dtype_policy, curve)
            else:
                out = run_sb3(args.task, args.steps, seed, args.torch_threads, args.warmup, curve)
            if curves is not None and curve is not None:
                curves.write(name, seed, curve)
            results[name][str(seed)] = out
            if args.json:
                save_results(args.json, results)
            print(f"{name:8s} seed {seed}: {out['steps_per_s']:7.1f} steps/s ({out['steps_per_s_all']:7.1f} with "
                  f"tracing {out['trace_s']:.1f} s), return of the last 10 episodes {out['return']:8.1f}", flush=True)
    summarise(args.task, args.steps, args.torch_threads, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
