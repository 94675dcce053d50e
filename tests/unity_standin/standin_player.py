#!/usr/bin/env python3
"""A stand-in for a Unity player built with the ML-Agents package, for tests without Unity.

It is launched as a player is (``--mlagents-port PORT [-logFile FILE] [-nographics -batchmode]``),
connects to the trainer as a gRPC client and plays the Unity side of the protocol: the
initialization output (version, capabilities, behavior parameters, first agent infos), then
one exchange per step until the trainer says QUIT or closes.

The scene is Simple1D with ``--agents`` walkers of behavior ``Simple1D?team=0``: each sees its
goal (-1 or +1) and walks 0.1 per step towards the goal (discrete action 1) or away (0); reaching
either end terminates its episode (reward +-1.011 by goal, -0.001 per other step), ``--max-step``
steps truncate it (``max_step_reached``). An agent that ends reports its terminal info and its
next episode's first decision in the same message, as Unity does. ``--scene visual`` shows the
goal as a PNG image (left or right half lit), ``--scene continuous`` takes a continuous action, ``--scene masked`` has a third
discrete action (stay) that its action mask never allows, ``--scene hybrid`` takes both kinds
at once: the discrete action is the direction, as in the vector scene, and the continuous one
the stride (clipped to [0, 0.1]: at 0 or below the walker stays).

``--scene duel`` and ``--scene group`` play kerasrl's built-in Duel1D (two teams, ``--agents``
arenas) and GroupSimple1D (``--agents`` agents in one group) as scenes (:class:`HostedScene`).

``--group ID`` puts every agent in group ``ID`` (ML-Agents' ``SimpleMultiAgentGroup``) and, at
each step where one of them ends an episode, gives the group ``GROUP_REWARD``: every info of
that message carries it (``group_reward``).

``--step-cost-ms MS`` gives every step a simulation cost (busy CPU, as a physics step has;
``--step-mode sleep`` sleeps instead, as a player whose physics runs on cores of its own), and
``--report FILE`` writes, when the player quits (leaving out the first ``--report-after N``
exchanges: start-up and compilation), where its wall time went (JSON): simulating,
its own message building and parsing, and waiting for the trainer (inside the exchange call),
with ``busy_share`` = 1 - waiting / wall, the share of the time the player was not kept waiting
(1.0: the trainer costs nothing); the same line goes to the log file.

Faults for tests: ``--never-connect``, ``--crash-after N`` (exit 3 after N steps), ``--hang-after N``
(stop answering after N steps), ``--communication-version V``; ``--outlive-trainer`` plays on
when the trainer is gone, as a Unity player does (by default the stand-in exits then). What arrives on the side
channels is written to the log file; ``Simple1D/Goal`` is recorded on the statistics channel at
every episode end.
"""
from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
import uuid
import zlib
from pathlib import Path

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's kerasrl, as the tests use
from kerasrl.protos import unity_protocol_pb2 as pb  # noqa: E402
from kerasrl.protos import unity_protocol_pb2_grpc as pb_grpc  # noqa: E402

BEHAVIOR = "Simple1D?team=0"
ENGINE = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
PARAMETERS = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")
IMAGE = (20, 20)
#: What the group earns (``--group``) at each step where one of its agents ends an episode.
GROUP_REWARD = 0.5


def png(grey_rows: list[bytes]) -> bytes:
    """An RGB PNG of grey rows (filter 0), as a player's camera sends one."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    height, width = len(grey_rows), len(grey_rows[0])
    raw = b"".join(b"\x00" + bytes(v for v in row for _ in range(3)) for row in grey_rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


class Scene:
    def __init__(self, args: argparse.Namespace, log) -> None:
        self.args, self.log = args, log
        self.random = random.Random(0)
        self.step_size = 0.1
        self.agents = [{"id": 100 + i} for i in range(args.agents)]
        half = IMAGE[1] // 2
        self.images = {g: png([bytes(255 if (x < half) == (g < 0) else 0 for x in range(IMAGE[1]))] * IMAGE[0])
                       for g in (-1, 1)}
        self.stats: list[bytes] = []
        self.echo: list[bytes] = []
        for agent in self.agents:
            self.reset_agent(agent)

    def reset_agent(self, agent: dict) -> None:
        agent.update(goal=self.random.choice([-1, 1]), position=0.0, steps=0)

    def observation(self, agent: dict) -> pb.ObservationProto:
        if self.args.scene == "visual":
            return pb.ObservationProto(shape=[IMAGE[0], IMAGE[1], 1], compression_type=pb.PNG,
                                       compressed_data=self.images[agent["goal"]])
        return pb.ObservationProto(shape=[1], float_data=pb.ObservationProto.FloatData(data=[agent["goal"]]))

    def info(self, agent: dict, reward: float = 0.0, done: bool = False, truncated: bool = False) -> pb.AgentInfoProto:
        # the masked scene has a third action, "stay", which is never allowed (true: masked)
        mask = [False, False, True] if self.args.scene == "masked" else []
        return pb.AgentInfoProto(id=agent["id"], reward=reward, done=done, max_step_reached=truncated,
                                 observations=[self.observation(agent)], action_mask=mask,
                                 group_id=self.args.group)

    def decisions(self) -> list[pb.AgentInfoProto]:
        return [self.info(agent) for agent in self.agents]

    def step(self, actions: list[pb.AgentActionProto]) -> list[pb.AgentInfoProto]:
        if len(actions) != len(self.agents):
            raise SystemExit(f"stand-in: {len(actions)} actions for {len(self.agents)} agents")
        ended, decisions = [], []
        legacy = self.args.communication_version.split(".")[:2] in (["1", "0"], ["1", "1"], ["1", "2"])
        for agent, action in zip(self.agents, actions):
            # before Communication API 1.3 a player reads only the one float list
            continuous = action.vector_actions_deprecated if legacy else action.continuous_actions
            discrete = [int(v) for v in action.vector_actions_deprecated] if legacy else action.discrete_actions
            if self.args.scene == "hybrid" and (len(continuous), len(discrete)) != (1, 1):
                raise SystemExit(f"stand-in: hybrid actions {list(continuous)} {list(discrete)}")
            if self.args.scene == "continuous":
                delta = max(-self.step_size, min(self.step_size, continuous[0]))
            elif self.args.scene == "hybrid":
                delta = max(0.0, min(self.step_size, continuous[0])) * (1 if discrete[0] == 1 else -1)
            elif discrete[0] == 2:
                raise SystemExit("stand-in: the masked action 'stay' was taken")
            else:
                delta = self.step_size if discrete[0] == 1 else -self.step_size
            agent["position"] = max(-1.0, min(1.0, agent["position"] + delta))
            agent["steps"] += 1
            reached = abs(agent["position"]) >= 1.0
            truncated = not reached and agent["steps"] >= self.args.max_step
            if reached or truncated:
                reward = 1.011 * agent["position"] * agent["goal"] if reached else -0.001
                ended.append(self.info(agent, reward, True, truncated))
                self.record_stat("Simple1D/Goal", float(agent["goal"]))
                self.reset_agent(agent)
                decisions.append(self.info(agent))
            else:
                decisions.append(self.info(agent, -0.001))
        if self.args.group and ended:
            for info in ended + decisions:
                info.group_reward = GROUP_REWARD
        return ended + decisions

    def record_stat(self, key: str, value: float) -> None:
        data = key.encode()
        self.stats.append(struct.pack("<i", len(data)) + data + struct.pack("<fi", value, 0))

    def side_channel_out(self) -> bytes:
        out = b"".join(STATS.bytes_le + struct.pack("<i", len(m)) + m for m in self.stats) + b"".join(self.echo)
        self.stats.clear()
        self.echo.clear()
        return out

    def side_channel_in(self, data: bytes) -> None:
        offset = 0
        while offset < len(data):
            channel = uuid.UUID(bytes_le=data[offset:offset + 16])
            (size,) = struct.unpack_from("<i", data, offset + 16)
            payload = data[offset + 20:offset + 20 + size]
            offset += 20 + size
            if channel == ENGINE:
                (kind,) = struct.unpack_from("<i", payload)
                value = struct.unpack_from("<f" if kind == 2 else f"<{(len(payload) - 4) // 4}i", payload, 4)
                self.log(f"engine {kind} {' '.join(f'{v:g}' for v in value)}")
            elif channel == PARAMETERS:
                (n,) = struct.unpack_from("<i", payload)
                key = payload[4:4 + n].decode()
                (kind,) = struct.unpack_from("<i", payload, 4 + n)
                if kind == 1:  # a sampler: seed, sampler type, then its floats (a list for multirangeuniform)
                    seed, sampler = struct.unpack_from("<ii", payload, 8 + n)
                    rest = payload[16 + n:]
                    floats = struct.unpack(f"<{len(rest) // 4}f", rest)
                    floats = floats[1:] if sampler == 2 else floats
                    self.log(f"sampler {key} {sampler} {seed} {' '.join(f'{v:g}' for v in floats)}")
                    continue
                (value,) = struct.unpack_from("<f", payload, 8 + n)
                self.log(f"parameter {key} {value:g}")
                if key == "step_size":
                    self.step_size = value
            else:  # any other channel: echoed back, as a user's C# channel might answer
                self.log(f"channel {channel} {payload.hex()}")
                self.echo.append(channel.bytes_le + struct.pack("<i", len(payload)) + payload)


class GroupAreas:
    """``groups`` GroupSimple1D scenes side by side, as a Unity scene's training areas: each area's
    agents (``agents`` of them) in a group of their own; agent ids and group ids offset per area."""

    def __init__(self, groups: int, agents: int, max_steps) -> None:
        from kerasrl.envs.groups import GroupSimple1DEnvironment

        self.areas = [GroupSimple1DEnvironment(num_agents=agents, seed=k, max_steps=max_steps) for k in range(groups)]
        self.behavior_specs = self.areas[0].behavior_specs
        self.name = next(iter(self.behavior_specs))
        self.agents = agents
        self.sizes: list[int] = []

    def _merged(self, results: list) -> dict:
        from kerasrl.spec import StepResult

        parts = [r[self.name] for r in results]
        self.sizes = [len(p.agent_ids) for p in parts]

        def joined(values) -> np.ndarray:
            return np.concatenate(list(values))

        return {self.name: StepResult(
            agent_ids=joined(p.agent_ids + k * self.agents for k, p in enumerate(parts)),
            observations=[joined(p.observations[0] for p in parts)], rewards=joined(p.rewards for p in parts),
            terminated=joined(p.terminated for p in parts), truncated=joined(p.truncated for p in parts),
            group_id=joined(p.group_id_or_zeros + k for k, p in enumerate(parts)),
            group_reward=joined(p.group_reward_or_zeros for p in parts))}

    def reset(self) -> dict:
        return self._merged([area.reset() for area in self.areas])

    def step(self, actions: dict) -> dict:
        rows = np.split(actions[self.name], np.cumsum(self.sizes)[:-1])
        return self._merged([area.step({self.name: part}) for area, part in zip(self.areas, rows)])


class HostedScene(Scene):
    """A kerasrl built-in environment played as a scene (``--scene duel``: Duel1D's two teams,
    ``--agents`` arenas; ``--scene group``: GroupSimple1D, ``--agents`` agents in one group, or in
    each of ``--groups`` areas), each
    of its behaviors a behavior of the player. An agent whose episode ends reports its terminal
    info and asks for its next decision one step later (its next episode's first observation), as
    a Unity agent may; its action in between is ignored by the environment anyway."""

    def __init__(self, args: argparse.Namespace, log) -> None:
        super().__init__(argparse.Namespace(**{**vars(args), "agents": 0}), log)
        from kerasrl.envs.competitive import Duel1DEnvironment
        from kerasrl.envs.groups import GroupSimple1DEnvironment

        if args.scene == "duel":
            self.env = Duel1DEnvironment(num_areas=args.agents, seed=0)
        elif args.groups > 1:
            self.env = GroupAreas(args.groups, args.agents, args.max_step)
        else:
            self.env = GroupSimple1DEnvironment(num_agents=args.agents, seed=0, max_steps=args.max_step)
        self.specs = self.env.behavior_specs
        self.results = self.env.reset()

    def brain_parameters(self, init) -> None:
        for name, spec in self.specs.items():
            params = init.brain_parameters.add(brain_name=name, is_training=True)
            params.action_spec.num_discrete_actions = len(spec.discrete_branches)
            params.action_spec.discrete_branch_sizes.extend(spec.discrete_branches)

    def _infos(self, result) -> list[pb.AgentInfoProto]:
        group = result.group_id_or_zeros
        group_reward = result.group_reward_or_zeros
        return [pb.AgentInfoProto(id=int(result.agent_ids[i]), reward=float(result.rewards[i]),
                                  done=bool(result.done[i]), max_step_reached=bool(result.truncated[i]),
                                  observations=[pb.ObservationProto(shape=[result.observations[0].shape[1]],
                                                float_data=pb.ObservationProto.FloatData(
                                                    data=result.observations[0][i].tolist()))],
                                  group_id=int(group[i]), group_reward=float(group_reward[i]))
                for i in range(len(result.agent_ids))]

    def hosted_decisions(self) -> dict[str, list[pb.AgentInfoProto]]:
        return {name: self._infos(result) for name, result in self.results.items()}

    def hosted_step(self, actions) -> dict[str, list[pb.AgentInfoProto]]:
        """Each behavior's actions for the agents that asked (a done agent: a stand-in 0)."""
        full = {}
        for name, result in self.results.items():
            given = iter([list(a.discrete_actions) for a in actions[name].value] if name in actions else [])
            zero = [0] * len(self.specs[name].discrete_branches)
            rows = [zero if done else next(given) for done in result.done.tolist()]
            full[name] = np.array(rows, np.int32).reshape(len(rows), len(zero))
        self.results = self.env.step(full)
        return self.hosted_decisions()


class PlayerClock:
    """Where the player's wall time goes, from its first step to its end: ``simulating`` (the
    scene's step and ``--step-cost-ms``), ``waiting`` (inside the exchange call: the trainer, and
    the transport), the rest its own message building and parsing."""

    def __init__(self, step_cost_s: float, report_after: int = 0, sleep: bool = False) -> None:
        self.step_cost_s, self.report_after, self.sleep = step_cost_s, report_after, sleep
        self.simulating = self.waiting = 0.0
        self.exchanges = self.steps = 0
        self.start: float | None = None

    def simulate(self, step, *args):
        start = time.perf_counter()
        self.start = start if self.start is None else self.start
        result = step(*args)
        deadline = start + self.step_cost_s
        if self.sleep and deadline > time.perf_counter():
            time.sleep(deadline - time.perf_counter())
        while time.perf_counter() < deadline:  # the physics step's cost: one busy core
            pass
        self.simulating += time.perf_counter() - start
        self.steps += 1
        return result

    def wait(self, call, *args, **kwargs):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            if self.start is not None:
                self.waiting += time.perf_counter() - start
                self.exchanges += 1
                if self.report_after and self.exchanges == self.report_after:  # start-up left out: start again
                    self.simulating = self.waiting = 0.0
                    self.steps = self.exchanges = self.report_after = 0
                    self.start = time.perf_counter()

    def report(self) -> dict:
        wall = time.perf_counter() - self.start if self.start is not None else 0.0
        per = 1e3 / max(self.exchanges, 1)
        return {"exchanges": self.exchanges, "wall_s": wall, "steps": self.steps,
                "busy_share": 1.0 - self.waiting / wall if wall else 0.0,
                "simulating_ms": self.simulating * per, "waiting_ms": self.waiting * per,
                "own_messages_ms": (wall - self.simulating - self.waiting) * per}


def output_message(infos, scene: Scene) -> pb.UnityMessageProto:
    """The player's message: ``infos`` of ``BEHAVIOR``, or ``{behavior: infos}`` of a hosted scene."""
    message = pb.UnityMessageProto()
    message.header.status = 200
    for name, value in (infos if isinstance(infos, dict) else {BEHAVIOR: infos}).items():
        message.unity_output.rl_output.agentInfos[name].value.extend(value)
    message.unity_output.rl_output.side_channel = scene.side_channel_out()
    return message


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mlagents-port", type=int, required=True)
    p.add_argument("-logFile", default=None)
    p.add_argument("-nographics", action="store_true")
    p.add_argument("-batchmode", action="store_true")
    p.add_argument("--scene", choices=("vector", "visual", "continuous", "masked", "hybrid", "duel", "group"),
                   default="vector")
    p.add_argument("--agents", type=int, default=1)
    p.add_argument("--max-step", type=int, default=100)
    p.add_argument("--communication-version", default="1.5.0")
    p.add_argument("--group", type=int, default=0, help="the agents' group id (0: in no group)")
    p.add_argument("--groups", type=int, default=1, help="--scene group: areas side by side, --agents agents in each one's group")
    p.add_argument("--never-connect", action="store_true")
    p.add_argument("--crash-after", type=int, default=None)
    p.add_argument("--hang-after", type=int, default=None)
    p.add_argument("--outlive-trainer", action="store_true",
                   help="play on when the trainer is gone (as a Unity player does), instead of exiting")
    p.add_argument("--late-behavior-after", type=int, default=None, help="a second behavior appears after N steps")
    p.add_argument("--step-cost-ms", type=float, default=0.0, help="busy CPU per step, as a physics step costs")
    p.add_argument("--step-mode", choices=("busy", "sleep"), default="busy",
                   help="spend --step-cost-ms busy (one core) or sleeping (physics on cores of its own)")
    p.add_argument("--report", default=None, help="write where the wall time went (JSON) here at the end")
    p.add_argument("--report-after", type=int, default=0, help="leave the first N exchanges out of the report")
    args = p.parse_args(argv)
    log_file = open(args.logFile, "a", buffering=1) if args.logFile else None

    def log(line: str) -> None:
        if log_file is not None:
            log_file.write(line + "\n")

    log(f"stand-in player: port {args.mlagents_port} nographics={args.nographics} batchmode={args.batchmode}")
    if args.never_connect:
        time.sleep(3600)
    hosted = args.scene in ("duel", "group")
    scene = HostedScene(args, log) if hosted else Scene(args, log)
    clock = PlayerClock(args.step_cost_ms / 1e3, args.report_after, args.step_mode == "sleep")
    stub = pb_grpc.UnityToExternalProtoStub(grpc.insecure_channel(f"localhost:{args.mlagents_port}"))

    def exchange(message: pb.UnityMessageProto, **kwargs) -> pb.UnityMessageProto:
        try:
            return clock.wait(stub.Exchange, message, **kwargs)
        except grpc.RpcError:
            if not args.outlive_trainer:
                raise
            log("trainer gone: playing on")
            time.sleep(3600)
            raise

    first = output_message(scene.hosted_decisions() if hosted else scene.decisions(), scene)
    init = first.unity_output.rl_initialization_output
    init.name, init.communication_version, init.package_version = "StandIn", args.communication_version, "2.0.1"
    init.capabilities.baseRLCapabilities = True
    init.capabilities.hybridActions = True
    if hosted:
        scene.brain_parameters(init)
    else:
        params = init.brain_parameters.add(brain_name=BEHAVIOR, is_training=True)
        if args.scene in ("continuous", "hybrid"):
            params.action_spec.num_continuous_actions = 1
        if args.scene != "continuous":
            params.action_spec.num_discrete_actions = 1
            params.action_spec.discrete_branch_sizes.append(3 if args.scene == "masked" else 2)
    reply = exchange(first, wait_for_ready=True, timeout=120)
    if reply.header.status == 400:
        return 0
    seed = reply.unity_input.rl_initialization_input.seed
    log(f"seed {seed}")
    log(f"num_areas {reply.unity_input.rl_initialization_input.num_areas}")
    scene.random.seed(seed)  # the goals of every reset on follow the trainer's seed
    reply = exchange(pb.UnityMessageProto(header=pb.HeaderProto(status=200)))
    steps = 0
    while reply.header.status != 400:
        rl_input = reply.unity_input.rl_input
        scene.side_channel_in(rl_input.side_channel)
        if rl_input.command == pb.QUIT:
            break
        if rl_input.command == pb.RESET:
            log("reset")
            for agent in scene.agents:
                scene.reset_agent(agent)
            if hosted:
                scene.results = scene.env.reset()
            infos = scene.hosted_decisions() if hosted else scene.decisions()
        else:
            steps += 1
            if args.crash_after is not None and steps > args.crash_after:
                log("crash")
                return 3
            if args.hang_after is not None and steps > args.hang_after:
                log("hang")
                time.sleep(3600)
            infos = clock.simulate(scene.hosted_step, rl_input.agent_actions) if hosted else \
                clock.simulate(scene.step, list(rl_input.agent_actions[BEHAVIOR].value))
        message = output_message(infos, scene)
        if args.late_behavior_after is not None and steps > args.late_behavior_after:
            late = message.unity_output.rl_initialization_output.brain_parameters.add(brain_name="Late")
            late.action_spec.num_continuous_actions = 1
            message.unity_output.rl_output.agentInfos["Late"].value.append(scene.info({"id": 1, "goal": 1}))
        reply = exchange(message)
    report = clock.report()
    log("busy share {busy_share:.3f}: per exchange simulating {simulating_ms:.3f} ms, own messages "
        "{own_messages_ms:.3f} ms, waiting {waiting_ms:.3f} ms ({exchanges} exchanges)".format(**report))
    if args.report:
        Path(args.report).write_text(json.dumps(report))
    log("quit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
