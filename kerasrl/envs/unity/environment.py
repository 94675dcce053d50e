"""A Unity scene (a player built with the ML-Agents package, or the Editor) as a kerasrl environment.

kerasrl listens on ``base_port + worker_id`` (5005 for players, 5004 for the Editor) and the
player connects. The handshake checks that both sides speak the same major version of the
Communication API (kerasrl speaks 1.5.0, as ML-Agents package 2.x and 3.x) and tells the player
the seed. Behaviors and their specs come from the player's behavior parameters and its first
agent infos; a behavior keeps its full name (``Striker?team=1``), the config section it trains
with drops the team suffix.

Steps. The player sends the agents that ended an episode (``done``; ``max_step_reached``
means truncated) and those asking for a decision, in one message; an agent can be in both
(its last step and the first of its next episode). kerasrl reports the ended one with its final
observation, and keeps its new decision: the next :meth:`UnityEnvironment.step` then reports
only those agents (reward 0, their first observation) without talking to the player, so that
their first action is chosen from what they see; the step after sends every agent's action.
Actions go back in the order the player listed the deciding agents.

Groups. An agent's ``group_id`` (0: in no group) and ``group_reward`` (its
``SimpleMultiAgentGroup``'s reward) become the step result's ``group_id`` and ``group_reward``
once one of the behavior's agents has been in a group (``None`` before, as for a scene without
groups).
"""
from __future__ import annotations

import logging
import os
import uuid
import weakref
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from kerasrl.demo_format._common import Corrupt
from kerasrl.demo_format.layout import behavior_spec_of
from kerasrl.envs.base import BehaviorSpec, Environment, EnvironmentException, StepResult, check_actions
from kerasrl.envs.unity.communicator import Communicator, PlayerProcess, UnityCommunicationError, describe_player
from kerasrl.envs.unity.observations import action_masks, observation_arrays
from kerasrl.envs.unity.side_channels import (
    EngineConfig,
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    SideChannel,
    StatsAggregation,
    StatsSideChannel,
    decode_side_channels,
    encode_side_channels,
)
from kerasrl.protos import unity_protocol_pb2 as pb
from kerasrl.timers import hierarchical_timer

__all__ = ["COMMUNICATION_VERSION", "EDITOR_PORT", "PLAYER_PORT", "UnityEnvironment", "behavior_config_name"]

logger = logging.getLogger("kerasrl")

COMMUNICATION_VERSION = "1.5.0"
PACKAGE_VERSION = "kerasrl-0.1.0"
EDITOR_PORT = 5004
PLAYER_PORT = 5005


def behavior_config_name(behavior: str) -> str:
    """The config section of a behavior: its name without the team suffix (``Striker?team=1`` -> ``Striker``)."""
    return behavior.split("?team=", 1)[0]


def compatible(player_version: str) -> bool:
    """Same major version (and, for 0.x, the same minor) as kerasrl's."""
    try:
        theirs = [int(p) for p in player_version.split(".")[:2]]
    except ValueError:
        return False
    ours = [int(p) for p in COMMUNICATION_VERSION.split(".")[:2]]
    return theirs[:1] == ours[:1] and (ours[0] != 0 or theirs[:2] == ours[:2])


def behavior_spec(params: pb.BrainParametersProto, info: pb.AgentInfoProto) -> BehaviorSpec:
    """The spec of one behavior from its parameters and one agent's observations."""
    try:
        return behavior_spec_of(params, info)
    except Corrupt as e:
        raise EnvironmentException(f"Behavior '{params.brain_name}' {e}.") from None


class UnityEnvironment(Environment):
    """A Unity player (``file_name``) or the Editor (``file_name=None``: press Play) as an environment.

    ``side_channels``: the user's own channels, besides the engine-configuration, environment-
    parameter and statistics channels every environment has (``engine_channel``,
    ``parameters_channel``, ``stats_channel``). ``engine``: the player's time scale, quality,
    screen size and frame rates, sent with the first reset. ``log_folder``: where the player
    writes its log (``Player-{worker_id}.log``). ``timeout_wait``: seconds to wait for the player
    to connect and for each of its steps. ``num_areas``: training areas the scene makes (its
    ``TrainingAreaReplicator``). ``samplers``: ``(key, kind, values, seed)`` of parameters the scene
    draws anew each episode, sent with the first reset.
    """

    def __init__(self, file_name: Optional[str] = None, worker_id: int = 0, base_port: Optional[int] = None,
                 seed: int = 0, no_graphics: bool = False, timeout_wait: float = 60.0,
                 additional_args: Sequence[str] = (), side_channels: Iterable[SideChannel] = (),
                 log_folder: Optional[str] = None, engine: Optional[EngineConfig] = None, num_areas: int = 1,
                 samplers: Sequence[tuple[str, str, Sequence[float], int]] = ()) -> None:
        port = (base_port if base_port is not None else PLAYER_PORT if file_name else EDITOR_PORT) + worker_id
        self.file_name = file_name
        self.port = port
        self.engine_channel = EngineConfigurationChannel()
        self.parameters_channel = EnvironmentParametersChannel()
        self.stats_channel = StatsSideChannel()
        self._channels: dict[uuid.UUID, SideChannel] = {}
        for channel in [self.engine_channel, self.parameters_channel, self.stats_channel, *side_channels]:
            if channel.channel_id in self._channels:
                raise EnvironmentException(f"Two side channels have the id {channel.channel_id}.")
            self._channels[channel.channel_id] = channel
        if engine is not None:
            self.engine_channel.set_configuration(engine)
        for key, kind, values, sampler_seed in samplers:  # sent with the first reset; the scene keeps them
            self.parameters_channel.set_sampler(key, kind, values, sampler_seed)
        self._specs: dict[str, BehaviorSpec] = {}
        self._params: dict[str, pb.BrainParametersProto] = {}
        self._decision_ids: dict[str, list[int]] = {}
        self._chosen: dict[str, dict[int, np.ndarray]] = {}
        self._held: dict[str, list[pb.AgentInfoProto]] = {}
        self._last: dict[str, StepResult] = {}
        #: Behaviors whose agents have been in a group: their results carry group ids and rewards.
        self._grouped: set[str] = set()
        self._needs_reset = True
        self._legacy_actions = False
        self._connected = False
        self.player_log: Optional[str] = None
        comm = Communicator(port, timeout_wait)
        self._comm = comm
        self._finalizer = weakref.finalize(self, comm.close)  # no player outlives its environment
        try:
            if file_name is not None:
                self.player_log = os.path.join(log_folder, f"Player-{worker_id}.log") if log_folder else None
            comm.start(describe_player(file_name, port, self.player_log) if file_name is not None else None)
            if file_name is not None:
                comm.player = PlayerProcess.launch(file_name, port, self.player_log, no_graphics, additional_args)
            self._handshake(seed, num_areas)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ the handshake

    def _handshake(self, seed: int, num_areas: int) -> None:
        first = self._comm.receive(first=True).unity_output
        init = first.rl_initialization_output
        if not compatible(init.communication_version):
            raise UnityCommunicationError(
                f"{self._comm.describe()} speaks Communication API {init.communication_version or '(none)'} "
                f"(ML-Agents package {init.package_version or 'unknown'}); kerasrl speaks {COMMUNICATION_VERSION}: "
                "the major versions must match (ML-Agents package 2.x and 3.x speak 1.5.0).")
        if not init.capabilities.baseRLCapabilities:
            logger.warning("%s did not report its capabilities (an old ML-Agents package?).", self._comm.describe())
        answer = pb.UnityInputProto()
        reply = answer.rl_initialization_input
        reply.seed = int(seed)
        reply.communication_version = COMMUNICATION_VERSION
        reply.package_version = PACKAGE_VERSION
        reply.num_areas = int(num_areas)
        caps = reply.capabilities
        caps.baseRLCapabilities = caps.concatenatedPngObservations = caps.compressedChannelMapping = True
        caps.hybridActions = True
        self._comm.send(answer)
        self._comm.receive()  # the player's empty message; its answer is the first command
        self.player_name = init.name
        # Players before Communication API 1.3 read actions from one float list only.
        self._legacy_actions = init.communication_version.split(".")[:2] in (["1", "0"], ["1", "1"], ["1", "2"])
        #: Agents in the player's first step (how many act at once, for progress reports).
        self.num_envs = max(1, sum(len(infos.value) for infos in first.rl_output.agentInfos.values()))
        self._learn_behaviors(first)
        self._connected = True
        decode_side_channels(first.rl_output.side_channel, self._channels)

    def _learn_behaviors(self, output: pb.UnityOutputProto) -> None:
        """Specs of behaviors the player announces (in its first message, or later ones) once an agent shows them."""
        for params in output.rl_initialization_output.brain_parameters:
            self._params.setdefault(params.brain_name, params)
        infos = output.rl_output.agentInfos
        for name, params in self._params.items():
            if name in self._specs or name not in infos or not infos[name].value:
                continue
            if self._connected:
                raise EnvironmentException(
                    f"Behavior '{name}' reported its first agents after training started; kerasrl needs every "
                    "behavior's agents in the player's first step (enable them when the scene starts).")
            self._specs[name] = behavior_spec(params, infos[name].value[0])
            self._decision_ids[name] = []
            self._chosen[name] = {}

    # ------------------------------------------------------------------ the Environment API

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    @property
    def reset_parameters(self) -> dict[str, float]:
        return dict(self.parameters_channel.values)

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        """Set ``config`` (environment parameters the scene reads) and reset the scene; a value that
        carries a ``sampler`` (a curriculum lesson's) is sent as that sampler, which the scene draws."""
        for key, value in (config or {}).items():
            sampler = getattr(value, "sampler", None)
            if sampler is not None:
                self.parameters_channel.set_sampler(key, *sampler)
            else:
                self.parameters_channel.set_float_parameter(key, value)
        message = pb.UnityInputProto()
        message.rl_input.command = pb.RESET
        message.rl_input.side_channel = encode_side_channels(self._channels.values())
        self._held.clear()
        for chosen in self._chosen.values():
            chosen.clear()
        results = self._read(self._comm.exchange(message), reset=True)
        self._needs_reset = False
        return results

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        if self._needs_reset:
            raise EnvironmentException("UnityEnvironment.step before reset.")
        for name, result in self._last.items():
            if not len(result):
                continue
            if name not in actions:
                raise EnvironmentException(f"No actions for behavior '{name}' (got {sorted(actions)}).")
            chosen = check_actions(self._specs[name], actions[name], len(result), name)
            live = np.flatnonzero(~result.done)
            self._chosen[name].update(zip(result.agent_ids[live].tolist(), chosen[live]))
        if self._held:
            self._last = {name: self._result(name, infos, 0) for name, infos in self._held.items()}
            self._held = {}
            return self._last
        with hierarchical_timer("unity.encode"):
            message = self._step_input()
        with hierarchical_timer("unity.wait"):  # the player: its step, and the exchange both ways
            reply = self._comm.exchange(message)
        with hierarchical_timer("unity.decode"):
            return self._read(reply, reset=False)

    def _step_input(self) -> pb.UnityInputProto:
        message = pb.UnityInputProto()
        rl_input = message.rl_input
        rl_input.command = pb.STEP
        for name, ids in self._decision_ids.items():
            if not ids:
                continue
            spec, chosen = self._specs[name], self._chosen[name]
            out = rl_input.agent_actions[name].value
            for agent_id in ids:
                action = chosen.pop(agent_id, None)
                if action is None:
                    raise EnvironmentException(f"No action was chosen for agent {agent_id} of behavior '{name}', "
                                               "which the player asked for a decision.")
                if self._legacy_actions:
                    out.add(vector_actions_deprecated=action.astype(np.float32).tolist())
                elif spec.is_discrete:
                    out.add(discrete_actions=action.tolist())
                elif spec.is_hybrid:
                    size = spec.continuous_size
                    out.add(continuous_actions=action[:size].tolist(),
                            discrete_actions=action[size:].astype(np.int32).tolist())
                else:
                    out.add(continuous_actions=action.tolist())
            chosen.clear()
        rl_input.side_channel = encode_side_channels(self._channels.values())
        return message

    def _read(self, message: pb.UnityMessageProto, reset: bool) -> dict[str, StepResult]:
        """The step results of a player's message; agents that ended and decide again are held back."""
        output = message.unity_output
        decode_side_channels(output.rl_output.side_channel, self._channels)
        self._learn_behaviors(output)
        infos = output.rl_output.agentInfos
        results: dict[str, StepResult] = {}
        for name in self._specs:
            agents = list(infos[name].value) if name in infos else []
            decisions = [info for info in agents if not info.done]
            self._decision_ids[name] = [info.id for info in decisions]
            ended = [] if reset else [info for info in agents if info.done]
            ended_ids = {info.id for info in ended}
            held = [info for info in decisions if info.id in ended_ids] if ended_ids else []
            if held:
                self._held[name] = held
                decisions = [info for info in decisions if info.id not in ended_ids]
            results[name] = self._result(name, ended + decisions, len(ended))
        self._last = results
        return results

    def _result(self, name: str, infos: list[pb.AgentInfoProto], n_ended: int) -> StepResult:
        """``infos`` as a step result; the first ``n_ended`` ended their episode."""
        spec = self._specs[name]
        n = len(infos)
        done = np.zeros(n, bool)
        done[:n_ended] = True
        truncated = done & np.array([info.max_step_reached for info in infos], bool)
        mask = None
        if spec.has_action_mask:
            mask = action_masks(infos, spec.action_mask_size)
        group_id, group_reward = self._groups(name, infos)
        result = StepResult(
            agent_ids=np.array([info.id for info in infos], np.int64),
            observations=observation_arrays(infos, spec.observation_shapes, name),
            rewards=np.array([info.reward for info in infos], np.float32),
            terminated=done & ~truncated, truncated=truncated, action_mask=mask,
            group_id=group_id, group_reward=group_reward)
        return result

    def _groups(self, name: str, infos: list[pb.AgentInfoProto]) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """The agents' group ids and group rewards (ML-Agents' ``SimpleMultiAgentGroup``); ``None``
        until one of the behavior's agents is in a group, then arrays for the rest of the run."""
        group_id = np.array([info.group_id for info in infos], np.int32)
        if name not in self._grouped:
            if not group_id.any():
                return None, None
            self._grouped.add(name)
        return group_id, np.array([info.group_reward for info in infos], np.float32)

    # ------------------------------------------------------------------ statistics and closing

    def take_environment_stats(self) -> dict[str, list[float]]:
        """What the scene recorded since the last call, each key as the values to average
        (a sum or most-recent statistic is one value)."""
        out = {}
        for key, (values, aggregation) in self.stats_channel.take().items():
            if aggregation == StatsAggregation.MOST_RECENT:
                values = values[-1:]
            elif aggregation == StatsAggregation.SUM:
                values = [float(sum(values))]
            out[key] = values
        return out

    def close(self) -> None:
        """Tell the player to quit, stop listening, and stop the player's process."""
        self._finalizer()
