"""Typed, frozen trainer settings, built once from an ML-Agents trainer config.

A trainer config is ML-Agents 0.9's YAML: a ``default`` section, per-behavior sections that
override it shallowly (a behavior's ``reward_signals`` replaces the default block whole), and
string aliases (``MyBehavior: OtherSection``). Every flat key of a section belongs to one
typed group: the trainer itself (``trainer``, ``max_steps``, ``time_horizon``, ...), the network
(:class:`NetworkSettings`), the trainer type's hyper-parameters (the settings class it is
registered with in ``registry``: :class:`PPOSettings` for ``ppo``, :class:`SACSettings` for
``sac``, :class:`POCASettings` for ``poca``, ...), the reward signals
(:class:`RewardSignalSettings` and its subclasses) and behavioral cloning
(:class:`BehavioralCloningSettings`). The defaults live in these classes and nowhere else.

Loading is strict: an unknown key names the key, its section and the closest known key; a
wrong type or an out-of-range value names the key and the value; YAML's ``1e-5`` (read as a
string) becomes a number here, once. What a run adds (paths, run id, seed, a ``--steps``
override) is a :class:`RunContext`, kept apart from the hyper-parameters.

The modules, bottom to top: ``checks`` (fields, value checks and conversion), one module per
group (``network``, ``hyperparameters``, ``reward_signals``, ``behavioral_cloning``),
``trainer`` (one section), ``config`` (whole configs), ``run_context`` and ``registry`` (the
registry of trainer types).
"""
from kerasrl.settings.behavioral_cloning import BCTrainerSettings, BehavioralCloningSettings, OfflineBCSettings, OnlineBCSettings
from kerasrl.settings.checks import Check, at_least, one_of, positive, setting, unit_interval
from kerasrl.settings.config import TrainerConfig, load_trainer_config, read_trainer_config, read_yaml, trainer_config_from_dict
from kerasrl.settings.hyperparameters import ADAM_EPSILON_STYLES, ADVANTAGE_NORMALIZATIONS, PPOSettings
from kerasrl.settings.network import (
    ACTIVATIONS,
    CONV_STYLES,
    GAUSSIAN_STYLES,
    INITIALIZERS,
    RECURRENT_STYLES,
    VIS_ENCODE_TYPES,
    NetworkSettings,
)
from kerasrl.settings.poca import POCASettings
from kerasrl.settings.registry import TrainerType, register_trainer_type, trainer_type, trainer_types
from kerasrl.settings.reward_signals import (
    REWARD_SIGNAL_SETTINGS,
    CuriositySettings,
    GAILSettings,
    RewardSignalSettings,
    RNDSettings,
)
from kerasrl.settings.run_context import RunContext
from kerasrl.settings.sac import DTYPE_POLICIES, LEARNING_RATE_SCHEDULES, SACSettings
from kerasrl.settings.self_play import SelfPlaySettings
from kerasrl.settings.trainer import INFERENCE_MODES, Hyperparameters, TrainerSettings, key_groups

__all__ = [
    "ACTIVATIONS", "ADAM_EPSILON_STYLES", "ADVANTAGE_NORMALIZATIONS", "CONV_STYLES",
    "DTYPE_POLICIES", "GAUSSIAN_STYLES", "INFERENCE_MODES", "INITIALIZERS", "LEARNING_RATE_SCHEDULES",
    "RECURRENT_STYLES", "REWARD_SIGNAL_SETTINGS", "VIS_ENCODE_TYPES",
    "BCTrainerSettings", "BehavioralCloningSettings", "Check", "CuriositySettings", "GAILSettings", "Hyperparameters",
    "NetworkSettings", "OfflineBCSettings", "OnlineBCSettings",
    "POCASettings", "PPOSettings", "RewardSignalSettings", "RNDSettings", "RunContext", "SelfPlaySettings", "SACSettings",
    "TrainerConfig", "TrainerSettings", "TrainerType",
    "at_least", "key_groups", "load_trainer_config", "one_of", "positive", "read_trainer_config", "read_yaml",
    "register_trainer_type", "setting", "trainer_config_from_dict", "trainer_type", "trainer_types", "unit_interval",
]
