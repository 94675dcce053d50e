"""Small numpy helpers shared by the acting and collecting code."""
from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=64)
def shared_ones(*shape: int) -> np.ndarray:
    """A shared read-only float32 array of ones (all-allowed action masks, the ``masks`` field):
    one allocation per shape instead of one per step. Callers only read it (the buffer copies)."""
    arr = np.ones(shape, np.float32)
    arr.flags.writeable = False
    return arr
