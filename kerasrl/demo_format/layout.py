"""What a behavior's protocol messages mean in kerasrl's terms: its actions (``BrainParametersProto``)
and its observations' shapes and layout (``ObservationProto``). A demonstration file and a Unity
player describe a behavior with the same messages, so both the demo reader and the Unity
environment read them here."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from kerasrl.demo_format._common import CHANNELS_FIRST, Corrupt
from kerasrl.protos import unity_protocol_pb2 as pb
from kerasrl.spec import ActionType, BehaviorSpec

__all__ = ["CHANNELS_FIRST", "action_layout", "behavior_spec_of", "channels_first", "observation_shape", "to_kerasrl_layout"]


def action_layout(brain: pb.BrainParametersProto) -> tuple[int, tuple[int, ...]]:
    """``(continuous size, discrete branch sizes)`` of a behavior: from its action spec, or from the
    deprecated fields a package older than Communication API 1.3 filled instead."""
    action = brain.action_spec
    continuous, branches = int(action.num_continuous_actions), tuple(int(b) for b in action.discrete_branch_sizes)
    if continuous or branches:
        return continuous, branches
    sizes = tuple(int(s) for s in brain.vector_action_size_deprecated)
    if brain.vector_action_space_type_deprecated == pb.continuous:
        return (sizes[0] if sizes else 0), ()
    return 0, sizes


def channels_first(proto: pb.ObservationProto) -> bool:
    """Whether an image observation's shape (and float data) is (channels, height, width): marked
    so by its dimension properties, as packages 2.x and 3.x send cameras and render textures."""
    return len(proto.shape) == 3 and tuple(proto.dimension_properties) == CHANNELS_FIRST


def observation_shape(proto: pb.ObservationProto) -> tuple[int, ...]:
    """kerasrl's shape of an observation: ``(size,)`` or ``(height, width, channels)``;
    :class:`Corrupt` (``"of shape ...: why"``) for a shape kerasrl does not train on."""
    shape = tuple(int(d) for d in proto.shape)
    if len(shape) not in (1, 3):
        raise Corrupt(f"of shape {shape}: kerasrl trains vector (1-D) and visual (height, width, channels) "
                      "observations, not variable-length (2-D) ones such as a BufferSensor's")
    if any(d <= 0 for d in shape):
        raise Corrupt(f"of shape {shape}, with a dimension that is not positive")
    return (shape[1], shape[2], shape[0]) if channels_first(proto) else shape


def to_kerasrl_layout(data: np.ndarray, proto: pb.ObservationProto, shape: Sequence[int]) -> np.ndarray:
    """An observation's float values as an array of kerasrl's ``shape`` (channels last)."""
    if len(shape) == 3 and channels_first(proto):
        return data.reshape(shape[2], shape[0], shape[1]).transpose(1, 2, 0)
    return data.reshape(tuple(shape))


def behavior_spec_of(brain: pb.BrainParametersProto, info: pb.AgentInfoProto) -> BehaviorSpec:
    """The spec of a behavior from its brain parameters and one agent's observations;
    :class:`Corrupt` (its reason, naming the observation) when kerasrl cannot train it."""
    continuous, branches = action_layout(brain)
    if not continuous and not branches:
        raise Corrupt("has no actions")
    shapes = []
    for k, obs in enumerate(info.observations):
        try:
            shapes.append(observation_shape(obs))
        except Corrupt as e:
            raise Corrupt(f"sends observation {k} {e}") from None
    if not shapes:
        raise Corrupt("has no observations")
    if continuous and branches:
        return BehaviorSpec(tuple(shapes), ActionType.HYBRID, (continuous, *branches))
    if continuous:
        return BehaviorSpec(tuple(shapes), ActionType.CONTINUOUS, (continuous,))
    return BehaviorSpec(tuple(shapes), ActionType.DISCRETE, branches)
