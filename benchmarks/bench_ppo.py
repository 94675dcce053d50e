"""Whole-loop PPO throughput and sample efficiency against Stable-Baselines3, task by task.

``--task`` (benchmarks/bench_tasks.py): ``cartpole`` (the default, below), ``pendulum``
(Pendulum-v1, 4 envs, ``pendulum_sb3`` vs SB3 PPO), ``lstm`` (CartPole with the velocities
masked, ``lstm_sb3``: a 64-unit LSTM per stream on the observations, sequence length 32, vs
sb3-contrib RecurrentPPO), ``visual``
(PixelChase-v0, 36×36 pixels, Nature CNN vs SB3 CnnPolicy), ``agents64`` (CartPole, 64
copies of one behavior vs SB3 with 64 envs) and ``halfcheetah`` / ``hopper`` (MuJoCo v5, one
env, the RL-Zoo's PPO settings; 1M steps, observations and rewards normalised on both sides).
Every task runs both libraries alternating, seed after seed, with the same hyper-parameters;
``--steps`` defaults to the task's budget.

Both libraries train PPO with the RL-Zoo hyper-parameters (8 envs × 32 steps, batch 256,
20 epochs, gae_lambda 0.8, gamma 0.98, lr 1e-3 linear, clip 0.2 linear, 64×64, no entropy
bonus), alternating runs in this process, one seed after the other. Printed per library:

* env steps/s without the one-time tracing/compilation and final export, and counting them;
* env steps until the rolling mean return (last ≤100 episodes) first reaches 475;
* kerasrl's timer breakdown (inference, env, experience bookkeeping + buffer, update);
* the start-up costs (imports, tracing/compilation).

Medians over the seeds; ratios are kerasrl / SB3 from the same run.

    python benchmarks/bench_ppo.py                 # 3 seeds × 100k steps
    python benchmarks/bench_ppo.py --seeds 1 --steps 50000 --no-sb3
    python benchmarks/bench_ppo.py --task halfcheetah --seeds 1 --first-seed 601 --sb3-only   # SB3 alone
    python benchmarks/bench_ppo.py --seeds 20     # sample efficiency needs many seeds: the
                                                  # seed-to-seed spread (57k–95k for SB3) swamps 3

Learning curves (``--curves FILE``): every run appends, at each episode end, its rolling mean
return (last ≤100 episodes, as the table's) to a CSV (``library,seed,step,rolling_return``);
``benchmarks/plot_curves.py FILE`` draws the median and spread over seeds, kerasrl beside SB3.

    python benchmarks/bench_ppo.py --seeds 5 --curves cartpole.csv && python benchmarks/plot_curves.py cartpole.csv

Start-up as kerasrl-learn users see it (its XLA cache is on by default): run twice with one fresh
``--xla-cache DIR``; the first invocation compiles every seed's update (a first-ever run), the
second loads them (every later run of the same command). Same seeds give the same results.

    python benchmarks/bench_ppo.py --xla-cache /tmp/xla && python benchmarks/bench_ppo.py --xla-cache /tmp/xla

Environment workers (``SubprocessEnvManager``): ``--workers 1 2 4`` runs kerasrl with the 8
copies in this process (1) and split over 2 and 4 worker processes, and prints steps/s with
the ratio to the first ``--workers`` value; ``--slow-env`` trains on ``SlowCartPole-v1``
(kerasrl/envs/slow.py: CartPole whose every step of every copy costs 1 ms of busy CPU,
``--slow-mode sleep`` to sleep instead). No SB3 comparison with these options.

    python benchmarks/bench_ppo.py --seeds 1 --steps 30000 --workers 1 2 4 --slow-env
    python benchmarks/bench_ppo.py --seeds 3 --workers 2 --threaded --compare-unthreaded

Reward signals (``--reward-signals``): each listed set (``extrinsic,curiosity``,
``extrinsic,gail``) runs alternately with extrinsic-only on the same seeds, and the table
gives steps/s and its ratio to extrinsic-only. GAIL's demonstrations come from ``--demo PATH``
or are recorded here (10k steps of a scripted CartPole controller that scores 500). No SB3.

    python benchmarks/bench_ppo.py --seeds 1 --steps 30000 --reward-signals extrinsic,curiosity extrinsic,gail
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # kerasrl-learn's: hides the XLA cache's spurious errors
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TARGET = 475.0  # changed by --task


def task_config(task: Any, jit_compile: Optional[bool] = None, reward_signals: Optional[dict[str, Any]] = None,
                threaded: bool = False) -> Any:
    """The kerasrl config of ``task`` (``jit_compile``: None keeps the config's / the default;
    ``reward_signals`` replaces the config's; ``threaded``: updates in their own thread)."""
    from kerasrl.configs import config_path
    from kerasrl.settings import load_trainer_config, read_yaml

    section = {**read_yaml(config_path(task.config))["default"], **task.overrides, "summary_freq": 10**9}
    if reward_signals:
        section["reward_signals"] = reward_signals
    section.pop("jit_compile", None)  # the default (kerasrl.common.fast_path) unless asked for
    if jit_compile is not None:
        section["jit_compile"] = jit_compile
    section["threaded"] = threaded
    return load_trainer_config({"default": section})


def make_manager(env_id: str, num_envs: int, seed: int, workers: int, make_kwargs: dict[str, Any],
                 env_manager: str = "auto") -> Any:
    """The 8 copies in this process (``workers == 1`` and ``env_manager="auto"``) or split over
    ``workers`` processes (``"subprocess"``) or Ray actors (``"ray"``)."""
    from kerasrl.envs import GymnasiumEnv, GymnasiumEnvFactory, RayEnvManager, SimpleEnvManager, SubprocessEnvManager

    if workers == 1 and env_manager == "auto":
        return SimpleEnvManager(GymnasiumEnv(env_id, num_envs=num_envs, seed=seed, **make_kwargs))
    factory = GymnasiumEnvFactory(env_id, num_envs // workers, seed=seed, make_kwargs=make_kwargs)
    if env_manager == "ray":
        return RayEnvManager(factory, workers)
    return SubprocessEnvManager(factory, workers)


def signal_settings(names: str, demo: Optional[str], gamma: float) -> dict[str, Any]:
    """The ``reward_signals`` block of a comma-separated set of signal names (intrinsic signals
    weighted 0.01 beside the extrinsic reward, as ML-Agents' examples)."""
    blocks = {
        "extrinsic": {"strength": 1.0, "gamma": gamma},
        "curiosity": {"strength": 0.01, "gamma": 0.99, "encoding_size": 64},
        "gail": {"strength": 0.01, "gamma": 0.99, "demo_path": demo or "", "encoding_size": 64},
    }
    return {name: blocks[name] for name in names.split(",")}


def record_cartpole_demo(path: str, steps: int = 10_000) -> str:
    """10k steps of a scripted CartPole-v1 controller (push towards where the pole falls; returns 500)."""
    from kerasrl import recording

    recording.record("CartPole-v1", lambda obs: (3 * obs[:, 2] + obs[:, 3] + 0.1 * obs[:, 1] > 0).astype("int64")[:, None],
                 steps, path, seed=0)
    return path


def run_kerasrl(steps: int, seed: int, workdir: str, env_id: str = "CartPole-v1", workers: int = 1,
                make_kwargs: Optional[dict[str, Any]] = None, env_manager: str = "auto",
                reward_signals: Optional[dict[str, Any]] = None, task: Any = None,
                jit_compile: Optional[bool] = True, curve: Optional[list[tuple[int, float]]] = None,
                threaded: bool = False) -> dict[str, Any]:
    import numpy as np
    from bench_tasks import TASKS

    from kerasrl.export import export_trainers
    from kerasrl.settings import RunContext
    from kerasrl.timers import get_timer_tree, reset_timers
    from kerasrl.trainers import TrainerController, create_trainers

    task = TASKS["cartpole"] if task is None else task
    env_id = task.env_id if env_id == "CartPole-v1" else env_id
    num_envs = task.num_envs
    config = task_config(task, jit_compile, reward_signals, threaded)  # no summaries while timing
    reset_timers()
    t0 = time.perf_counter()
    manager = make_manager(env_id, num_envs, seed, workers, make_kwargs or {}, env_manager)
    context = RunContext(run_id=f"bench{seed}", summaries_dir=os.path.join(workdir, "s"),
                         model_path=os.path.join(workdir, "m"), keep_checkpoints=1, seed=seed, max_steps=steps)
    trainers = create_trainers(config, manager.behavior_specs, context)
    trainer = trainers[env_id]
    setup = time.perf_counter() - t0
    exported = [0.0]

    def timed_export(trainers: dict) -> None:
        """The SavedModel (+ ONNX) export at the end of training: a one-time cost SB3's learn() has not."""
        t = time.perf_counter()
        export_trainers(trainers)
        exported[0] += time.perf_counter() - t
    reached: list[Optional[int]] = [None]
    seen = [0]

    def progress(tc: TrainerController) -> None:
        if (reached[0] is None or curve is not None) and trainer.episodes_completed != seen[0]:
            seen[0] = trainer.episodes_completed
            rolling = float(np.mean(trainer.recent_returns))
            if curve is not None:
                curve.append((trainer.get_step, rolling))
            if reached[0] is None and rolling >= TARGET:
                reached[0] = trainer.get_step

    tc = TrainerController(trainers, os.path.join(workdir, "m"), os.path.join(workdir, "s"), f"bench{seed}",
                           save_freq=10**9, train=True, training_seed=seed, progress=progress, progress_freq=1,
                           export=timed_export)
    start = time.perf_counter()
    tc.start_learning(manager)
    wall = time.perf_counter() - start
    # Threaded, the compile runs beside acting: what it costs acting is the wait for the first update.
    update_trace = (trainer.first_wait_seconds or 0.0) if threaded else trainer.learner.trace_seconds
    trace = trainer.policy.trace_seconds + update_trace
    trace += sum(getattr(s, "trace_seconds", 0.0) for s in trainer.reward_signals.values())
    done = trainer.get_step
    tree = get_timer_tree()

    def total(node: dict[str, Any], name: str) -> float:
        """Time of the ``name`` blocks of this process (worker trees, marked parallel, left out)."""
        if node.get("is_parallel"):
            return 0.0
        if node.get("name") == name:
            return float(node["total"])
        return sum(total(c, name) for c in node.get("children", []))

    update = total(tree, "update_policy")
    breakdown = {
        "inference": total(tree, "policy.act"),
        "env": total(tree, "env.step") + total(tree, "SubprocessEnvManager.step_workers"),  # workers: the wait
        "bookkeeping+buffer": total(tree, "process_step"),
        "update (incl. compile)": update,
        "  of which reward-signal updates": total(tree, "reward_signals.update"),
        "  of which reward-signal rewards": total(tree, "reward_signals.evaluate"),
        "export (once, at the end)": exported[0],
    }
    gauges = {g["name"]: g["value"] for g in tree.get("gauges", [])}
    if threaded:  # the update thread's time, beside the rest (not part of the wall time's sum)
        breakdown["  update thread busy (parallel)"] = gauges.get(f"{env_id}.threaded.update_seconds", 0.0)
        breakdown["  acting and updating overlapped"] = gauges.get(f"{env_id}.threaded.overlap_seconds", 0.0)
    breakdown["other"] = wall - sum(v for k, v in breakdown.items() if not k.startswith(" "))
    return {
        "sps": done / (wall - trace - exported[0]), "sps_all": done / (wall + setup), "reach": reached[0],
        "final": float(np.mean(trainer.recent_returns)) if trainer.recent_returns else float("nan"),
        "trace": trace, "setup": setup, "breakdown": breakdown, "wall": wall,
        "act_trace": trainer.policy.trace_seconds, "update_trace": update_trace,
        "share": trace / (wall + setup),
        "act_ms": 1000 * total(tree, "policy.act") / max(done / num_envs, 1),
        "jit": trainer.learner.use_xla,
    }


def run_sb3(steps: int, seed: int, task: Any = None, curve: Optional[list[tuple[int, float]]] = None) -> dict[str, Any]:
    import numpy as np
    import torch
    from bench_tasks import TASKS
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    task = TASKS["cartpole"] if task is None else task
    model_class: Any = PPO
    if task.sb3_class == "RecurrentPPO":
        from sb3_contrib import RecurrentPPO

        model_class = RecurrentPPO

    torch.set_num_threads(1)

    class Reach(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.reached: Optional[int] = None

        def _on_step(self) -> bool:
            if (self.reached is None or curve is not None) and any("episode" in i for i in self.locals.get("infos", [])):
                buf = self.model.ep_info_buffer
                rolling = float(np.mean([e["r"] for e in buf])) if buf else float("nan")
                if curve is not None:
                    curve.append((self.num_timesteps, rolling))
                if self.reached is None and rolling >= TARGET:
                    self.reached = self.num_timesteps
            return True

    t0 = time.perf_counter()
    env = make_vec_env(task.env_id, n_envs=task.num_envs, seed=seed)
    if task.sb3_vec_normalize is not None:
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(env, **task.sb3_vec_normalize)
    model = model_class(task.sb3_policy, env, seed=seed, verbose=0, device="cpu", **task.sb3_kwargs())
    setup = time.perf_counter() - t0
    cb = Reach()
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=cb)
    wall = time.perf_counter() - start
    final = float(np.mean([e["r"] for e in model.ep_info_buffer])) if model.ep_info_buffer else float("nan")
    return {"sps": model.num_timesteps / wall, "sps_all": model.num_timesteps / (wall + setup), "reach": cb.reached,
            "final": final, "setup": setup, "wall": wall}


class CurveWriter:
    """Appends runs' learning curves to a CSV (``library,seed,step,rolling_return``), one run at a
    time and flushed, so that the runs finished before an interruption are kept. A new file gets a
    header and a first comment line naming the task and the machine's CPU."""

    def __init__(self, path: str, env_id: str, task: str) -> None:
        import csv
        import platform

        self.path = path
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            with open(path, "w", newline="") as f:
                f.write(f"# {env_id} ({task}); {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs\n")
                csv.writer(f).writerow(["library", "seed", "step", "rolling_return"])

    def write(self, library: str, seed: int, curve: list[tuple[int, float]]) -> None:
        import csv

        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerows((library, seed, step, f"{value:.4g}") for step, value in curve)


def median(values: list[Optional[float]]) -> float:
    vals = [v if v is not None else float("inf") for v in values]
    return statistics.median(vals) if vals else float("nan")


def main_workers(args: argparse.Namespace, import_tf: float) -> int:
    """kerasrl alone, for every ``--workers`` value (and with ``--threaded --compare-unthreaded``
    unthreaded and threaded each): steps/s and its ratio to the first variant."""
    import tempfile

    env_id = "SlowCartPole-v1" if args.slow_env else "CartPole-v1"
    make_kwargs = {"mode": args.slow_mode} if args.slow_env else {}
    modes = [False, True] if args.threaded and args.compare_unthreaded else [args.threaded]
    runs: dict[tuple[int, bool], list[dict[str, Any]]] = {(w, t): [] for w in args.workers for t in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
            for w, t in list(runs) if i % 2 == 0 else list(runs)[::-1]:  # alternating: a neighbour hits all alike
                r = run_kerasrl(args.steps, seed, os.path.join(tmp, f"{seed}-{w}-{t}"), env_id, w, make_kwargs,
                                threaded=t)
                runs[(w, t)].append(r)
                print(f"kerasrl seed {seed} workers {w}{' threaded' if t else ''}: {r['sps']:.0f} steps/s "
                      f"({r['sps_all']:.0f} with compile and set-up), final mean {r['final']:.1f}", flush=True)
    slow = f" (every copy's step costs 1 ms, {args.slow_mode})" if args.slow_env else ""
    print(f"\n{env_id}{slow}, 8 copies, Zoo hyper-parameters, {args.steps} steps, {args.seeds} seeds (medians); "
          f"import tensorflow + kerasrl {import_tf:.2f} s")
    print(f"{'workers':>8s}{'threaded':>9s}{'steps/s':>10s}{'ratio':>8s}{'with set-up':>13s}{'set-up s':>10s}"
          f"{'env/wait s':>12s}{'final':>8s}")
    base = median([r["sps"] for r in next(iter(runs.values()))])
    for (w, t), rs in runs.items():
        sps = median([r["sps"] for r in rs])
        print(f"{w:8d}{'yes' if t else 'no':>9s}{sps:10.0f}{sps / base:7.2f}x{median([r['sps_all'] for r in rs]):13.0f}"
              f"{median([r['setup'] for r in rs]):10.2f}{median([r['breakdown']['env'] for r in rs]):12.2f}"
              f"{median([r['final'] for r in rs]):8.1f}")
    return 0


def main_signals(args: argparse.Namespace) -> int:
    """Extrinsic-only against each ``--reward-signals`` set, alternating on the same seeds."""
    import tempfile

    gamma = 0.98  # the Zoo's
    with tempfile.TemporaryDirectory() as tmp:
        demo = args.demo
        if demo is None and any("gail" in s for s in args.reward_signals):
            demo = record_cartpole_demo(os.path.join(tmp, "cartpole.demo"))
        sets = ["extrinsic", *[s for s in args.reward_signals if s != "extrinsic"]]
        results: dict[str, list[dict[str, Any]]] = {s: [] for s in sets}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for names in sets:
                r = run_kerasrl(args.steps, seed, os.path.join(tmp, f"{seed}-{names}"),
                                reward_signals=signal_settings(names, demo, gamma))
                results[names].append(r)
                print(f"{names:24s} seed {seed}: {r['sps']:.0f} steps/s ({r['sps_all']:.0f} with compile), "
                      f"final mean {r['final']:.1f}", flush=True)
    base = median([r["sps"] for r in results["extrinsic"]])
    print()
    print(f"CartPole-v1, Zoo hyper-parameters, {args.steps} steps, {args.seeds} seeds (medians)")
    print(f"{'reward signals':26s}{'steps/s':>10s}{'vs extrinsic':>14s}{'with compile':>14s}{'final return':>14s}")
    for names, rs in results.items():
        sps = median([r["sps"] for r in rs])
        print(f"{names:26s}{sps:10.0f}{sps / base:13.2f}x{median([r['sps_all'] for r in rs]):14.0f}"
              f"{median([r['final'] for r in rs]):14.1f}")
    for names, rs in results.items():
        print(f"time breakdown, {names} (median seconds per run):")
        for key in rs[0]["breakdown"]:
            print(f"  {key:34s}{median([r['breakdown'][key] for r in rs]):8.2f}")
    return 0


def print_summary(args: argparse.Namespace, task: Any, ours: list[dict[str, Any]], theirs: list[dict[str, Any]],
                  variants: dict[str, list[dict[str, Any]]]) -> None:
    """The medians table: one column per library that ran, and their ratio (or difference) when both did."""
    print()
    print(f"{task.env_id} ({args.task}: {task.num_envs} copies, config {task.config}"
          f"{', threaded' if args.threaded else ''}), {args.steps} steps, {args.seeds} seeds (medians)")
    columns = [(name, runs) for name, runs in (("kerasrl", ours), ("SB3", theirs)) if runs]
    print(f"{'':34s}" + "".join(f"{name:>12s}" for name, _ in columns)
          + (f"{'ratio/diff':>12s}" if len(columns) == 2 else ""))
    rows = [
        ("env steps/s (no compile)", "sps", "{:.0f}", False),
        ("env steps/s (compile counted)", "sps_all", "{:.0f}", False),
        (f"steps to rolling-100 mean >= {TARGET:g}", "reach", "{:.0f}", True),
        ("final rolling mean return", "final", "{:.1f}", None),
    ]
    for label, key, fmt, lower_better in rows:
        values = [median([r[key] for r in runs]) for _, runs in columns]
        line = f"{label:34s}" + "".join(f"{fmt.format(v):>12s}" for v in values)
        if len(values) == 2:
            a, b = values
            if lower_better is None:  # returns can be negative: the difference kerasrl - SB3
                line += f"{a - b:>+11.1f} "
            else:
                ratio = (b / a if lower_better else a / b) if b and a else float("nan")
                line += f"{ratio:>11.2f}x"
        print(line)
    print("per seed, final return: " + "; ".join(
        f"{name} " + " ".join(f"{r['final']:.1f}" for r in runs) for name, runs in columns))
    if variants["unthreaded"]:
        un = variants["unthreaded"]
        print(f"kerasrl unthreaded, same seeds: {median([r['sps'] for r in un]):.0f} steps/s "
              f"({median([r['sps_all'] for r in un]):.0f} with compile), threshold at "
              f"{median([r['reach'] for r in un]):.0f}, final {median([r['final'] for r in un]):.1f}")
    if args.default_vs_best:
        base = median([r["sps"] for r in variants["default"]])
        print("\nkerasrl default (no jit_compile key) vs explicit choices, steps/s (no compile / compile counted):")
        for name, rs in variants.items():
            print(f"  {name:10s}{median([r['sps'] for r in rs]):8.0f}{median([r['sps_all'] for r in rs]):8.0f}"
                  f"{median([r['sps'] for r in rs]) / base:7.2f}x of default")
    print()


def print_kerasrl_costs(task: Any, ours: list[dict[str, Any]], import_tf: float) -> None:
    """Where kerasrl's time went: the policy call, the timer breakdown and the start-up costs."""
    if ours:
        print(f"kerasrl policy call per step for all {task.num_envs} agents: "
              f"{median([r['act_ms'] for r in ours]):.3f} ms (median; the timer's overhead included)")
        print("kerasrl time breakdown (median seconds per run):")
        for key in ours[0]["breakdown"]:
            print(f"  {key:26s}{median([r['breakdown'][key] for r in ours]):8.2f}")
    print("start-up costs:")
    print(f"  import tensorflow + kerasrl    {import_tf:6.2f} s")
    if not ours:
        return
    print(f"  kerasrl env + model set-up     {median([r['setup'] for r in ours]):6.2f} s")
    print(f"  kerasrl tracing/compilation    {median([r['trace'] for r in ours]):6.2f} s "
          f"({100 * median([r['share'] for r in ours]):.1f}% of the run's set-up + wall time; first run "
          f"{100 * ours[0]['share']:.1f}%)")
    print(f"    first act (TF acting only)   {median([r['act_trace'] for r in ours]):6.2f} s")
    print(f"    first update, waited for     {median([r['update_trace'] for r in ours]):6.2f} s")
    print(f"  kerasrl steady (wall - compile){median([r['wall'] - r['trace'] for r in ours]):6.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=("cartpole", "pendulum", "lstm", "visual", "agents64", "acrobot", "pendulum200k",
                                           "lunarlander", "halfcheetah", "hopper"), default="cartpole",
                        help="environment, config and peer (see benchmarks/bench_tasks.py)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the task's budget)")
    parser.add_argument("--default-vs-best", action="store_true",
                        help="also run kerasrl with jit_compile true and false beside the default (no key)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run are first-seed .. first-seed+seeds-1")
    parser.add_argument("--no-sb3", action="store_true", help="time kerasrl alone")
    parser.add_argument("--sb3-only", action="store_true",
                        help="run SB3 alone (long MuJoCo runs: one process per library and seed)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1],
                        help="env worker processes to compare (1: in process), e.g. --workers 1 2 4")
    parser.add_argument("--slow-env", action="store_true", help="SlowCartPole-v1: every step of every copy costs 1 ms")
    parser.add_argument("--slow-mode", choices=("busy", "sleep"), default="busy",
                        help="how the slow env spends its 1 ms: busy CPU (default) or sleeping")
    parser.add_argument("--reward-signals", nargs="+", default=None, metavar="SET",
                        help="signal sets to compare with extrinsic-only, e.g. extrinsic,curiosity extrinsic,gail")
    parser.add_argument("--demo", default=None, help="GAIL's demonstrations (default: record a scripted expert)")
    parser.add_argument("--curves", default=None, metavar="FILE",
                        help="write every run's rolling mean return at each episode end to this CSV "
                             "(benchmarks/plot_curves.py draws it)")
    parser.add_argument("--threaded", action="store_true",
                        help="kerasrl's runs with threaded: true (updates beside acting)")
    parser.add_argument("--compare-unthreaded", action="store_true",
                        help="with --threaded: also an unthreaded kerasrl run per seed, alternating")
    parser.add_argument("--xla-cache", default=None, metavar="DIR",
                        help="keep XLA's compiled code in DIR (kerasrl.common.fast_path.use_xla_cache): runs after the "
                             "first, and later invocations, load it instead of compiling")
    args = parser.parse_args()
    if args.sb3_only and (args.no_sb3 or args.default_vs_best or args.threaded or args.reward_signals
                          or args.workers != [1] or args.slow_env):
        parser.error("--sb3-only runs SB3 alone: it cannot go with --no-sb3, --default-vs-best, --threaded, "
                     "--reward-signals, --workers or --slow-env")
    import tempfile

    from bench_tasks import TASKS

    global TARGET
    task = TASKS[args.task]
    TARGET = task.threshold
    args.steps = task.steps if args.steps is None else args.steps

    t = time.perf_counter()
    import tensorflow  # noqa: F401

    import kerasrl.ppo.trainer  # noqa: F401
    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)

    import_tf = time.perf_counter() - t
    if args.xla_cache:  # TensorFlow reads TF_XLA_FLAGS at its first XLA compilation, not at import
        from kerasrl.common.fast_path import use_xla_cache

        use_xla_cache(args.xla_cache)
    if args.workers != [1] or args.slow_env:
        return main_workers(args, import_tf)
    if args.reward_signals:
        return main_signals(args)
    have_sb3 = False
    if not args.no_sb3:
        try:
            t = time.perf_counter()
            import stable_baselines3  # noqa: F401
            import torch  # noqa: F401

            if task.sb3_class == "RecurrentPPO":
                import sb3_contrib  # noqa: F401

            import_sb3 = time.perf_counter() - t
            have_sb3 = True
        except ImportError:
            print("stable_baselines3 (or sb3-contrib) is not installed; to compare, run: "
                  "pip install torch==2.13.0 stable-baselines3 sb3-contrib")
            if args.sb3_only:
                return 1
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    curves = CurveWriter(args.curves, task.env_id, args.task) if args.curves else None
    variants: dict[str, list[dict[str, Any]]] = {"default": [], "jit true": [], "jit false": [], "unthreaded": []}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            curve: Optional[list[tuple[int, float]]] = [] if curves else None
            if not args.sb3_only:
                r = run_kerasrl(args.steps, seed, os.path.join(tmp, str(seed)), task=task, jit_compile=None,
                                curve=curve, threaded=args.threaded)
                ours.append(r)
                if curves and curve is not None:
                    curves.write("kerasrl", seed, curve)
                variants["default"].append(r)
                print(f"kerasrl seed {seed}: {r['sps']:.0f} steps/s ({r['sps_all']:.0f} with compile, "
                      f"XLA {r['jit']}), {TARGET:g} reached at {r['reach']}, final mean {r['final']:.1f}", flush=True)
            if have_sb3:
                curve = [] if curves else None
                s = run_sb3(args.steps, seed, task, curve=curve)
                theirs.append(s)
                if curves and curve is not None:
                    curves.write("sb3", seed, curve)
                print(f"sb3     seed {seed}: {s['sps']:.0f} steps/s ({s['sps_all']:.0f} with set-up), "
                      f"{TARGET:g} reached at {s['reach']}, final mean {s['final']:.1f}", flush=True)
            for name, jit in (("jit true", True), ("jit false", False)) if args.default_vs_best else ():
                v = run_kerasrl(args.steps, seed, os.path.join(tmp, f"{seed}{name}"), task=task, jit_compile=jit)
                variants[name].append(v)
                print(f"kerasrl seed {seed} {name}: {v['sps']:.0f} steps/s ({v['sps_all']:.0f} with compile)", flush=True)
            if args.threaded and args.compare_unthreaded:
                v = run_kerasrl(args.steps, seed, os.path.join(tmp, f"{seed}u"), task=task, jit_compile=None)
                variants["unthreaded"].append(v)
                print(f"kerasrl seed {seed} unthreaded: {v['sps']:.0f} steps/s ({v['sps_all']:.0f} with compile), "
                      f"{TARGET:g} reached at {v['reach']}, final mean {v['final']:.1f}", flush=True)
    print_summary(args, task, ours, theirs, variants)
    print_kerasrl_costs(task, ours, import_tf)
    if have_sb3:
        print(f"  import torch + SB3             {import_sb3:6.2f} s")
        print(f"  SB3 env + model set-up         {median([r['setup'] for r in theirs]):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
