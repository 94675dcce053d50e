"""Linear decays of the PPO hyper-parameters over ``max_steps`` (TF ``polynomial_decay``, power 1),
written once in :mod:`kerasrl.common.schedules`: the names PPO's users and tests import. The
learner calls ``decayed_hyperparameters`` itself, so that a value such as ``epsilon`` keeps its
name from the settings to the loss through as few files as possible."""
from __future__ import annotations

from kerasrl.common.schedules import LR_END, decayed_hyperparameters, linear_decay
from kerasrl.settings import PPOSettings

__all__ = ["BETA_END", "LR_END", "linear_decay", "ppo_schedules"]

BETA_END = PPOSettings.beta_end  # ML-Agents 0.9's


def ppo_schedules(settings: PPOSettings, step: float, max_steps: float) -> dict[str, float]:
    """Current learning rate, clip epsilon and entropy coefficient at ``step``
    (:func:`kerasrl.common.schedules.decayed_hyperparameters`)."""
    return decayed_hyperparameters(settings, step, max_steps)
