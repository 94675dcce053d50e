"""Which compiled update path is fastest, per kind of policy: the measurement behind
``kerasrl.fast_path`` (the defaults a config without kerasrl's extra keys gets).

For each policy kind (feed-forward MLP on vectors, LSTM, CNN on pixels) one PPO update
(``fused_update``: every epoch and mini-batch in one compiled call) is timed with
``jit_compile`` true and false, alternating, after a warm-up call; printed: the median update
time of each, the one-time compile cost of each, and which is faster.

    python benchmarks/bench_fast_path.py --repeats 5
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def kinds() -> dict[str, tuple[Any, dict[str, Any], int, int, int]]:
    """Policy kind → (spec, network settings, rows per update, batch size, epochs)."""
    from kerasrl.spec import BehaviorSpec

    zoo = {"hidden_units": 64, "num_layers": 2, "activation": "tanh", "initializer": "orthogonal",
           "separate_value_network": True}
    return {
        "mlp": (BehaviorSpec(((4,),), "discrete", (2,)), zoo, 256, 256, 20),
        "mlp-mlagents": (BehaviorSpec(((8,),), "continuous", (2,)), {}, 10240, 1024, 3),  # 0.9's defaults
        "mlp-continuous": (BehaviorSpec(((3,),), "continuous", (1,)), zoo, 4096, 64, 10),
        "lstm": (BehaviorSpec(((4,),), "discrete", (2,)),
                 {**zoo, "num_layers": 1, "use_recurrent": True, "memory_size": 256, "sequence_length": 32}, 256, 256, 20),
        "cnn": (BehaviorSpec(((36, 36, 1),), "discrete", (3,)),
                {"hidden_units": 512, "num_layers": 1, "vis_encode_type": "nature_cnn", "activation": "relu"},
                1024, 256, 4),
    }


def batch_for(learner: Any, rows: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}
    for name, spec in learner.batch_signature().items():
        shape = [rows, *spec.shape[1:]]
        if spec.dtype.is_integer:
            out[name] = np.zeros(shape, np.int32)
        elif name == "action_mask":
            out[name] = np.ones(shape, np.float32)
        elif name == "masks":
            out[name] = np.ones(shape, np.float32)
        else:
            out[name] = rng.normal(scale=0.1, size=shape).astype(np.float32)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=list(kinds()))
    args = parser.parse_args()
    import tensorflow as tf

    from kerasrl.cli import set_tf_threads
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.ppo.learner import PPOLearner
    from kerasrl.settings import NetworkSettings, PPOSettings

    set_tf_threads(1)
    print(f"{'policy':16s}{'XLA ms':>9s}{'no-XLA ms':>11s}{'ratio':>8s}{'XLA compile s':>15s}{'plain trace s':>15s}  faster")
    for kind in args.kinds:
        spec, net, rows, batch_size, epochs = kinds()[kind]
        learners = {}
        for jit in (True, False):
            tf.random.set_seed(0)
            model = ActorCritic(spec, ["extrinsic"], NetworkSettings(**net), seed=0)
            learners[jit] = PPOLearner(model, PPOSettings(batch_size=batch_size, buffer_size=rows, num_epoch=epochs,
                                                          jit_compile=jit))
        data = batch_for(learners[True], rows)
        first = {}
        for jit, learner in learners.items():
            t = time.perf_counter()
            learner.fused_update(data, epochs, batch_size, seed=0)
            first[jit] = time.perf_counter() - t
        times: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.repeats):
            for jit, learner in learners.items():
                t = time.perf_counter()
                learner.fused_update(data, epochs, batch_size, seed=r + 1)
                times[jit].append(time.perf_counter() - t)
        xla, plain = (1000 * statistics.median(times[j]) for j in (True, False))
        print(f"{kind:16s}{xla:9.1f}{plain:11.1f}{plain / xla:7.2f}x{first[True] - xla / 1000:15.2f}"
              f"{first[False] - plain / 1000:15.2f}  {'XLA' if xla < plain else 'no XLA'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
