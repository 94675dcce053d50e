"""How a behavior's protocol messages become a spec and arrays, shared by the Unity environment and
the demo reader: actions of every package generation, and camera images sent channels first (as
packages 2.x and 3.x send them) or channels last (1.x)."""
from __future__ import annotations

import numpy as np
import pytest

from kerasrl.demo_format.layout import CHANNELS_FIRST, action_layout, behavior_spec_of
from kerasrl.demo_format.png import encode_png
from kerasrl.envs.unity.environment import behavior_spec
from kerasrl.envs.unity.observations import observation_arrays
from kerasrl.exception import EnvironmentException
from kerasrl.protos import unity_protocol_pb2 as pb


def _image(values: np.ndarray, channels_first: bool, png: bool = False) -> pb.ObservationProto:
    """An observation proto of ``values`` ((height, width, channels)), laid out as a package sends it."""
    height, width, channels = values.shape
    obs = pb.ObservationProto(shape=[channels, height, width] if channels_first else [height, width, channels])
    if channels_first:
        obs.dimension_properties.extend(CHANNELS_FIRST)
    if png:
        obs.compression_type = pb.PNG
        obs.compressed_data = encode_png(np.round(values * 255).astype(np.uint8))
    else:
        data = values.transpose(2, 0, 1) if channels_first else values
        obs.float_data.data.extend(data.ravel().tolist())
    return obs


@pytest.mark.parametrize("channels_first", [True, False])
@pytest.mark.parametrize("png", [True, False])
def test_camera_images_are_channels_last_whatever_the_package_sends(channels_first, png):
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, size=(4, 5, 3)).astype(np.float32) / 255 for _ in range(2)]
    infos = [pb.AgentInfoProto(id=i, observations=[_image(im, channels_first, png)]) for i, im in enumerate(images)]
    brain = pb.BrainParametersProto(brain_name="Cam", action_spec=pb.ActionSpecProto(discrete_branch_sizes=[3]))
    spec = behavior_spec(brain, infos[0])
    assert spec.observation_shapes == ((4, 5, 3),)
    (decoded,) = observation_arrays(infos, spec.observation_shapes, "Cam")
    assert decoded.shape == (2, 4, 5, 3)
    np.testing.assert_allclose(decoded, np.stack(images), atol=1e-6)


def test_actions_of_every_package_generation():
    today = pb.BrainParametersProto(action_spec=pb.ActionSpecProto(num_continuous_actions=2, discrete_branch_sizes=[3, 2]))
    assert action_layout(today) == (2, (3, 2))
    old_discrete = pb.BrainParametersProto(vector_action_size_deprecated=[3, 2], vector_action_space_type_deprecated=pb.discrete)
    assert action_layout(old_discrete) == (0, (3, 2))
    old_continuous = pb.BrainParametersProto(vector_action_size_deprecated=[4], vector_action_space_type_deprecated=pb.continuous)
    assert action_layout(old_continuous) == (4, ())
    info = pb.AgentInfoProto(observations=[pb.ObservationProto(shape=[3])])
    assert behavior_spec_of(today, info).is_hybrid and behavior_spec_of(old_continuous, info).is_continuous


def test_a_behavior_kerasrl_cannot_train_is_named_in_one_line():
    brain = pb.BrainParametersProto(brain_name="Buf", action_spec=pb.ActionSpecProto(discrete_branch_sizes=[2]))
    buffer_sensor = pb.AgentInfoProto(observations=[pb.ObservationProto(shape=[3]), pb.ObservationProto(shape=[5, 4])])
    with pytest.raises(EnvironmentException, match=r"^Behavior 'Buf' sends observation 1 of shape \(5, 4\): kerasrl "
                                                   r"trains vector .* BufferSensor's\.$"):
        behavior_spec(brain, buffer_sensor)
    no_actions = pb.BrainParametersProto(brain_name="Idle")
    with pytest.raises(EnvironmentException, match=r"^Behavior 'Idle' has no actions\.$"):
        behavior_spec(no_actions, buffer_sensor)
