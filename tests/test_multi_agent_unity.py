"""Teams, self-play and groups through the Unity protocol: the stand-in player plays kerasrl's Duel1D
as a scene of two team behaviors (``--scene duel``), trained by ``kerasrl-learn`` with self-play from
today's layout and from a 0.14-style flat config, and GroupSimple1D as a scene of one group
(``--scene group``), trained by MA-POCA."""
from __future__ import annotations

import csv
import os

import pytest
import yaml

from kerasrl.cli import main
from kerasrl.envs.competitive import SPEC, team_behavior
from kerasrl.settings import RunContext
from kerasrl.trainers import create_trainers
from tests.process_tools import free_ports
from tests.test_self_play import LEARNING, _win_rate

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unity_standin", "StandIn")


def _learn(tmp_path, config, run_id: str, scene: str = "duel", agents: int = 8, behavior: str = "Duel1D") -> list[dict]:
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(config))
    (port,) = free_ports(1)
    assert main([str(path), "--env", STANDIN, "--base-port", str(port), "--results-dir", str(tmp_path),
                 "--run-id", run_id, "--seed", "1", "--env-args", "--scene", scene, "--agents", str(agents)]) == 0
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
