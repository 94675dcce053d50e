"""PPO learner throughput and sample efficiency on 1, 2, … replicas (GPUs, else logical CPUs).

1. Learner throughput: samples/s through one PPO update (``num_epoch`` passes of one global
   mini-batch of ``--batch`` rows, the fused driver) for the MLP policy (64×2 on a 16-d vector)
   and a ``nature_cnn`` visual policy (``--image``² × 3 pixels), per replica count. Replica
   counts are measured alternately, round after round; medians, and the ratio to 1 replica.
2. Learning curve: PPO (``kerasrl.PPO.fit``) on ``--env`` with the same global batch and seeds
   on 1 and on N replicas: the mean episode return after each quarter of ``--curve-steps``.

On a machine with GPUs, replicas are GPUs (MirroredStrategy, NCCL); otherwise the CPU is split
into logical devices, which shows correctness and overheads, not speed (the replicas share the
cores). The scaling target (≥ 1.8× at 2 GPUs for the visual policy) needs real GPUs.

    python benchmarks/bench_multi_gpu.py                                   # 4096 rows, 84² images
    python benchmarks/bench_multi_gpu.py --replicas 1 2 --batch 512 --image 36 --rounds 3 \\
        --curve-steps 20000                                                # brief, on 2 CPU cores
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def strategies(counts: list[int]) -> tuple[str, dict[int, Any]]:
    """One strategy per replica count: over the first k GPUs, else over k logical CPUs."""
    import tensorflow as tf

    from kerasrl.distribute import split_cpu

    gpus = tf.config.list_physical_devices("GPU")
    if gpus and max(counts) > len(gpus):
        raise SystemExit(f"--replicas {max(counts)}: this machine has {len(gpus)} GPU(s).")
    devices = [f"/gpu:{i}" for i in range(len(gpus))] if gpus else split_cpu(max(counts))
    out = {}
    for k in counts:
        if k == 1:
            out[k] = tf.distribute.OneDeviceStrategy(devices[0])
        else:
            ops = None if gpus else tf.distribute.ReductionToOneDevice()
            out[k] = tf.distribute.MirroredStrategy(devices[:k], cross_device_ops=ops)
    return ("GPU" if gpus else "logical CPU"), out


def make_learner(kind: str, strategy: Any, batch: int, epochs: int, image: int) -> Any:
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.ppo.learner import PPOLearner
    from kerasrl.settings import NetworkSettings, PPOSettings
    from kerasrl.spec import BehaviorSpec

    if kind == "mlp":
        spec, network = BehaviorSpec(((16,),), "discrete", (4,)), NetworkSettings(hidden_units=64, num_layers=2)
    else:
        spec = BehaviorSpec(((image, image, 3),), "discrete", (4,))
        network = NetworkSettings(hidden_units=256, num_layers=1, vis_encode_type="nature_cnn")
    with strategy.scope():
        model = ActorCritic(spec, ["extrinsic"], network, seed=0)
        return PPOLearner(model, PPOSettings(batch_size=batch, buffer_size=batch, num_epoch=epochs), max_steps=10**6)


def synthetic_batch(learner: Any, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    out = {}
    for key, spec in learner.batch_signature().items():
        shape = [n if d is None else d for d in spec.shape]
        if key == "actions":
            out[key] = rng.integers(0, 4, shape).astype(np.int32)
        elif key in ("masks", "action_mask"):
            out[key] = np.ones(shape, np.float32)
        elif key == "action_log_probs":
            out[key] = np.full(shape, np.log(0.25), np.float32)
        else:
            out[key] = rng.normal(size=shape).astype(np.float32)
    return out


def throughput(args: argparse.Namespace, strategies_by_count: dict[int, Any]) -> None:
    for kind in ("mlp", "nature_cnn"):
        learners = {k: make_learner(kind, s, args.batch, args.epochs, args.image) for k, s in strategies_by_count.items()}
        batch = synthetic_batch(learners[1] if 1 in learners else next(iter(learners.values())), args.batch)
        times: dict[int, list[float]] = {k: [] for k in learners}
        for learner in learners.values():  # trace and compile once, not timed
            learner.fused_update(batch, args.epochs, args.batch, seed=0)
        for r in range(args.rounds):
            for k, learner in learners.items():
                start = time.perf_counter()
                learner.fused_update(batch, args.epochs, args.batch, seed=r)
                times[k].append(time.perf_counter() - start)
        base = statistics.median(times[min(times)])
        for k, t in times.items():
            med = statistics.median(t)
            print(f"throughput {kind:10s} replicas={k} batch={args.batch} samples/s={args.batch * args.epochs / med:,.0f} "
                  f"update_s={med:.3f} speedup={base / med:.2f}", flush=True)


def learning_curve(args: argparse.Namespace, strategies_by_count: dict[int, Any]) -> None:
    import kerasrl
    from kerasrl import distribute

    for seed in args.seeds:
        for k, strategy in strategies_by_count.items():
            distribute.set_strategy(strategy)
            with tempfile.TemporaryDirectory() as run_dir:
                agent = kerasrl.PPO(args.env, config="cartpole_zoo", seed=seed, run_dir=run_dir,
                                    max_steps=args.curve_steps)
                start = time.perf_counter()
                history = agent.fit(args.curve_steps, verbose=0)
                wall = time.perf_counter() - start
                agent.close()
            steps, rewards = history.history["step"], history.history["episode_reward_mean"]
            marks = []
            for q in (0.25, 0.5, 0.75, 1.0):
                at = [r for s, r in zip(steps, rewards) if s <= q * args.curve_steps and not math.isnan(r)]
                marks.append(f"{at[-1]:.1f}" if at else "nan")
            print(f"curve {args.env} seed={seed} replicas={k} mean_return@25/50/75/100%={'/'.join(marks)} "
                  f"updates={len(steps)} final_kl={np.mean(history.history['approx_kl'][-5:]):.4f} wall_s={wall:.1f}",
                  flush=True)
    distribute.set_strategy(None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=4096, help="global mini-batch (rows)")
    p.add_argument("--epochs", type=int, default=1, help="passes per timed update")
    p.add_argument("--image", type=int, default=84, help="nature_cnn image side (>= 36)")
    p.add_argument("--rounds", type=int, default=5, help="timed updates per replica count (alternating)")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--curve-steps", type=int, default=100_000, help="0: no learning curve")
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = p.parse_args()
    counts = sorted(set(args.replicas))
    if any(args.batch % k for k in counts):
        raise SystemExit(f"--batch {args.batch} must split evenly over --replicas {counts}.")
    kind, by_count = strategies(counts)
    print(f"bench_multi_gpu: replicas on {kind} devices {counts}", flush=True)
    throughput(args, by_count)
    if args.curve_steps:
        learning_curve(args, by_count)


if __name__ == "__main__":
    main()
