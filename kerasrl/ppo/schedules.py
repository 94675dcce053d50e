"""Linear decays of the PPO hyper-parameters over ``max_steps`` (TF ``polynomial_decay``, power 1)."""
from __future__ import annotations

LR_END = 1e-10
EPSILON_END = 0.1
BETA_END = 1e-5


def linear_decay(initial: float, end: float, step: float, max_steps: float) -> float:
    """``(initial − end) · (1 − min(step, max_steps) / max_steps) + end``."""
    if max_steps <= 0:
        return float(end)
    frac = 1.0 - min(max(float(step), 0.0), float(max_steps)) / float(max_steps)
    return (float(initial) - float(end)) * frac + float(end)


def ppo_schedules(learning_rate: float, epsilon: float, beta: float, step: float, max_steps: float,
                  epsilon_end: float = EPSILON_END) -> dict[str, float]:
    """Current learning rate, clip epsilon and entropy coefficient at ``step``.

    ``epsilon_end`` is ML-Agents' 0.1 by default; RL-Zoo configs decay the clip range to 0.
    """
    return {
        "learning_rate": linear_decay(learning_rate, LR_END, step, max_steps),
        "epsilon": linear_decay(epsilon, epsilon_end, step, max_steps),
        "beta": linear_decay(beta, BETA_END, step, max_steps),
    }
