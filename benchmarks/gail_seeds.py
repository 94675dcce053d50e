"""GAIL as the only reward, from a scripted Simple1D expert, over many seeds: does it follow its expert?

    python benchmarks/gail_seeds.py --seeds 101-108                        # state-action, discrete
    python benchmarks/gail_seeds.py --seeds 101-108 --continuous
    python benchmarks/gail_seeds.py --seeds 101-108 --state-only --observe-position

The expert walks straight to the observed goal; its demo (``--demo-steps``, recorded with env
seed 7) is then the only source of reward for a fresh PPO agent trained for ``--steps`` steps
(ML-Agents 0.9's Simple1D settings: batch 16, buffer 64, learning rate 5e-3, 2 × 128 units; GAIL's
defaults otherwise). Reported per seed: the mean environment return of the last 10 episodes
(1.0 follows the expert; −1.02 walks to the wrong end every time).

State-only GAIL cannot work on Simple1D as it is: the only observation is the goal, which an agent
walking the wrong way sees exactly as often as the expert does. ``--observe-position`` adds the
position to the observation (``[goal, position]``), where the expert's states and the
anti-expert's differ. The last line is machine-readable: ``final returns=<comma-separated>``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from kerasrl.envs.simple import Simple1DEnvironment  # noqa: E402


class PositionSimple1D(Simple1DEnvironment):
    """Simple1D observing ``[goal, position]`` (the position before the step's action)."""

    def _observation_shapes(self) -> tuple[tuple[int, ...], ...]:
        return ((2,),)

    def _observe(self) -> list[np.ndarray]:
        return [np.array([[self.goal, self.position]], np.float32)]


def parse_seeds(text: str) -> list[int]:
    """``101-108`` or ``1,5,9``."""
    if "-" in text:
        first, last = (int(v) for v in text.split("-"))
        return list(range(first, last + 1))
    return [int(v) for v in text.split(",")]


def make_env(args: argparse.Namespace, seed: int) -> Simple1DEnvironment:
    cls = PositionSimple1D if args.observe_position else Simple1DEnvironment
    return cls(use_discrete=not args.continuous, seed=seed)


def record_demo(args: argparse.Namespace, path: str) -> None:
    from kerasrl import recording

    discrete = not args.continuous

    def expert(obs: np.ndarray) -> np.ndarray:
        goal = np.asarray(obs)[:, 0]
        return (goal > 0).astype(np.int32)[:, None] if discrete else goal[:, None].astype(np.float32)

    recording.record(make_env(args, 7), expert, args.demo_steps, path)


def train(args: argparse.Namespace, demo: str, seed: int, folder: str) -> float:
    """Mean return of the last 10 episodes of a GAIL-only run."""
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.trainers import TrainerController, initialize_trainers

    gail = {"strength": 1.0, "gamma": 0.99, "demo_path": demo, "use_actions": not args.state_only}
    config = {"default": {"batch_size": 16, "buffer_size": 64, "learning_rate": 5.0e-3, "max_steps": args.steps,
                          "summary_freq": 10**9, "jit_compile": False, "reward_signals": {"gail": gail}}}
    manager = SimpleEnvManager(make_env(args, seed))
    trainers = initialize_trainers(config, manager.behavior_specs, summaries_dir=folder, run_id="gail",
                                   model_path=os.path.join(folder, "models"), keep_checkpoints=1, train_model=True,
                                   load_model=False, seed=seed, meta_curriculum=None, multi_gpu=False)
    for item in args.set:
        key, value = item.split("=", 1)
        target = gail if key.startswith("gail.") else config["default"]
        target[key.removeprefix("gail.")] = yaml.safe_load(value)
    controller = TrainerController(trainers, os.path.join(folder, "models"), folder, "gail", save_freq=10**9,
                                   meta_curriculum=None, train=True, training_seed=seed, fast_simulation=True,
                                   sampler_manager=None, resampling_interval=None)
    controller.start_learning(manager)
    returns = list(next(iter(trainers.values())).recent_returns)[-10:]
    return float(np.mean(returns)) if returns else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="101-108", help="e.g. 101-108 or 1,5,9")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--demo-steps", type=int, default=400)
    parser.add_argument("--continuous", action="store_true", help="continuous actions (default: discrete)")
    parser.add_argument("--state-only", action="store_true", help="use_actions: false (a state-only discriminator)")
    parser.add_argument("--observe-position", action="store_true", help="observe [goal, position]")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a trainer key (gail.KEY: a GAIL key), e.g. --set beta=0.01")
    args = parser.parse_args()

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    workdir = tempfile.mkdtemp(prefix="gail_seeds_")
    demo = os.path.join(workdir, "expert.demo")
    record_demo(args, demo)
    finals = []
    for seed in parse_seeds(args.seeds):
        start = time.perf_counter()
        finals.append(train(args, demo, seed, os.path.join(workdir, f"seed{seed}")))
        print(f"seed {seed}: mean return of the last 10 episodes {finals[-1]:.3f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"median {np.median(finals):.3f}, {sum(v >= 0.9 for v in finals)} of {len(finals)} seeds >= 0.9")
    print("final returns=" + ",".join(f"{v:.3f}" for v in finals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
