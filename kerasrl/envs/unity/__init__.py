"""Unity scenes (players built with the ML-Agents package, or the Editor) as kerasrl environments."""
from kerasrl.envs.unity.communicator import UnityCommunicationError, find_player
from kerasrl.envs.unity.environment import (
    COMMUNICATION_VERSION,
    EDITOR_PORT,
    PLAYER_PORT,
    UnityEnvironment,
    behavior_config_name,
)
from kerasrl.envs.unity.side_channels import (
    EngineConfig,
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    IncomingMessage,
    OutgoingMessage,
    SideChannel,
    StatsAggregation,
    StatsSideChannel,
)

__all__ = [
    "COMMUNICATION_VERSION", "EDITOR_PORT", "EngineConfig", "EngineConfigurationChannel", "EnvironmentParametersChannel",
    "IncomingMessage", "OutgoingMessage", "PLAYER_PORT", "SideChannel", "StatsAggregation", "StatsSideChannel",
    "UnityCommunicationError", "UnityEnvironment", "behavior_config_name", "find_player",
]
