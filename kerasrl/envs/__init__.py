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
from kerasrl.envs.groups import GroupSimple1DEnvironment
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.lock import COMBINATION_LOCK, CombinationLock  # also registers CombinationLock-v0
from kerasrl.envs.ray_env_manager import RayEnvManager  # Ray itself is imported when one is made
from kerasrl.envs.simple import (
    MultiBranchMaskedEnvironment,
    Simple1DEnvironment,
    VisualSimple1DEnvironment,
)
from kerasrl.envs.slow import SLOW_CARTPOLE, SlowEnvironment, SlowStep  # also registers SlowCartPole-v1
from kerasrl.envs.subprocess_env_manager import GymnasiumEnvFactory, SubprocessEnvManager

__all__ = [
    "ActionInfo", "ActionType", "BehaviorSpec", "COMBINATION_LOCK", "CombinationLock", "EnvManager", "Environment",
    "EnvironmentException", "GroupSimple1DEnvironment", "GymnasiumEnv", "GymnasiumEnvFactory",
    "MultiBranchMaskedEnvironment", "Policy",
    "RayEnvManager", "SLOW_CARTPOLE", "Simple1DEnvironment", "SimpleEnvManager", "SlowEnvironment", "SlowStep",
    "StepInfo", "StepResult", "SubprocessEnvManager", "VisualSimple1DEnvironment", "check_actions",
    "concat_vector_observations",
]
