"""Builds reward signals from their settings."""
from __future__ import annotations

import importlib
from typing import Optional, Union

from kerasrl.exception import TrainerConfigError
from kerasrl.rewards.base import RewardSignal
from kerasrl.rewards.extrinsic import ExtrinsicRewardSignal
from kerasrl.settings import REWARD_SIGNAL_SETTINGS, NetworkSettings, RewardSignalSettings
from kerasrl.spec import BehaviorSpec

#: Signal name → its class, or the ``module:Class`` that holds it (imported when first made:
#: the model signals load TensorFlow).
REWARD_SIGNALS: dict[str, Union[type[RewardSignal], str]] = {
    "extrinsic": ExtrinsicRewardSignal,
    "curiosity": "kerasrl.rewards.curiosity:CuriosityRewardSignal",
    "gail": "kerasrl.rewards.gail:GAILRewardSignal",
    "rnd": "kerasrl.rewards.rnd:RNDRewardSignal",
}


def create_reward_signal(name: str, settings: RewardSignalSettings, spec: Optional[BehaviorSpec] = None,
                         network: Optional[NetworkSettings] = None, seed: int = 0,
                         jit_compile: bool = False) -> RewardSignal:
    """The signal ``name`` (``extrinsic``, ``curiosity``, ``gail`` or ``rnd``) for a behavior of ``spec``.

    ``jit_compile``: XLA for the signal's update (PPO's setting). Settings of the wrong kind for ``name``
    (built by hand) are an error naming both.
    """
    entry = REWARD_SIGNALS.get(name)
    cls: Optional[type[RewardSignal]]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        cls = getattr(importlib.import_module(module), attr)
    else:
        cls = entry
    if cls is None:
        raise TrainerConfigError(f"Unknown reward signal type {name} (known: {', '.join(REWARD_SIGNALS)}).")
    expected = REWARD_SIGNAL_SETTINGS[name]
    if type(settings) is not expected:
        raise TrainerConfigError(f"The reward signal {name} takes {expected.__name__}, got {type(settings).__name__}.")
    return cls(settings, spec, network, seed, jit_compile)
