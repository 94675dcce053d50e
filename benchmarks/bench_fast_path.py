"""Which compiled update path is fastest, per kind of policy: the measurement behind
``kerasrl.common.fast_path`` (the defaults a config without kerasrl's extra keys gets).

For each policy kind (feed-forward MLP on vectors, LSTM, CNN on pixels) one PPO update
(``fused_update``: every epoch and mini-batch in one compiled call) is timed with
``jit_compile`` true and false, alternating, after a warm-up call; printed: the median update
time of each, the one-time compile cost of each, and which is faster.

    python benchmarks/bench_fast_path.py --repeats 5

``--acting``: the acting side instead. Per policy (the Zoo CartPole MLP for 8 and for 64
agents, the ``lstm`` task's 64-unit LSTM for 8 and 64 agents, the ``hopper_ppo`` config's two
256×256 networks for one agent) one decision step for all agents,
through ``ActorCriticPolicy.get_action`` (model inputs, noise, memories included) with the numpy
mirror and with the compiled TF call, alternating, and the bare batched numpy policy call
(``NumpyActorCritic.act``) under the trainer's timer as ``policy.act`` times it; medians of
``--repeats`` blocks of ``--calls`` calls.

    python benchmarks/bench_fast_path.py --acting --repeats 7
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

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
        "mujoco": (BehaviorSpec(((11,),), "continuous", (3,)),  # hopper_ppo.yaml: Hopper-v5's shapes
                   {"hidden_units": 256, "num_layers": 2, "activation": "relu", "separate_value_network": True,
                    "gaussian_style": "sb3", "log_std_init": -2.0, "action_scale": 1.0}, 512, 32, 5),
        "cnn": (BehaviorSpec(((36, 36, 1),), "discrete", (3,)),
                {"hidden_units": 512, "num_layers": 1, "vis_encode_type": "nature_cnn", "activation": "relu"},
                1024, 256, 4),
    }


def batch_for(learner: Any, rows: int) -> dict[str, Any]:
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


def acting_cases() -> dict[str, tuple[Any, dict[str, Any], int]]:
    """Acting case → (spec, network settings, agents)."""
    from kerasrl.spec import BehaviorSpec

    spec, zoo, *_ = kinds()["mlp"]
    lstm = kinds()["lstm"][1]
    hopper = {"hidden_units": 256, "num_layers": 2, "activation": "relu", "separate_value_network": True,
              "gaussian_style": "sb3", "log_std_init": -2.0, "action_scale": 1.0}  # kerasrl/configs/hopper_ppo.yaml
    return {"mlp 8 agents": (spec, zoo, 8), "mlp 64 agents": (spec, zoo, 64), "lstm 8 agents": (spec, lstm, 8),
            "lstm 64 agents": (spec, lstm, 64),
            "hopper 1 agent": (BehaviorSpec(((11,),), "continuous", (3,)), hopper, 1)}


def block_us(fn: Any, calls: int) -> float:
    """Mean µs per call of ``fn`` over ``calls`` calls."""
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e6 * (time.perf_counter() - t) / calls


def main_acting(args: argparse.Namespace) -> int:
    from kerasrl.common.policy import ActorCriticPolicy
    from kerasrl.envs.base import StepResult
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.settings import NetworkSettings
    from kerasrl.timers import hierarchical_timer

    print(f"{'policy':16s}{'numpy µs':>10s}{'TF µs':>9s}{'ratio':>8s}{'act call µs':>13s}  (get_action per step; "
          "bare numpy act under the timer)")
    for name, (spec, net, n) in acting_cases().items():
        model = ActorCritic(spec, ["extrinsic"], NetworkSettings(**net), seed=0)
        policies = {mode: ActorCriticPolicy(spec, model, seed=0, inference=mode) for mode in ("numpy", "tf")}
        rng = np.random.default_rng(0)
        obs_size = spec.vector_observation_size
        results = [StepResult(np.arange(n), [rng.normal(size=(n, obs_size)).astype(np.float32)], np.zeros(n, np.float32),
                              np.zeros(n, bool), np.zeros(n, bool)) for _ in range(8)]
        step = {mode: (lambda p=p, results=results: [p.get_action(r) for r in results]) for mode, p in policies.items()}
        mirror, policy = policies["numpy"].numpy_model, policies["numpy"]
        inputs, noise = policy.model_inputs(results[0]), policy.draw_noise(n)

        def act(mirror: Any = mirror, inputs: Any = inputs, noise: Any = noise) -> None:
            with hierarchical_timer("policy.act"):
                mirror.act(inputs, noise)

        for fn in (*step.values(), act):
            fn()  # trace / warm caches
        times: dict[str, list[float]] = {"numpy": [], "tf": [], "act": []}
        for _ in range(args.repeats):
            for mode in ("numpy", "tf"):
                times[mode].append(block_us(step[mode], max(args.calls // 8, 1)) / len(results))
            times["act"].append(block_us(act, args.calls))
        a, b, c = (statistics.median(times[k]) for k in ("numpy", "tf", "act"))
        print(f"{name:16s}{a:10.1f}{b:9.1f}{b / a:7.1f}x{c:13.1f}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=list(kinds()))
    parser.add_argument("--acting", action="store_true", help="time acting (numpy mirror vs compiled TF) instead")
    parser.add_argument("--calls", type=int, default=2000, help="--acting: calls per timed block")
    args = parser.parse_args()
    if args.acting:
        from kerasrl.cli.train import set_tf_threads

        set_tf_threads(1)
        return main_acting(args)
    import tensorflow as tf

    from kerasrl.cli.train import set_tf_threads
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
