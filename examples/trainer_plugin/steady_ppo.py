"""A kerasrl trainer type from outside kerasrl: ``steady_ppo``, PPO with constant schedules.

kerasrl's PPO decays its learning rate, clip range and entropy bonus linearly over ``max_steps``,
as ML-Agents does; Stable-Baselines3 keeps them constant. This plugin registers PPO under a second
name whose defaults keep all three constant, so a config says ``trainer: steady_ppo`` instead of
four keys in every section. kerasrl finds it through the ``kerasrl.trainer_type`` entry point in
this folder's ``pyproject.toml``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kerasrl.ppo.trainer import PPOTrainer
from kerasrl.settings import LEARNING_RATE_SCHEDULES, PPOSettings, at_least, one_of, setting


@dataclass(frozen=True, kw_only=True)
class SteadyPPOSettings(PPOSettings):
    """PPO's hyper-parameters with constant schedules by default: the learning rate, the clip
    range and the entropy bonus stay where they start unless a config sets where they end."""

    learning_rate_schedule: str = setting("constant", one_of(*LEARNING_RATE_SCHEDULES),
                                          "constant (this type's default), or linear decay to 1e-10 at max_steps")
    beta_end: Optional[float] = setting(None, at_least(0.0), "where the entropy bonus decays to (default: beta)")
    epsilon_end: Optional[float] = setting(None, at_least(0.0), "where the clip range decays to (default: epsilon)")

    def _check(self) -> None:
        if self.beta_end is None:
            object.__setattr__(self, "beta_end", self.beta)
        if self.epsilon_end is None:
            object.__setattr__(self, "epsilon_end", self.epsilon)
        super()._check()


class SteadyPPOTrainer(PPOTrainer):
    """PPO's trainer; only the settings differ (a trainer may override any hook of PPOTrainer)."""


def trainer_types() -> tuple[dict[str, type], dict[str, type]]:
    """The entry point: ``({name: trainer class}, {name: settings class})``."""
    return {"steady_ppo": SteadyPPOTrainer}, {"steady_ppo": SteadyPPOSettings}
