"""``kerasrl-learn --env PLAYER`` end to end with the stand-in player: training to the scene's
threshold, two players, and a player that crashes mid-run or a run stopped by Ctrl-C (one
line, a checkpoint, no player left)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kerasrl.export import onnx_available
from tests.process_tools import free_ports, group_members

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDIN = os.path.join(ROOT, "tests", "unity_standin", "StandIn")
FINAL = re.compile(r"^final steps=(\d+) mean_return=(\S+)", re.M)
CONFIG = ("Simple1D:\n  batch_size: 16\n  buffer_size: 64\n  learning_rate: {learning_rate}\n  hidden_units: 16\n"
          "  summary_freq: 500\n  max_steps: {steps}\n")


def _learn(tmp_path, *args: str, steps: int = 3000, player: str = STANDIN,
           learning_rate: float = 5.0e-3) -> subprocess.Popen:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG.format(steps=steps, learning_rate=learning_rate))
    (port,) = free_ports(1)
    command = [sys.executable, "-m", "kerasrl.cli", str(cfg), "--env", player, "--base-port", str(port), "--seed", "1",
               "--results-dir", str(tmp_path), "--run-id", "r", "--progress-every", "1000", *args]
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, cwd=ROOT)
    proc.base_port = port  # type: ignore[attr-defined]  # whose players _assert_no_process_left looks for
    return proc


def _finish(proc: subprocess.Popen, timeout: float = 120.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


def _assert_no_process_left(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(proc.pid) == []
    port = proc.base_port  # type: ignore[attr-defined]
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _is_standin(p, port)], "a stand-in player is left"


def _is_standin(pid: str, port: int) -> bool:
    """Whether ``pid`` is a live stand-in player of the run on ``port`` (not another test's, which
    may be running beside this one)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        return (b"standin_player.py" in cmdline and f"--mlagents-port\0{port}\0".encode() in cmdline
                and _session(pid) is not None)
    except OSError:
        return False


def _session(pid: str):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields


@pytest.mark.slow
def test_trains_the_standin_scene_to_its_threshold(tmp_path):
    code, out, err = _finish(_learn(tmp_path, "--num-envs", "2", "--no-graphics", "--time-scale", "10"))
    assert code == 0, err
    assert "PPO on " + STANDIN in out
    m = FINAL.search(out)
    assert m and int(m.group(1)) >= 3000 and float(m.group(2)) >= 0.9, out
    for i in (0, 1):
        log = (tmp_path / "r" / "run_logs" / f"Player-{i}.log").read_text()
        assert "nographics=True batchmode=True" in log and "engine 2 10" in log and f"seed {1 + i}" in log
    # files name the behavior Simple1D?team=0 without "?" or "=": checkpoints, exports, CSV, TensorBoard
    models = tmp_path / "r" / "models" / "Simple1D_team_0"
    unity_model = {"Simple1D_team_0.unity.onnx"} if onnx_available() else set()  # the onnx extra writes it
    assert {"Simple1D_team_0.weights.h5"} | unity_model <= set(os.listdir(models))
    assert "Simple1D/Goal" in (tmp_path / "r" / "Simple1D_team_0.csv").read_text().splitlines()[0]
    assert "r_Simple1D_team_0" in os.listdir(tmp_path / "r" / "summaries")
    assert not [p for p in tmp_path.rglob("*") if "?" in p.name or "=" in p.name]


@pytest.mark.slow
def test_trains_the_visual_scene_given_with_its_extension(tmp_path):
    code, out, err = _finish(_learn(tmp_path, "--num-envs", "2", "--env-args", "--scene", "visual",
                                    player=STANDIN + ".x86_64"))
    assert code == 0, err
    m = FINAL.search(out)
    assert m and float(m.group(2)) >= 0.9, out


@pytest.mark.slow
def test_trains_the_hybrid_scene_on_two_players(tmp_path):
    """Continuous and discrete actions at once: the player quits with an error unless every
    action carries one of each, and the walker reaches its goal only when both heads learned."""
    code, out, err = _finish(_learn(tmp_path, "--num-envs", "2", "--env-args", "--scene", "hybrid", steps=5000,
                                    learning_rate=1.0e-2), timeout=180)
    assert code == 0, err
    m = FINAL.search(out)
    assert m and float(m.group(2)) >= 0.9, out
    assert all((tmp_path / "r" / "run_logs" / f"Player-{i}.log").read_text().rstrip().endswith("quit") for i in (0, 1))


@pytest.mark.slow
def test_the_policy_never_takes_a_masked_action(tmp_path):
    """The masked scene's player quits with an error if its never-allowed action is taken."""
    code, out, err = _finish(_learn(tmp_path, "--steps", "1000", "--env-args", "--scene", "masked", "--agents", "4"))
    assert code == 0, err
    assert (tmp_path / "r" / "run_logs" / "Player-0.log").read_text().rstrip().endswith("quit")


@pytest.mark.slow
def test_two_players_on_consecutive_ports(tmp_path):
    code, out, err = _finish(_learn(tmp_path, "--num-envs", "2", "--steps", "600", "--env-args", "--agents", "2",
                                    "--max-step", "20"), timeout=180)
    assert code == 0, err
    logs = [(tmp_path / "r" / "run_logs" / f"Player-{i}.log").read_text() for i in range(2)]
    ports = [int(re.search(r"port (\d+)", log).group(1)) for log in logs]
    assert ports[1] == ports[0] + 1
    assert "seed 1" in logs[0] and "seed 2" in logs[1]
    assert all(log.rstrip().endswith("quit") for log in logs)
    # what the scenes recorded came through the worker processes
    assert "Simple1D/Goal" in (tmp_path / "r" / "Simple1D_team_0.csv").read_text().splitlines()[0]


@pytest.mark.slow
def test_a_player_that_crashes_mid_run(tmp_path):
    proc = _learn(tmp_path, "--save-freq", "200", "--env-args", "--crash-after", "700")
    code, out, err = _finish(proc)
    assert code == 2, (out, err)
    line = err.strip().splitlines()[-1]
    assert "exited with code 3" in line and STANDIN in line and "port " in line and "Player-0.log" in line, err
    assert "The model was saved at step" in line
    assert any(n.startswith("model-") for n in os.listdir(tmp_path / "r" / "models" / "Simple1D_team_0"))
    _assert_no_process_left(proc)


@pytest.mark.parametrize("players", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_players_that_crash_are_restarted_within_the_limits(tmp_path, players):
    """Each player crashes after 400 steps: with no rate limit the run restarts the players (all of
    them, after any one's crash) and trains to its end; the warnings count the restarts; the
    players' logs record the crashes."""
    proc = _learn(tmp_path, "--num-envs", str(players), "--restarts-rate-limit-n", "-1",
                  "--env-args", "--crash-after", "400", steps=1000 * players + 500)
    code, out, err = _finish(proc, timeout=300)
    assert code == 0, (out, err)
    assert "restarting it (restart 1 of at most 10)" in err and FINAL.search(out), err
    assert int(FINAL.search(out).group(1)) >= 1000 * players + 500
    logs = [(tmp_path / "r" / "run_logs" / f"Player-{i}.log").read_text() for i in range(players)]
    assert sum(log.count("crash") for log in logs) >= 2
    _assert_no_process_left(proc)


def test_a_crash_beyond_the_rate_limit_ends_the_run_with_one_line(tmp_path):
    proc = _learn(tmp_path, "--max-lifetime-restarts", "3", "--restarts-rate-limit-n", "1",
                  "--env-args", "--crash-after", "300", steps=3000)
    code, out, err = _finish(proc, timeout=300)
    assert code == 2, (out, err)
    assert "restarting it (restart 1 of at most 3)" in err
    assert "is not restarted (1 restarts within --restarts-rate-limit-period-s 60 s" in err
    assert "exited with code 3" in err.strip().splitlines()[-1]
    _assert_no_process_left(proc)


@pytest.mark.slow
def test_ctrl_c_saves_and_leaves_no_player(tmp_path):
    proc = _learn(tmp_path, steps=10**6)
    deadline = time.monotonic() + 90
    while not (tmp_path / "r" / "run_logs" / "Player-0.log").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C reaches the whole foreground group
    code, out, err = _finish(proc)
    assert code == 130, (out, err)
    assert "Interrupted: the model was saved" in out
    _assert_no_process_left(proc)


@pytest.mark.slow
@pytest.mark.parametrize("fault, expected, saved", [
    (("--timeout-wait", "2", "--env-args", "--never-connect"), "did not connect within 2 s", False),
    (("--env-args", "--communication-version", "2.0.0"), "speaks Communication API 2.0.0", False),
    (("--timeout-wait", "3", "--save-freq", "200", "--env-args", "--hang-after", "500"), "sent nothing for 3 s", True),
])
def test_faults_end_the_run_with_one_line(tmp_path, fault, expected, saved):
    proc = _learn(tmp_path, *fault)
    code, out, err = _finish(proc)
    assert code == 2, (out, err)
    line = err.strip().splitlines()[-1]
    assert line.startswith("kerasrl-learn: error: ") and expected in line, err
    assert STANDIN in line and "port " in line
    assert ("The model was saved at step" in line) == saved
    _assert_no_process_left(proc)


def test_todays_layout_trains_a_player_with_no_env_flag_and_its_samplers_reach_it(tmp_path):
    """env_settings.env_path names the player; environment_parameters' sampler reaches it."""
    (port,) = free_ports(1)
    cfg = tmp_path / "today.yaml"
    cfg.write_text(f"""behaviors:
  Simple1D:
    hyperparameters: {{batch_size: 16, buffer_size: 64, learning_rate: 5.0e-3}}
    network_settings: {{hidden_units: 16}}
    max_steps: 300
    summary_freq: 100
env_settings: {{env_path: {STANDIN}, base_port: {port}, seed: 1}}
checkpoint_settings: {{run_id: r, results_dir: {tmp_path}}}
environment_parameters:
  mass: {{sampler_type: uniform, sampler_parameters: {{min_value: 1, max_value: 2, seed: 5}}}}
  step_size: 0.5
""")
    done = subprocess.run([sys.executable, "-m", "kerasrl.cli", str(cfg), "--progress-every", "300"], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert FINAL.search(done.stdout), done.stdout[-2000:]
    with open(tmp_path / "r" / "run_logs" / "Player-0.log") as f:
        log = f.read()
    assert "sampler mass 0 5 1 2" in log and "parameter step_size 0.5" in log
