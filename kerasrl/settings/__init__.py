"""Typed, frozen trainer settings, built once from an ML-Agents trainer config.

A trainer config is ML-Agents 0.9's YAML: a ``default`` section, per-behavior sections that
override it shallowly (a behavior's ``reward_signals`` replaces the default block whole), and
string aliases (``MyBehavior: OtherSection``). Every flat key of a section belongs to one
typed group: the trainer itself (``trainer``, ``max_steps``, ``time_horizon``, ...), the network
(:class:`NetworkSettings`), the PPO hyper-parameters (:class:`PPOSettings`), the SAC ones
(:class:`SACSettings`, ``trainer: sac``), the reward signals
(:class:`RewardSignalSettings` and its subclasses) and behavioral cloning
(:class:`BehavioralCloningSettings`). The defaults live in these classes and nowhere else.

Loading is strict: an unknown key names the key, its section and the closest known key; a
wrong type or an out-of-range value names the key and the value; YAML's ``1e-5`` (read as a
string) becomes a number here, once. What a run adds (paths, run id, seed, a ``--steps``
override) is a :class:`RunContext`, kept apart from the hyper-parameters.

The modules, bottom to top: ``checks`` (fields, value checks and conversion), one module per
group (``network``, ``hyperparameters``, ``reward_signals``, ``behavioral_cloning``),
``trainer`` (one section), ``config`` (whole configs) and ``run_context``.
"""
from kerasrl.settings.behavioral_cloning import BCTrainerSettings, BehavioralCloningSettings
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
from kerasrl.settings.reward_signals import (
    REWARD_SIGNAL_SETTINGS,
    CuriositySettings,
    GAILSettings,
    RewardSignalSettings,
)
from kerasrl.settings.run_context import RunContext
from kerasrl.settings.sac import DTYPE_POLICIES, LEARNING_RATE_SCHEDULES, SACSettings
from kerasrl.settings.trainer import (
    BC_TRAINER_REQUIRED_KEYS,
    INFERENCE_MODES,
    KEY_GROUPS,
    TRAINER_TYPES,
    TrainerSettings,
)

__all__ = [
    "ACTIVATIONS", "ADAM_EPSILON_STYLES", "ADVANTAGE_NORMALIZATIONS", "BC_TRAINER_REQUIRED_KEYS", "CONV_STYLES",
    "DTYPE_POLICIES", "GAUSSIAN_STYLES", "INFERENCE_MODES", "INITIALIZERS", "KEY_GROUPS", "LEARNING_RATE_SCHEDULES",
    "RECURRENT_STYLES",
    "REWARD_SIGNAL_SETTINGS", "TRAINER_TYPES", "VIS_ENCODE_TYPES",
    "BCTrainerSettings", "BehavioralCloningSettings", "Check", "CuriositySettings", "GAILSettings", "NetworkSettings",
    "PPOSettings", "RewardSignalSettings", "RunContext", "SACSettings", "TrainerConfig", "TrainerSettings",
    "at_least", "load_trainer_config", "one_of", "positive", "read_trainer_config", "read_yaml", "setting",
    "trainer_config_from_dict", "unit_interval",
]
