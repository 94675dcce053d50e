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
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.simple import (
    MultiBranchMaskedEnvironment,
    Simple1DEnvironment,
    VisualSimple1DEnvironment,
)

__all__ = [
    "ActionInfo", "ActionType", "BehaviorSpec", "EnvManager", "Environment", "EnvironmentException",
    "GymnasiumEnv", "MultiBranchMaskedEnvironment", "Policy", "Simple1DEnvironment", "SimpleEnvManager",
    "StepInfo", "StepResult", "VisualSimple1DEnvironment", "check_actions", "concat_vector_observations",
]
