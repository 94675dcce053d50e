"""Groups of agents (ML-Agents' ``SimpleMultiAgentGroup``): ``StepResult.group_id`` and
``group_reward``, the built-in ``GroupSimple1D``, the fields the agent processor stores, the
merge of workers' results, and a Unity player's groups (the stand-in player)."""
from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pytest

from kerasrl.envs.base import EnvironmentException, StepResult
from kerasrl.envs.groups import GROUP_ID, GroupSimple1DEnvironment
from kerasrl.envs.registry import BUILTIN_ENVS, make_env
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.envs.subprocess_env_manager import SubprocessEnvManager
from kerasrl.envs.unity import UnityEnvironment
from kerasrl.fields import Field
from kerasrl.trainers.agent_processor import AgentProcessor
from kerasrl.trainers.trajectory import TrajectoryQueue
from tests.process_tools import free_ports

NAME = "GroupSimple1D"
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unity_standin", "StandIn")
STANDIN_BEHAVIOR = "Simple1D?team=0"


def _result(n: int, **groups) -> StepResult:
    return StepResult(np.arange(n), [np.zeros((n, 1))], np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), **groups)


# -- StepResult ------------------------------------------------------------------------------

def test_a_result_without_groups_reads_as_no_group_and_no_group_reward():
    r = _result(3)
    assert r.group_id is None and r.group_reward is None and not r.has_groups
    assert r.group_id_or_zeros.dtype == np.int32 and r.group_id_or_zeros.tolist() == [0, 0, 0]
    assert r.group_reward_or_zeros.dtype == np.float32 and r.group_reward_or_zeros.tolist() == [0.0, 0.0, 0.0]


def test_group_fields_are_typed_checked_and_one_alone_gets_zeros_for_the_other():
    r = _result(2, group_id=[1, 0], group_reward=[0.5, 0])
    assert r.has_groups and r.group_id.dtype == np.int32 and r.group_reward.dtype == np.float32
    only_ids = _result(2, group_id=[3, 3])
    assert only_ids.group_reward.tolist() == [0.0, 0.0]
    assert _result(2, group_reward=[1, 1]).group_id.tolist() == [0, 0]
    with pytest.raises(EnvironmentException, match="group_id has 3 rows for 2 agents"):
        _result(2, group_id=[1, 1, 1])
    bad = _result(1, group_id=[1], group_reward=[np.nan])
    with pytest.raises(EnvironmentException, match="Group rewards"):
        bad.validate(Simple1DEnvironment(True).behavior_specs["Simple1D"])


# -- GroupSimple1D -----------------------------------------------------------------------------

def _towards_goals(result: StepResult) -> np.ndarray:
    return (result.observations[0][:, :1] > 0).astype(np.int32)


def test_group_simple1d_is_registered_and_deterministic_under_a_seed():
    assert NAME in BUILTIN_ENVS and isinstance(make_env(NAME, None, seed=3), GroupSimple1DEnvironment)
    runs = []
    for _ in range(2):
        env, rng, seen = GroupSimple1DEnvironment(seed=5), np.random.default_rng(0), []
        r = env.reset()[NAME]
        for _ in range(60):
            r = env.step({NAME: rng.integers(0, 2, (len(r), 1)).astype(np.int32)})[NAME]
            seen.append((r.agent_ids.tolist(), r.observations[0].tolist(), r.done.tolist(), r.group_reward.tolist()))
        runs.append(seen)
    assert runs[0] == runs[1]
    goals = {tuple(GroupSimple1DEnvironment(seed=s).reset()[NAME].observations[0][:, 0]) for s in range(8)}
    assert len(goals) > 1  # the goals follow the seed


def test_the_only_reward_is_the_group_reward_when_all_reach_their_goals():
    env = GroupSimple1DEnvironment(num_agents=3, seed=1)
    r = env.reset()[NAME]
    assert r.group_id.tolist() == [GROUP_ID] * 3 and r.observations[0].shape == (3, 2)
    for step in range(1, 12):
        r = env.step({NAME: _towards_goals(r)})[NAME]
        assert (r.rewards == 0).all() and r.group_id.tolist() == [GROUP_ID] * 3
        if step < 11:
            assert not r.done.any() and (r.group_reward == 0).all()
    # 0.1 eleven times reaches the end (ten make 0.9999999999999999): all home at once
    assert r.terminated.all() and not r.truncated.any() and np.allclose(r.group_reward, 1.0)
    assert env.episode_count == 1 and (env.positions == 0).all()  # the next group episode started


def test_an_agent_that_leaves_early_ends_its_episode_before_the_group():
    env = GroupSimple1DEnvironment(num_agents=3, seed=2)
    r = env.reset()[NAME]
    leaver_goal = r.observations[0][0, 0]
    for step in range(1, 12):
        actions = _towards_goals(r)
        if 0 in r.agent_ids:
            actions[0] = 0 if leaver_goal > 0 else 1  # agent 0 walks away from its goal
        r = env.step({NAME: actions})[NAME]
        if step < 11:
            assert not r.done.any()
    # agent 0 reached the wrong end with the others at their goals: it left as the group ended
    assert r.terminated.all() and r.group_reward.tolist() == pytest.approx([0.0, 2 / 3, 2 / 3])

    env = GroupSimple1DEnvironment(num_agents=2, seed=4)
    r = env.reset()[NAME]
    goals = r.observations[0][:, 0].copy()
    # agent 0 leaves by walking away at 0.1 (11 steps); agent 1 dawdles (forth and back)
    for step in range(1, 12):
        actions = np.array([[0 if goals[0] > 0 else 1], [step % 2]], np.int32)
        r = env.step({NAME: actions})[NAME]
    assert r.agent_ids.tolist() == [0, 1] and r.terminated.tolist() == [True, False]
    assert (r.group_reward == 0).all() and r.group_id.tolist() == [GROUP_ID, GROUP_ID]
    r = env.step({NAME: np.ones((2, 1), np.int32)})[NAME]  # agent 0's action is ignored: it left
    assert r.agent_ids.tolist() == [1] and not r.done.any()
    while not r.done.any():  # agent 1 walks home alone: the group ends with its share
        r = env.step({NAME: _towards_goals(r)})[NAME]
    assert r.agent_ids.tolist() == [0, 1]
    assert r.done.tolist() == [False, True] and r.group_reward.tolist() == [0.0, 0.5]
    assert r.observations[0][0].tolist() == [env.goals[0], 0.0]  # the leaver's new episode


def test_max_steps_truncates_the_group_episode_without_a_group_reward():
    env = GroupSimple1DEnvironment(num_agents=2, seed=0, max_steps=4)
    r = env.reset()[NAME]
    for step in range(4):  # forth and back: nobody reaches an end
        r = env.step({NAME: np.full((2, 1), 1 - step % 2, np.int32)})[NAME]
    assert r.truncated.all() and not r.terminated.any() and (r.group_reward == 0).all()


# -- the agent processor and the trajectories ------------------------------------------------

def _trajectories(env, steps: int, rng_seed: int = 0):
    spec = env.behavior_specs[env.behavior_name]
    queue = TrajectoryQueue(env.behavior_name)
    proc = AgentProcessor(spec, {}, [Field.ACTIONS], defaultdict(list), queue)
    rng = np.random.default_rng(rng_seed)
    curr = env.reset()[env.behavior_name]
    proc.add_step(None, curr, None)
    for _ in range(steps):
        outputs = {Field.ACTIONS: rng.integers(0, 2, (len(curr), 1)).astype(np.int32)}
        nxt = env.step({env.behavior_name: outputs[Field.ACTIONS]})[env.behavior_name]
        proc.add_step(curr, nxt, outputs)
        curr = nxt
    return queue.take_all()


def test_trajectories_carry_group_ids_and_group_rewards_only_when_the_env_reports_groups():
    got = _trajectories(GroupSimple1DEnvironment(num_agents=3, seed=0), 400)
    assert got and all(t.has_groups for t in got)
    for t in got:
        assert (t.steps[Field.GROUP_ID].get_batch() == GROUP_ID).all()
        rewards = t.steps[Field.GROUP_REWARD].get_batch()
        assert len(rewards) == len(t) and (rewards[:-1] == 0).all()  # earned at the end only
        assert (t.steps[Field.ENVIRONMENT_REWARDS].get_batch() == 0).all()
    assert any(t.steps[Field.GROUP_REWARD].get_batch()[-1] > 0 for t in got)
    plain = _trajectories(Simple1DEnvironment(True, seed=0, max_steps=10), 60)
    assert plain and not any(t.has_groups or Field.GROUP_REWARD in t.steps for t in plain)


# -- workers' results merged -----------------------------------------------------------------

def _merger() -> SubprocessEnvManager:
    manager = object.__new__(SubprocessEnvManager)  # only the merge of replies, no worker
    manager._rows, manager._id_cache, manager._id_tables, manager._next_id = {}, {}, [{}, {}], 0
    return manager


def _packed(ids, groups=None):
    n = len(ids)
    base = (np.asarray(ids, np.int64), [np.zeros((n, 1), np.float32)], np.zeros(n, np.float32),
            np.zeros(n, bool), np.zeros(n, bool), None, None)
    return base if groups is None else base + (np.asarray(groups[0], np.int32), np.asarray(groups[1], np.float32))


def test_merged_workers_results_keep_each_agents_group():
    manager = _merger()
    one = manager._concat("b", [(0, _packed([5], ([2], [0.5])))])
    assert one.group_id.tolist() == [2] and one.group_reward.tolist() == [0.5]
    both = manager._concat("b", [(0, _packed([5, 6], ([2, 2], [0.5, 0.5]))), (1, _packed([5]))])
    assert both.group_id.tolist() == [2, 2, 0] and both.group_reward.tolist() == [0.5, 0.5, 0.0]
    assert manager._concat("b", [(0, _packed([5])), (1, _packed([5]))]).group_id is None


# -- a Unity player's groups ---------------------------------------------------------------

def _standin(tmp_path, *args: str):
    (port,) = free_ports(1)
    return UnityEnvironment(STANDIN, base_port=port, log_folder=str(tmp_path), additional_args=list(args),
                            timeout_wait=30.0)


def test_a_unity_players_group_ids_and_group_rewards_arrive(tmp_path):
    env = _standin(tmp_path, "--agents", "2", "--group", "7")
    try:
        r = env.reset({"step_size": 0.5})[STANDIN_BEHAVIOR]
        assert r.group_id.tolist() == [7, 7] and r.group_reward.tolist() == [0.0, 0.0]
        towards = (r.observations[0] > 0).astype(np.int32)
        r = env.step({STANDIN_BEHAVIOR: towards})[STANDIN_BEHAVIOR]
        assert not r.done.any() and r.group_reward.tolist() == [0.0, 0.0]
        r = env.step({STANDIN_BEHAVIOR: towards})[STANDIN_BEHAVIOR]
        assert r.terminated.all() and r.group_id.tolist() == [7, 7] and r.group_reward.tolist() == [0.5, 0.5]
        r = env.step({STANDIN_BEHAVIOR: towards})[STANDIN_BEHAVIOR]  # the held next decisions
        assert not r.done.any() and r.group_id.tolist() == [7, 7]
    finally:
        env.close()


def test_a_unity_player_without_groups_reports_none(tmp_path):
    env = _standin(tmp_path, "--agents", "2")
    try:
        r = env.reset()[STANDIN_BEHAVIOR]
        r = env.step({STANDIN_BEHAVIOR: np.ones((2, 1), np.int32)})[STANDIN_BEHAVIOR]
        assert r.group_id is None and r.group_reward is None
    finally:
        env.close()
