"""Demonstrations: record → load round trips, and the refusals (kerasrl.demos)."""
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasrl import demos, recording
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment, VisualSimple1DEnvironment
from kerasrl.fields import Field
from kerasrl.spec import BehaviorSpec


def toward_goal_discrete(obs):
    return (obs > 0).astype(np.int32)


def toward_goal_continuous(obs):
    return np.where(obs > 0, 1.0, -1.0).astype(np.float32)


def toward_goal_visual(obs):
    lit_right = obs[0][:, 0, -1, :1] > 0  # goal +1 lights the right half
    return lit_right.astype(np.int32)


def toward_goal_masked(obs):
    direction = np.where(obs > 0, 2, 0)
    return np.concatenate([direction, np.zeros_like(direction)], axis=1).astype(np.int32)


CASES = {
    "discrete": (lambda: Simple1DEnvironment(True, seed=1), toward_goal_discrete),
    "continuous": (lambda: Simple1DEnvironment(False, seed=1), toward_goal_continuous),
    "visual": (lambda: VisualSimple1DEnvironment(True, seed=1, image_shape=(8, 8, 2)), toward_goal_visual),
    "masked": (lambda: MultiBranchMaskedEnvironment(seed=1), toward_goal_masked),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_record_load_round_trip(case, tmp_path):
    make_env, expert = CASES[case]
    env = make_env()
    path = tmp_path / "expert.demo"
    spec, written = recording.record(env, expert, 150, path)
    assert spec == env.behavior_specs[env.behavior_name]
    loaded_spec, loaded = demos.load(path)
    assert loaded_spec == spec
    assert sorted(loaded) == sorted(written)
    for key in written:
        np.testing.assert_array_equal(loaded[key].array, written[key].array, err_msg=key)
        assert loaded[key].array.dtype == written[key].array.dtype, key
    n = 150
    actions = loaded[Field.ACTIONS].array
    assert actions.shape == (n, spec.action_size)
    assert actions.dtype == (np.int32 if spec.is_discrete else np.float32)
    for j, shape in enumerate(spec.visual_observation_shapes):
        assert loaded[Field.visual_obs(j)].array.shape == (n, *shape)
    if spec.vector_observation_size:
        assert loaded[Field.VECTOR_OBS].array.shape == (n, spec.vector_observation_size)
        assert loaded[Field.NEXT_VECTOR_OBS].array.shape == (n, spec.vector_observation_size)
    if spec.is_discrete:
        assert loaded[Field.ACTION_MASK].array.shape == (n, spec.action_mask_size)
    done = loaded[Field.DONE].array
    episode = loaded[Field.EPISODE_ID].array
    # Episodes are contiguous, numbered in order, and each one but the last ends on a done row.
    assert episode[0] == 0 and np.all(np.diff(episode) >= 0) and np.all(np.diff(episode) <= 1)
    ends = np.flatnonzero(np.diff(episode))
    assert np.all(done[ends] == 1.0) and done.sum() >= len(ends)
    # The scripted expert reaches the goal: every finished episode ends with the success reward.
    assert np.all(loaded[Field.ENVIRONMENT_REWARDS].array[done == 1.0] > 1.0)


def test_record_with_a_ppo_policy_and_an_env_manager(tmp_path):
    from kerasrl.common.policy import ActorCriticPolicy
    from kerasrl.models.actor_critic import ActorCritic

    env = Simple1DEnvironment(True, seed=2)
    spec = env.behavior_specs["Simple1D"]
    policy = ActorCriticPolicy(spec, ActorCritic(spec, seed=0), seed=0)
    recording.record(SimpleEnvManager(env), policy, 40, tmp_path / "ppo.demo")
    loaded_spec, buffer = demos.load(tmp_path / "ppo.demo")
    assert loaded_spec == spec and len(buffer[Field.ACTIONS]) == 40


def test_a_folder_of_demos_loads_as_one(tmp_path):
    for seed in (1, 2):
        recording.record(Simple1DEnvironment(True, seed=seed), toward_goal_discrete, 30, tmp_path / f"d{seed}.demo")
    _, buffer = demos.load(tmp_path)
    assert len(buffer[Field.ACTIONS]) == 60
    assert np.all(np.diff(buffer[Field.EPISODE_ID].array) >= 0)


def test_a_demo_for_another_spec_is_refused_naming_both(tmp_path):
    path = tmp_path / "d.demo"
    recording.record(Simple1DEnvironment(True, seed=1), toward_goal_discrete, 20, path)
    other = BehaviorSpec(observation_shapes=((1,),), action_type="continuous", action_shape=(1,))
    with pytest.raises(demos.DemoError) as e:
        demos.load_demo(path, other)
    message = str(e.value)
    assert str(path) in message and "discrete actions (2,)" in message and "continuous actions (1,)" in message
    with pytest.raises(demos.DemoError, match=r"but behavior Ball has observations"):
        demos.load_demo(path, other, behavior="Ball")


def test_a_demo_without_steps_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "d.demo"
    recording.record(Simple1DEnvironment(True, seed=1), toward_goal_discrete, 20, path)
    spec, buffer = demos.load(path)
    for key in list(buffer.keys()):
        buffer[key] = np.asarray(buffer[key].array)[:0]
    demos.write(tmp_path / "zero.demo", spec, buffer, "Simple1D")
    with pytest.raises(demos.DemoError, match=r"zero\.demo holds no steps"):
        demos.load(tmp_path / "zero.demo")


def test_foreign_and_truncated_files_are_refused_naming_the_file(tmp_path):
    import h5py

    text = tmp_path / "notes.demo"
    text.write_text("not a demonstration")
    plain_h5 = tmp_path / "plain.demo"
    with h5py.File(plain_h5, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    good = tmp_path / "good.demo"
    recording.record(Simple1DEnvironment(True, seed=1), toward_goal_discrete, 50, good)
    truncated = tmp_path / "truncated.demo"
    data = good.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    for path in (text, plain_h5, truncated, tmp_path / "missing.demo"):
        with pytest.raises(demos.DemoError, match=str(path)):
            demos.load(path)


def test_a_failed_recording_writes_nothing(tmp_path):
    path = tmp_path / "d.demo"
    path.write_bytes(b"previous content")
    calls = []

    def failing(obs):
        calls.append(1)
        if len(calls) > 5:
            raise RuntimeError("policy crashed")
        return toward_goal_discrete(obs)

    with pytest.raises(RuntimeError, match="policy crashed"):
        recording.record(Simple1DEnvironment(True, seed=1), failing, 50, path)
    with pytest.raises(Exception, match="Actions for behavior"):
        recording.record(Simple1DEnvironment(True, seed=1), lambda obs: np.zeros((1, 3)), 50, path)
    assert os.listdir(tmp_path) == ["d.demo"] and path.read_bytes() == b"previous content"


def test_record_a_gymnasium_id(tmp_path):
    pytest.importorskip("gymnasium")
    spec, buffer = recording.record("CartPole-v1", lambda obs: (obs[:, 2:3] > 0).astype(np.int32), 60,
                                tmp_path / "cartpole.demo", seed=0)
    assert spec.observation_shapes == ((4,),) and spec.discrete_branches == (2,)
    loaded_spec, loaded = demos.load(tmp_path / "cartpole.demo")
    assert loaded_spec == spec and len(loaded[Field.ACTIONS]) == 60


def test_documented_demonstration_example_records_and_loads(tmp_path, monkeypatch):
    """The demonstrations guide's recording snippet, as written, in a scratch folder."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "demonstrations.md").read_text()
    block = re.search(r"## Recording demonstrations\n\n```python\n(.*?)```", page, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "docs/guides/demonstrations.md", "exec"), namespace)  # noqa: S102
    spec, buffer = namespace["spec"], namespace["buffer"]
    assert spec.is_discrete and len(buffer[Field.ACTIONS]) == 500
    assert (tmp_path / "demos" / "expert.demo").exists()


def test_episode_layout_pads_each_episode_to_whole_sequences():
    source, first = demos.episode_layout(np.array([4, 4, 4, 7, 7, 9]), 2)
    np.testing.assert_array_equal(source, [0, 1, 2, -1, 3, 4, 5, -1])
    np.testing.assert_array_equal(first, [True, False, False, True, False, True])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=12), st.integers(1, 5))
def test_episode_layout_keeps_every_row_once_and_no_sequence_spans_two_episodes(lengths, sequence_length):
    episodes = np.repeat(np.arange(len(lengths)), lengths)
    source, _ = demos.episode_layout(episodes, sequence_length)
    assert len(source) % sequence_length == 0
    np.testing.assert_array_equal(source[source >= 0], np.arange(len(episodes)))
    for chunk in source.reshape(-1, sequence_length):
        rows = chunk[chunk >= 0]
        assert len(rows) and len(set(episodes[rows])) == 1
        assert (chunk[len(rows):] == -1).all()


@pytest.mark.parametrize("num_steps", [0, -3, 2.5, True, "10"])
def test_record_refuses_a_step_count_that_is_not_a_positive_integer(tmp_path, num_steps):
    with pytest.raises(demos.DemoError, match=re.escape(f"num_steps must be an integer >= 1, got {num_steps!r}")):
        recording.record(Simple1DEnvironment(True, seed=1), toward_goal_discrete, num_steps, tmp_path / "d.demo")
    assert not (tmp_path / "d.demo").exists()
