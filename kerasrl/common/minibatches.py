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
