"""Command line: ``kerasrl-learn <trainer-config> --env CartPole-v1 ...`` (ML-Agents' ``mlagents-learn``)."""
from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from typing import Any, Optional, Sequence

from kerasrl.exception import TrainerError

BUILTIN_ENVS = ("Simple1D", "Simple1DContinuous", "MultiBranchMasked", "VisualSimple1D")


def make_env(env_id: str, num_envs: int, seed: Optional[int]) -> Any:
    """A built-in environment by name, else a Gymnasium id (``num_envs`` agents of one behavior)."""
    from kerasrl.envs import GymnasiumEnv
    from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment, VisualSimple1DEnvironment

    if env_id in BUILTIN_ENVS:
        if num_envs != 1:
            raise TrainerError(f"The built-in environment {env_id} has one agent; --num-envs must be 1.")
        if env_id == "Simple1D":
            return Simple1DEnvironment(use_discrete=True, seed=seed)
        if env_id == "Simple1DContinuous":
            return Simple1DEnvironment(use_discrete=False, seed=seed)
        if env_id == "MultiBranchMasked":
            return MultiBranchMaskedEnvironment(seed=seed)
        return VisualSimple1DEnvironment(use_discrete=True, seed=seed)
    return GymnasiumEnv(env_id, num_envs=num_envs, seed=seed)


def set_tf_threads(threads: int) -> bool:
    """Limit TensorFlow's thread pools (must run before TensorFlow executes anything).

    Small models spend their time in per-op overhead that a 2-thread pool only adds to.
    Returns False (and leaves the pools alone) if TensorFlow is already running.
    """
    import tensorflow as tf

    if threads <= 0:
        return False
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        logging.getLogger("kerasrl").warning("TensorFlow is already initialized; --tf-threads %d ignored.", threads)
        return False
    return True


def build_parser(prog: str = "kerasrl-learn", config_required: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Train PPO with kerasrl on a built-in or Gymnasium environment.")
    if config_required:
        p.add_argument("trainer_config_path", help="ML-Agents-style trainer config (YAML: default + per-behavior sections)")
    else:
        p.add_argument("--config", dest="trainer_config_path", default=None, help="trainer config YAML")
    p.add_argument("--env", default="CartPole-v1", help=f"Gymnasium id or one of {', '.join(BUILTIN_ENVS)}")
    p.add_argument("--num-envs", type=int, default=8, help="parallel copies of the env (agents of one behavior)")
    p.add_argument("--steps", type=int, default=None,
                   help="environment steps to train for (all copies counted); overrides max_steps")
    p.add_argument("--seed", type=int, default=-1, help="random seed; -1 draws one")
    p.add_argument("--run-id", default="ppo", help="name of the run's folder under --results-dir")
    p.add_argument("--results-dir", default="results", help="where models and summaries go")
    p.add_argument("--save-freq", type=int, default=50000, help="checkpoint every n trainer steps")
    p.add_argument("--keep-checkpoints", type=int, default=5, help="checkpoints kept")
    p.add_argument("--resume", "--load", dest="load", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--inference", action="store_true",
                   help="run the policy without training (for --steps steps, else until Ctrl-C)")
    p.add_argument("--progress-every", type=int, default=10000, help="print progress every n environment steps")
    p.add_argument("--tf-threads", type=int, default=1,
                   help="TensorFlow intra-op threads (1 is fastest for small MLPs; 0 = TensorFlow's default)")
    p.add_argument("--debug", action="store_true", help="debug logging")
    return p


def _setup(args: argparse.Namespace, default_config: Optional[str]) -> tuple[Any, Any, dict[str, Any], int]:
    """The run context, the env manager, the trainers and the number of agents that ``args`` describe."""
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.settings import RunContext, load_trainer_config
    from kerasrl.trainers import create_trainers

    config = load_trainer_config(args.trainer_config_path or default_config)
    if args.num_envs < 1:
        raise TrainerError(f"--num-envs must be >= 1, got {args.num_envs}.")
    if args.steps is not None and args.steps < 1:
        raise TrainerError(f"--steps must be >= 1, got {args.steps}.")
    seed = args.seed if args.seed >= 0 else random.randrange(10000)
    env = make_env(args.env, args.num_envs, seed)
    n_agents = int(getattr(env, "num_envs", 1))
    max_steps = None if args.steps is None else max(args.steps // n_agents, 1)
    context = RunContext.in_results_dir(args.results_dir, args.run_id, keep_checkpoints=args.keep_checkpoints,
                                        train_model=not args.inference, load_model=args.load, seed=seed,
                                        max_steps=max_steps)
    manager = SimpleEnvManager(env)
    return context, manager, create_trainers(config, manager.external_brains, context), n_agents


def run_training(args: argparse.Namespace, default_config: Optional[str] = None) -> dict[str, float]:
    """Train as ``args`` say; print progress and the final machine-readable summary line."""
    import numpy as np

    from kerasrl.trainers import TrainerController

    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(message)s")
    set_tf_threads(args.tf_threads)
    start = time.perf_counter()
    context, manager, trainers, n_agents = _setup(args, default_config)
    first_step = {name: t.get_step for name, t in trainers.items()}
    progress_freq = max(args.progress_every // n_agents, 1)
    train_start = time.perf_counter()

    def trace_seconds() -> float:
        return sum(t.policy.trace_seconds + getattr(t, "learner").trace_seconds for t in trainers.values())

    def summary() -> dict[str, float]:
        wall = time.perf_counter() - train_start
        if args.inference:
            steps = tc.global_step * n_agents
        else:
            steps = sum(t.get_step - first_step[n] for n, t in trainers.items()) * n_agents
        returns = [r for t in trainers.values() for r in t.recent_returns]
        return {
            "steps": float(steps),
            "mean_return": float(np.mean(returns)) if returns else float("nan"),
            "steps_per_sec": steps / max(wall - trace_seconds(), 1e-9),
            "wall_s": wall,
        }

    def progress(tc: TrainerController) -> None:
        s = summary()
        print(f"steps={int(s['steps'])} mean_return={s['mean_return']:.2f} steps_per_sec={s['steps_per_sec']:.0f}",
              flush=True)

    tc = TrainerController(trainers, context.model_path, context.summaries_dir, f"{args.run_id}-0", args.save_freq,
                           train=not args.inference,
                           training_seed=context.seed, progress=progress, progress_freq=progress_freq,
                           inference_steps=context.max_steps if args.inference else None)
    print(f"kerasrl: PPO on {args.env} x{n_agents}, seed {context.seed}, results in "
          f"{os.path.join(args.results_dir, args.run_id)} "
          f"(set-up {train_start - start:.1f} s)", flush=True)
    tc.start_learning(manager)
    result = summary()
    result["trace_s"] = trace_seconds()
    if tc.interrupted:
        print("Interrupted: the model was saved; continue with --resume.", flush=True)
    print(f"final steps={int(result['steps'])} mean_return={result['mean_return']:.3f} "
          f"steps_per_sec={result['steps_per_sec']:.1f} wall_s={result['wall_s']:.2f}", flush=True)
    return result


def main(argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None,
         default_config: Optional[str] = None) -> int:
    """Parse ``argv``, train, and turn a ``TrainerError`` into a one-line message and exit code 2."""
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    try:
        run_training(args, default_config=default_config)
    except TrainerError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
