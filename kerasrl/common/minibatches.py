"""The order in which an update visits its mini-batches, shared by every learner and driver."""
from __future__ import annotations

import numpy as np


def minibatch_plan(num_sequences: int, sequences_per_batch: int, num_epoch: int, seed: int) -> np.ndarray:
    """Sequence indices of every mini-batch of an update: ``[num_epoch, n_batches, sequences_per_batch]``.

    Each epoch is a fresh permutation of the whole sequences (seeded); the trailing partial
    mini-batch is dropped (ML-Agents after #2362). Both drivers follow the same plan.
    """
    n = int(num_sequences)
    spb = min(max(int(sequences_per_batch), 1), max(n, 1))
    n_batches = max(n // spb, 1)
    rng = np.random.Generator(np.random.PCG64([int(seed) & 0xFFFFFFFF, 0x5EED]))
    perms = rng.permuted(np.broadcast_to(np.arange(n, dtype=np.int64), (int(num_epoch), n)), axis=1)
    return perms[:, : n_batches * spb].reshape(int(num_epoch), n_batches, spb)


def step_counted_plan(num_sequences: int, steps: int, batch_size: int, sequence_length: int, num_epoch: int,
                      seed: int) -> np.ndarray:
    """Sequence indices of every mini-batch when ``batch_size`` counts agent steps rather than
    padded rows (sb3-contrib's RecurrentPPO): each epoch visits every sequence, in
    ``ceil(steps / batch_size)`` mini-batches of a fresh permutation. Mini-batches are padded
    with index ``num_sequences`` (the caller's masked sequence) to a width that is a multiple
    of ``batch_size / sequence_length``, so that updates of a few sequences more or fewer share
    one compiled shape: ``[num_epoch, n_batches, width]``."""
    n = int(num_sequences)
    base = max(int(batch_size) // int(sequence_length), 1)
    n_batches = min(max(-(-int(steps) // int(batch_size)), 1), max(n, 1))
    width = -(-max(-(-n // n_batches), 1) // base) * base
    rng = np.random.Generator(np.random.PCG64([int(seed) & 0xFFFFFFFF, 0x5EED]))
    perms = rng.permuted(np.broadcast_to(np.arange(n, dtype=np.int64), (int(num_epoch), n)), axis=1)
    plan = np.full((int(num_epoch), n_batches, width), n, np.int64)
    for b, chunk in enumerate(np.array_split(np.arange(n), n_batches)):
        plan[:, b, : len(chunk)] = perms[:, chunk]
    return plan
