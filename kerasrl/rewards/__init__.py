"""Reward signals: one value head and one GAE stream each."""
from kerasrl.rewards.base import RewardSignal, RewardSignalResult
from kerasrl.rewards.curiosity import CuriosityRewardSignal
from kerasrl.rewards.extrinsic import ExtrinsicRewardSignal
from kerasrl.rewards.factory import REWARD_SIGNALS, create_reward_signal
from kerasrl.rewards.gail import GAILRewardSignal

__all__ = ["CuriosityRewardSignal", "ExtrinsicRewardSignal", "GAILRewardSignal", "REWARD_SIGNALS", "RewardSignal",
           "RewardSignalResult", "create_reward_signal"]
