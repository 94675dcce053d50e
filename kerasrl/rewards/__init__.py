"""Reward signals: one value head and one GAE stream each.

The model signals (curiosity, GAIL) load TensorFlow; they are imported when first used, so
that ``import kerasrl.rewards`` (and the trainers' imports) stay free of it.
"""
from __future__ import annotations

import importlib
from typing import Any

from kerasrl.rewards.base import RewardSignal, RewardSignalResult
from kerasrl.rewards.extrinsic import ExtrinsicRewardSignal
from kerasrl.rewards.factory import REWARD_SIGNALS, create_reward_signal

_LAZY = {"CuriosityRewardSignal": "kerasrl.rewards.curiosity", "GAILRewardSignal": "kerasrl.rewards.gail"}

__all__ = ["CuriosityRewardSignal", "ExtrinsicRewardSignal", "GAILRewardSignal", "REWARD_SIGNALS", "RewardSignal",
           "RewardSignalResult", "create_reward_signal"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kerasrl.rewards' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
