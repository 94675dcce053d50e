"""The agent processor closes trajectories by one rule and hands them to the trainer through a
thread-safe queue, each owning its steps."""
from __future__ import annotations

import threading
from collections import defaultdict, deque

import numpy as np

from kerasrl.envs.base import StepResult
from kerasrl.fields import Field
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers.agent_processor import AgentProcessor, Rollout
from kerasrl.trainers.trajectory import Trajectory, TrajectoryQueue

SPEC = BehaviorSpec(((3,),), "discrete", (2,))


def result(ids, t, done=(), terminated=()):
    """A step of agents ``ids`` whose observation is ``t`` (so rows tell which step they came from)."""
    n = len(ids)
    obs = np.full((n, 3), float(t), np.float32)
    term = np.isin(ids, terminated)
    trunc = np.isin(ids, done) & ~term
    return StepResult(np.asarray(ids), [obs], np.full(n, 0.5, np.float32), term, trunc)


def outputs(n, t):
    return {Field.ACTIONS: np.full((n, 1), t % 2, np.int32), Field.ACTION_LOG_PROBS: np.zeros((n, 1), np.float32)}


def processor(time_horizon=None, value_estimates=None, reward_buffer=None):
    queue = TrajectoryQueue("b")
    stats = defaultdict(list)
    proc = AgentProcessor(SPEC, {}, [Field.ACTIONS, Field.ACTION_LOG_PROBS], stats, queue, time_horizon=time_horizon,
                          value_estimates=value_estimates, reward_buffer=reward_buffer)
    return proc, queue, stats


def run(proc, steps):
    """Feed ``steps`` = [(ids, done, terminated), ...]; the policy acts on every step."""
    prev = None
    for t, (ids, done, terminated) in enumerate(steps):
        nxt = result(ids, t, done, terminated)
        proc.add_step(prev, nxt, None if prev is None else outputs(len(prev), t - 1))
        prev = nxt


def test_an_episode_end_closes_the_trajectory_with_its_steps_and_flags():
    rewards = deque(maxlen=5)
    proc, queue, stats = processor(reward_buffer=rewards)
    run(proc, [([1, 2], (), ()), ([1, 2], (), ()), ([1, 2], (), (1,)), ([1, 2], (2,), ())])
    got = queue.take_all()
    assert [(t.agent_id, len(t), t.terminated, t.episode_ended) for t in got] == [(1, 2, True, True),
                                                                                 (2, 3, False, True)]
    np.testing.assert_array_equal(got[0].steps[Field.VECTOR_OBS].get_batch()[:, 0], [0, 1])
    np.testing.assert_array_equal(got[1].steps[Field.DONE].get_batch(), [0, 0, 1])
    assert len(proc.buffer[1][Field.ACTIONS]) == len(proc.buffer[2][Field.ACTIONS]) == 0  # moved to the trajectories
    got[0].steps[Field.ACTIONS].set(np.full((2, 1), 7, np.int32))  # which own them
    assert len(proc.buffer[1][Field.ACTIONS]) == 0
    assert stats["Environment/Episode Length"] == [2.0, 3.0] and list(rewards) == [1.5, 1.0]
    assert queue.take_all() == []


def test_time_horizon_cuts_a_trajectory_and_bootstraps_it():
    calls = []

    def values(res, rows):
        calls.append(res.agent_ids[rows].tolist())
        return {"extrinsic": 10.0 * res.agent_ids[rows]}

    proc, queue, stats = processor(time_horizon=2, value_estimates=values)
    run(proc, [([1, 2], (), ())] * 4)
    got = queue.take_all()
    assert calls == [[1, 2]]  # one batched value call for every trajectory that closed at that step
    assert [(t.agent_id, len(t), t.episode_ended, t.bootstrap) for t in got] == [
        (1, 3, False, {"extrinsic": 10.0}), (2, 3, False, {"extrinsic": 20.0})]
    assert not stats["Environment/Episode Length"]  # cut, not ended


def test_a_complete_rollout_closes_every_trajectory():
    proc, queue, _ = processor(time_horizon=100)
    proc.rollout = Rollout(size=5)
    run(proc, [([1, 2], (), ())] * 3)  # 6 agent steps > 5: the third step ends the rollout
    assert proc.rollout.done
    assert sorted((t.agent_id, len(t)) for t in queue.take_all()) == [(1, 2), (2, 2)]
    proc.rollout.restart()
    assert not proc.rollout.done


def test_close_all_cuts_every_unfinished_trajectory():
    proc, queue, _ = processor()
    run(proc, [([1, 2], (), ())] * 3)
    assert queue.take_all() == [] and proc.transitions == 4
    proc.close_all()
    assert sorted((t.agent_id, len(t), t.episode_ended) for t in queue.take_all()) == [(1, 2, False), (2, 2, False)]


def test_the_stored_observations_are_those_the_policy_acted_on():
    proc, queue, _ = processor()
    acted = np.arange(6, dtype=np.float32).reshape(2, 3) + 100
    first, second = result([1, 2], 0), result([1, 2], 1, done=(1, 2))
    proc.add_step(None, first, None)
    proc.add_step(first, second, {**outputs(2, 0), Field.VECTOR_OBS: acted})
    got = {t.agent_id: t.steps[Field.VECTOR_OBS].get_batch() for t in queue.take_all()}
    np.testing.assert_array_equal(got[2], acted[1:])


def test_the_queue_hands_over_between_threads_in_order():
    queue = TrajectoryQueue("b")
    n = 2000

    def produce():
        for i in range(n):
            queue.put(Trajectory(i, None))  # type: ignore[arg-type]

    thread = threading.Thread(target=produce)
    thread.start()
    taken = []
    while len(taken) < n:
        taken.extend(t.agent_id for t in queue.take_all())
    thread.join()
    assert taken == list(range(n)) and len(queue) == 0


def test_agents_missing_from_a_whole_step_keep_their_transition():
    """A step without any of the behavior's agents (a Unity scene whose agents decide at other
    times, or only another behavior's agents report): the transition from the step they acted
    on runs to the next step that reports them, nothing is lost."""
    proc, queue, _ = processor()
    first = result([1, 2], 0)
    proc.add_step(None, first, None)
    proc.add_step(first, None, outputs(2, 0))  # behavior absent from the step
    proc.add_step(None, StepResult.empty(SPEC), None)  # and an empty step after it
    last = result([1, 2], 3, terminated=(1, 2))
    proc.add_step(None, last, None)
    got = queue.take_all()
    assert [(t.agent_id, len(t), t.terminated) for t in got] == [(1, 1, True), (2, 1, True)]
    np.testing.assert_array_equal(got[0].steps[Field.VECTOR_OBS].get_batch()[:, 0], [0])  # from the first step
