"""Discounted returns and generalised advantage estimation."""
from __future__ import annotations

import numpy as np

from kerasrl._kernels import gae as _gae


def discount_rewards(r: np.ndarray, gamma: float = 0.99, value_next: float = 0.0) -> np.ndarray:
    """``out[t] = r[t] + γ · out[t+1]`` with ``out[T] = value_next``.

    The recurrence runs on Python floats (a trajectory is at most ``time_horizon`` long), which
    is several times faster than indexing numpy scalars; the result is float32.
    """
    values = np.asarray(r, dtype=np.float64).reshape(-1).tolist()
    running = float(value_next)
    g = float(gamma)
    out = [0.0] * len(values)
    for t in range(len(values) - 1, -1, -1):
        running = running * g + values[t]
        out[t] = running
    return np.asarray(out, dtype=np.float32)


def get_gae(
    rewards: np.ndarray,
    value_estimates: np.ndarray,
    value_next: float = 0.0,
    gamma: float = 0.99,
    lambd: float = 0.95,
) -> np.ndarray:
    """GAE(λ): ``δ_t = r_t + γ V_{t+1} − V_t`` (``V_{T} = value_next``), discounted by ``γλ``."""
    return gae_and_returns(rewards, value_estimates, value_next, gamma, lambd)[0]


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
