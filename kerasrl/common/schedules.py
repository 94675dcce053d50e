"""Linear decays of on-policy hyper-parameters over ``max_steps`` (TF ``polynomial_decay``, power
1), shared by PPO and MA-POCA, whose settings name them alike."""
from __future__ import annotations

from typing import Any

#: Where ``learning_rate_schedule: linear`` decays the learning rate to.
LR_END = 1e-10


def linear_decay(initial: float, end: float, step: float, max_steps: float) -> float:
    """``(initial − end) · (1 − min(step, max_steps) / max_steps) + end``."""
    if max_steps <= 0:
        return float(end)
    frac = 1.0 - min(max(float(step), 0.0), float(max_steps)) / float(max_steps)
    return (float(initial) - float(end)) * frac + float(end)


def decayed_hyperparameters(settings: Any, step: float, max_steps: float) -> dict[str, float]:
    """Current learning rate, clip epsilon and entropy coefficient at ``step`` of settings with
    ``learning_rate``, ``learning_rate_schedule``, ``epsilon``, ``epsilon_end``, ``beta`` and ``beta_end``.

    The learning rate decays to 1e-10 (``learning_rate_schedule: linear``) or stays (``constant``);
    the clip range decays to ``epsilon_end`` (ML-Agents: 0.1; RL-Zoo configs: 0), the entropy
    bonus to ``beta_end`` (ML-Agents: 1e-5; SB3: constant).
    """
    return {
        "learning_rate": (settings.learning_rate if settings.learning_rate_schedule == "constant"
                          else linear_decay(settings.learning_rate, LR_END, step, max_steps)),
        "epsilon": linear_decay(settings.epsilon, settings.epsilon_end, step, max_steps),
        "beta": linear_decay(settings.beta, settings.beta_end, step, max_steps),
    }
