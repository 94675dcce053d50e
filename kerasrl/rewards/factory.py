"""Builds reward signals from a trainer's ``reward_signals`` config block."""
from __future__ import annotations

from typing import Any

from kerasrl.exception import TrainerConfigError
from kerasrl.rewards.base import RewardSignal
from kerasrl.rewards.extrinsic import ExtrinsicRewardSignal

REWARD_SIGNALS: dict[str, type[RewardSignal]] = {"extrinsic": ExtrinsicRewardSignal}


def create_reward_signal(name: str, config: dict[str, Any]) -> RewardSignal:
    cls = REWARD_SIGNALS.get(name)
    if cls is None:
        raise TrainerConfigError(f"Unknown reward signal type {name}")
    if not isinstance(config, dict):
        raise TrainerConfigError(f"The reward signal {name} must be a mapping of hyper-parameters, got {config!r}.")
    cls.check_config(name, config)
    return cls(**config)
