"""GymnasiumEnv: spaces, autoreset handling, terminated vs truncated, seeding, NaN checks."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from kerasrl.envs import EnvironmentException, GymnasiumEnv, StepResult


def _step(env: GymnasiumEnv, action: Any) -> StepResult:
    return env.step({env.behavior_name: action})[env.behavior_name]


def _reset(env: GymnasiumEnv) -> StepResult:
    return env.reset()[env.behavior_name]


class CountdownEnv(gymnasium.Env):
    """Observation = [steps left, episode index]; terminates when the countdown reaches 0.

    Action spaces and observation spaces are configurable; rewards are the step index so that a
    reset step's reward (which must be reported as 0) is never 0 by accident.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 3, action_space: Optional[spaces.Space] = None,
                 nan_at: Optional[int] = None, nan_in: str = "obs") -> None:
        self.length = length
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = action_space if action_space is not None else spaces.Discrete(2)
        self.nan_at, self.nan_in = nan_at, nan_in
        self.left = length
        self.episode = -1
        self.t = 0
        self.actions: list[Any] = []

    def _obs(self) -> np.ndarray:
        return np.array([self.left, self.episode], np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.left = self.length
        self.episode += 1
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.actions.append(action)
        self.t += 1
        self.left -= 1
        obs, reward = self._obs(), float(self.t)
        if self.nan_at is not None and self.t == self.nan_at:
            if self.nan_in == "obs":
                obs[0] = np.nan
            else:
                reward = float("inf")
        return obs, reward, self.left == 0, False, {}


# --- CartPole ---------------------------------------------------------------------------------

@pytest.mark.parametrize("num_envs", [1, 4])
def test_cartpole_spec_and_steps(num_envs: int) -> None:
    env = GymnasiumEnv("CartPole-v1", num_envs=num_envs, seed=3)
    assert env.behavior_name == "CartPole-v1"
    spec = env.behavior_specs["CartPole-v1"]
    assert spec.observation_shapes == ((4,),)
    assert spec.is_discrete and spec.action_shape == (2,)
    first = _reset(env)
    assert list(first.agent_ids) == list(range(num_envs))
    assert first.observations[0].shape == (num_envs, 4) and first.observations[0].dtype == np.float32
    assert not first.done.any()
    episodes = 0
    for _ in range(60):
        r = _step(env, np.ones((num_envs, 1), np.int32))
        assert r.rewards.dtype == np.float32 and r.observations[0].shape == (num_envs, 4)
        assert not r.truncated.any()
        episodes += int(r.terminated.sum())
    assert episodes >= num_envs  # always pushing right topples the pole within ~10 steps
    env.close()


def test_cartpole_vector_uses_native_vector_env() -> None:
    env = GymnasiumEnv("CartPole-v1", num_envs=4)
    assert env.is_vector and type(env.env).__name__ == "CartPoleVectorEnv"
    sync = GymnasiumEnv("CartPole-v1", num_envs=2, vectorization_mode="sync")
    assert isinstance(sync.env, SyncVectorEnv)


@pytest.mark.parametrize("num_envs", [1, 3])
@pytest.mark.parametrize("mode", [None, "sync"])
def test_truncation_final_obs_and_reset_step(num_envs: int, mode: Optional[str]) -> None:
    if num_envs == 1 and mode == "sync":
        env = GymnasiumEnv("CartPole-v1", num_envs=1, seed=0, vectorization_mode="sync", max_episode_steps=3)
    else:
        env = GymnasiumEnv("CartPole-v1", num_envs=num_envs, seed=0, vectorization_mode=mode, max_episode_steps=3)
    _reset(env)
    action = np.zeros((num_envs, 1), np.int32)
    results = [_step(env, action) for _ in range(4)]
    for r in results[:2]:
        assert not r.done.any() and np.all(r.rewards == 1.0)
    done = results[2]
    assert done.truncated.all() and not done.terminated.any()
    assert np.all(done.rewards == 1.0)
    # the final observation continues the trajectory: velocity keeps decreasing (pushing left)
    assert np.all(done.observations[0][:, 1] < results[1].observations[0][:, 1])
    after = results[3]
    assert not after.done.any()
    assert np.all(after.rewards == 0.0)
    # the reset observation is a fresh start: CartPole resets every state variable to ±0.05
    assert np.all(np.abs(after.observations[0]) <= 0.05)
    nxt = _step(env, action)
    assert np.all(nxt.rewards == 1.0) and not nxt.done.any()


@pytest.mark.parametrize("num_envs", [1, 2])
def test_termination_kept_apart_from_truncation(num_envs: int) -> None:
    if num_envs == 1:
        env = GymnasiumEnv(CountdownEnv(length=2))
    else:
        env = GymnasiumEnv(SyncVectorEnv([lambda: CountdownEnv(length=2)] * num_envs))
    first = _reset(env)
    np.testing.assert_array_equal(first.observations[0][:, 0], 2)
    r1 = _step(env, np.zeros((num_envs, 1), np.int32))
    r2 = _step(env, np.zeros((num_envs, 1), np.int32))
    assert not r1.done.any()
    assert r2.terminated.all() and not r2.truncated.any()
    np.testing.assert_array_equal(r2.observations[0], [[0.0, 0.0]] * num_envs)  # final obs, episode 0
    np.testing.assert_array_equal(r2.rewards, 2.0)
    r3 = _step(env, np.zeros((num_envs, 1), np.int32))
    assert not r3.done.any()
    np.testing.assert_array_equal(r3.rewards, 0.0)
    np.testing.assert_array_equal(r3.observations[0], [[2.0, 1.0]] * num_envs)  # reset obs, episode 1
    r4 = _step(env, np.zeros((num_envs, 1), np.int32))
    np.testing.assert_array_equal(r4.observations[0], [[1.0, 1.0]] * num_envs)
    assert r4.rewards[0] == 3.0  # the env's own 3rd step: the reset did not consume an env step


def test_same_step_autoreset_takes_final_obs_from_info() -> None:
    vec = SyncVectorEnv([lambda: CountdownEnv(length=2), lambda: CountdownEnv(length=3)],
                        autoreset_mode=AutoresetMode.SAME_STEP)
    env = GymnasiumEnv(vec)
    assert env.autoreset_mode == AutoresetMode.SAME_STEP
    _reset(env)
    a = np.zeros((2, 1), np.int32)
    _step(env, a)
    r = _step(env, a)
    assert list(r.terminated) == [True, False]
    np.testing.assert_array_equal(r.observations[0], [[0.0, 0.0], [1.0, 0.0]])
    r = _step(env, a)
    assert list(r.terminated) == [False, True]
    # env 0 was already reset in the same step as its done: this step is real (episode 1)
    np.testing.assert_array_equal(r.observations[0], [[1.0, 1.0], [0.0, 0.0]])
    assert r.rewards[0] == 3.0


def test_disabled_autoreset_is_rejected() -> None:
    vec = SyncVectorEnv([lambda: CountdownEnv()], autoreset_mode=AutoresetMode.DISABLED)
    with pytest.raises(EnvironmentException, match="autoreset"):
        GymnasiumEnv(vec)


# --- spaces -----------------------------------------------------------------------------------

def test_box_actions_rescaled_pendulum() -> None:
    env = GymnasiumEnv("Pendulum-v1", seed=0)
    spec = env.behavior_specs["Pendulum-v1"]
    assert spec.is_continuous and spec.action_shape == (1,) and spec.observation_shapes == ((3,),)
    assert env._env_action({"Pendulum-v1": np.array([[1.0]])}) == pytest.approx([2.0])
    assert env._env_action({"Pendulum-v1": np.array([[-0.25]])}) == pytest.approx([-0.5])
    assert env._env_action({"Pendulum-v1": np.array([[5.0]])}) == pytest.approx([2.0])  # clipped
    _reset(env)
    r = _step(env, np.array([[0.5]], np.float32))
    assert r.observations[0].shape == (1, 3) and not r.done.any()
    with pytest.raises(EnvironmentException, match="Pendulum-v1"):
        _step(env, np.array([[np.nan]], np.float32))


def test_box_actions_mountain_car_vector_and_asymmetric_bounds() -> None:
    env = GymnasiumEnv("MountainCarContinuous-v0", num_envs=2, seed=1)
    _reset(env)
    r = _step(env, np.array([[1.0], [-1.0]], np.float32))
    assert r.observations[0].shape == (2, 2)
    np.testing.assert_allclose(r.rewards, [-0.1, -0.1], rtol=1e-5)  # reward −0.1·a²
    box = spaces.Box(np.array([0.0, -np.inf, 0.0], np.float32), np.array([10.0, np.inf, np.inf], np.float32))
    env2 = GymnasiumEnv(CountdownEnv(action_space=box))
    act = env2._env_action({env2.behavior_name: np.array([[-1.0, 0.5, -0.5]])})
    np.testing.assert_allclose(act, [0.0, 0.5, 0.0])  # rescaled, passed through, clipped to low
    act = env2._env_action({env2.behavior_name: np.array([[0.5, -1.0, 1.0]])})
    np.testing.assert_allclose(act, [7.5, -1.0, 1.0])


def test_multidiscrete_actions_with_start() -> None:
    space = spaces.MultiDiscrete([3, 2, 4], start=[1, 0, -2])
    inner = CountdownEnv(length=5, action_space=space)
    env = GymnasiumEnv(inner, behavior_name="md")
    spec = env.behavior_specs["md"]
    assert spec.is_discrete and spec.action_shape == (3, 2, 4)
    _reset(env)
    _step(env, np.array([[2, 1, 0]]))
    np.testing.assert_array_equal(inner.actions[-1], [3, 1, -2])
    assert space.contains(inner.actions[-1])
    with pytest.raises(EnvironmentException, match="md"):
        _step(env, np.array([[3, 0, 0]]))
    with pytest.raises(EnvironmentException, match="md"):
        _step(env, np.array([[0, -1, 0]]))
    with pytest.raises(EnvironmentException, match="md"):
        _step(env, np.array([[0, 0]]))


def test_multidiscrete_vector_and_discrete_start() -> None:
    vec = SyncVectorEnv([lambda: CountdownEnv(action_space=spaces.MultiDiscrete([2, 3]))] * 2)
    env = GymnasiumEnv(vec)
    _reset(env)
    _step(env, np.array([[1, 2], [0, 1]], np.int32))
    np.testing.assert_array_equal(vec.envs[0].unwrapped.actions[-1], [1, 2])
    np.testing.assert_array_equal(vec.envs[1].unwrapped.actions[-1], [0, 1])
    inner = CountdownEnv(action_space=spaces.Discrete(3, start=-1))
    env1 = GymnasiumEnv(inner)
    _reset(env1)
    _step(env1, np.array([[0]]))
    assert inner.actions[-1] == -1
    with pytest.raises(EnvironmentException, match="branch sizes"):
        _step(env1, np.array([[3]]))


def test_discrete_observations_are_one_hot() -> None:
    env = GymnasiumEnv("FrozenLake-v1", seed=0, is_slippery=False)
    assert env.behavior_specs["FrozenLake-v1"].observation_shapes == ((16,),)
    first = _reset(env)
    np.testing.assert_array_equal(first.observations[0], np.eye(16, dtype=np.float32)[[0]])
    r = _step(env, np.array([[2]]))  # right
    np.testing.assert_array_equal(r.observations[0], np.eye(16, dtype=np.float32)[[1]])


class ImageDictEnv(gymnasium.Env):
    """Dict observation: a uint8 image and a vector; terminates after 2 steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict({
            "image": spaces.Box(0, 255, (6, 5, 3), np.uint8),
            "gray": spaces.Box(0, 255, (4, 4), np.uint8),
            "vec": spaces.Box(-1.0, 1.0, (2,), np.float32),
        })
        self.action_space = spaces.MultiBinary(2)
        self.t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"image": np.full((6, 5, 3), 200 + self.t, np.uint8), "gray": np.full((4, 4), 7, np.uint8),
                "vec": np.array([self.t, -self.t], np.float32) / 10}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        assert self.action_space.contains(action), action
        self.t += 1
        return self._obs(), 1.0, self.t >= 2, False, {}


@pytest.mark.parametrize("vector", [False, True])
def test_dict_and_image_observations(vector: bool) -> None:
    if vector:
        env = GymnasiumEnv(SyncVectorEnv([ImageDictEnv, ImageDictEnv]), behavior_name="img")
    else:
        env = GymnasiumEnv(ImageDictEnv(), behavior_name="img")
    n = 2 if vector else 1
    spec = env.behavior_specs["img"]
    assert spec.observation_shapes == ((4, 4, 1), (6, 5, 3), (2,))  # the space's (sorted) key order
    assert spec.is_discrete and spec.action_shape == (2, 2)
    first = _reset(env)
    gray, img, vec = first.observations
    assert img.shape == (n, 6, 5, 3) and img.dtype == np.float32
    assert img.max() == pytest.approx(200.0 / 255.0)  # uint8 images scaled to [0, 1]
    assert gray.shape == (n, 4, 4, 1) and gray.max() == pytest.approx(7.0 / 255.0)
    assert vec.shape == (n, 2)
    _step(env, np.ones((n, 2), np.int32))
    done = _step(env, np.zeros((n, 2), np.int32))
    assert done.terminated.all()
    assert done.observations[1].max() == pytest.approx(202.0 / 255.0)  # final obs
    after = _step(env, np.zeros((n, 2), np.int32))
    assert after.observations[1].max() == pytest.approx(200.0 / 255.0) and np.all(after.rewards == 0.0)


def test_unsupported_space_rejected() -> None:
    class TextEnv(CountdownEnv):
        def __init__(self) -> None:
            super().__init__()
            self.observation_space = spaces.Text(5)

    with pytest.raises(EnvironmentException, match="not supported"):
        GymnasiumEnv(TextEnv())


# --- seeding, errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("num_envs", [1, 4])
def test_seeding_reproducible(num_envs: int) -> None:
    def rollout(seed: Optional[int]) -> np.ndarray:
        env = GymnasiumEnv("CartPole-v1", num_envs=num_envs, seed=seed)
        obs = [_reset(env).observations[0]]
        rng = np.random.default_rng(0)
        for _ in range(40):  # crosses episode ends, so autoresets are seeded too
            obs.append(_step(env, rng.integers(0, 2, (num_envs, 1))).observations[0])
        obs.append(_reset(env).observations[0])
        return np.stack(obs)

    a, b, c = rollout(7), rollout(7), rollout(8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_action_space_seeded() -> None:
    a = GymnasiumEnv("CartPole-v1", num_envs=2, seed=5)
    b = GymnasiumEnv("CartPole-v1", num_envs=2, seed=5)
    assert [a.env.action_space.sample().tolist() for _ in range(5)] == \
        [b.env.action_space.sample().tolist() for _ in range(5)]


@pytest.mark.parametrize("where", ["obs", "reward"])
@pytest.mark.parametrize("vector", [False, True])
def test_nan_or_inf_raises_naming_env(where: str, vector: bool) -> None:
    inner = CountdownEnv(length=10, nan_at=2, nan_in=where)
    env = GymnasiumEnv(SyncVectorEnv([lambda: inner]) if vector else inner, behavior_name="nanny")
    _reset(env)
    _step(env, np.zeros((1, 1), np.int32))
    with pytest.raises(EnvironmentException, match="nanny"):
        _step(env, np.zeros((1, 1), np.int32))


def test_bad_actions_rejected() -> None:
    env = GymnasiumEnv("CartPole-v1", num_envs=2)
    _reset(env)
    with pytest.raises(EnvironmentException, match="CartPole-v1.*shape"):
        _step(env, np.zeros((3, 1), np.int32))
    with pytest.raises(EnvironmentException, match="No actions for behavior 'CartPole-v1'"):
        env.step({"other": np.zeros((2, 1), np.int32)})
    with pytest.raises(EnvironmentException, match="CartPole-v1"):
        _step(env, np.array([[0], [2]]))
    with pytest.raises(EnvironmentException, match="CartPole-v1"):
        _step(env, np.array([[0], [-1]]))
    r = _step(env, np.array([1, 0]))  # a flat array of one action per agent is accepted
    assert len(r) == 2


def test_caller_action_array_not_modified() -> None:
    inner = CountdownEnv(action_space=spaces.Discrete(3, start=5))
    env = GymnasiumEnv(inner)
    _reset(env)
    action = np.array([[1]], np.int64)
    _step(env, action)
    assert action[0, 0] == 1 and inner.actions[-1] == 6


def test_num_envs_with_env_instance_rejected() -> None:
    with pytest.raises(EnvironmentException):
        GymnasiumEnv(CountdownEnv(), num_envs=2)
