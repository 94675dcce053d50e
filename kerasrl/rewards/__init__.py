"""Reward signals: one value head and one GAE stream each."""
from kerasrl.rewards.base import RewardSignal, RewardSignalResult
from kerasrl.rewards.extrinsic import ExtrinsicRewardSignal
from kerasrl.rewards.factory import create_reward_signal

__all__ = ["ExtrinsicRewardSignal", "RewardSignal", "RewardSignalResult", "create_reward_signal"]
