"""--initialize-from's errors name --initialize-from, not --run-id or --resume."""
import socket

import pytest

from kerasrl.cli import main
from kerasrl.envs.unity import UnityCommunicationError, UnityEnvironment
from tests.test_unity_env import STANDIN

PPO = "default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: {units}\n"
SAC = "default:\n  trainer: sac\n  batch_size: 8\n  buffer_size: 64\n  hidden_units: {units}\n"


def _learn(tmp_path, config: str, units: int, *args: str) -> int:
    cfg = tmp_path / f"cfg{units}.yaml"
    cfg.write_text(config.format(units=units))
    return main([str(cfg), "--seed", "1", "--results-dir", str(tmp_path), "--train", *args])


@pytest.mark.parametrize("config", [PPO, SAC], ids=["ppo", "sac"])
def test_a_missing_behavior_names_initialize_from_and_the_runs_behaviors(tmp_path, capsys, config):
    assert _learn(tmp_path, config, 16, "--env", "Simple1D", "--run-id", "full", "--steps", "20") == 0
    capsys.readouterr()
    assert _learn(tmp_path, config, 16, "--env", "MultiBranchMasked", "--run-id", "init2", "--initialize-from", "full") != 0
    err = capsys.readouterr().err
    assert f"--initialize-from {tmp_path / 'full'} has no checkpoint of behavior MultiBranchMasked; it has Simple1D." in err
    assert "--run-id." not in err


def test_a_network_size_mismatch_advises_the_source_runs_settings(tmp_path, capsys):
    assert _learn(tmp_path, PPO, 16, "--env", "Simple1D", "--run-id", "full", "--steps", "20") == 0
    capsys.readouterr()
    assert _learn(tmp_path, PPO, 32, "--env", "Simple1D", "--run-id", "wide", "--initialize-from", "full") != 0
    err = capsys.readouterr().err
    assert "does not fit this configuration" in err
    assert "use the network settings of the run it initializes from (hidden_units, num_layers, ...)" in err
    assert "or drop --initialize-from." in err and "--resume" not in err and "--force" not in err


def test_a_busy_port_names_the_player_not_the_editor():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("localhost", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(UnityCommunicationError) as error:
            UnityEnvironment(STANDIN, base_port=port, timeout_wait=1.0)
    message = str(error.value)
    assert f"Port {port} for the Unity player {STANDIN} (port {port}) is in use" in message
    assert "Editor (port" not in message
