"""Generalised advantage estimation and discounted returns of one trajectory (shared by every
reward signal's value stream)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from kerasrl._kernels import gae as _gae
from kerasrl._kernels import gae_segments as _gae_segments


def gae_and_returns(
    rewards: np.ndarray,
    value_estimates: np.ndarray,
    value_next: float = 0.0,
    gamma: float = 0.99,
    lambd: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, returns)`` with ``returns = advantages + value_estimates`` (float32), in one
    Cython loop: ``δ_t`` in float32, the ``γλ`` recurrence in float64."""
    rewards, values, advantages, returns = _arrays(rewards, value_estimates)
    _gae(rewards, values, float(value_next), float(gamma), float(lambd), advantages, returns)
    return advantages, returns


def segmented_gae_and_returns(
    rewards: np.ndarray,
    value_estimates: np.ndarray,
    ends: Sequence[int],
    values_next: Sequence[float],
    gamma: float = 0.99,
    lambd: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gae_and_returns` of consecutive trajectories in one Cython call: trajectory ``i``
    is rows ``[ends[i-1], ends[i])`` (from 0) and is bootstrapped from ``values_next[i]``."""
    rewards, values, advantages, returns = _arrays(rewards, value_estimates)
    _gae_segments(rewards, values, np.asarray(ends, np.int64), np.asarray(values_next, np.float64), float(gamma),
                  float(lambd), advantages, returns)
    return advantages, returns


def _arrays(rewards: np.ndarray, value_estimates: np.ndarray) -> tuple[np.ndarray, ...]:
    """The kernels' inputs (contiguous float32 rows of one length) and their two outputs."""
    rewards = np.ascontiguousarray(rewards, dtype=np.float32).reshape(-1)
    values = np.ascontiguousarray(value_estimates, dtype=np.float32).reshape(-1)
    if rewards.shape != values.shape:
        raise ValueError(f"rewards {rewards.shape} and value_estimates {values.shape} differ in length.")
    return rewards, values, np.empty_like(values), np.empty_like(values)
