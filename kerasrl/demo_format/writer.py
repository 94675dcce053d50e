"""Writing kerasrl's demonstration rows as an ML-Agents demonstration file."""
from __future__ import annotations

import io
import os
from typing import Optional, Union

import numpy as np

from kerasrl.buffer import AgentBuffer, write_atomically
from kerasrl.demo_format._common import (
    API_VERSION,
    BRAIN_PARAMETERS_OFFSET,
    CHANNELS_FIRST,
    INV_255,
    PNG_TOLERANCE,
    VECTOR_DIMENSIONS,
    DemoError,
)
from kerasrl.demo_format.png import encode_png
from kerasrl.exception import one_line
from kerasrl.fields import Field
from kerasrl.protos import unity_protocol_pb2 as pb
from kerasrl.spec import BehaviorSpec

__all__ = ["write_unity_demo"]


def _write_varint(out: io.BytesIO, size: int) -> None:
    while True:
        byte = size & 0x7F
        size >>= 7
        out.write(bytes([byte | 0x80 if size else byte]))
        if not size:
            return


def _delimited_bytes(body: bytes) -> bytes:
    out = io.BytesIO()
    _write_varint(out, len(body))
    return out.getvalue() + body


def _meta_bytes(name: str, steps: int, episodes: int, mean_reward: float) -> bytes:
    """The length-delimited meta message, its name shortened to fit the reserved 33 bytes."""
    encoded = name.encode("utf-8")
    while True:
        meta = pb.DemonstrationMetaProto(api_version=API_VERSION, demonstration_name=encoded.decode("utf-8", "ignore"),
                                         number_steps=steps, number_episodes=episodes, mean_reward=mean_reward)
        body = _delimited_bytes(meta.SerializeToString())
        if len(body) <= BRAIN_PARAMETERS_OFFSET or not encoded:
            return body
        encoded = encoded[:-1]


def _brain_parameters(spec: BehaviorSpec, behavior: str) -> pb.BrainParametersProto:
    branches = list(spec.discrete_branches)
    brain = pb.BrainParametersProto(brain_name=behavior, is_training=False)
    brain.action_spec.num_continuous_actions = spec.continuous_size
    brain.action_spec.num_discrete_actions = len(branches)
    brain.action_spec.discrete_branch_sizes.extend(branches)
    if not spec.is_hybrid:  # the layout of packages older than Communication API 1.3
        brain.vector_action_size_deprecated.extend(branches or [spec.continuous_size])
        brain.vector_action_space_type_deprecated = pb.continuous if spec.is_continuous else pb.discrete
    return brain


def _image_protos(images: np.ndarray) -> list[pb.ObservationProto]:
    """One camera's observations, shape (channels, height, width) as packages 2.x and 3.x write
    them: PNG when that is lossless (up to float rounding), else floats (channels first)."""
    height, width, channels = images.shape[1:]
    shape = [channels, height, width]
    quantized = np.clip(np.rint(images * 255.0), 0, 255).astype(np.uint8)
    if not images.size or np.abs(quantized.astype(np.float32) * INV_255 - images).max() > PNG_TOLERANCE:
        return [pb.ObservationProto(shape=shape, compression_type=pb.NONE, dimension_properties=CHANNELS_FIRST,
                                    float_data=pb.ObservationProto.FloatData(data=image.transpose(2, 0, 1).ravel()
                                                                             .tolist()))
                for image in images]
    groups = -(-channels // 3)
    padded = np.zeros((*quantized.shape[:3], groups * 3), np.uint8)
    padded[..., :channels] = quantized
    if channels == 1:  # grey in R, G and B: their average (how a 1-channel PNG observation is read) is exact
        padded[..., 1] = padded[..., 2] = quantized[..., 0]
    return [pb.ObservationProto(shape=shape, compression_type=pb.PNG, dimension_properties=CHANNELS_FIRST,
                                compressed_data=b"".join(encode_png(image[..., 3 * g:3 * g + 3])
                                                         for g in range(groups)))
            for image in padded]


def _observation_arrays(spec: BehaviorSpec, buffer: AgentBuffer, next_obs: bool) -> Optional[list[np.ndarray]]:
    """Observation ``k`` of every row, in spec order (the vector observations split out of the
    concatenated field); ``None`` when the buffer lacks one."""
    vector_key = Field.NEXT_VECTOR_OBS if next_obs else Field.VECTOR_OBS
    visual_key = Field.next_visual_obs if next_obs else Field.visual_obs
    out: list[np.ndarray] = [np.zeros(0)] * len(spec.observation_shapes)
    if spec.vector_observation_indices:
        if vector_key not in buffer:
            return None
        flat = np.asarray(buffer[vector_key].array, np.float32)
        at = 0
        for k in spec.vector_observation_indices:
            size = spec.observation_shapes[k][0]
            out[k] = flat[:, at:at + size]
            at += size
    for j, k in enumerate(spec.visual_observation_indices):
        if visual_key(j) not in buffer:
            return None
        out[k] = np.asarray(buffer[visual_key(j)].array, np.float32)
    return out


def _encoded_observations(spec: BehaviorSpec, arrays: list[np.ndarray]) -> list[list[pb.ObservationProto]]:
    """Per row, its observation messages in spec order."""
    columns: list[list[pb.ObservationProto]] = []
    for k, shape in enumerate(spec.observation_shapes):
        if len(shape) == 1:
            columns.append([pb.ObservationProto(shape=list(shape), compression_type=pb.NONE,
                                                dimension_properties=VECTOR_DIMENSIONS,
                                                float_data=pb.ObservationProto.FloatData(data=row.tolist()))
                            for row in arrays[k]])
        else:
            columns.append(_image_protos(arrays[k]))
    return [list(row) for row in zip(*columns)] if columns else []


def _episode_bounds(buffer: AgentBuffer, n: int) -> list[tuple[int, int]]:
    """``(first row, last row + 1)`` of each episode: runs of one episode id, else cut after done rows."""
    if Field.EPISODE_ID in buffer:
        ids = np.asarray(buffer[Field.EPISODE_ID].array)
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    else:
        cuts = np.flatnonzero(np.asarray(buffer[Field.DONE].array)[:-1] > 0) + 1
    edges = [0, *cuts.tolist(), n]
    return list(zip(edges[:-1], edges[1:]))


def _action_proto(spec: BehaviorSpec, row: np.ndarray) -> pb.AgentActionProto:
    """One row's action: continuous_actions and discrete_actions, and the whole row in the
    deprecated vector_actions (older readers, and ``mlagents``' previous actions, read it)."""
    message = pb.AgentActionProto(vector_actions_deprecated=[float(v) for v in row])
    message.continuous_actions.extend(float(v) for v in row[: spec.continuous_size])
    message.discrete_actions.extend(int(v) for v in row[spec.continuous_size:])
    return message


def _step(agent: int, observations: list[pb.ObservationProto], action: pb.AgentActionProto,
          blocked: Optional[np.ndarray], reward: float, ended: bool = False, max_step: bool = False) -> bytes:
    """One serialized AgentInfoActionPairProto (``blocked``: the protocol's mask, true = NOT allowed)."""
    info = pb.AgentInfoProto(reward=reward, done=ended, max_step_reached=max_step, id=agent, observations=observations)
    if blocked is not None:
        info.action_mask.extend(bool(b) for b in blocked)
    return pb.AgentInfoActionPairProto(agent_info=info, action_info=action).SerializeToString()


def _last_observations(spec: BehaviorSpec, buffer: AgentBuffer, obs: list[list[pb.ObservationProto]],
                       last_rows: list[int]) -> dict[int, list[pb.ObservationProto]]:
    """The observations of the step that follows each episode's last row: the row's next
    observations (its own for a buffer without them)."""
    following = _observation_arrays(spec, buffer, next_obs=True)
    if following is None:
        return {r: obs[r] for r in last_rows}
    return dict(zip(last_rows, _encoded_observations(spec, [a[last_rows] for a in following])))


def _records(spec: BehaviorSpec, buffer: AgentBuffer) -> tuple[list[bytes], int, float]:
    """The steps of ``buffer`` as serialized AgentInfoActionPairProto, the number of episodes and
    their mean reward."""
    for key in (Field.ACTIONS, Field.DONE, Field.ENVIRONMENT_REWARDS):
        if key not in buffer:
            raise DemoError(f"the buffer has no field {key!r}")
    n = len(buffer[Field.ACTIONS])
    current = _observation_arrays(spec, buffer, next_obs=False)
    if current is None:
        raise DemoError("the buffer lacks the observations of its spec")
    obs = _encoded_observations(spec, current)
    bounds = _episode_bounds(buffer, n)
    next_obs = _last_observations(spec, buffer, obs, [end - 1 for _, end in bounds])
    actions = [_action_proto(spec, row) for row in np.asarray(buffer[Field.ACTIONS].array).reshape(n, -1)]
    rewards = np.asarray(buffer[Field.ENVIRONMENT_REWARDS].array, np.float32)
    done = np.asarray(buffer[Field.DONE].array) > 0
    truncated = (np.asarray(buffer[Field.TRUNCATED].array) > 0) if Field.TRUNCATED in buffer else np.zeros(n, bool)
    blocked: list[Optional[np.ndarray]] = [None] * n
    if spec.has_action_mask and Field.ACTION_MASK in buffer:
        blocked = list(np.asarray(buffer[Field.ACTION_MASK].array) <= 0)
    out: list[bytes] = []
    for episode, (start, end) in enumerate(bounds):  # the id: the episode's number, as the package's episodeId
        for r in range(start, end):
            out.append(_step(episode, obs[r], actions[r], blocked[r], float(rewards[r - 1]) if r > start else 0.0))
        last = end - 1
        out.append(_step(episode, next_obs[last], actions[last], blocked[last], float(rewards[last]), bool(done[last]),
                         bool(done[last] and truncated[last])))
    return out, len(bounds), float(rewards.sum()) / max(len(bounds), 1)


def write_unity_demo(path: Union[str, os.PathLike[str]], spec: BehaviorSpec, buffer: AgentBuffer,
                     behavior: str = "") -> None:
    """Write ``buffer`` (``kerasrl.demos``' contract) with ``spec`` as an ML-Agents demonstration
    file, atomically (made in memory, then a temporary file renamed into place)."""
    path = os.fspath(path)
    try:
        empty = Field.ACTIONS in buffer and not len(buffer[Field.ACTIONS])
        records, episodes, mean_reward = ([], 0, 0.0) if empty else _records(spec, buffer)
    except DemoError as e:
        raise DemoError(f"Unable to write the demonstration {path}: {one_line(e)}") from e
    name = os.path.splitext(os.path.basename(path))[0]
    out = io.BytesIO()
    meta = _meta_bytes(name, len(records), episodes, mean_reward)
    out.write(meta + b"\0" * (BRAIN_PARAMETERS_OFFSET - len(meta)))
    for body in [_brain_parameters(spec, behavior).SerializeToString(), *records]:
        _write_varint(out, len(body))
        out.write(body)
    folder = os.path.dirname(path)
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)
        with out.getbuffer() as data:
            write_atomically(path, data)
    except OSError as e:
        raise DemoError(f"Unable to write the demonstration {path}: {one_line(e)}") from e
