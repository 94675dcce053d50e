"""kerasrl: the Unity ML-Agents trainer stack (PPO, SAC, MA-POCA, reward signals, BC) on TensorFlow 2 and Keras 3.

The names a user needs are importable from here; TensorFlow is imported only when a name
that needs it is first used (``import kerasrl`` stays fast), with its start-up chatter kept off
stderr as the command line keeps it (``TF_CPP_MIN_LOG_LEVEL`` 3 unless the user set it)::

    import kerasrl

    env = kerasrl.SimpleEnvManager(kerasrl.GymnasiumEnv("CartPole-v1", num_envs=8, seed=0))
    context = kerasrl.RunContext.in_results_dir("results", "cartpole", seed=0)
    trainers = kerasrl.create_trainers("kerasrl/configs/cartpole_zoo.yaml", env.behavior_specs, context)
    kerasrl.TrainerController(trainers, context.model_path, context.summaries_dir, "cartpole",
                              save_freq=50_000).start_learning(env)
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

from kerasrl.tf_startup import quiet_tensorflow, tensorflow_start_up_hidden

__version__ = "0.1.0"

_EXPORTS = {
    "kerasrl.spec": ("ActionType", "BehaviorSpec"),
    "kerasrl.fields": ("Field",),
    "kerasrl.exception": ("EnvironmentException", "TrainerConfigError", "TrainerError", "UnityTrainerException"),
    "kerasrl.settings": (
        "BehavioralCloningSettings", "NetworkSettings", "POCASettings",
        "PPOSettings", "RewardSignalSettings", "RunContext", "SACSettings",
        "TrainerConfig", "TrainerSettings", "TrainerType", "load_trainer_config", "register_trainer_type",
        "trainer_types",
    ),
    "kerasrl.envs": (
        "EnvManager", "Environment", "GymnasiumEnv", "MultiBranchMaskedEnvironment", "Simple1DEnvironment",
        "SimpleEnvManager", "StepResult", "SubprocessEnvManager", "VisualSimple1DEnvironment",
    ),
    "kerasrl.buffer": ("AgentBuffer", "Buffer"),
    "kerasrl.trainers": ("TrainerController", "create_trainer", "create_trainers", "initialize_trainers"),
    "kerasrl.ppo.trainer": ("PPOTrainer",),
    "kerasrl.sac.trainer": ("SACTrainer",),
    "kerasrl.poca.trainer": ("POCATrainer",),
    "kerasrl.timers": ("hierarchical_timer", "set_gauge"),
    "kerasrl.api": ("PPO", "SAC", "POCA", "load"),
    "kerasrl.distribute": ("get_strategy",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'kerasrl' has no attribute {name!r}")
    if "tensorflow" not in sys.modules:  # TensorFlow's start-up chatter off, as for the command line
        quiet_tensorflow(debug=False)
    with tensorflow_start_up_hidden(debug=False):
        loaded = importlib.import_module(module)
    value = getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*__all__, "__version__"]
