"""Built-in test environments (Simple1D and variants) and SimpleEnvManager."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from kerasrl.envs import (
    ActionInfo,
    EnvironmentException,
    MultiBranchMaskedEnvironment,
    Simple1DEnvironment,
    SimpleEnvManager,
    StepResult,
    VisualSimple1DEnvironment,
)
from kerasrl.envs.simple import MIN_STEPS, SUCCESS_REWARD, TIME_PENALTY

OPTIMAL_RETURN = SUCCESS_REWARD - (MIN_STEPS - 1) * TIME_PENALTY


def _toward_goal(env: Simple1DEnvironment) -> np.ndarray:
    if env.use_discrete:
        return np.array([[1 if env.goal > 0 else 0]], np.int32)
    return np.array([[1.0 * env.goal]], np.float32)


def _run_episode(env: Simple1DEnvironment, away: bool = False) -> list[StepResult]:
    name = env.behavior_name
    out = []
    for _ in range(100):
        action = _toward_goal(env)
        if away:
            action = 1 - action if env.use_discrete else -action
        r = env.step({name: action})[name]
        out.append(r)
        if r.done[0]:
            return out
    raise AssertionError("episode did not end")


# --- Simple1D -----------------------------------------------------------------------------------

def test_constants() -> None:
    assert MIN_STEPS == 11
    assert SUCCESS_REWARD == pytest.approx(1.011)
    assert OPTIMAL_RETURN == pytest.approx(1.001)


@pytest.mark.parametrize("use_discrete", [True, False])
def test_simple1d_spec_and_reset(use_discrete: bool) -> None:
    env = Simple1DEnvironment(use_discrete, seed=1)
    spec = env.behavior_specs["Simple1D"]
    assert spec.observation_shapes == ((1,),)
    assert spec.is_discrete == use_discrete
    assert spec.action_shape == ((2,) if use_discrete else (1,))
    r = env.reset()["Simple1D"]
    assert list(r.agent_ids) == [0]
    assert r.observations[0].tolist() == [[float(env.goal)]]
    assert env.goal in (-1, 1) and env.position == 0.0
    assert not r.done.any() and r.rewards.tolist() == [0.0]
    assert not env.global_done and env.reset_parameters == {}


@pytest.mark.parametrize("use_discrete", [True, False])
def test_simple1d_optimal_episode_takes_11_steps(use_discrete: bool) -> None:
    env = Simple1DEnvironment(use_discrete, seed=2)
    env.reset()
    for _ in range(5):
        goal = env.goal
        steps = _run_episode(env)
        assert len(steps) == MIN_STEPS
        for r in steps[:-1]:
            assert r.rewards[0] == pytest.approx(-TIME_PENALTY)
            assert not r.done[0]
            assert r.observations[0][0, 0] == goal
        last = steps[-1]
        assert last.terminated[0] and not last.truncated[0]
        assert last.rewards[0] == pytest.approx(SUCCESS_REWARD)
        assert last.observations[0][0, 0] == goal  # the old goal, though the agent was reset
        assert env.position == 0.0 and env.step_count == 0
        assert sum(float(r.rewards[0]) for r in steps) == pytest.approx(OPTIMAL_RETURN, abs=1e-6)


def test_simple1d_wrong_way_and_clamping() -> None:
    env = Simple1DEnvironment(False, seed=3)
    env.reset()
    steps = _run_episode(env, away=True)
    assert len(steps) == MIN_STEPS
    assert steps[-1].rewards[0] == pytest.approx(-SUCCESS_REWARD)
    env.reset()
    name = env.behavior_name
    env.step({name: np.array([[0.05]], np.float32)})  # small steps are taken as they are
    assert env.position == pytest.approx(0.05)
    env.step({name: np.array([[-5.0]], np.float32)})  # large ones are clamped to ±0.1
    assert env.position == pytest.approx(-0.05)


def test_simple1d_observe_position_adds_the_position_before_each_action() -> None:
    env = Simple1DEnvironment(True, seed=3, observe_position=True)
    assert env.behavior_specs["Simple1D"].observation_shapes == ((2,),)
    first = env.reset()["Simple1D"].observations[0]
    goal = env.goal
    assert first.tolist() == [[goal, 0.0]]
    steps = _run_episode(env)
    positions = [r.observations[0][0, 1] for r in steps]
    assert positions == pytest.approx([0.1 * goal * k for k in range(MIN_STEPS)])  # observed before each move
    assert all(r.observations[0][0, 0] == goal for r in steps)
    assert steps[-1].rewards[0] == pytest.approx(SUCCESS_REWARD)


def test_simple1d_reset_after_done_gives_new_goal_next_step() -> None:
    env = Simple1DEnvironment(True, seed=4)
    env.reset()
    goals = []
    for _ in range(20):
        goals.append(env.goal)
        steps = _run_episode(env)
        assert steps[-1].observations[0][0, 0] == goals[-1]
        nxt = env.step({"Simple1D": _toward_goal(env)})["Simple1D"]
        assert nxt.observations[0][0, 0] == env.goal  # the new episode's goal
        assert env.position == pytest.approx(0.1 * env.goal)
        env.reset()
    assert set(goals) == {-1, 1}


def test_simple1d_seeded_goals_reproducible() -> None:
    def goals(seed: Optional[int]) -> list[int]:
        env = Simple1DEnvironment(True, seed=seed)
        out = []
        for _ in range(30):
            out.append(int(env.reset()["Simple1D"].observations[0][0, 0]))
        return out

    assert goals(5) == goals(5)
    assert goals(5) != goals(6)
    assert goals(0) == goals(0)  # seed 0 is a seed, not "no seed"


def test_simple1d_max_steps_truncates() -> None:
    env = Simple1DEnvironment(True, seed=7, max_steps=4)
    env.reset()
    goal = env.goal
    away = np.array([[0 if goal > 0 else 1]], np.int32)
    results = [env.step({"Simple1D": away})["Simple1D"] for _ in range(4)]
    assert not any(r.done[0] for r in results[:3])
    last = results[3]
    assert last.truncated[0] and not last.terminated[0]
    assert last.rewards[0] == pytest.approx(-TIME_PENALTY)
    assert last.observations[0][0, 0] == goal
    assert env.step_count == 0 and env.position == 0.0
    # reaching the goal on the last allowed step terminates rather than truncates
    env2 = Simple1DEnvironment(True, seed=7, max_steps=MIN_STEPS)
    env2.reset()
    last2 = _run_episode(env2)[-1]
    assert last2.terminated[0] and not last2.truncated[0]
    with pytest.raises(EnvironmentException, match="max_steps"):
        Simple1DEnvironment(True, max_steps=0)


@pytest.mark.parametrize(
    "use_discrete,action,match",
    [
        (True, np.zeros((2, 1), np.int32), "Simple1D.*shape"),
        (True, np.zeros((1, 2), np.int32), "Simple1D.*shape"),
        (True, np.array([[2]]), "Simple1D.*branch"),
        (True, np.array([[-1]]), "Simple1D.*branch"),
        (False, np.zeros((1, 2), np.float32), "Simple1D.*shape"),
        (False, np.array([[np.nan]], np.float32), "Simple1D.*NaN"),
    ],
)
def test_simple1d_bad_actions_rejected(use_discrete: bool, action: np.ndarray, match: str) -> None:
    env = Simple1DEnvironment(use_discrete, seed=0)
    env.reset()
    with pytest.raises(EnvironmentException, match=match):
        env.step({"Simple1D": action})


def test_simple1d_missing_behavior_and_custom_name() -> None:
    env = Simple1DEnvironment(True, seed=0, behavior_name="Line")
    assert list(env.behavior_specs) == ["Line"]
    env.reset()
    with pytest.raises(EnvironmentException, match="Line"):
        env.step({"Simple1D": np.zeros((1, 1), np.int32)})
    r = env.step({"Line": np.array([1])})["Line"]  # a flat (n,) array is accepted
    assert len(r) == 1


# --- multi-branch masked ----------------------------------------------------------------------

def _masked_optimal(env: MultiBranchMaskedEnvironment, mask: np.ndarray) -> np.ndarray:
    return np.array([[2 if env.goal > 0 else 0, 1 if mask[0, 4] else 0]], np.int32)


def test_masked_spec_and_mask_rule() -> None:
    env = MultiBranchMaskedEnvironment(seed=0)
    spec = env.behavior_specs["MultiBranchMasked"]
    assert spec.is_discrete and spec.action_shape == (3, 2) and spec.action_mask_size == 5
    r = env.reset()["MultiBranchMasked"]
    masks = [r.action_mask[0].tolist()]
    for _ in range(7):  # small steps: 7 units, the episode does not end
        small = np.array([[2 if env.goal > 0 else 0, 0]])
        r = env.step({"MultiBranchMasked": small})["MultiBranchMasked"]
        assert not r.done[0]
        r.validate(spec, "MultiBranchMasked")
        masks.append(r.action_mask[0].tolist())
    allowed, large_masked = [1, 0, 1, 1, 1], [1, 0, 1, 1, 0]
    assert masks == [allowed, allowed, allowed, large_masked] * 2


def test_masked_optimal_policy_matches_simple1d_optimum() -> None:
    env = MultiBranchMaskedEnvironment(seed=1)
    r = env.reset()["MultiBranchMasked"]
    for _ in range(4):
        goal, ret, steps = env.goal, 0.0, 0
        while True:
            r = env.step({"MultiBranchMasked": _masked_optimal(env, r.action_mask)})["MultiBranchMasked"]
            ret += float(r.rewards[0])
            steps += 1
            if r.done[0]:
                break
            assert r.observations[0][0, 0] == goal
        assert r.terminated[0] and steps == MultiBranchMaskedEnvironment.OPTIMAL_STEPS == 6
        assert ret == pytest.approx(MultiBranchMaskedEnvironment.OPTIMAL_RETURN, abs=1e-6)
        assert ret == pytest.approx(1.006, abs=1e-6)
        # the mask after a done step is for the new episode's first decision
        assert r.action_mask[0].tolist() == [1, 0, 1, 1, 1]
    assert env.masked_actions_taken == 0


def test_masked_actions_are_counted_or_raise() -> None:
    env = MultiBranchMaskedEnvironment(seed=2)
    env.reset()
    env.step({"MultiBranchMasked": np.array([[1, 0]])})  # "stay" is always masked
    assert env.masked_actions_taken == 1 and env.position == 0.0
    for _ in range(2):
        env.step({"MultiBranchMasked": np.array([[2, 1]])})
    assert env.position == pytest.approx(0.4)
    env.step({"MultiBranchMasked": np.array([[2, 1]])})  # step 3: "large" is masked; wasted step
    assert env.masked_actions_taken == 2 and env.position == pytest.approx(0.4)
    env.step({"MultiBranchMasked": np.array([[0, 0]])})
    assert env.masked_actions_taken == 2 and env.position == pytest.approx(0.3)
    strict = MultiBranchMaskedEnvironment(seed=2, strict=True, behavior_name="Strict")
    strict.reset()
    with pytest.raises(EnvironmentException, match="Strict.*masked"):
        strict.step({"Strict": np.array([[1, 1]])})
    with pytest.raises(EnvironmentException, match="Strict"):
        strict.step({"Strict": np.array([[3, 0]])})


def _random_policy_mean_return(env: MultiBranchMaskedEnvironment, episodes: int, respect_masks: bool) -> float:
    rng = np.random.default_rng(0)
    name = env.behavior_name
    r = env.reset()[name]
    returns, ret = [], 0.0
    while len(returns) < episodes:
        mask = r.action_mask[0] if respect_masks else np.ones(5)
        d = rng.choice(np.flatnonzero(mask[:3]))
        s = rng.choice(np.flatnonzero(mask[3:]))
        r = env.step({name: np.array([[d, s]])})[name]
        ret += float(r.rewards[0])
        if r.done[0]:
            returns.append(ret)
            ret = 0.0
    return float(np.mean(returns))


def test_masked_random_policy_is_clearly_worse() -> None:
    env = MultiBranchMaskedEnvironment(seed=3, max_steps=200)
    mean = _random_policy_mean_return(env, 100, respect_masks=True)
    assert mean < 0.4 * MultiBranchMaskedEnvironment.OPTIMAL_RETURN
    assert env.masked_actions_taken == 0
    ignoring = MultiBranchMaskedEnvironment(seed=3, max_steps=200)
    _random_policy_mean_return(ignoring, 3, respect_masks=False)
    assert ignoring.masked_actions_taken > 0


# --- visual -----------------------------------------------------------------------------------

def test_visual_spec_and_images() -> None:
    env = VisualSimple1DEnvironment(True, seed=0)
    spec = env.behavior_specs["VisualSimple1D"]
    assert spec.observation_shapes == ((36, 36, 1),)
    assert spec.visual_observation_shapes == [(36, 36, 1)] and spec.vector_observation_size == 0
    seen = set()
    for _ in range(20):
        img = env.reset()["VisualSimple1D"].observations[0]
        assert img.shape == (1, 36, 36, 1) and img.dtype == np.float32
        left, right = img[0, :, :18].mean(), img[0, :, 18:].mean()
        if env.goal < 0:
            assert (left, right) == (1.0, 0.0)
        else:
            assert (left, right) == (0.0, 1.0)
        seen.add(env.goal)
    assert seen == {-1, 1}
    # 36×36 is the smallest input nature_cnn (8×8/4, 4×4/2, 3×3/1) accepts
    size = 36
    for kernel, stride in ((8, 4), (4, 2), (3, 1)):
        size = (size - kernel) // stride + 1
    assert size == 1


def test_visual_dynamics_match_simple1d_and_custom_shape() -> None:
    env = VisualSimple1DEnvironment(False, seed=1, image_shape=(40, 44, 3), bright=1.0, behavior_name="V")
    assert env.behavior_specs["V"].observation_shapes == ((40, 44, 3),)
    first = env.reset()["V"].observations[0]
    assert first.max() == 1.0 and first.shape == (1, 40, 44, 3)
    goal = env.goal
    steps = _run_episode(env)
    assert len(steps) == MIN_STEPS and steps[-1].terminated[0]
    np.testing.assert_array_equal(steps[-1].observations[0], first)  # the old goal's image
    assert env.goal in (-1, 1) and goal in (-1, 1)
    with pytest.raises(EnvironmentException, match="image_shape"):
        VisualSimple1DEnvironment(True, image_shape=(4, 1, 1))


# --- SimpleEnvManager -------------------------------------------------------------------------

class TowardGoalPolicy:
    """Reads the goal from the observation and always steps towards it (discrete)."""

    def __init__(self) -> None:
        self.seen: list[StepResult] = []

    def get_action(self, step_result: StepResult) -> ActionInfo:
        self.seen.append(step_result)
        action = (step_result.observations[0][:, :1] > 0).astype(np.int32)
        return ActionInfo(action=action, memory=None, value=np.zeros(len(step_result), np.float32),
                          outputs={"action": action})


def test_simple_env_manager_step_infos() -> None:
    env = Simple1DEnvironment(True, seed=9)
    manager = SimpleEnvManager(env)
    assert manager.behavior_specs == {"Simple1D": env.behavior_specs["Simple1D"]}
    assert manager.reset_parameters == {}
    policy = TowardGoalPolicy()
    manager.set_policy("Simple1D", policy)
    [first] = manager.reset()
    assert first.previous is None and first.action_infos is None
    reset_result = first.current["Simple1D"]
    prev_current = first.current
    returns, ret, after_done = [], 0.0, False
    for _ in range(4 * MIN_STEPS):
        [info] = manager.step()
        assert info.previous is prev_current
        assert policy.seen[-1] is prev_current["Simple1D"]
        action_info = info.action_infos["Simple1D"]
        assert action_info.action.shape == (1, 1)
        cur = info.current["Simple1D"]
        if not after_done:  # like the trainer, skip the transition that follows a done step
            ret += float(cur.rewards[0])
        after_done = bool(cur.done[0])
        if after_done:
            returns.append(ret)
            ret = 0.0
        prev_current = info.current
    assert policy.seen[0] is reset_result
    assert len(returns) >= 3
    assert returns[0] == pytest.approx(OPTIMAL_RETURN, abs=1e-6)
    # later episodes start with one step chosen from the previous goal: one step more or less
    for r in returns[1:]:
        assert r == pytest.approx(OPTIMAL_RETURN - TIME_PENALTY, abs=1e-6) or r == pytest.approx(
            OPTIMAL_RETURN + TIME_PENALTY, abs=1e-6)
    manager.close()


def test_simple_env_manager_needs_policy_and_resets_on_global_done() -> None:
    class GlobalDoneEnv(Simple1DEnvironment):
        resets = 0

        @property
        def global_done(self) -> bool:
            return self.step_count >= 2

        def reset(self, config=None):  # type: ignore[no-untyped-def]
            GlobalDoneEnv.resets += 1
            return super().reset(config)

    manager = SimpleEnvManager(GlobalDoneEnv(True, seed=0))
    manager.reset()
    with pytest.raises(KeyError, match="Simple1D"):
        manager.step()
    manager.set_policy("Simple1D", TowardGoalPolicy())
    manager.step()
    manager.step()
    assert GlobalDoneEnv.resets == 1
    [info] = manager.step()  # global_done: the manager resets instead of stepping
    assert GlobalDoneEnv.resets == 2
    assert info.current["Simple1D"].rewards[0] == 0.0
    assert info.action_infos is not None


def test_simple_env_manager_catches_nan_and_bad_shapes_where_they_enter() -> None:
    from kerasrl.envs import BehaviorSpec, Environment, EnvironmentException, SimpleEnvManager, StepResult

    class Broken(Environment):
        def __init__(self, obs: np.ndarray, reward: float) -> None:
            self.obs, self.reward = obs, reward

        @property
        def behavior_specs(self):
            return {"B": BehaviorSpec(((2,),), "discrete", (2,))}

        def reset(self, config=None):
            return {"B": StepResult([0], [self.obs], [self.reward], [False], [False])}

        def step(self, actions):
            return self.reset()

    with pytest.raises(EnvironmentException, match="Observation 0 of behavior 'B' contains NaN"):
        SimpleEnvManager(Broken(np.array([[np.nan, 0.0]], np.float32), 0.0)).reset()
    with pytest.raises(EnvironmentException, match="Rewards of behavior 'B' contain NaN or inf"):
        SimpleEnvManager(Broken(np.zeros((1, 2), np.float32), float("inf"))).reset()
    with pytest.raises(EnvironmentException, match=r"Observation 0 of behavior 'B' has shape \(3,\)"):
        SimpleEnvManager(Broken(np.zeros((1, 3), np.float32), 0.0)).reset()
