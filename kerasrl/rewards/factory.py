"""Builds reward signals from their settings."""
from __future__ import annotations

from kerasrl.exception import TrainerConfigError
from kerasrl.rewards.base import RewardSignal
from kerasrl.rewards.extrinsic import ExtrinsicRewardSignal
from kerasrl.settings import REWARD_SIGNAL_SETTINGS, RewardSignalSettings

REWARD_SIGNALS: dict[str, type[RewardSignal]] = {"extrinsic": ExtrinsicRewardSignal}


def create_reward_signal(name: str, settings: RewardSignalSettings) -> RewardSignal:
    cls = REWARD_SIGNALS.get(name)
    if cls is None:
        if name in REWARD_SIGNAL_SETTINGS:
            raise TrainerConfigError(
                f"The reward signal {name} is not available in this version of kerasrl "
                f"(available: {', '.join(REWARD_SIGNALS)}).")
        raise TrainerConfigError(f"Unknown reward signal type {name}")
    return cls(settings)
