"""Recurrent PPO on CartPole without velocities (``MaskedCartPole-v1``, 8 envs): kerasrl against
sb3-contrib ``RecurrentPPO`` over many seeds, with a Mann-Whitney U rank test.

    python benchmarks/lstm_seeds.py --seeds 600-609 --steps 60000 --json ours.json --sb3-json sb3.json

kerasrl's layout (``--layout``):

* ``mlagents`` (the default): a user's ML-Agents config, the Zoo CartPole keys of
  ``cartpole_zoo.yaml`` with ``use_recurrent: true``, ``memory_size: 128``, ``sequence_length: 32``;
* ``sb3``: ``lstm_sb3.yaml`` (RecurrentPPO's network in ML-Agents keys);
* ``mlp-critic``: ``lstm_mlp_critic.yaml`` (the same with a critic without memory and
  RecurrentPPO's mini-batches: ``--peer mlp-critic``'s network and training).

``--set KEY=VALUE`` overrides a trainer key of the layout (YAML value), e.g. ``--set
memory_size=256``. RecurrentPPO (``--peer``) runs the Zoo CartPole hyper-parameters with one of three networks:

* ``bench`` (the default): ``bench_ppo.py --task lstm``'s (64-unit actor and critic LSTMs on the
  observations, then 64 tanh units);
* ``zoo``: the RL Zoo's exact ``CartPoleNoVel-v1`` entry, RecurrentPPO's default network (a
  256-unit actor LSTM, a critic LSTM of its own, 64×64 tanh layers after each);
* ``mlp-critic``: a 64-unit actor LSTM and a critic without memory (64 tanh units on the
  observation alone).
The final return is the mean of the last 100 episodes. Results are written to the JSON files
(``{seed: return}``) after every run and read back at the start, so that an interrupted
comparison resumes where it stopped (``--sb3-json`` can be shared by comparisons of several
kerasrl variants). The U test is two-sided (``pendulum_seeds.mann_whitney_u``).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_ppo  # noqa: E402
import bench_tasks  # noqa: E402
from bench_tasks import TASKS  # noqa: E402
from pendulum_seeds import mann_whitney_u, run_seeds  # noqa: E402
from seed_args import parse_overrides, parse_seeds  # noqa: E402

#: The ML-Agents layout of the issue: cartpole_zoo's keys with an LSTM.
MLAGENTS_LAYOUT = {"use_recurrent": True, "memory_size": 128, "sequence_length": 32}


def kerasrl_task(layout: str, overrides: dict[str, Any]) -> Any:
    """``bench_ppo``'s ``lstm`` task with the kerasrl config of ``layout`` and ``overrides``."""
    task = TASKS["lstm"]
    if layout == "mlagents":
        return dataclasses.replace(task, config="cartpole_zoo", overrides={**MLAGENTS_LAYOUT, **overrides})
    if layout == "mlp-critic":
        return dataclasses.replace(task, config="lstm_mlp_critic", overrides=dict(overrides))
    return dataclasses.replace(task, overrides=dict(overrides))


def _peer_zoo() -> dict[str, Any]:
    return bench_tasks._zoo_cartpole()


def _peer_mlp_critic() -> dict[str, Any]:
    import torch

    return dict(**bench_tasks._zoo_cartpole(), policy_kwargs={
        "lstm_hidden_size": 64, "enable_critic_lstm": False, "net_arch": {"pi": [64], "vf": [64]},
        "activation_fn": torch.nn.Tanh})


def torch_lstm_init() -> None:
    """An experiment (``--torch-lstm-init``): kerasrl's LSTMs start as PyTorch's do (every kernel
    entry uniform in ±1/√units; the bias the sum of two such draws, as PyTorch's two biases; no
    forget-gate bias of 1) instead of Keras's (Glorot-uniform input kernel, orthogonal recurrent
    kernel, zero bias with the forget gate's at 1). ``benchmarks/lstm_init_swap.py`` finds the
    starting network where RecurrentPPO's and kerasrl's runs differ."""
    import keras

    lstm = keras.layers.LSTM

    def patched(units: int, *args: Any, **kwargs: Any) -> Any:
        seed = getattr(kwargs.get("kernel_initializer"), "seed", None)
        limit = units ** -0.5

        def uniform(offset: int) -> Any:
            return keras.initializers.RandomUniform(-limit, limit, seed=None if seed is None else seed + offset)

        def two_biases(shape: Any, dtype: Any = None) -> Any:
            return uniform(11)(shape, dtype) + uniform(13)(shape, dtype)

        kwargs.update(kernel_initializer=uniform(5), recurrent_initializer=uniform(7), bias_initializer=two_biases,
                      unit_forget_bias=False)
        return lstm(units, *args, **kwargs)

    keras.layers.LSTM = patched


def doubled_lstm_bias() -> None:
    """An experiment (``--doubled-lstm-bias``): each optimizer step moves kerasrl's LSTM biases
    twice as far, as PyTorch's LSTM's two biases move together (the same gradient reaches both,
    and Adam steps each by the same amount). A constraint, applied after every step, doubles the
    step; it is attached to each LSTM of the trainer's model once the trainer is built."""
    import keras
    import tensorflow as tf

    from kerasrl.ppo.trainer import PPOTrainer

    class DoubleStep(keras.constraints.Constraint):
        def __init__(self, variable: Any) -> None:
            self.before = tf.Variable(variable.numpy(), trainable=False)

        def __call__(self, value: Any) -> Any:
            doubled = self.before + 2.0 * (value - self.before)
            self.before.assign(doubled)
            return doubled

    init = PPOTrainer.__init__

    def patched(self: PPOTrainer, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        lstms = [layer for layer in self.learner.actor_critic._flatten_layers() if isinstance(layer, keras.layers.LSTM)]
        assert lstms, "no LSTM in the model"
        for lstm in lstms:
            lstm.cell.bias.constraint = DoubleStep(lstm.cell.bias)

    PPOTrainer.__init__ = patched  # type: ignore[method-assign]


#: RecurrentPPO's network for each ``--peer`` (None: the benchmark task's own).
PEERS = {"bench": None, "zoo": _peer_zoo, "mlp-critic": _peer_mlp_critic}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="600-609", help="a range (600-609) or a list (1,5,9)")
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--layout", choices=("mlagents", "sb3", "mlp-critic"), default="mlagents")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a trainer key of the layout, e.g. --set memory_size=256")
    parser.add_argument("--json", default="lstm_kerasrl.json", help="kerasrl's {seed: return}")
    parser.add_argument("--sb3-json", default="lstm_sb3.json", help="RecurrentPPO's {seed: return}")
    parser.add_argument("--peer", choices=tuple(PEERS), default="bench", help="RecurrentPPO's network")
    parser.add_argument("--curves", default=None, metavar="FILE",
                        help="append every run's learning curve to this CSV (benchmarks/plot_curves.py draws it)")
    parser.add_argument("--only", choices=("kerasrl", "sb3"), default=None, help="run one library only")
    parser.add_argument("--torch-lstm-init", action="store_true",
                        help="an experiment: kerasrl's LSTMs start as PyTorch's (torch_lstm_init)")
    parser.add_argument("--doubled-lstm-bias", action="store_true",
                        help="an experiment: kerasrl's LSTM bias moves as PyTorch's two do (doubled_lstm_bias)")
    args = parser.parse_args()
    if args.torch_lstm_init:
        torch_lstm_init()
    if args.doubled_lstm_bias:
        doubled_lstm_bias()

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    task = kerasrl_task(args.layout, parse_overrides(args.set))
    if PEERS[args.peer] is not None:
        task = dataclasses.replace(task, sb3_kwargs=PEERS[args.peer])
    bench_ppo.TARGET = task.threshold
    seeds = parse_seeds(args.seeds)
    curves = bench_ppo.CurveWriter(args.curves, task.env_id, f"lstm, peer {args.peer}") if args.curves else None
    peer = "RecurrentPPO" if args.peer == "bench" else f"RecurrentPPO-{args.peer}"
    ours, theirs = run_seeds(task, seeds, args.steps, (args.json, args.sb3_json), peer, args.only, curves)
    a = [ours[str(s)] for s in seeds if str(s) in ours]
    b = [theirs[str(s)] for s in seeds if str(s) in theirs]
    if a and b:
        u, p = mann_whitney_u(a, b)
        ahead = sum(ours[str(s)] > theirs[str(s)] for s in seeds if str(s) in ours and str(s) in theirs)
        print(f"{len(seeds)} seeds, {args.steps} steps: median kerasrl {statistics.median(a):.1f}, RecurrentPPO "
              f"{statistics.median(b):.1f}; kerasrl ahead on {ahead} paired seeds; Mann-Whitney U = {u:.1f} "
              f"(of {len(a) * len(b)}), two-sided p = {p:.3f}")
    elif a:
        print(f"{len(a)} seeds, {args.steps} steps: median kerasrl {statistics.median(a):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
