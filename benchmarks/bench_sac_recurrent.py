"""Recurrent SAC's update cost: gradient steps/s of one compiled call, against feed-forward SAC on
the same ``batch_size`` rows, in one process, alternating, medians over ``--repeats``.

Variants: ``feed-forward``, with and without XLA (``jit_compile``); recurrent without XLA, its
LSTMs ``looped`` (a while loop over the steps) or ``unrolled`` (kerasrl's choice without XLA up to
``sequence_length`` 16); ``recurrent xla`` (kerasrl's default: XLA, the LSTMs looped). Every
recurrent mini-batch is ``batch_size // sequence_length`` sequences drawn from a replay of
50-step episodes, with the critics' burn-in; the feed-forward one holds the same number of rows.
Printed: each run's steps/s (and its first call's seconds, tracing included), then the medians
and their cost relative to ``feed-forward``.

    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_sac_recurrent.py --repeats 3
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import kerasrl.sac.networks as sac_networks
from kerasrl.fields import Field
from kerasrl.sac.learner import NEXT_NOISE, NOISE, REWARDS, SACLearner
from kerasrl.sac.replay import ReplayBuffer
from kerasrl.settings import TrainerSettings
from kerasrl.spec import BehaviorSpec

SPEC = BehaviorSpec(((8,),), "continuous", (2,))
VARIANTS = ("feed-forward", "feed-forward xla", "looped", "unrolled", "recurrent xla")


def replay_of_episodes(rng: np.random.Generator, memory_size: int, episodes: int = 200, length: int = 50) -> ReplayBuffer:
    replay = ReplayBuffer(episodes * length, sequences=True)
    for _ in range(episodes):
        done = np.zeros(length, bool)
        done[-1] = True
        replay.add({Field.VECTOR_OBS: rng.standard_normal((length, 8), np.float32),
                    Field.NEXT_VECTOR_OBS: rng.standard_normal((length, 8), np.float32),
                    Field.ACTIONS: rng.uniform(-1, 1, (length, 2)).astype(np.float32),
                    REWARDS: rng.standard_normal((length, 1), np.float32), Field.TERMINATED: done.astype(np.float32),
                    Field.DONE: done, Field.MEMORY: rng.standard_normal((length, memory_size), np.float32)}, agent=0)
    return replay


def batches(args: argparse.Namespace) -> dict[bool, dict[str, np.ndarray]]:
    """One call's mini-batches: of sequences (recurrent) and of as many rows (feed-forward)."""
    rng = np.random.default_rng(0)
    length = args.sequence_length
    sequences = replay_of_episodes(rng, args.memory_size).sample_sequences(
        rng, (args.steps, args.batch_size // length), length, length, first_only=(Field.MEMORY,),
        burn_in_fields=(Field.VECTOR_OBS,))
    rows = (args.steps, (args.batch_size // length) * length)
    flat = {k: rng.standard_normal((*rows, *sequences[k].shape[3:]), np.float32)
            for k in (Field.VECTOR_OBS, Field.NEXT_VECTOR_OBS, Field.ACTIONS, REWARDS)}
    flat[Field.TERMINATED] = np.zeros(rows, np.float32)
    for b in (sequences, flat):
        shape = b[Field.TERMINATED].shape
        b[NOISE] = rng.standard_normal((*shape, 2), np.float32)
        b[NEXT_NOISE] = rng.standard_normal((*shape, 2), np.float32)
    return {True: sequences, False: flat}


def learner_kind(variant: str, settings: TrainerSettings) -> bool:
    """The variant is what the networks and the learner will build."""
    xla = sac_networks.update_uses_xla(settings.hyperparameters, settings.network.use_recurrent, 1)
    unroll = settings.network.use_recurrent and not xla and variant == "unrolled"
    return xla == variant.endswith("xla") and unroll == (variant == "unrolled")


def rate(variant: str, args: argparse.Namespace, data: dict[bool, dict[str, np.ndarray]]) -> tuple[float, float]:
    """Gradient steps/s of the variant (median of 3 calls) and its first call's seconds."""
    recurrent = not variant.startswith("feed-forward")
    sac_networks.UNROLL_SEQUENCE_LENGTH = 0 if variant == "looped" else 16
    settings = TrainerSettings.from_dict({
        "trainer": "sac", "batch_size": args.batch_size, "hidden_units": args.hidden_units, "num_layers": 2,
        "use_recurrent": recurrent, "memory_size": args.memory_size, "sequence_length": args.sequence_length,
        "jit_compile": variant.endswith("xla")})
    assert learner_kind(variant, settings), variant
    learner = SACLearner.for_behavior(SPEC, settings, seed=0, max_steps=100)
    batch = data[recurrent]
    start = time.perf_counter()
    learner.update(batch, args.steps, 1e-4)
    first = time.perf_counter() - start
    times = []
    for _ in range(3):
        start = time.perf_counter()
        learner.update(batch, args.steps, 1e-4)
        times.append(time.perf_counter() - start)
    return args.steps / statistics.median(times), first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=128, help="gradient steps per compiled call")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--sequence-length", type=int, default=8)
    parser.add_argument("--memory-size", type=int, default=64)
    parser.add_argument("--hidden-units", type=int, default=64)
    args = parser.parse_args()
    data = batches(args)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for repeat in range(args.repeats):
        for variant in VARIANTS:
            steps_per_s, first = rate(variant, args, data)
            rates[variant].append(steps_per_s)
            print(f"{repeat} {variant:>16}: {steps_per_s:7.1f} gradient steps/s (first call {first:.1f} s)", flush=True)
    reference = statistics.median(rates["feed-forward"])
    for variant, values in rates.items():
        median = statistics.median(values)
        print(f"median {variant:>16}: {median:7.1f} gradient steps/s, {reference / median:5.2f}x feed-forward's cost")


if __name__ == "__main__":
    main()
