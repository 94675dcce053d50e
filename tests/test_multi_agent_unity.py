"""Teams, self-play and groups through the Unity protocol: the stand-in player plays kerasrl's Duel1D
as a scene of two team behaviors (``--scene duel``), trained by ``kerasrl-learn`` with self-play from
today's layout and from a 0.14-style flat config, and GroupSimple1D as a scene of one group
(``--scene group``), trained by MA-POCA."""
from __future__ import annotations

import csv
import os

import numpy as np
import pytest
import yaml

from kerasrl.cli import main
from kerasrl.envs.competitive import SPEC, team_behavior
from kerasrl.settings import RunContext
from kerasrl.trainers import create_trainers
from tests.process_tools import free_ports
from tests.test_self_play import LEARNING, _win_rate
from tests.unity_standin.standin_player import GroupAreas

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unity_standin", "StandIn")


def _learn(tmp_path, config, run_id: str, scene: str = "duel", agents: int = 8, behavior: str = "Duel1D",
           player_args: tuple[str, ...] = ()) -> list[dict]:
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(config))
    (port,) = free_ports(1)
    assert main([str(path), "--env", STANDIN, "--base-port", str(port), "--results-dir", str(tmp_path),
                 "--run-id", run_id, "--seed", "1", "--env-args", "--scene", scene, "--agents", str(agents),
                 *player_args]) == 0
    with open(tmp_path / run_id / f"{behavior}.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_flat_0_14_config_with_self_play_trains_two_teams_of_a_unity_player(tmp_path, capsys):
    flat = {"default": {"batch_size": 64, "buffer_size": 512, "hidden_units": 16, "max_steps": 3000,
                        "summary_freq": 1000},
            "Duel1D": {"self_play": {"play_against_current_self_ratio": 0.5, "save_steps": 500, "swap_steps": 250,
                                     "team_change": 1000, "window": 3}}}
    rows = _learn(tmp_path, flat, "flat")
    assert len(rows) == 3 and all("Self-play/ELO" in row for row in rows)
    assert (tmp_path / "flat" / "models" / "Duel1D" / "self_play.npz").is_file()
    assert "Duel1D?team=0" not in os.listdir(tmp_path / "flat" / "models")  # one trainer for both teams
    capsys.readouterr()


@pytest.mark.slow
def test_self_play_through_a_unity_player_beats_the_scripted_runner(tmp_path):
    """Today's layout, 60k learning-team steps through the protocol; the policy restored from the
    run's checkpoint then plays Duel1D against the scripted runner in this process."""
    rows = _learn(tmp_path, {"behaviors": {"Duel1D": LEARNING}}, "today")
    elo = [float(row["Self-play/ELO"]) for row in rows]
    context = RunContext.in_results_dir(str(tmp_path), "today", seed=1, load_model=True, train_model=False)
    ghost = create_trainers({"behaviors": {"Duel1D": LEARNING}}, {team_behavior(0): SPEC, team_behavior(1): SPEC},
                            context)["Duel1D"]
    wins, draws = _win_rate(lambda r: ghost.policy.get_action(r).action, games=200, seed=7)
    print(f"through the protocol: ELO {elo}, wins {wins:.2f}, draws {draws:.2f} against the script")
    assert wins >= 0.8 and elo[-1] > 1300


def test_poca_from_todays_layout_trains_a_group_of_a_unity_player(tmp_path, capsys):
    config = {"behaviors": {"GroupSimple1D": {
        "trainer_type": "poca", "hyperparameters": {"batch_size": 64, "buffer_size": 256},
        "network_settings": {"hidden_units": 16, "num_layers": 1}, "max_steps": 1500, "summary_freq": 500}}}
    rows = _learn(tmp_path, config, "groups", scene="group", agents=3, behavior="GroupSimple1D")
    assert len(rows) == 3 and all("Losses/Baseline Loss" in row for row in rows)
    assert any(row.get("Environment/Group Cumulative Reward") for row in rows)  # the group's episodes reach POCA
    assert (tmp_path / "groups" / "models" / "GroupSimple1D").is_dir()
    capsys.readouterr()


def test_threaded_poca_trains_groups_in_several_areas_of_a_unity_player(tmp_path, capsys):
    """Three areas of two agents (group ids 1-3): ``threaded: auto`` updates in a thread (the
    player is another process); each agent's groupmates are its own area's."""
    config = {"behaviors": {"GroupSimple1D": {
        "trainer_type": "poca", "threaded": "auto", "hyperparameters": {"batch_size": 64, "buffer_size": 256},
        "network_settings": {"hidden_units": 16, "num_layers": 1}, "max_steps": 1500, "summary_freq": 500}}}
    rows = _learn(tmp_path, config, "areas", scene="group", agents=2, behavior="GroupSimple1D",
                  player_args=("--groups", "3"))
    assert len(rows) == 3 and all("Losses/Baseline Loss" in row for row in rows)
    assert all(row.get("Policy/Staleness") for row in rows[1:])  # the update thread's statistic
    assert any(row.get("Environment/Group Cumulative Reward") for row in rows)
    capsys.readouterr()


def test_the_players_group_areas_are_separate_groups_with_their_own_agent_ids():
    areas = GroupAreas(groups=3, agents=2, max_steps=40)
    first = areas.reset()["GroupSimple1D"]
    assert first.agent_ids.tolist() == [0, 1, 2, 3, 4, 5] and first.group_id.tolist() == [1, 1, 2, 2, 3, 3]
    # area 0 walks its agents toward their goals, the others away: only area 0's group can earn its reward
    goals = first.observations[0][:, 0]
    toward = (goals > 0).astype(np.int32)
    actions = np.where(np.arange(6) < 2, toward, 1 - toward).reshape(6, 1)
    rewards = np.zeros(6)
    for _ in range(12):  # 10 steps of 0.1 reach ±1 (11 with float rounding)
        result = areas.step({"GroupSimple1D": actions})["GroupSimple1D"]
        assert len(result.agent_ids) == sum(areas.sizes)
        rewards[result.agent_ids] += result.group_reward
        actions = np.where(result.agent_ids < 2, toward[result.agent_ids], 1 - toward[result.agent_ids]).reshape(-1, 1)
    assert rewards[:2].min() > 0 and rewards[2:].max() == 0
