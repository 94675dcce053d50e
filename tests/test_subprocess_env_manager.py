"""SubprocessEnvManager: environment copies in worker processes, one policy call per step.

Workers are spawned interpreters that import this module to unpickle the factories below, so
it must not import TensorFlow at the top.
"""
from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np
import pytest
from process_tools import group_members

from kerasrl.cli import main
from kerasrl.envs import (
    ActionInfo,
    BehaviorSpec,
    Environment,
    EnvironmentException,
    GymnasiumEnv,
    GymnasiumEnvFactory,
    SimpleEnvManager,
    SlowEnvironment,
    SlowStep,
    StepResult,
    SubprocessEnvManager,
)
from kerasrl.envs.base import ActionType
from kerasrl.timers import get_timer_stack, get_timer_tree, reset_timers, set_gauge

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FINAL = re.compile(r"^final steps=(\d+) mean_return=(\S+) steps_per_sec=(\S+) wall_s=(\S+)$", re.M)


class ObsPolicy:
    """A deterministic policy stub: push the cart towards the pole's lean."""

    def get_action(self, result: StepResult) -> ActionInfo:
        action = (result.observations[0][:, 2] > 0).astype(np.int32).reshape(-1, 1)
        return ActionInfo(action, None, None, {})


class CountingEnv(Environment):
    """One agent observing its step count; on worker ``bad_worker`` it misbehaves from step
    ``at`` on: ``raise`` (ValueError), ``hang`` (sleeps a minute), ``nan`` (a NaN observation).
    Every step sets the gauge ``counting_env.step``."""

    def __init__(self, index: int, mode: Optional[str] = None, at: int = 0, obs_size: int = 2) -> None:
        self.index, self.mode, self.at, self.t = index, mode, at, 0
        self.env_name = f"CountingEnv#{index}"
        self._specs = {"Count": BehaviorSpec(((obs_size,),), ActionType.DISCRETE, (2,))}

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def _result(self) -> dict[str, StepResult]:
        obs = np.full((1,) + self._specs["Count"].observation_shapes[0], float(self.t), np.float32)
        if self.mode == "nan" and self.t >= self.at:
            obs[0, 0] = np.nan
        return {"Count": StepResult([7], [obs], [1.0], [False], [False])}

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        self.t = 0
        return self._result()

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        self.t += 1
        set_gauge("counting_env.step", float(self.t))
        if self.mode == "raise" and self.t >= self.at:
            raise ValueError(f"boom at step {self.t}\n(second line)")
        if self.mode == "hang" and self.t >= self.at:
            time.sleep(60)
        return self._result()


@dataclass
class CountingFactory:
    mode: Optional[str] = None
    bad_worker: int = 1
    at: int = 3
    odd_obs_size: int = 2

    def __call__(self, index: int) -> Environment:
        if self.mode == "fail_start" and index == self.bad_worker:
            raise RuntimeError("cannot build")
        size = self.odd_obs_size if index % 2 else 2
        return CountingEnv(index, self.mode if index == self.bad_worker else None, self.at, size)


class ZeroPolicy:
    def get_action(self, result: StepResult) -> ActionInfo:
        return ActionInfo(np.zeros((len(result), 1), np.int32), None, None, {})


def assert_no_workers_alive() -> None:
    assert multiprocessing.active_children() == []


def test_steps_equal_simple_env_manager_over_the_same_seeded_envs():
    """4 sync-vectorised CartPole copies in one process = 2 workers × 2 copies, step by step."""
    inproc = SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=4, seed=3, vectorization_mode="sync"))
    workers = SubprocessEnvManager(GymnasiumEnvFactory("CartPole-v1", 2, seed=3, vectorization_mode="sync"), 2)
    try:
        assert workers.behavior_specs == inproc.behavior_specs
        assert workers.worker_pids != [None, None] and len(set(workers.worker_pids)) == 2
        for manager in (inproc, workers):
            manager.set_policy("CartPole-v1", ObsPolicy())
        pairs = [(inproc.reset()[0], workers.reset()[0])]
        pairs += [(inproc.step()[0], workers.step()[0]) for _ in range(300)]
        dones = 0
        for a, b in pairs:
            ra, rb = a.current["CartPole-v1"], b.current["CartPole-v1"]
            np.testing.assert_array_equal(ra.agent_ids, rb.agent_ids)  # 0..3, as in one process
            np.testing.assert_array_equal(ra.observations[0], rb.observations[0])
            for name in ("rewards", "terminated", "truncated"):
                np.testing.assert_array_equal(getattr(ra, name), getattr(rb, name))
            if a.action_infos is not None:
                np.testing.assert_array_equal(a.action_infos["CartPole-v1"].action,
                                              b.action_infos["CartPole-v1"].action)
                assert b.previous is not None
            dones += int(ra.done.sum())
        assert dones >= 8  # episodes ended and the copies were reset along the way
    finally:
        workers.close()
        inproc.close()
    assert_no_workers_alive()


def _ppo_run(manager: Any, tmp_path: Any, steps: int) -> tuple[int, list[float], list[np.ndarray]]:
    from kerasrl.configs import config_path
    from kerasrl.settings import RunContext, load_trainer_config, read_yaml
    from kerasrl.trainers import TrainerController, create_trainers

    zoo = read_yaml(config_path("cartpole_zoo"))["default"]
    config = load_trainer_config({"default": {**zoo, "summary_freq": 10**9, "num_epoch": 4, "jit_compile": False}})
    context = RunContext(run_id="t", summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"),
                         keep_checkpoints=1, seed=5, max_steps=steps)
    trainers = create_trainers(config, manager.behavior_specs, context)
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "t", save_freq=10**9, training_seed=5)
    tc.start_learning(manager)
    trainer = trainers["CartPole-v1"]
    weights = [np.asarray(w) for w in trainer.learner.actor_critic.get_weights()]
    return trainer.get_step, list(trainer.recent_returns), weights


def test_ppo_with_two_workers_equals_the_in_process_run(tmp_path):
    """PPO through TrainerController: same steps, episodes and final weights, bit for bit."""
    env = GymnasiumEnv("CartPole-v1", num_envs=4, seed=11, vectorization_mode="sync")
    steps_a, returns_a, weights_a = _ppo_run(SimpleEnvManager(env), tmp_path / "a", 3000)
    reset_timers()
    factory = GymnasiumEnvFactory("CartPole-v1", 2, seed=11, vectorization_mode="sync")
    manager = SubprocessEnvManager(factory, 2)
    steps_b, returns_b, weights_b = _ppo_run(manager, tmp_path / "b", 3000)
    assert manager.closed  # the controller closes the env manager at the end
    assert_no_workers_alive()
    assert steps_a == steps_b == 3004 and len(returns_a) >= 20
    assert returns_a == returns_b
    for wa, wb in zip(weights_a, weights_b):
        np.testing.assert_array_equal(wa, wb)
    tree = get_timer_tree()
    workers = next(c for c in tree["children"] if c["name"] == "workers")["children"][0]
    assert workers["name"] == "worker_root" and workers["is_parallel"]
    env_steps = next(c for c in workers["children"] if c["name"] == "env.step")
    assert env_steps["count"] == 2 * (3004 // 4)  # every step of both workers, merged


def test_a_worker_that_raises_names_worker_and_environment():
    saved: list[EnvironmentException] = []
    manager = SubprocessEnvManager(CountingFactory("raise", bad_worker=1, at=3), 2, on_failure=saved.append)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    manager.step()
    with pytest.raises(EnvironmentException) as info:
        manager.step()
    message = str(info.value)
    assert message == ("Environment worker 1 of 2 (CountingEnv#1) raised ValueError: boom at step 3 (second line) "
                       "(during a step).")
    assert saved == [info.value]  # on_failure ran, after every worker had been stopped
    assert manager.closed
    assert_no_workers_alive()
    manager.close()  # idempotent
    with pytest.raises(EnvironmentException, match="closed after a worker failed"):
        manager.step()


def test_a_nan_from_a_worker_is_caught_where_it_enters():
    manager = SubprocessEnvManager(CountingFactory("nan", bad_worker=0, at=2), 2)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    nan = r"^Environment worker 0 of 2 \(CountingEnv#0\) raised EnvironmentException: Observation 0 of behavior 'Count'"
    with pytest.raises(EnvironmentException, match=nan + " contains NaN"):
        manager.step()
    assert_no_workers_alive()


def test_a_killed_worker_is_reported_with_its_exit_code():
    manager = SubprocessEnvManager(CountingFactory(), 2)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    pid = manager.worker_pids[1]
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    with pytest.raises(EnvironmentException,
                       match=r"^Environment worker 1 of 2 \(CountingEnv#1\) died: it was killed by signal SIGKILL "
                             r"\(exit code -9\)\.$"):
        manager.step()
    assert_no_workers_alive()


def test_a_hang_is_caught_by_the_step_timeout():
    manager = SubprocessEnvManager(CountingFactory("hang", bad_worker=1, at=2), 2, step_timeout_s=0.5)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    start = time.monotonic()
    with pytest.raises(EnvironmentException,
                       match=r"^Environment worker 1 of 2 \(CountingEnv#1\) did not answer a step within 0\.5 s"):
        manager.step()
    assert time.monotonic() - start < 5.0  # the hung worker is terminated, not waited for
    assert_no_workers_alive()


def test_start_failures_and_spec_disagreements_are_errors():
    with pytest.raises(EnvironmentException,
                       match=r"^Environment worker 1 of 3 \(CountingFactory\) raised RuntimeError: cannot build "
                             r"\(while building its environment\)\.$"):
        SubprocessEnvManager(CountingFactory("fail_start", bad_worker=1), 3)
    assert_no_workers_alive()
    with pytest.raises(EnvironmentException, match=r"disagree on their behavior specs: Environment worker 0 of 2 "
                                                   r"\(CountingEnv#0\) has .*\(2,\).*worker 1 of 2 .*\(3,\)"):
        SubprocessEnvManager(CountingFactory(odd_obs_size=3), 2)
    assert_no_workers_alive()
    with pytest.raises(EnvironmentException, match="picklable"):
        SubprocessEnvManager(lambda i: CountingEnv(i), 2)
    with pytest.raises(EnvironmentException, match="num_workers"):
        SubprocessEnvManager(CountingFactory(), 0)


def test_close_is_idempotent_and_merges_worker_timers_and_gauges():
    reset_timers()
    manager = SubprocessEnvManager(CountingFactory(), 2, timer_sync_s=3600)
    manager.set_policy("Count", ZeroPolicy())
    first = manager.reset()[0].current["Count"]
    np.testing.assert_array_equal(first.agent_ids, [0, 1])  # local id 7 in each worker, made unique
    for _ in range(5):
        result = manager.step()[0].current["Count"]
    np.testing.assert_array_equal(result.agent_ids, [0, 1])
    np.testing.assert_array_equal(result.observations[0][:, 0], [5, 5])
    manager.close()
    manager.close()
    assert_no_workers_alive()
    root = get_timer_stack().root.children["workers"].children["worker_root"]
    assert root.is_parallel and root.children["env.step"].count == 10
    gauge = get_timer_stack().gauges["counting_env.step"]
    assert (gauge.count, gauge.min_value, gauge.max_value) == (10, 1.0, 5.0)


def test_a_step_interrupted_by_ctrl_c_needs_a_reset_and_close_still_works(monkeypatch):
    import kerasrl.envs.subprocess_env_manager as sem

    manager = SubprocessEnvManager(CountingFactory(), 2)
    manager.set_policy("Count", ZeroPolicy())
    manager.reset()
    manager.step()
    real_wait = sem.wait

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(sem, "wait", real_wait)
        raise KeyboardInterrupt

    monkeypatch.setattr(sem, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        manager.step()  # the workers stepped, but their answers were never read
    with pytest.raises(EnvironmentException, match=r"call reset\(\) first"):
        manager.step()
    first = manager.reset()[0].current["Count"]  # reads the stale answers, then resets
    np.testing.assert_array_equal(first.observations[0][:, 0], [0, 0])
    assert manager.step()[0].current["Count"].observations[0][0, 0] == 1
    manager.close()
    assert_no_workers_alive()


def test_the_slow_wrappers_cost_cpu_time_per_step():
    import gymnasium

    env = gymnasium.make("SlowCartPole-v1")
    assert isinstance(env.unwrapped, gymnasium.envs.classic_control.CartPoleEnv)
    env.reset(seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    for k in range(50):
        if any(env.step(k % 2)[2:4]):
            env.reset()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= 0.05 and cpu >= 0.03  # busy: ~1 ms of CPU per step, not a sleep
    slept = SlowStep(gymnasium.make("CartPole-v1"), 2e-3, mode="sleep")
    slept.reset(seed=0)
    wall = time.perf_counter()
    for k in range(10):
        slept.step(k % 2)
    assert time.perf_counter() - wall >= 0.02
    inner = GymnasiumEnv("CartPole-v1", num_envs=2, seed=0)
    slow = SlowEnvironment(GymnasiumEnv("CartPole-v1", num_envs=2, seed=0))
    np.testing.assert_array_equal(inner.reset()["CartPole-v1"].observations[0],
                                  slow.reset()["CartPole-v1"].observations[0])
    start = time.perf_counter()
    out = slow.step({"CartPole-v1": np.ones((2, 1), np.int32)})["CartPole-v1"]
    assert time.perf_counter() - start >= 2e-3  # 1 ms per agent
    np.testing.assert_array_equal(out.observations[0],
                                  inner.step({"CartPole-v1": np.ones((2, 1), np.int32)})["CartPole-v1"].observations[0])
    assert GymnasiumEnv("SlowCartPole-v1", num_envs=2, seed=0, step_cost_s=0.0).num_envs == 2


def test_cli_workers_trains_then_resumes(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 64\n  buffer_size: 256\n  hidden_units: 16\n  num_epoch: 2\n")
    base = [str(cfg), "--env", "CartPole-v1", "--num-envs", "4", "--workers", "2", "--seed", "2",
            "--results-dir", str(tmp_path), "--run-id", "w", "--progress-every", "1000"]
    assert main(base + ["--steps", "2000"]) == 0
    out = capsys.readouterr().out
    assert "x4 in 2 worker processes" in out
    assert int(FINAL.search(out).group(1)) == 2004
    assert_no_workers_alive()
    assert main(base + ["--steps", "3000", "--resume"]) == 0
    out = capsys.readouterr().out
    assert "Resumed CartPole-v1 at step 2004" in out
    assert int(FINAL.search(out).group(1)) == 3004
    assert (tmp_path / "w" / "models" / "CartPole-v1" / "model-3004.index").exists()
    assert_no_workers_alive()


def test_cli_workers_with_a_builtin_env_and_layout_errors(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n")
    base = [str(cfg), "--results-dir", str(tmp_path), "--seed", "0"]
    assert main(base + ["--env", "Simple1D", "--workers", "2", "--steps", "100", "--run-id", "s"]) == 0
    out = capsys.readouterr().out
    assert "Simple1D x2 in 2 worker processes" in out and int(FINAL.search(out).group(1)) >= 100
    for args, needle in ((["--env", "CartPole-v1", "--workers", "3"], "--num-envs 8"),
                         (["--env", "CartPole-v1", "--num-envs", "2", "--workers", "4"], "--workers 4"),
                         (["--env", "Simple1D", "--num-envs", "4", "--workers", "2"], "one copy per worker"),
                         (["--env", "CartPol-v1", "--workers", "2"], "CartPol-v1"),
                         (["--env", "Simple1D", "--workers", "0"], "--workers")):
        assert main(base + args + ["--run-id", "e"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("kerasrl-learn: error: ") and err.count("\n") == 1 and needle in err, err
    assert_no_workers_alive()


def test_cli_saves_the_model_before_reporting_a_dead_worker(tmp_path, capsys, monkeypatch):
    from kerasrl.trainers import TrainerController

    original = TrainerController.advance

    def kill_a_worker_at_100(self, env):
        if self.global_step == 100:
            os.kill(env.worker_pids[1], signal.SIGKILL)
            time.sleep(0.2)
        return original(self, env)

    monkeypatch.setattr(TrainerController, "advance", kill_a_worker_at_100)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n")
    args = [str(cfg), "--env", "Simple1D", "--workers", "2", "--results-dir", str(tmp_path), "--steps", "1000"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Environment worker 1 of 2 (Simple1D" in err and "SIGKILL" in err, err
    assert "saved at step 200; continue with --resume" in err
    assert (tmp_path / "ppo" / "models" / "Simple1D" / "model-200.index").exists()
    assert_no_workers_alive()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process groups from /proc")
def test_ctrl_c_saves_exits_130_and_leaves_no_process(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C: no worker traceback, no orphan."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 64\n  buffer_size: 256\n  hidden_units: 16\n  num_epoch: 2\n")
    cmd = [sys.executable, "-m", "kerasrl.cli", str(cfg), "--env", "CartPole-v1", "--num-envs", "4", "--workers", "2",
           "--steps", "10000000", "--results-dir", str(tmp_path), "--progress-every", "2000",
           "--save-every-minutes", "0"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("steps="):
                break
        assert len(group_members(proc.pid)) >= 3  # the main process and its 2 workers
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "continue with --resume" in out
    assert list((tmp_path / "ppo" / "models" / "CartPole-v1").glob("model-*.index"))
    deadline = time.monotonic() + 5
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(proc.pid) == []
