"""RayEnvManager: environment copies in Ray actors (the optional extra ``kerasrl[ray]``).

The Ray tests share one local Ray (started once for the module); they skip with the reason
when Ray is not installed. Actors unpickle the factories of test_subprocess_env_manager.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
from test_subprocess_env_manager import CountingFactory, ObsPolicy, ZeroPolicy, _ppo_run

from kerasrl.envs import EnvironmentException, GymnasiumEnvFactory, SubprocessEnvManager
from kerasrl.envs.ray_env_manager import RayEnvManager
from kerasrl.timers import reset_timers

ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install "kerasrl[ray]"')


TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray whose workers import this checkout's kerasrl and the tests' factories."""
    path = os.pathsep.join([os.path.dirname(TESTS), TESTS, os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": path.rstrip(os.pathsep)}})
    yield
    ray.shutdown()


def _alive(actor) -> bool:
    try:
        ray.get(actor.ready.remote(), timeout=5)
    except Exception:  # noqa: BLE001 - any failure: the actor is gone
        return False
    return True


def _kill(actor) -> None:
    """Kill an actor and wait until it is gone: ``ray.kill`` is asynchronous, and a step sent
    before the kill lands would still be answered."""
    ray.kill(actor)
    deadline = time.monotonic() + 20
    while _alive(actor) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(actor)


def test_steps_equal_the_subprocess_manager_and_close_stops_the_actors():
    factory = GymnasiumEnvFactory("CartPole-v1", 2, seed=3, vectorization_mode="sync")
    sub, rm = SubprocessEnvManager(factory, 2), RayEnvManager(factory, 2)
    try:
        assert rm.behavior_specs == sub.behavior_specs and len(rm.nodes) == 2
        for manager in (sub, rm):
            manager.set_policy("CartPole-v1", ObsPolicy())
        pairs = [(sub.reset()[0], rm.reset()[0])] + [(sub.step()[0], rm.step()[0]) for _ in range(150)]
        for a, b in pairs:
            ra, rb = a.current["CartPole-v1"], b.current["CartPole-v1"]
            np.testing.assert_array_equal(ra.agent_ids, rb.agent_ids)
            np.testing.assert_array_equal(ra.observations[0], rb.observations[0])
            np.testing.assert_array_equal(ra.done, rb.done)
    finally:
        sub.close()
        rm.close()
    deadline = time.monotonic() + 20  # ray.kill is asynchronous
    while any(_alive(a) for a in rm.actors) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(a) for a in rm.actors)
    rm.close()  # idempotent


def test_ppo_with_two_ray_actors_equals_the_subprocess_run(tmp_path):
    """PPO through TrainerController: same steps, episodes and final weights, bit for bit."""
    factory = GymnasiumEnvFactory("CartPole-v1", 2, seed=11, vectorization_mode="sync")
    steps_a, returns_a, weights_a = _ppo_run(SubprocessEnvManager(factory, 2), tmp_path / "a", 2000)
    reset_timers()
    manager = RayEnvManager(factory, 2)
    steps_b, returns_b, weights_b = _ppo_run(manager, tmp_path / "b", 2000)
    assert manager.closed and steps_a == steps_b and len(returns_a) >= 10
    assert returns_a == returns_b
    for wa, wb in zip(weights_a, weights_b):
        np.testing.assert_array_equal(wa, wb)


def test_an_actor_that_raises_is_named_with_its_environment_and_node():
    saved: list[EnvironmentException] = []
    manager = RayEnvManager(CountingFactory("raise", bad_worker=1, at=2), 2, on_failure=saved.append)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    with pytest.raises(EnvironmentException) as info:
        manager.step()
    message = str(info.value)
    assert message.startswith("Environment worker 1 of 2 (CountingEnv#1, Ray actor on node ")
    assert message.endswith("raised ValueError: boom at step 2 (second line) (during a step).") and "\n" not in message
    assert saved == [info.value] and manager.closed


def test_a_killed_actor_is_an_error_unless_restarts_are_allowed():
    manager = RayEnvManager(CountingFactory(), 2)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    _kill(manager.actors[1])
    with pytest.raises(EnvironmentException, match=r"^Environment worker 1 of 2 \(CountingEnv#1, Ray actor on node "
                                                   r".*\) died during a step"):
        manager.step()
    assert manager.closed

    manager = RayEnvManager(CountingFactory(), 2, restart_workers=True)
    manager.set_policy("Count", ZeroPolicy())
    first = manager.reset()[0].current["Count"]
    manager.step()
    _kill(manager.actors[1])
    after = manager.step()[0].current["Count"]
    assert manager.restarts == 1
    assert after.observations[0][:, 0].tolist() == [2.0, 0.0]  # worker 1's environment started afresh
    assert after.agent_ids.tolist() == [first.agent_ids[0], 2]  # with a new agent id: no trajectory spans it
    manager.step()
    manager.close()


def test_a_hang_is_caught_by_the_step_timeout():
    manager = RayEnvManager(CountingFactory("hang", bad_worker=1, at=2), 2, step_timeout_s=0.5)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    start = time.monotonic()
    with pytest.raises(EnvironmentException, match=r"^Environment worker 1 of 2 \(CountingEnv#1, Ray actor on node "
                                                   r".*\) did not answer a step within 0\.5 s"):
        manager.step()
    assert time.monotonic() - start < 10.0


def test_cli_trains_with_ray_actors_and_saves_before_reporting_a_dead_actor(tmp_path, capsys, monkeypatch):
    from kerasrl.cli import main
    from kerasrl.trainers import TrainerController

    original = TrainerController.advance

    def kill_an_actor_at_100(self, env):
        if self.global_step == 100:
            _kill(env.actors[1])
        return original(self, env)

    monkeypatch.setattr(TrainerController, "advance", kill_an_actor_at_100)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n")
    args = [str(cfg), "--env", "Simple1D", "--workers", "2", "--env-manager", "ray", "--results-dir", str(tmp_path),
            "--steps", "1000"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Environment worker 1 of 2 (Simple1D" in err and "Ray actor on node" in err, err
    assert "saved at step 200; continue with --resume" in err
    assert (tmp_path / "ppo" / "models" / "Simple1D" / "model-200.index").exists()


def test_an_environment_that_cannot_be_built_is_named():
    with pytest.raises(EnvironmentException, match=r"^Environment worker 1 of 2 \(CountingFactory, Ray actor on node "
                                                   r".*\) raised RuntimeError: cannot build \(while building its "
                                                   r"environment\)\.$"):
        RayEnvManager(CountingFactory("fail_start", bad_worker=1), 2)


def test_without_ray_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(EnvironmentException, match=r'needs Ray, which is not installed: pip install "kerasrl\[ray\]"'):
        RayEnvManager(CountingFactory(), 1)
