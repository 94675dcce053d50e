"""Unity ML-Agents' demonstration files (kerasrl.demo_format): kerasrl writes and reads them back
unchanged, reads a file laid out as Unity's DemonstrationWriter lays it out, refuses broken ones
in one line, and trains from one end to end."""
import io
import os
import struct
import zlib

import numpy as np
import pytest

from kerasrl import demo_format, demos, recording
from kerasrl.demo_format.reader import read_messages
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.fields import Field
from kerasrl.protos import unity_protocol_pb2 as pb
from kerasrl.spec import BehaviorSpec


# -- helpers ---------------------------------------------------------------------------------------
def contract_buffer(spec: BehaviorSpec, episode_lengths, ended, seed=0, png_friendly=True):
    """Rows as kerasrl's recordings hold them: whole episodes, next observations that are the
    following row's observations inside an episode, done/terminated/truncated on ended episodes."""
    rng = np.random.default_rng(seed)
    n = sum(episode_lengths)
    buffer = {}
    steps = [n + len(episode_lengths)]  # each episode has one more observation than rows

    def observations(shape):
        size = (steps[0], *shape)
        if len(shape) == 3 and png_friendly:
            return (rng.integers(0, 256, size) / 255.0).astype(np.float32)
        return rng.standard_normal(size).astype(np.float32)

    per_obs = [observations(s) for s in spec.observation_shapes]
    now = np.concatenate([np.arange(a + i, a + i + length) for i, (a, length) in
                          enumerate(zip(np.cumsum([0, *episode_lengths[:-1]]), episode_lengths))])
    if spec.vector_observation_size:
        flat = np.concatenate([per_obs[k] for k in spec.vector_observation_indices], axis=1)
        buffer[Field.VECTOR_OBS] = flat[now]
        buffer[Field.NEXT_VECTOR_OBS] = flat[now + 1]
    for j, k in enumerate(spec.visual_observation_indices):
        buffer[Field.visual_obs(j)] = per_obs[k][now]
        buffer[Field.next_visual_obs(j)] = per_obs[k][now + 1]
    columns = []
    if spec.continuous_size:
        columns.append(rng.uniform(-1, 1, (n, spec.continuous_size)))
    if spec.discrete_branches:
        columns.append(np.stack([rng.integers(0, b, n) for b in spec.discrete_branches], axis=1))
    actions = np.concatenate(columns, axis=1)
    buffer[Field.ACTIONS] = actions.astype(np.int32 if spec.is_discrete else np.float32)
    if spec.has_action_mask:
        mask = (rng.random((n, spec.action_mask_size)) < 0.7).astype(np.float32)
        buffer[Field.ACTION_MASK] = mask
    done = np.zeros(n, np.float32)
    truncated = np.zeros(n, np.float32)
    episode = np.repeat(np.arange(len(episode_lengths)), episode_lengths).astype(np.int64)
    ends = np.cumsum(episode_lengths) - 1
    for end, how in zip(ends, ended):
        if how:
            done[end] = 1.0
            truncated[end] = float(how == "truncated")
    buffer[Field.MASKS] = np.ones(n, np.float32)
    buffer[Field.DONE] = done
    buffer[Field.TERMINATED] = done * (1 - truncated)
    buffer[Field.TRUNCATED] = truncated
    buffer[Field.ENVIRONMENT_REWARDS] = rng.standard_normal(n).astype(np.float32)
    buffer[Field.EPISODE_ID] = episode
    out = demos.AgentBuffer()
    for key, value in buffer.items():
        out[key] = np.asarray(value)
    return out


def assert_same(loaded, written):
    """Equal fields; images (PNG pixels, k/255 computed as the decoder computes it) up to float rounding."""
    assert sorted(loaded) == sorted(written)
    for key in written:
        if key.startswith(("visual_obs", "next_visual_obs")):
            np.testing.assert_allclose(loaded[key].array, written[key].array, rtol=0, atol=1e-7, err_msg=key)
        else:
            np.testing.assert_array_equal(loaded[key].array, written[key].array, err_msg=key)
        assert loaded[key].array.dtype == written[key].array.dtype, key


def delimited(message) -> bytes:
    body = message.SerializeToString()
    size, prefix = len(body), bytearray()
    while True:
        prefix.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            return bytes(prefix) + body


def unity_file(brain, pairs, api_version=1, name="Expert", close=True) -> bytes:
    """A demo as Unity's DemonstrationWriter writes one: the meta message (counts 0) at byte 0,
    the brain parameters at byte 33, one message per recorded step; on close the meta message's
    bytes at the end, then the meta message with its counts at byte 0 again."""
    f = io.BytesIO()
    f.write(delimited(pb.DemonstrationMetaProto(api_version=api_version, demonstration_name=name)))
    f.seek(33)
    f.write(delimited(brain))
    cumulative, episodes = 0.0, 0
    for pair in pairs:
        cumulative += pair.agent_info.reward
        episodes += pair.agent_info.done
        f.write(delimited(pair))
    if close:
        episodes += 1
        meta = pb.DemonstrationMetaProto(api_version=api_version, demonstration_name=name, number_steps=len(pairs),
                                         number_episodes=episodes, mean_reward=cumulative / episodes)
        f.write(meta.SerializeToString())
        f.seek(0)
        f.write(delimited(meta))
    return f.getvalue()


def step(obs, reward=0.0, done=False, max_step=False, mask=(), continuous=(), discrete=(), agent=0, deprecated=()):
    info = pb.AgentInfoProto(reward=reward, done=done, max_step_reached=max_step, id=agent, action_mask=list(mask))
    for o in obs:
        info.observations.append(o)
    action = pb.AgentActionProto(continuous_actions=list(continuous), discrete_actions=list(discrete),
                                 vector_actions_deprecated=list(deprecated))
    return pb.AgentInfoActionPairProto(agent_info=info, action_info=action)


def vector(*values):
    return pb.ObservationProto(shape=[len(values)], float_data=pb.ObservationProto.FloatData(data=list(values)))


def png_image(rgb: np.ndarray) -> bytes:
    import tensorflow as tf

    return tf.io.encode_png(tf.constant(rgb)).numpy()


def discrete_brain(*branches, name="Ball"):
    brain = pb.BrainParametersProto(brain_name=name)
    brain.action_spec.num_discrete_actions = len(branches)
    brain.action_spec.discrete_branch_sizes.extend(branches)
    return brain


# -- round trips -----------------------------------------------------------------------------------
SPECS = {
    "vector-discrete": BehaviorSpec(((3,), (2,)), "discrete", (3, 2)),
    "vector-continuous": BehaviorSpec(((4,),), "continuous", (2,)),
    "hybrid": BehaviorSpec(((2,),), "hybrid", (2, 3, 4)),
    "visual": BehaviorSpec(((6, 5, 3), (2,), (4, 4, 1), (3, 2, 5)), "discrete", (2,)),
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_write_then_read_gives_the_same_data(case, tmp_path):
    spec = SPECS[case]
    written = contract_buffer(spec, [4, 1, 6, 3, 2], ["terminated", "truncated", "terminated", None, None])
    path = tmp_path / "expert.demo"
    demos.write(path, spec, written, "Ball", format="unity")
    assert not demo_format.is_hdf5(path)
    loaded_spec, loaded = demos.load(path)
    assert loaded_spec == spec
    assert_same(loaded, written)
    _, _, behavior = demo_format.read_unity_demo(path)
    assert behavior == "Ball"
    assert sorted(os.listdir(tmp_path)) == ["expert.demo"]


def test_images_that_png_cannot_hold_exactly_are_written_as_floats(tmp_path):
    spec = BehaviorSpec(((5, 4, 2),), "continuous", (1,))
    written = contract_buffer(spec, [5, 3], ["terminated", None], png_friendly=False)
    demos.write(tmp_path / "f.demo", spec, written, format="unity")
    pair = read_messages("f", (tmp_path / "f.demo").read_bytes())[2][0]
    assert pair.agent_info.observations[0].compression_type == pb.NONE
    loaded = demos.load(tmp_path / "f.demo")[1]
    for key in written:  # floats: bit for bit
        np.testing.assert_array_equal(loaded[key].array, written[key].array, err_msg=key)
    png_spec = BehaviorSpec(((5, 4, 2),), "continuous", (1,))
    demos.write(tmp_path / "p.demo", png_spec, contract_buffer(png_spec, [3], ["terminated"]), format="unity")
    pair = read_messages("p", (tmp_path / "p.demo").read_bytes())[2][0]
    assert pair.agent_info.observations[0].compression_type == pb.PNG


def test_recording_to_a_demo_path_writes_unity_format_and_to_h5_writes_hdf5(tmp_path):
    env = lambda: Simple1DEnvironment(True, seed=3)  # noqa: E731
    policy = lambda obs: (obs > 0).astype(np.int32)  # noqa: E731
    spec, unity = recording.record(env(), policy, 40, tmp_path / "u.demo")
    _, hdf5 = recording.record(env(), policy, 40, tmp_path / "h.h5")
    _, forced = recording.record(env(), policy, 40, tmp_path / "forced.demo", format="hdf5")
    assert not demo_format.is_hdf5(tmp_path / "u.demo")
    assert demo_format.is_hdf5(tmp_path / "h.h5") and demo_format.is_hdf5(tmp_path / "forced.demo")
    for name, written in (("u.demo", unity), ("h.h5", hdf5), ("forced.demo", forced)):
        loaded_spec, loaded = demos.load(tmp_path / name)
        assert loaded_spec == spec
        assert_same(loaded, written)
    with pytest.raises(demos.DemoError, match="Unknown demonstration format 'npz'"):
        recording.record(env(), policy, 40, tmp_path / "x.demo", format="npz")


def test_the_header_fits_its_33_bytes_and_counts_the_steps(tmp_path):
    spec = SPECS["vector-discrete"]
    path = tmp_path / ("a-very-long-demonstration-name-indeed" * 3 + ".demo")
    written = contract_buffer(spec, [4, 2], ["terminated", None])
    demos.write(path, spec, written, "Ball", format="unity")
    data = path.read_bytes()
    size = data[0]
    assert 1 + size <= 33
    meta = pb.DemonstrationMetaProto.FromString(data[1:1 + size])
    assert meta.api_version == 1 and meta.number_steps == 4 + 1 + 2 + 1 and meta.number_episodes == 2
    assert path.name.startswith(meta.demonstration_name) and meta.demonstration_name
    np.testing.assert_allclose(meta.mean_reward, written[Field.ENVIRONMENT_REWARDS].array.sum() / 2, rtol=1e-5)
    brain = pb.BrainParametersProto.FromString(data[34:34 + data[33]])
    assert brain.brain_name == "Ball" and list(brain.action_spec.discrete_branch_sizes) == [3, 2]


# -- a file laid out as Unity writes it ------------------------------------------------------------
def test_a_file_written_the_way_unity_writes_it_reads(tmp_path):
    grey = np.array([[[0], [128]], [[255], [64]]], np.uint8).repeat(3, axis=2)  # 2x2, R = G = B
    camera = pb.ObservationProto(shape=[2, 2, 1], compression_type=pb.PNG, compressed_data=png_image(grey))
    pairs = [
        # episode 0: three decisions, then the done step (max step reached); masks: True = NOT allowed
        step([vector(0.0, 1.0), camera], reward=0.0, mask=[False, True, False], discrete=[0]),
        step([vector(0.5, 1.5), camera], reward=0.25, mask=[False, False, False], discrete=[1]),
        step([vector(1.0, 2.0), camera], reward=0.5, mask=[True, False, False], discrete=[2]),
        step([vector(1.5, 2.5), camera], reward=1.0, done=True, max_step=True, mask=[False] * 3, discrete=[2]),
        # episode 1: two decisions, ends in a terminal state
        step([vector(9.0, 9.0), camera], reward=0.0, discrete=[1]),
        step([vector(8.0, 8.0), camera], reward=-0.5, discrete=[0]),
        step([vector(7.0, 7.0), camera], reward=2.0, done=True, discrete=[0]),
        # episode 2, still going when the recording stopped: its last step has no outcome
        step([vector(3.0, 3.0), camera], reward=0.0, discrete=[2]),
        step([vector(4.0, 4.0), camera], reward=0.125, discrete=[1]),
    ]
    path = tmp_path / "Unity.demo"
    path.write_bytes(unity_file(discrete_brain(3), pairs))
    spec, buffer = demos.load_demo(path, BehaviorSpec(((2,), (2, 2, 1)), "discrete", (3,)))
    assert spec.observation_shapes == ((2,), (2, 2, 1)) and spec.discrete_branches == (3,)
    np.testing.assert_array_equal(buffer[Field.VECTOR_OBS].array,
                                  [[0, 1], [0.5, 1.5], [1, 2], [9, 9], [8, 8], [3, 3]])
    np.testing.assert_array_equal(buffer[Field.NEXT_VECTOR_OBS].array,
                                  [[0.5, 1.5], [1, 2], [1.5, 2.5], [8, 8], [7, 7], [4, 4]])
    np.testing.assert_array_equal(buffer[Field.ACTIONS].array, [[0], [1], [2], [1], [0], [2]])
    assert buffer[Field.ACTIONS].array.dtype == np.int32
    np.testing.assert_array_equal(buffer[Field.ACTION_MASK].array[:3], [[1, 0, 1], [1, 1, 1], [0, 1, 1]])
    np.testing.assert_array_equal(buffer[Field.ACTION_MASK].array[3:], np.ones((3, 3)))
    np.testing.assert_array_equal(buffer[Field.ENVIRONMENT_REWARDS].array, [0.25, 0.5, 1.0, -0.5, 2.0, 0.125])
    np.testing.assert_array_equal(buffer[Field.DONE].array, [0, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(buffer[Field.TRUNCATED].array, [0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(buffer[Field.TERMINATED].array, [0, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(buffer[Field.EPISODE_ID].array, [0, 0, 0, 1, 1, 2])
    np.testing.assert_array_equal(buffer[Field.MASKS].array, np.ones(6))
    image = buffer[Field.visual_obs(0)].array
    assert image.shape == (6, 2, 2, 1) and image.dtype == np.float32
    np.testing.assert_array_equal(image[0, :, :, 0], np.array([[0, 128], [255, 64]], np.float32) * np.float32(1 / 255))
    assert Field.next_visual_obs(0) in buffer


def test_channels_first_images_as_packages_2_and_3_write_them_read(tmp_path):
    """Packages 2.x and 3.x send images as (channels, height, width), their dimension properties
    (NONE, TRANSLATIONAL_EQUIVARIANCE, TRANSLATIONAL_EQUIVARIANCE) saying so: float data channels
    first, PNG data an ordinary image; kerasrl reads both as (height, width, channels)."""
    image = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) / 24  # (height, width, channels)
    floats = pb.ObservationProto(shape=[4, 2, 3], dimension_properties=[1, 2, 2],
                                 float_data=pb.ObservationProto.FloatData(data=image.transpose(2, 0, 1).ravel()))
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10
    png = pb.ObservationProto(shape=[3, 2, 3], dimension_properties=[1, 2, 2], compression_type=pb.PNG,
                              compressed_data=png_image(rgb))
    pairs = [step([floats, png], discrete=[1]), step([floats, png], reward=1.0, done=True, discrete=[0])]
    path = tmp_path / "chw.demo"
    path.write_bytes(unity_file(discrete_brain(2), pairs))
    spec, buffer = demos.load(path)
    assert spec.observation_shapes == ((2, 3, 4), (2, 3, 3))
    np.testing.assert_array_equal(buffer[Field.visual_obs(0)].array[0], image)
    np.testing.assert_array_equal(buffer[Field.visual_obs(1)].array[0], rgb * np.float32(1 / 255))
    # kerasrl writes images channels first too
    demos.write(tmp_path / "again.demo", spec, buffer, format="unity")
    observation = read_messages("x", (tmp_path / "again.demo").read_bytes())[2][0].agent_info.observations
    assert list(observation[0].shape) == [4, 2, 3] and list(observation[0].dimension_properties) == [1, 2, 2]
    assert observation[1].compression_type == pb.PNG and list(observation[1].shape) == [3, 2, 3]


def test_older_layouts_interleaved_agents_and_an_unclosed_recording_read(tmp_path):
    """Actions in ``vector_actions_deprecated`` and the brain's deprecated action fields; two
    agents' steps interleaved (each its own episodes, by id); a recording never closed (its
    header says 0 steps: every step to the end of the file is read)."""
    brain = pb.BrainParametersProto(brain_name="Old", vector_action_size_deprecated=[2],
                                    vector_action_space_type_deprecated=pb.continuous)
    pairs = [
        step([vector(1.0)], agent=1, deprecated=[0.5, -0.5]),
        step([vector(10.0)], agent=2, deprecated=[1.0, 1.0]),
        step([vector(2.0)], agent=1, reward=1.0, deprecated=[0.25, 0.25]),
        step([vector(20.0)], agent=2, reward=3.0, done=True, deprecated=[0.0, 0.0]),
        step([vector(3.0)], agent=1, reward=2.0, done=True, deprecated=[0.0, 0.0]),
    ]
    path = tmp_path / "old.demo"
    path.write_bytes(unity_file(brain, pairs, api_version=0, close=False))
    spec, buffer = demos.load(path)
    assert spec == BehaviorSpec(((1,),), "continuous", (2,))
    # agent 2's episode ended first, so it comes first
    np.testing.assert_array_equal(buffer[Field.VECTOR_OBS].array, [[10], [1], [2]])
    np.testing.assert_array_equal(buffer[Field.NEXT_VECTOR_OBS].array, [[20], [2], [3]])
    np.testing.assert_array_equal(buffer[Field.ACTIONS].array, [[1, 1], [0.5, -0.5], [0.25, 0.25]])
    np.testing.assert_array_equal(buffer[Field.ENVIRONMENT_REWARDS].array, [3, 1, 2])
    np.testing.assert_array_equal(buffer[Field.EPISODE_ID].array, [0, 1, 1])
    np.testing.assert_array_equal(buffer[Field.DONE].array, [1, 0, 1])
    assert Field.ACTION_MASK not in buffer


def test_a_folder_of_unity_and_hdf5_demos_loads_as_one(tmp_path):
    spec = BehaviorSpec(((1,),), "discrete", (2,))
    policy = lambda obs: (obs > 0).astype(np.int32)  # noqa: E731
    recording.record(Simple1DEnvironment(True, seed=1), policy, 30, tmp_path / "a.demo")
    recording.record(Simple1DEnvironment(True, seed=2), policy, 20, tmp_path / "b.demo", format="hdf5")
    pairs = [step([vector(1.0)], discrete=[1]), step([vector(1.0)], reward=1.0, done=True, discrete=[1])]
    (tmp_path / "c.demo").write_bytes(unity_file(discrete_brain(2, name="Simple1D"), pairs))
    loaded_spec, buffer = demos.load(tmp_path)
    assert loaded_spec == spec and len(buffer[Field.ACTIONS]) == 30 + 20 + 1
    episodes = buffer[Field.EPISODE_ID].array
    assert episodes[0] == 0 and np.all(np.diff(episodes) >= 0) and episodes[-1] > episodes[-2]


# -- refusals --------------------------------------------------------------------------------------
def one_line_error(path):
    with pytest.raises(demos.DemoError) as e:
        demos.load(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message, message
    return message


def test_a_truncated_file_is_one_line_naming_the_file(tmp_path):
    pairs = [step([vector(float(i))], reward=1.0, done=i == 4, discrete=[1]) for i in range(5)]
    data = unity_file(discrete_brain(2), pairs)
    for cut, where in [(1, "header"), (20, "brain parameters"), (35, "brain parameters"),
                       (len(data) - len(pairs[-1].SerializeToString()) - 30, "inside step"),
                       (len(data) - 40, "inside step 5 of the 5")]:
        path = tmp_path / f"cut-{cut}.demo"
        path.write_bytes(data[:cut])
        message = one_line_error(path)
        assert "truncated" in message and where in message, (cut, message)


def test_an_unsupported_api_version_is_one_line(tmp_path):
    path = tmp_path / "future.demo"
    path.write_bytes(unity_file(discrete_brain(2), [step([vector(1.0)], discrete=[1])], api_version=7))
    message = one_line_error(path)
    assert "api_version 7" in message and "reads versions 0, 1" in message


def test_other_broken_files_are_one_line(tmp_path):
    cases = {
        "empty.demo": b"",
        "text.demo": b"not a demonstration at all, just some text that goes on for a while" * 3,
        "no-steps.demo": unity_file(discrete_brain(2), []),
        "one-step.demo": unity_file(discrete_brain(2), [step([vector(1.0)], discrete=[1])]),
        "bad-action.demo": unity_file(discrete_brain(2), [step([vector(1.0)], discrete=[5]),
                                                          step([vector(1.0)], done=True, discrete=[0])]),
        "no-actions.demo": unity_file(pb.BrainParametersProto(), [step([vector(1.0)]), step([vector(1.0)])]),
        "bad-png.demo": unity_file(discrete_brain(2), [
            step([pb.ObservationProto(shape=[2, 2, 3], compression_type=pb.PNG, compressed_data=b"\x89PNG junk")],
                 discrete=[1]), step([vector(1.0)], done=True, discrete=[0])]),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        message = one_line_error(tmp_path / name)
        if name in ("no-steps.demo", "one-step.demo"):
            assert "holds no steps" in message


def test_a_unity_demo_for_another_spec_is_refused_naming_both(tmp_path):
    path = tmp_path / "d.demo"
    recording.record(Simple1DEnvironment(True, seed=1), lambda obs: (obs > 0).astype(np.int32), 20, path)
    with pytest.raises(demos.DemoError, match=r"d\.demo is for .*discrete actions \(2,\).*continuous actions \(1,\)"):
        demos.load_demo(path, BehaviorSpec(((1,),), "continuous", (1,)))


def test_a_failed_write_leaves_nothing(tmp_path):
    spec = SPECS["vector-continuous"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(demos.DemoError, match=rf"Unable to write the demonstration {blocker / 'x.demo'}: "):
        demos.write(blocker / "x.demo", spec, contract_buffer(spec, [3], ["terminated"]), format="unity")
    incomplete = demos.AgentBuffer()
    incomplete[Field.VECTOR_OBS] = np.zeros((3, 4), np.float32)
    with pytest.raises(demos.DemoError, match="Unable to write the demonstration .*has no field 'actions'"):
        demos.write(tmp_path / "y.demo", spec, incomplete, format="unity")
    assert sorted(os.listdir(tmp_path)) == ["file"]


# -- PNG -------------------------------------------------------------------------------------------
def handmade_png(pixels: np.ndarray, color: int, filters, palette: bytes = b"") -> bytes:
    """A PNG with the scanline filters ``filters`` (cycled), filtered by the PNG specification."""
    height, width = pixels.shape[:2]
    bpp = pixels.shape[2] if pixels.ndim == 3 else 1
    data = pixels.reshape(height, width * bpp).astype(np.int64)
    raw = bytearray()
    prior = np.zeros(width * bpp, np.int64)
    for y in range(height):
        kind = filters[y % len(filters)]
        line = data[y]
        left = np.concatenate([np.zeros(bpp, np.int64), line[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int64), prior[:-bpp]])
        if kind == 0:
            out = line
        elif kind == 1:
            out = line - left
        elif kind == 2:
            out = line - prior
        elif kind == 3:
            out = line - (left + prior) // 2
        else:
            p = left + prior - upleft
            pa, pb_, pc = abs(p - left), abs(p - prior), abs(p - upleft)
            out = line - np.where((pa <= pb_) & (pa <= pc), left, np.where(pb_ <= pc, prior, upleft))
        raw += bytes([kind]) + bytes((out % 256).astype(np.uint8))
        prior = line

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    extra = chunk(b"PLTE", palette) if palette else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra + chunk(b"IDAT", zlib.compress(bytes(raw)))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("color, channels", [(0, 1), (2, 3), (4, 2), (6, 4), (3, 1)],
                         ids=["grey", "rgb", "grey-alpha", "rgba", "palette"])
def test_the_png_decoder_undoes_every_filter_as_tensorflow_does(color, channels):
    import tensorflow as tf

    rng = np.random.default_rng(color)
    pixels = rng.integers(0, 256 if color != 3 else 7, (9, 7, channels)).astype(np.uint8)
    palette = rng.integers(0, 256, 7 * 3).astype(np.uint8).tobytes() if color == 3 else b""
    png = handmade_png(pixels if channels > 1 else pixels[:, :, 0], color, [0, 1, 2, 3, 4, 4, 3, 2, 1], palette)
    expected = tf.io.decode_png(png, channels=3).numpy()
    np.testing.assert_array_equal(demo_format.decode_png(png), expected)


def test_the_png_encoder_writes_what_tensorflow_reads():
    import tensorflow as tf

    image = np.random.default_rng(0).integers(0, 256, (5, 11, 3)).astype(np.uint8)
    np.testing.assert_array_equal(tf.io.decode_png(demo_format.encode_png(image), channels=3).numpy(), image)


# -- end to end ------------------------------------------------------------------------------------
def test_offline_bc_trains_from_a_unity_format_demo(tmp_path):
    """A demo laid out as Unity writes it (the scripted Simple1D expert: move toward the goal's
    sign) feeds offline_bc for a short run."""
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.settings import RunContext
    from kerasrl.trainers import TrainerController, create_trainers

    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(20):
        goal = float(rng.choice([-1.0, 1.0]))
        for t in range(4):
            pairs.append(step([vector(goal)], reward=0.0 if t == 0 else -0.01, discrete=[int(goal > 0)],
                              mask=[False, False]))
        pairs.append(step([vector(goal)], reward=1.0, done=True, discrete=[int(goal > 0)], mask=[False, False]))
    path = tmp_path / "Simple1D.demo"
    path.write_bytes(unity_file(discrete_brain(2, name="Simple1D"), pairs))
    config = {"default": {"trainer": "offline_bc", "demo_path": str(path), "batches_per_epoch": 4, "batch_size": 16,
                          "learning_rate": 3e-3, "max_steps": 30, "summary_freq": 10, "hidden_units": 16}}
    manager = SimpleEnvManager(Simple1DEnvironment(True, seed=1))
    context = RunContext(summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=1, keep_checkpoints=1)
    trainers = create_trainers(config, manager.behavior_specs, context)
    TrainerController(trainers, context.model_path, context.summaries_dir, "id", save_freq=99999,
                      training_seed=1).start_learning(manager)
    trainer = trainers["Simple1D"]
    assert trainer.update_count > 0 and trainer.get_step >= 30
