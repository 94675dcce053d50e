"""UnityEnvironment against the stand-in player (tests/unity_standin): the real protocol over
gRPC, a real player process; handshake, steps, episode ends, side channels, and each fault."""
from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

from kerasrl.envs.unity import (
    EngineConfig,
    OutgoingMessage,
    SideChannel,
    UnityCommunicationError,
    UnityEnvironment,
    behavior_config_name,
)
from kerasrl.envs.unity.observations import decode_png_observation
from kerasrl.envs.unity.side_channels import IncomingMessage, decode_side_channels, encode_side_channels
from tests.process_tools import free_ports

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unity_standin", "StandIn")
BEHAVIOR = "Simple1D?team=0"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _env(tmp_path, *args: str, **kwargs) -> UnityEnvironment:
    (port,) = free_ports(1)
    kwargs.setdefault("timeout_wait", 30.0)
    return UnityEnvironment(STANDIN, base_port=port, log_folder=str(tmp_path), additional_args=list(args), **kwargs)


def _players_on(port: int) -> list[int]:
    """Live stand-in players launched for ``port``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f"--mlagents-port\0{port}\0".encode() in f.read() and _alive(int(entry)):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _log(tmp_path) -> str:
    with open(tmp_path / "Player-0.log") as f:
        return f.read()


def test_handshake_specs_seed_and_engine_settings(tmp_path):
    env = _env(tmp_path, "--agents", "3", seed=7, engine=EngineConfig(time_scale=20.0, width=84, height=64))
    pid = env._comm.player.process.pid
    try:
        (name,) = env.behavior_specs
        assert name == BEHAVIOR and behavior_config_name(name) == "Simple1D"
        spec = env.behavior_specs[name]
        assert spec.observation_shapes == ((1,),) and spec.is_discrete and spec.discrete_branches == (2,)
        assert env.num_envs == 3
        result = env.reset({"step_size": 0.5})[name]
        assert result.agent_ids.tolist() == [100, 101, 102] and not result.done.any()
        assert set(result.observations[0].ravel().tolist()) <= {-1.0, 1.0}
        assert env.reset_parameters == {"step_size": 0.5}
    finally:
        env.close()
    assert not _alive(pid)
    log = _log(tmp_path)
    assert "seed 7" in log and "engine 0 84 64" in log and "engine 2 20" in log
    assert "parameter step_size 0.5" in log and log.rstrip().endswith("quit")


def test_episode_end_and_next_decision_in_one_message(tmp_path):
    """Steps of 0.5 reach the end in 2 steps: the terminal step is reported with its reward and
    final observation; the next step reports the agent's new decision (reward 0) without a
    player step; the player always gets one action per deciding agent."""
    env = _env(tmp_path, "--agents", "2")
    try:
        first = env.reset({"step_size": 0.5})[BEHAVIOR]
        right = np.ones((2, 1), np.int32) * (first.observations[0] > 0)  # towards each goal
        r = env.step({BEHAVIOR: right})[BEHAVIOR]
        assert not r.done.any() and np.allclose(r.rewards, -0.001)
        r = env.step({BEHAVIOR: right})[BEHAVIOR]
        assert r.terminated.all() and not r.truncated.any() and np.allclose(r.rewards, 1.011, atol=1e-6)
        np.testing.assert_array_equal(r.observations[0], first.observations[0])  # the goal they acted on
        new = env.step({BEHAVIOR: np.zeros((2, 1), np.int32)})[BEHAVIOR]  # ignored: acts on a final step
        assert new.agent_ids.tolist() == [100, 101] and not new.done.any() and (new.rewards == 0).all()
        r = env.step({BEHAVIOR: np.ones((2, 1), np.int32)})[BEHAVIOR]
        assert not r.done.any() and np.allclose(r.rewards, -0.001)
    finally:
        env.close()
    assert _log(tmp_path).count("reset") == 1


def test_max_step_reached_is_truncated(tmp_path):
    env = _env(tmp_path, "--max-step", "3")
    try:
        result = env.reset()[BEHAVIOR]
        flags = []
        for _ in range(3):
            away = np.array([[0 if result.observations[0][0, 0] > 0 else 1]], np.int32)
            result = env.step({BEHAVIOR: away})[BEHAVIOR]
            flags.append((bool(result.terminated[0]), bool(result.truncated[0]), round(float(result.rewards[0]), 3)))
        assert flags == [(False, False, -0.001), (False, False, -0.001), (False, True, -0.001)]
    finally:
        env.close()


@pytest.mark.parametrize("agents", [1, 3])  # one image, or all agents' images decoded at once
def test_visual_observations_are_decoded_png(tmp_path, agents):
    env = _env(tmp_path, "--scene", "visual", "--agents", str(agents), seed=4)
    try:
        spec = env.behavior_specs[BEHAVIOR]
        assert spec.observation_shapes == ((20, 20, 1),)
        images = env.reset()[BEHAVIOR].observations[0]
        assert images.shape == (agents, 20, 20, 1) and images.dtype == np.float32
        assert set(np.unique(images).tolist()) == {0.0, 1.0}
        for image in images:  # one half lit: the goal's side
            assert {image[:, :10].mean(), image[:, 10:].mean()} == {0.0, 1.0}
    finally:
        env.close()


def test_continuous_scene(tmp_path):
    env = _env(tmp_path, "--scene", "continuous")
    try:
        spec = env.behavior_specs[BEHAVIOR]
        assert spec.is_continuous and spec.action_shape == (1,)
        env.reset()
        r = env.step({BEHAVIOR: np.array([[0.05]], np.float32)})[BEHAVIOR]
        assert np.allclose(r.rewards, -0.001)
        with pytest.raises(Exception, match="Continuous actions for behavior 'Simple1D\\?team=0' contain NaN"):
            env.step({BEHAVIOR: np.array([[np.nan]], np.float32)})
    finally:
        env.close()


def test_hybrid_scene_gets_both_kinds_of_actions(tmp_path):
    """The hybrid scene's player walks by the continuous stride in the discrete direction (and
    quits with an error unless each action carries one of each)."""
    env = _env(tmp_path, "--scene", "hybrid", seed=3)
    try:
        spec = env.behavior_specs[BEHAVIOR]
        assert spec.is_hybrid and (spec.continuous_size, spec.discrete_branches) == (1, (2,))
        goal = env.reset()[BEHAVIOR].observations[0][0, 0]
        towards = 1.0 if goal > 0 else 0.0
        for _ in range(3):  # a stride at or below 0: the walker stays
            r = env.step({BEHAVIOR: np.array([[-0.5, 1.0 - towards]], np.float32)})[BEHAVIOR]
            assert not r.done.any() and np.allclose(r.rewards, -0.001)
        for step in range(14):  # 0.1 per step (a stride above 0.1 is clipped): the goal is 10 or 11 steps away
            r = env.step({BEHAVIOR: np.array([[0.1 if step % 2 else 0.5, towards]], np.float32)})[BEHAVIOR]
            if r.done.any():
                break
        assert step in (9, 10) and r.terminated[0] and np.isclose(r.rewards[0], 1.011)
        with pytest.raises(Exception, match="Discrete actions for behavior 'Simple1D\\?team=0' fall outside"):
            env.step({BEHAVIOR: np.array([[0.5, 2.0]], np.float32)})
    finally:
        env.close()
    assert _log(tmp_path).rstrip().endswith("quit")


def test_players_start_cleanly_while_grpc_is_busy(tmp_path):
    """Starting a player never forks the trainer with gRPC's fork handlers armed: while a gRPC
    server and client are busy in this process, every launched player runs to its own exit."""
    import threading
    from concurrent import futures

    import grpc

    from kerasrl.envs.unity.communicator import PlayerProcess

    player = tmp_path / "Quick.x86_64"
    player.write_text("#!/bin/sh\nexit 0\n")
    player.chmod(0o755)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    done = threading.Event()

    def poke() -> None:
        call = channel.unary_unary("/kerasrl.Test/Nothing")  # answered UNIMPLEMENTED
        while not done.is_set():
            try:
                call(b"", timeout=1)
            except grpc.RpcError:
                pass

    def watch(state: grpc.ChannelConnectivity) -> None:
        pass

    channel.subscribe(watch, try_to_connect=True)  # a thread of gRPC's polls the channel meanwhile
    poker = threading.Thread(target=poke, daemon=True)
    poker.start()
    try:
        codes = [PlayerProcess.launch(str(player), port, None, True).process.wait(10) for _ in range(60)]
    finally:
        done.set()
        poker.join(5)
        channel.unsubscribe(watch)
        channel.close()
        server.stop(None)
    assert codes == [0] * 60


def test_a_trainer_killed_with_sigkill_takes_its_player_along(tmp_path):
    """SIGKILL leaves the trainer no cleanup: the kernel's parent-death signal ends its player
    (which, as a Unity player, would play on without its trainer)."""
    import signal
    import subprocess
    import sys
    import time

    from kerasrl.envs.unity.communicator import parent_death_prefix

    if not parent_death_prefix():
        pytest.skip("the parent-death signal needs Linux and util-linux's setpriv")
    (port,) = free_ports(1)
    script = ("import sys, time; from kerasrl.envs.unity import UnityEnvironment; "
              f"env = UnityEnvironment({STANDIN!r}, base_port={port}, additional_args=['--outlive-trainer']); "
              "print('ready', flush=True); time.sleep(60)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trainer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=root))
    try:
        assert trainer.stdout.readline().strip() == "ready"
        (player,) = _players_on(port)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(10)
        deadline = time.monotonic() + 10
        while _alive(player) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(player), "the player outlived its SIGKILLed trainer"
    finally:
        trainer.kill()
        for pid in _players_on(port):
            os.kill(pid, signal.SIGKILL)


def test_action_masks(tmp_path):
    env = _env(tmp_path, "--scene", "masked", "--agents", "2")
    try:
        assert env.behavior_specs[BEHAVIOR].discrete_branches == (3,)
        result = env.reset()[BEHAVIOR]
        np.testing.assert_array_equal(result.action_mask, [[1, 1, 0], [1, 1, 0]])  # 1: allowed
        result = env.step({BEHAVIOR: np.array([[1], [0]], np.int32)})[BEHAVIOR]
        np.testing.assert_array_equal(result.action_mask, [[1, 1, 0], [1, 1, 0]])
    finally:
        env.close()


class _EchoChannel(SideChannel):
    def __init__(self) -> None:
        super().__init__(uuid.UUID("621f0a70-4f87-11ea-a6bf-784f4387d1f7"))
        self.received: list[str] = []

    def on_message_received(self, message: IncomingMessage) -> None:
        self.received.append(message.read_string())


def test_stats_and_a_users_own_channel_round_trip(tmp_path):
    echo = _EchoChannel()
    env = _env(tmp_path, "--max-step", "1", side_channels=[echo])
    try:
        env.reset()
        message = OutgoingMessage()
        message.write_string("hello player")
        echo.queue_message(message)
        env.step({BEHAVIOR: np.array([[1]], np.int32)})
        assert echo.received == ["hello player"]
        stats = env.take_environment_stats()
        assert list(stats) == ["Simple1D/Goal"] and stats["Simple1D/Goal"][0] in (-1.0, 1.0)
        assert env.take_environment_stats() == {}
    finally:
        env.close()


def test_side_channel_framing():
    channel = _EchoChannel()
    for text in ("a", "ü"):
        message = OutgoingMessage()
        message.write_string(text)
        channel.queue_message(message)
    data = encode_side_channels([channel])
    assert data[:16] == channel.channel_id.bytes_le and channel.outgoing == []
    decode_side_channels(data, {channel.channel_id: channel})
    assert channel.received == ["a", "ü"]
    with pytest.raises(Exception, match="claims 99 bytes"):
        decode_side_channels(data[:16] + (99).to_bytes(4, "little") + b"x", {})


def test_png_grey_is_the_average_and_a_mapping_stacks():
    tf = pytest.importorskip("tensorflow")
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 30, 60, 90
    data = tf.io.encode_png(rgb).numpy()
    grey = decode_png_observation(data, (2, 3, 1))
    np.testing.assert_allclose(grey, np.full((2, 3, 1), 60 / 255), rtol=1e-6)
    # two stacked grey frames in two PNGs: channels 0-2 -> frame 0, 3-5 -> frame 1
    other = tf.io.encode_png(np.full((2, 3, 3), 255, np.uint8)).numpy()
    stacked = decode_png_observation(data + other, (2, 3, 2), [0, 0, 0, 1, 1, 1])
    np.testing.assert_allclose(stacked[..., 0], 60 / 255, rtol=1e-6)
    np.testing.assert_allclose(stacked[..., 1], 1.0)
    colour = decode_png_observation(data, (2, 3, 3))
    np.testing.assert_allclose(colour[0, 0], [30 / 255, 60 / 255, 90 / 255], rtol=1e-6)


def test_a_player_before_api_1_3_gets_its_actions_in_the_old_field(tmp_path):
    env = _env(tmp_path, "--communication-version", "1.2.0", "--max-step", "2")
    try:
        goal = env.reset()[BEHAVIOR].observations[0][0, 0]
        towards = np.array([[1 if goal > 0 else 0]], np.int32)
        rewards = [env.step({BEHAVIOR: towards})[BEHAVIOR].rewards[0] for _ in range(2)]
        assert env.step({BEHAVIOR: towards})[BEHAVIOR].rewards[0] == 0.0  # truncated at 2, then the new decision
        assert np.allclose(rewards, -0.001)
    finally:
        env.close()


def test_version_mismatch_is_one_line_naming_both(tmp_path):
    with pytest.raises(UnityCommunicationError) as e:
        _env(tmp_path, "--communication-version", "2.0.0")
    message = str(e.value)
    assert "\n" not in message and "2.0.0" in message and "1.5.0" in message and "StandIn" in message


@pytest.mark.parametrize("fault, expected", [
    (("--never-connect",), "did not connect within 1 s"),
    (("--crash-after", "2"), "exited with code 3"),
    (("--hang-after", "2"), "sent nothing for 1 s"),
])
def test_faults_name_build_port_and_log_and_leave_no_process(tmp_path, fault, expected):
    (port,) = free_ports(1)
    env = None
    with pytest.raises(UnityCommunicationError) as e:
        env = UnityEnvironment(STANDIN, base_port=port, log_folder=str(tmp_path), additional_args=list(fault),
                               timeout_wait=1.0 if fault[0] != "--crash-after" else 30.0)
        env.reset()
        for _ in range(5):
            env.step({BEHAVIOR: np.array([[1]], np.int32)})
    message = str(e.value)
    assert expected in message and "\n" not in message
    assert STANDIN in message and f"port {port}" in message and str(tmp_path / "Player-0.log") in message
    if env is not None:
        env.close()
    assert _players_on(port) == []


def test_a_behavior_that_appears_after_the_start(tmp_path):
    env = _env(tmp_path, "--late-behavior-after", "1")
    try:
        env.reset()
        env.step({BEHAVIOR: np.array([[1]], np.int32)})
        with pytest.raises(Exception, match="Behavior 'Late' reported its first agents after training started"):
            env.step({BEHAVIOR: np.array([[1]], np.int32)})
    finally:
        env.close()


def test_no_player_and_port_in_use(tmp_path):
    with pytest.raises(UnityCommunicationError, match="no Unity player there"):
        UnityEnvironment(str(tmp_path / "Missing"), base_port=free_ports(1)[0])
    env = _env(tmp_path)
    try:
        with pytest.raises(UnityCommunicationError, match=f"Port {env.port} .* is in use"):
            UnityEnvironment(STANDIN, base_port=env.port, timeout_wait=1.0)
    finally:
        env.close()


def test_the_editor_connects_to_port_5004_by_default(tmp_path, monkeypatch):
    """No build: kerasrl listens and whatever connects (here the stand-in, as if Play were pressed) plays."""
    import subprocess
    import threading

    from kerasrl.envs.unity import EDITOR_PORT
    from kerasrl.envs.unity import environment as unity_environment

    (port,) = free_ports(1)
    monkeypatch.setattr(unity_environment, "EDITOR_PORT", port)  # 5004 may be taken on a shared machine
    made: list = []
    thread = threading.Thread(target=lambda: made.append(UnityEnvironment(timeout_wait=30.0)))
    thread.start()
    player = subprocess.Popen([STANDIN + ".x86_64", "--mlagents-port", str(port)])
    try:
        thread.join(60)
        (env,) = made
        assert env.port == port and env.file_name is None and EDITOR_PORT == 5004
        assert env.reset()[BEHAVIOR].agent_ids.tolist() == [100]
        env.close()
        assert player.wait(10) == 0  # told to quit, it quits
    finally:
        player.kill()
        player.wait()


def test_an_editor_that_never_plays(tmp_path):
    (port,) = free_ports(1)
    with pytest.raises(UnityCommunicationError, match=f"Unity Editor \\(port {port}\\) did not connect within 1 s"):
        UnityEnvironment(base_port=port, timeout_wait=1.0)


def test_the_seed_reaches_the_scene(tmp_path):
    """The same seed gives the scene the same goals; another seed other goals."""
    def goals(seed: int) -> list[float]:
        env = _env(tmp_path, "--agents", "4", "--max-step", "1", seed=seed)
        try:
            out = [env.reset()[BEHAVIOR].observations[0].ravel().tolist()]
            for _ in range(6):
                out.append(env.step({BEHAVIOR: np.ones((len(env._last[BEHAVIOR]), 1), np.int32)})[BEHAVIOR]
                           .observations[0].ravel().tolist())
            return sum(out, [])
        finally:
            env.close()

    assert goals(5) == goals(5) != goals(6)


def test_the_keras_style_api_trains_a_unity_scene(tmp_path):
    import kerasrl

    env = _env(tmp_path, "--max-step", "20")
    try:
        agent = kerasrl.PPO(env, seed=1, run_dir=str(tmp_path / "run"), batch_size=16, buffer_size=64,
                            hidden_units=16)
        history = agent.fit(200, verbose=0)
        assert agent.behavior == BEHAVIOR and len(history.epoch) >= 2
    finally:
        env.close()
    assert "reset" in _log(tmp_path)


def test_make_env_takes_a_player_path(tmp_path):
    from kerasrl.envs.registry import is_unity_env, make_env

    assert is_unity_env(STANDIN) and is_unity_env(STANDIN + ".x86_64") and is_unity_env("editor")
    assert not is_unity_env("CartPole-v1") and not is_unity_env("ALE/Pong-v5")
    with pytest.raises(Exception, match="is one Unity player here; --num-envs must be 1"):
        make_env(STANDIN, 2, 0)


def test_a_team_suffix_names_no_file_with_question_mark_or_equals(tmp_path):
    """Checkpoints, metrics, TensorBoard and exported files name ``Striker?team=1`` as
    ``Striker_team_1``; two behaviors that would share one name are refused in one line."""
    from kerasrl.exception import TrainerError
    from kerasrl.export import export_policy
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.settings import NetworkSettings, RunContext
    from kerasrl.spec import BehaviorSpec, behavior_file_name
    from kerasrl.trainers.factory import create_trainers

    assert behavior_file_name("Striker?team=1") == "Striker_team_1"
    assert behavior_file_name("CartPole-v1") == "CartPole-v1"
    context = RunContext.in_results_dir(str(tmp_path), "run")
    paths = [context.behavior_model_path("Striker?team=1"), context.metrics_path("Striker?team=1"),
             context.summary_path("Striker?team=1")]
    assert [os.path.relpath(p, tmp_path) for p in paths] == [
        "run/models/Striker_team_1", "run/Striker_team_1.csv", "run/summaries/run_Striker_team_1"]
    spec = BehaviorSpec(((3,),), "discrete", (2,))
    model = ActorCritic(spec, network=NetworkSettings(hidden_units=4), seed=0)
    files = export_policy(model, paths[0], "Striker?team=1", onnx=False)
    assert sorted(os.path.basename(p) for p in files.values()) == ["Striker_team_1.policy.json",
                                                                    "Striker_team_1.savedmodel"]
    with open(files["policy_json"]) as f:
        assert '"behavior": "Striker?team=1"' in f.read()  # the id itself is kept
    with pytest.raises(TrainerError, match="Behaviors 'Striker\\?team=1' and 'Striker_team_1' would write .* "
                                           "under one name, 'Striker_team_1'"):
        create_trainers(None, {"Striker?team=1": spec, "Striker_team_1": spec}, context)


def test_samplers_and_training_areas_reach_the_scene(tmp_path):
    """A config's per-episode samplers go through the environment-parameters channel with the
    first reset (the scene draws them each episode), and --num-areas with the handshake."""
    samplers = [("mass", "uniform", (1.0, 2.0), 7), ("scale", "multirangeuniform", (0.5, 1.0, 2.0, 3.0), 8),
                ("wind", "gaussian", (0.0, 0.5), 9)]
    env = _env(tmp_path, samplers=samplers, num_areas=2)
    try:
        env.reset()
    finally:
        env.close()
    log = _log(tmp_path)
    assert "num_areas 2" in log
    assert "sampler mass 0 7 1 2" in log and "sampler scale 2 8 0.5 1 2 3" in log and "sampler wind 1 9 0 0.5" in log
