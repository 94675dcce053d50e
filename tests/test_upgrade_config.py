"""``kerasrl upgrade-config``: a config in the 0.9-0.15 layout written in today's layout loads back
into the same settings and trains the same run."""
import re

import pytest
import yaml

from kerasrl.cli import main, tools
from kerasrl.configs import available_configs, config_path
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import load_trainer_config
from kerasrl.settings.upgrade import todays_layout

FINAL = re.compile(r"^final steps=(\d+) mean_return=(\S+) ", re.M)


@pytest.mark.parametrize("name", available_configs())
def test_every_shipped_config_upgrades_to_the_same_settings(name, tmp_path):
    old = load_trainer_config(config_path(name))
    new = tmp_path / "new.yaml"
    assert tools.main(["upgrade-config", name, str(new)]) == 0
    upgraded = load_trainer_config(new)
    assert upgraded.layout == "today's ML-Agents layout" and "behaviors" in yaml.safe_load(new.read_text())
    for section in old.sections:
        assert upgraded.settings_for(section) == old.settings_for(section), section


def test_sections_with_more_signals_than_default_keep_them():
    old = load_trainer_config({
        "default": {"batch_size": 64, "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}}},
        "Pyramids": {"reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99},
                                        "curiosity": {"strength": 0.02, "gamma": 0.99, "encoding_size": 256}}},
        "Walker": {"trainer": "sac", "tau": 0.01, "memory_size": 64}})
    layout = todays_layout(old)
    new = load_trainer_config(layout)
    assert layout["behaviors"]["Walker"]["trainer_type"] == "sac"
    for section in old.sections:
        assert new.settings_for(section) == old.settings_for(section)


def test_a_behavior_that_drops_a_default_signal_is_one_clear_error():
    old = load_trainer_config({
        "default": {"reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99},
                                       "curiosity": {"strength": 0.02, "gamma": 0.99, "encoding_size": 64}}},
        "Plain": {"reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.9}}}})
    with pytest.raises(TrainerConfigError, match="cannot be written in today's layout unchanged"):
        todays_layout(old)


def test_the_command_refuses_to_overwrite_or_to_create_folders(tmp_path, capsys):
    new = tmp_path / "new.yaml"
    new.write_text("keep")
    assert tools.main(["upgrade-config", "cartpole_zoo", str(new)]) == 2
    assert "already exists" in capsys.readouterr().err and new.read_text() == "keep"
    assert tools.main(["upgrade-config", "cartpole_zoo", str(new), "--force"]) == 0
    assert tools.main(["upgrade-config", str(new), str(new), "--force"]) == 2
    assert "is the config being upgraded" in capsys.readouterr().err
    assert tools.main(["upgrade-config", "cartpole_zoo", str(tmp_path / "no" / "x.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "no").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.yaml"]  # no temporary file left


@pytest.mark.slow
def test_the_upgraded_config_trains_the_same_run(tmp_path, capsys):
    flat = tmp_path / "flat.yaml"
    flat.write_text(yaml.safe_dump({"default": {"batch_size": 16, "buffer_size": 64, "hidden_units": 16,
                                                "learning_rate": 3.0e-3, "summary_freq": 100,
                                                "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.9},
                                                                   "curiosity": {"strength": 0.01, "gamma": 0.9,
                                                                                 "encoding_size": 8}}}}))
    new = tmp_path / "new.yaml"
    assert tools.main(["upgrade-config", str(flat), str(new)]) == 0
    finals = []
    for i, config in enumerate((flat, new)):
        assert main([str(config), "--env", "Simple1D", "--steps", "400", "--seed", "5", "--results-dir",
                     str(tmp_path), "--run-id", f"r{i}", "--progress-every", "400"]) == 0
        finals.append(FINAL.search(capsys.readouterr().out).groups())
    assert finals[0] == finals[1]
    assert (tmp_path / "r0" / "Simple1D.csv").read_text() == (tmp_path / "r1" / "Simple1D.csv").read_text()
