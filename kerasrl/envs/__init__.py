"""Environment API, built-in environments and env managers."""
from kerasrl.envs.base import (
    ActionType,
    BehaviorSpec,
    Environment,
    EnvironmentException,
    StepResult,
    check_actions,
    concat_vector_observations,
)
from kerasrl.envs.env_manager import ActionInfo, EnvManager, Policy, SimpleEnvManager, StepInfo

__all__ = [
    "ActionInfo", "ActionType", "BehaviorSpec", "EnvManager", "Environment", "EnvironmentException",
    "Policy", "SimpleEnvManager", "StepInfo", "StepResult", "check_actions", "concat_vector_observations",
]
