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

``--trace N`` prints, every N updates, GAIL's reward over the positions −0.9…0.9 for each goal,
the policy's probability of the expert's move and the GAIL value estimate at a few states, the
four terminal observations (goal ±1 at position ±1) last: it shows how the discriminator, the
value head and the policy move together. Discrete actions only.

``--set gail.gamma=0.9`` (a discount that matches the 10-step episodes) is what makes state-only
GAIL follow its expert on most seeds; the figures are in docs/benchmarks/learning.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from seed_args import apply_overrides, parse_seeds  # noqa: E402

from kerasrl.envs.simple import Simple1DEnvironment  # noqa: E402


def make_env(args: argparse.Namespace, seed: int) -> Simple1DEnvironment:
    return Simple1DEnvironment(use_discrete=not args.continuous, seed=seed, observe_position=args.observe_position)


def record_demo(args: argparse.Namespace, path: str) -> None:
    from kerasrl import recording

    discrete = not args.continuous

    def expert(obs: np.ndarray) -> np.ndarray:
        goal = np.asarray(obs)[:, 0]
        return (goal > 0).astype(np.int32)[:, None] if discrete else goal[:, None].astype(np.float32)

    recording.record(make_env(args, 7), expert, args.demo_steps, path)


TRACE_POSITIONS = np.round(np.arange(-0.9, 0.91, 0.3), 2)
TRACE_STATES = ((-1.0, 0.0), (1.0, 0.0), (-1.0, -0.5), (1.0, 0.5), (-1.0, 0.5), (1.0, -0.5),
                (-1.0, -1.0), (-1.0, 1.0), (1.0, 1.0), (1.0, -1.0))


def observation(args: argparse.Namespace, goal: float, position: float) -> list[float]:
    return [goal, position] if args.observe_position else [goal]


def trace(args: argparse.Namespace, trainer: object) -> None:
    """One line: GAIL's reward by goal and position, P(expert's move) and V_gail at ``TRACE_STATES``."""
    import tensorflow as tf

    from kerasrl.fields import Field

    signal, model = trainer.reward_signals["gail"], trainer.learner.actor_critic  # type: ignore[attr-defined]
    parts = [f"update {trainer.update_count:3d}"]  # type: ignore[attr-defined]
    for goal in (-1.0, 1.0):
        obs = tf.constant([observation(args, goal, x) for x in TRACE_POSITIONS], tf.float32)
        reward = signal.rewards({Field.VECTOR_OBS: obs, Field.ACTIONS: tf.fill([len(TRACE_POSITIONS), 1], int(goal > 0)),
                                 Field.DONE: tf.zeros([len(TRACE_POSITIONS)])}).numpy().ravel()
        parts.append(f"r(goal {goal:+.0f})=" + " ".join(f"{v:.2f}" for v in reward))
    obs = tf.constant([observation(args, g, x) for g, x in TRACE_STATES], tf.float32)
    out = model({Field.VECTOR_OBS: obs})
    right = tf.nn.softmax(out["logits"]).numpy()[:, 1]
    expert = [p if g > 0 else 1.0 - p for p, (g, _) in zip(right, TRACE_STATES)]
    parts.append("P(expert move)=" + " ".join(f"{v:.2f}" for v in expert))
    parts.append("V=" + " ".join(f"{v:.1f}" for v in out["values"]["gail"].numpy()))
    print("  " + " | ".join(parts), flush=True)


def traced(args: argparse.Namespace, trainer: object) -> None:
    """Wrap ``trainer.update_policy`` to print ``trace`` every ``args.trace`` updates."""
    update = trainer.update_policy  # type: ignore[attr-defined]

    def update_and_trace() -> None:
        update()
        if trainer.update_count % args.trace == 0:  # type: ignore[attr-defined]
            trace(args, trainer)

    trainer.update_policy = update_and_trace  # type: ignore[attr-defined]


def train(args: argparse.Namespace, demo: str, seed: int, folder: str) -> float:
    """Mean return of the last 10 episodes of a GAIL-only run."""
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.trainers import TrainerController, initialize_trainers

    gail = {"strength": 1.0, "gamma": 0.99, "demo_path": demo, "use_actions": not args.state_only}
    config = {"default": {"batch_size": 16, "buffer_size": 64, "learning_rate": 5.0e-3, "max_steps": args.steps,
                          "summary_freq": 10**9, "jit_compile": False, "reward_signals": {"gail": gail}}}
    apply_overrides(config["default"], args.set)
    manager = SimpleEnvManager(make_env(args, seed))
    trainers = initialize_trainers(config, manager.behavior_specs, summaries_dir=folder, run_id="gail",
                                   model_path=os.path.join(folder, "models"), keep_checkpoints=1, train_model=True,
                                   load_model=False, seed=seed, meta_curriculum=None, multi_gpu=False)
    if args.trace:
        traced(args, next(iter(trainers.values())))
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
    parser.add_argument("--trace", type=int, default=0, metavar="N",
                        help="every N updates, print GAIL's rewards, the policy and its values (discrete only)")
    args = parser.parse_args()
    if args.trace and args.continuous:
        parser.error("--trace reads discrete logits: drop --continuous")

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
