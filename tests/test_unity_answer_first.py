"""Answering a Unity player first: the next actions go out as soon as a step's results arrive, so
the player simulates while the trainer records the step. The steps are the same as when the
trainer answers after recording; a player that is stepping when the trainer resets or closes
is handled; the stand-in player's busy-share report."""
from __future__ import annotations

import json

import numpy as np

from kerasrl.envs.env_manager import SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.spec import ActionInfo
from tests.test_unity_env import BEHAVIOR, _env, _log


class CountingPolicy:
    """Walks towards the goal, except every third decision (episodes of several lengths)."""

    def __init__(self, label: int = 0) -> None:
        self.calls, self.label = 0, label

    def get_action(self, result) -> ActionInfo:
        self.calls += 1
        toward = (result.observations[0][:, :1] > 0).astype(np.int32)
        action = 1 - toward if self.calls % 3 == 0 else toward
        return ActionInfo(action, None, None, {"label": np.full(len(action), self.label)})


def _steps(tmp_path, answer_first: bool, n: int) -> list:
    env = _env(tmp_path / str(answer_first), "--agents", "3", seed=5)
    manager = SimpleEnvManager(env, answer_first=answer_first)
    try:
        manager.set_policy(BEHAVIOR, CountingPolicy())
        manager.reset()
        return [manager.step()[0] for _ in range(n)]
    finally:
        manager.close()


def test_a_unity_player_is_answered_first_and_the_steps_are_the_same(tmp_path):
    first, after = _steps(tmp_path, True, 40), _steps(tmp_path, False, 40)
    assert SimpleEnvManager(Simple1DEnvironment(use_discrete=True)).answer_first is False  # in process: nothing to overlap
    ended = 0
    for a, b in zip(first, after):
        ra, rb = a.current[BEHAVIOR], b.current[BEHAVIOR]
        np.testing.assert_array_equal(ra.agent_ids, rb.agent_ids)
        np.testing.assert_array_equal(ra.observations[0], rb.observations[0])
        np.testing.assert_array_equal(ra.rewards, rb.rewards)
        np.testing.assert_array_equal(ra.done, rb.done)
        np.testing.assert_array_equal(a.action_infos[BEHAVIOR].action, b.action_infos[BEHAVIOR].action)
        ended += int(ra.done.sum())
    assert ended >= 3  # episode ends (and the decisions held back after them) were among the steps


def test_a_new_policy_acts_from_the_step_after_the_one_already_sent(tmp_path):
    env = Simple1DEnvironment(use_discrete=True, seed=0)
    env.simulates_elsewhere = True  # the default step_async/step_wait: the same contract in process
    manager = SimpleEnvManager(env)
    manager.set_policy("Simple1D", CountingPolicy(label=1))
    manager.reset()
    manager.step()  # sends the actions of the next step, chosen by policy 1
    manager.set_policy("Simple1D", CountingPolicy(label=2))
    labels = [manager.step()[0].action_infos["Simple1D"].outputs["label"][0] for _ in range(2)]
    assert labels == [1, 2]


def test_a_reset_or_close_while_the_player_steps(tmp_path):
    report = tmp_path / "report.json"
    env = _env(tmp_path, "--agents", "2", "--step-cost-ms", "2", "--report", str(report))
    manager = SimpleEnvManager(env)
    manager.set_policy(BEHAVIOR, CountingPolicy())
    manager.reset()
    for _ in range(5):
        manager.step()
    assert manager._sent is not None and env._in_flight  # the player is stepping
    result = manager.reset()[0].current[BEHAVIOR]
    assert result.agent_ids.tolist() == [100, 101] and not result.done.any()
    for _ in range(30):
        manager.step()
    assert env._in_flight
    manager.close()  # the step under way is taken, so the player is told to quit (and reports)
    log = _log(tmp_path)
    assert log.count("reset") == 2 and log.rstrip().endswith("quit")
    figures = json.loads(report.read_text())
    # 5 + 31 steps, each answered once, and the second reset (the first came before the clock started)
    assert figures["steps"] == figures["exchanges"] - 1 == 36
    assert figures["simulating_ms"] * figures["exchanges"] >= 2.0 * figures["steps"]
    assert 0.0 < figures["busy_share"] < 1.0 and figures["waiting_ms"] > 0.0
    assert "busy share" in log
