"""Reading an ML-Agents demonstration file into a behavior spec and kerasrl's demonstration rows."""
from __future__ import annotations

import os
from typing import Optional, TypeVar, Union

import numpy as np
from google.protobuf.message import Message

from kerasrl.buffer import AgentBuffer, AgentBufferField
from kerasrl.demo_format._common import BRAIN_PARAMETERS_OFFSET, SUPPORTED_API_VERSIONS, Corrupt, DemoError
from kerasrl.demo_format.layout import behavior_spec_of, to_kerasrl_layout
from kerasrl.demo_format.png import png_observation
from kerasrl.exception import one_line
from kerasrl.fields import Field
from kerasrl.protos import unity_protocol_pb2 as pb
from kerasrl.spec import BehaviorSpec

__all__ = ["read_messages", "read_unity_demo"]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; ``_Truncated`` past the end."""
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise _Truncated
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise Corrupt(f"a length prefix at byte {pos} is not a varint")


class _Truncated(Exception):
    """The file ends inside a message."""


def _delimited(data: bytes, pos: int) -> tuple[bytes, int]:
    size, start = _varint(data, pos)
    if start + size > len(data):
        raise _Truncated
    return data[start:start + size], start + size


_M = TypeVar("_M", bound=Message)


def _parse(message: type[_M], body: bytes, what: str) -> _M:
    try:
        return message.FromString(body)
    except Exception as e:  # protobuf's DecodeError: bytes that are not that message
        raise Corrupt(f"its {what} is not valid: {one_line(e)}") from e


def read_messages(path: str, data: bytes) -> tuple[pb.DemonstrationMetaProto, pb.BrainParametersProto,
                                                    list[pb.AgentInfoActionPairProto]]:
    """The messages of a demonstration file's bytes ``data``: its header, brain parameters and
    steps; a :class:`DemoError` naming ``path`` for a truncated file or an unsupported api_version."""
    try:
        body, _ = _delimited(data, 0)
    except _Truncated:
        raise DemoError(f"The demonstration file {path} is truncated or not a demonstration: it ends inside "
                        "its header.") from None
    meta = _parse(pb.DemonstrationMetaProto, body, "header (DemonstrationMetaProto)")
    if meta.api_version not in SUPPORTED_API_VERSIONS:
        raise DemoError(f"The demonstration file {path} has ML-Agents demonstration api_version {meta.api_version}; "
                        f"kerasrl reads versions {', '.join(map(str, sorted(SUPPORTED_API_VERSIONS)))}.")
    try:
        body, pos = _delimited(data, BRAIN_PARAMETERS_OFFSET)
    except _Truncated:
        raise DemoError(f"The demonstration file {path} is truncated: it ends inside its brain parameters "
                        f"(byte {BRAIN_PARAMETERS_OFFSET} on).") from None
    brain = _parse(pb.BrainParametersProto, body, "brain parameters")
    expected = max(int(meta.number_steps), 0)
    # A closed recording counts at least one episode; one never closed counts nothing: read to the end.
    to_the_end = not expected and not meta.number_episodes
    pairs: list[pb.AgentInfoActionPairProto] = []
    while (pos < len(data)) if to_the_end else (len(pairs) < expected):
        try:
            body, pos = _delimited(data, pos)
        except _Truncated:
            of = f" of the {expected} its header announces" if expected else ""
            raise DemoError(f"The demonstration file {path} is truncated: it ends inside step {len(pairs) + 1}{of}.") \
                from None
        pair = _parse(pb.AgentInfoActionPairProto, body, f"step {len(pairs) + 1}")
        pairs.append(pair)
    return meta, brain, pairs


def _spec(brain: pb.BrainParametersProto, info: pb.AgentInfoProto) -> BehaviorSpec:
    """The behavior spec from the brain parameters and the first step's observations."""
    try:
        return behavior_spec_of(brain, info)
    except Corrupt as e:
        if not info.observations:
            raise Corrupt("its steps have no observations (a file older than ML-Agents 1.0?)") from None
        raise Corrupt(f"its behavior {e}") from None


def _observation(proto: pb.ObservationProto, shape: tuple[int, ...]) -> np.ndarray:
    if proto.compression_type == pb.PNG:
        if len(shape) != 3:
            raise Corrupt(f"a vector observation of shape {shape} is PNG-compressed")
        return png_observation(proto, shape)
    data = np.asarray(proto.float_data.data, np.float32)
    if data.size != int(np.prod(shape)):
        raise Corrupt(f"an observation has {data.size} values, its shape {shape} needs {int(np.prod(shape))}")
    return to_kerasrl_layout(data, proto, shape)


def _action_row(action: pb.AgentActionProto, spec: BehaviorSpec) -> list[float]:
    """The step's action in kerasrl's layout: continuous values, then branch indices."""
    continuous, discrete = list(action.continuous_actions), list(action.discrete_actions)
    if not continuous and not discrete:  # the deprecated layout: one list of floats
        values = list(action.vector_actions_deprecated)
        continuous, discrete = values[: spec.continuous_size], values[spec.continuous_size:]
    branches = spec.discrete_branches
    if len(continuous) != spec.continuous_size or len(discrete) != len(branches):
        raise Corrupt(f"an action has {len(continuous)} continuous and {len(discrete)} discrete values; the behavior "
                   f"has {spec.continuous_size} and {len(branches)}")
    for value, size in zip(discrete, branches):
        if not 0 <= value < size or value != int(value):
            raise Corrupt(f"a discrete action {value} is not a branch index below {size}")
    return [float(v) for v in continuous] + [float(v) for v in discrete]


def _episodes(pairs: list[pb.AgentInfoActionPairProto]) -> list[tuple[list[int], bool]]:
    """Each episode's steps (indices into ``pairs``, its outcome step last) and whether it ended
    (a done step), ordered by the position of their last step."""
    found: list[tuple[int, list[int], bool]] = []
    pending: dict[int, list[int]] = {}
    for i, pair in enumerate(pairs):
        steps = pending.setdefault(int(pair.agent_info.id), [])
        steps.append(i)
        if pair.agent_info.done:
            found.append((i, pending.pop(int(pair.agent_info.id)), True))
    found += [(steps[-1], steps, False) for steps in pending.values()]
    found.sort(key=lambda episode: episode[0])
    return [(steps, ended) for _, steps, ended in found if len(steps) > 1]


def _observation_columns(spec: BehaviorSpec, pairs: list[pb.AgentInfoActionPairProto],
                         used: np.ndarray) -> list[np.ndarray]:
    """Observation ``k`` of the steps ``used``, stacked: one ``[len(used), *shape]`` array per ``k``."""
    columns = []
    for k, shape in enumerate(spec.observation_shapes):
        column = np.zeros((len(used), *shape), np.float32)
        for j, i in enumerate(used):
            info = pairs[i].agent_info
            if len(info.observations) != len(spec.observation_shapes):
                raise Corrupt(f"step {i + 1} has {len(info.observations)} observations, the first step "
                              f"{len(spec.observation_shapes)}")
            try:
                column[j] = _observation(info.observations[k], shape)
            except Corrupt as e:
                raise Corrupt(f"step {i + 1}, observation {k}: {e}") from e
        columns.append(column)
    return columns


def _actions(spec: BehaviorSpec, pairs: list[pb.AgentInfoActionPairProto], rows: np.ndarray) -> np.ndarray:
    """The actions of the steps ``rows``: int32 (discrete) or float32 ``[n, action_size]``."""
    values = []
    for i in rows:
        try:
            values.append(_action_row(pairs[i].action_info, spec))
        except Corrupt as e:
            raise Corrupt(f"step {i + 1}: {e}") from e
    actions = np.asarray(values, np.float64).reshape(len(rows), spec.action_size)
    return actions.astype(np.int32 if spec.is_discrete else np.float32)


def _action_masks(spec: BehaviorSpec, pairs: list[pb.AgentInfoActionPairProto], rows: np.ndarray) -> np.ndarray:
    """The allowed actions of the steps ``rows``, 1 = allowed (the protocol's true: NOT allowed;
    no mask: all allowed)."""
    mask = np.ones((len(rows), spec.action_mask_size), np.float32)
    for r, i in enumerate(rows):
        blocked = pairs[i].agent_info.action_mask
        if len(blocked) not in (0, spec.action_mask_size):
            raise Corrupt(f"step {i + 1} has an action mask of {len(blocked)} values; the behavior's branches "
                          f"have {spec.action_mask_size}")
        if len(blocked):
            mask[r] = 1.0 - np.asarray(blocked, np.float32)
    return mask


def _episode_flags(pairs: list[pb.AgentInfoActionPairProto], episodes: list[tuple[list[int], bool]],
                   n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: done, truncated (done at the agent's max step) and the episode's number."""
    done = np.zeros(n, np.float32)
    truncated = np.zeros(n, np.float32)
    episode_id = np.zeros(n, np.int64)
    at = 0
    for number, (steps, ended) in enumerate(episodes):
        at += len(steps) - 1
        episode_id[at - len(steps) + 1:at] = number
        if ended:
            done[at - 1] = 1.0
            truncated[at - 1] = float(pairs[steps[-1]].agent_info.max_step_reached)
    return done, truncated, episode_id


def _to_buffer(spec: BehaviorSpec, pairs: list[pb.AgentInfoActionPairProto]) -> Optional[AgentBuffer]:
    """The rows of ``pairs``; ``None`` when they make none (no step with an outcome)."""
    episodes = _episodes(pairs)
    if not episodes:
        return None
    rows = np.asarray([i for steps, _ in episodes for i in steps[:-1]], np.int64)
    nexts = np.asarray([i for steps, _ in episodes for i in steps[1:]], np.int64)
    used = np.unique(np.concatenate([rows, nexts]))
    where = np.full(len(pairs), -1, np.int64)
    where[used] = np.arange(len(used))
    observations = _observation_columns(spec, pairs, used)
    fields: dict[str, np.ndarray] = {}
    if spec.vector_observation_indices:
        flat = np.concatenate([observations[k] for k in spec.vector_observation_indices], axis=1)
        fields[Field.VECTOR_OBS], fields[Field.NEXT_VECTOR_OBS] = flat[where[rows]], flat[where[nexts]]
    for j, k in enumerate(spec.visual_observation_indices):
        fields[Field.visual_obs(j)] = observations[k][where[rows]]
        fields[Field.next_visual_obs(j)] = observations[k][where[nexts]]
    fields[Field.ACTIONS] = _actions(spec, pairs, rows)
    if spec.has_action_mask:
        fields[Field.ACTION_MASK] = _action_masks(spec, pairs, rows)
    done, truncated, episode_id = _episode_flags(pairs, episodes, len(rows))
    fields[Field.MASKS] = np.ones(len(rows), np.float32)
    fields[Field.DONE], fields[Field.TERMINATED], fields[Field.TRUNCATED] = done, done * (1.0 - truncated), truncated
    fields[Field.ENVIRONMENT_REWARDS] = np.asarray([pairs[i].agent_info.reward for i in nexts], np.float32)
    fields[Field.EPISODE_ID] = episode_id
    out = AgentBuffer()
    for key, array in fields.items():
        out[key] = AgentBufferField.from_array(np.ascontiguousarray(array), padding_value=0)
    return out


def read_unity_demo(path: Union[str, os.PathLike[str]]) -> tuple[BehaviorSpec, AgentBuffer, str]:
    """The behavior spec, the experience (``kerasrl.demos``' contract) and the behavior name of an
    ML-Agents demonstration file; a :class:`DemoError` naming the file when it cannot be read."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DemoError(f"The demonstration file {path} could not be read: {one_line(e)}") from e
    if not data:
        raise DemoError(f"The demonstration file {path} is empty.")
    try:
        meta, brain, pairs = read_messages(path, data)
        if not pairs:
            raise DemoError(f"The demonstration file {path} holds no steps.")
        spec = _spec(brain, pairs[0].agent_info)
        buffer = _to_buffer(spec, pairs)
    except DemoError:
        raise
    except Exception as e:  # Corrupt, or a spec the file's values make invalid
        raise DemoError(f"The demonstration file {path} could not be read as an ML-Agents demonstration: "
                        f"{one_line(e)}.") from e
    if buffer is None:
        raise DemoError(f"The demonstration file {path} holds no steps.")
    return spec, buffer, brain.brain_name
