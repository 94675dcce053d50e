"""Generalised advantage estimation and discounted returns of one trajectory (shared by every
reward signal's value stream)."""
from __future__ import annotations

import numpy as np

from kerasrl._kernels import gae as _gae


def gae_and_returns(
    rewards: np.ndarray,
    value_estimates: np.ndarray,
    value_next: float = 0.0,
    gamma: float = 0.99,
    lambd: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, returns)`` with ``returns = advantages + value_estimates`` (float32), in one
    Cython loop: ``δ_t`` in float32, the ``γλ`` recurrence in float64."""
    rewards = np.ascontiguousarray(rewards, dtype=np.float32).reshape(-1)
    values = np.ascontiguousarray(value_estimates, dtype=np.float32).reshape(-1)
    if rewards.shape != values.shape:
        raise ValueError(f"rewards {rewards.shape} and value_estimates {values.shape} differ in length.")
    advantages = np.empty_like(values)
    returns = np.empty_like(values)
    _gae(rewards, values, float(value_next), float(gamma), float(lambd), advantages, returns)
    return advantages, returns
