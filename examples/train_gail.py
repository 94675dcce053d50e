"""GAIL on CartPole-v1: train an expert, record its demonstrations, imitate them with GAIL alone.

    python examples/train_gail.py                  # expert 100k steps, 10k demo steps, GAIL 200k steps

1. PPO with the Zoo configuration trains the expert (its return: mean of its last 100 episodes);
2. ``kerasrl.recording.record`` writes 10k steps of the expert's policy to a demo file;
3. a fresh PPO agent learns with ``reward_signals: {gail: ...}`` only (no environment reward)
   for up to 200k steps; reported: the step at which its rolling mean reaches 90 % of the
   expert's return;
4. when kerasrl has the ``offline_bc`` trainer: behavioral cloning from the same demo.

The last line is machine-readable: ``final expert=<float> gail=<float> gail_reached=<int|None> bc=<float|nan>``.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expert-steps", type=int, default=100_000)
    parser.add_argument("--demo-steps", type=int, default=10_000)
    parser.add_argument("--gail-steps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None, help="where runs and the demo go (default: a temporary folder)")
    args = parser.parse_args()

    from _harness import in_workdir

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    return in_workdir(args.workdir, "train_gail_", lambda workdir: run(args, workdir))


def run(args: argparse.Namespace, workdir: str) -> int:
    """The expert, its demo, GAIL and BC, each in a folder of ``workdir``."""
    from _harness import mean_return, train, zoo_cartpole

    from kerasrl import recording
    from kerasrl.settings import trainer_types

    t0 = time.perf_counter()
    expert, _ = train(zoo_cartpole(), "CartPole-v1", args.expert_steps, args.seed, os.path.join(workdir, "expert"))
    expert_return = mean_return(expert)
    print(f"expert: mean return {expert_return:.1f} after {expert.get_step} steps ({time.perf_counter() - t0:.0f} s)",
          flush=True)

    demo = os.path.join(workdir, "cartpole_expert.demo")
    _, buffer = recording.record("CartPole-v1", expert.policy, args.demo_steps, demo, seed=args.seed + 1000)
    print(f"demo: {len(buffer['actions'])} steps, {int(buffer['done'].get_batch().sum())} episodes -> {demo}", flush=True)

    target = 0.9 * expert_return
    gail = {"gail": {"strength": 1.0, "gamma": 0.99, "demo_path": demo, "encoding_size": 64}}
    t0 = time.perf_counter()
    student, reached = train(zoo_cartpole(reward_signals=gail), "CartPole-v1", args.gail_steps, args.seed + 1,
                             os.path.join(workdir, "gail"), target=target)
    gail_return = mean_return(student)
    print(f"GAIL only: mean return {gail_return:.1f} after {student.get_step} steps, 90% of the expert "
          f"({target:.1f}) reached at step {reached} ({time.perf_counter() - t0:.0f} s)", flush=True)

    bc_return = math.nan
    if "offline_bc" in trainer_types():
        bc_section = {"trainer": "offline_bc", "demo_path": demo, "batch_size": 64, "batches_per_epoch": 10,
                      "learning_rate": 3e-3, "hidden_units": 64, "num_layers": 2, "summary_freq": 10**9}
        bc, bc_reached = train(bc_section, "CartPole-v1", 20_000, args.seed + 2, os.path.join(workdir, "bc"),
                               target=target)
        bc_return = mean_return(bc)
        print(f"offline_bc: mean return {bc_return:.1f} after {bc.get_step} steps, 90% reached at step {bc_reached}")
    else:
        print("offline_bc: this kerasrl has no offline_bc trainer; skipped")
    print(f"final expert={expert_return:.1f} gail={gail_return:.1f} gail_reached={reached} bc={bc_return:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
