"""An ``environment_parameters`` sampler (top-level, or a lesson's value) reaches Gymnasium envs as
ML-Agents means it: drawn anew for each episode of each copy, seeded from the run's seed, through
the reset-parameter path of ``--sampler`` (``kerasrl.envs.parameters``)."""
import logging
import shutil

import gymnasium
import numpy as np
import pytest
import yaml

from kerasrl.cli import build_parser, main
from kerasrl.cli.env_parameters import EnvParameters
from kerasrl.envs import EnvironmentException, GymnasiumEnv, SimpleEnvManager
from kerasrl.envs.parameters import apply_gymnasium_parameters
from kerasrl.envs.subprocess_env_manager import SubprocessEnvManager
from kerasrl.settings import load_trainer_config
from kerasrl.settings.environment_parameters import SampledValue, Sampler
from kerasrl.spec import ActionInfo
from kerasrl.trainers import TrainerController

RAMP = "RampTest-v0"
UNIFORM = {"sampler_type": "uniform", "sampler_parameters": {"min_value": 2.0, "max_value": 3.0}}


class Ramp(gymnasium.Env):
    """Episodes of 3 steps whose observation is the env's ``size`` (a reset parameter); every
    reset's ``size`` is logged in ``Ramp.log``."""

    observation_space = gymnasium.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)
    log: list[float] = []

    def __init__(self):
        self.size, self.t = 1.0, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        Ramp.log.append(float(self.size))
        return np.array([self.size], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.size], np.float32), 0.0, self.t >= 3, False, {}


gymnasium.register(RAMP, entry_point=Ramp)


def _sampled(seed=5):
    return SampledValue(Sampler("uniform", {"min_value": 2.0, "max_value": 3.0}), seed)


def _episodes(env, steps=24):
    """Per copy, the ``size`` of each of its episodes (the observation stays one value per episode)."""
    first = env.reset({"size": _sampled()})[RAMP].observations[0][:, 0]
    rows = [first]
    for _ in range(steps):
        rows.append(env.step({RAMP: np.zeros((env.num_envs, 1), np.int64)})[RAMP].observations[0][:, 0])
    rows = np.array(rows)
    # a copy's episode is steps 0-3 (the last reports the final obs), its next starts at step 4
    return [[float(rows[k, c]) for k in range(0, len(rows), 4)] for c in range(env.num_envs)]


def test_each_episode_of_each_copy_draws_anew_within_the_range_and_a_seed_repeats_them():
    episodes = _episodes(GymnasiumEnv(RAMP, num_envs=3, seed=7, vectorization_mode="sync"))
    values = [v for copy in episodes for v in copy]
    assert all(2.0 <= v < 3.0 for v in values)
    assert len(set(values)) == len(values)  # every episode of every copy its own draw
    assert episodes == _episodes(GymnasiumEnv(RAMP, num_envs=3, seed=7, vectorization_mode="sync"))
    assert episodes != _episodes(GymnasiumEnv(RAMP, num_envs=3, seed=8, vectorization_mode="sync"))
    # copy j draws the same alone as in a vector env: its stream is seeded by its env seed 7 + j
    assert _episodes(GymnasiumEnv(RAMP, seed=8))[0] == episodes[1]


def test_a_reset_without_parameters_draws_anew_and_a_constant_replaces_the_sampler():
    env = GymnasiumEnv(RAMP, num_envs=2, seed=0, vectorization_mode="sync")
    first = env.reset({"size": _sampled()})[RAMP].observations[0][:, 0]
    again = env.reset()[RAMP].observations[0][:, 0]
    assert (first != again).all() and ((again >= 2) & (again < 3)).all()
    assert (env.reset({"size": 4.0})[RAMP].observations[0][:, 0] == 4.0).all()
    for _ in range(8):
        assert (env.step({RAMP: np.zeros((2, 1), np.int64)})[RAMP].observations[0][:, 0] == 4.0).all()


def test_an_env_that_draws_no_per_episode_values_refuses_a_sampler_in_one_line():
    with pytest.raises(EnvironmentException, match=r"'length' is a sampler, drawn anew each episode, which the "
                                                   r"PettingZoo env does not do: give it as a constant") as e:
        apply_gymnasium_parameters(gymnasium.make("CartPole-v1"), {"length": _sampled()}, "the PettingZoo env")
    assert "\n" not in str(e.value)


def test_copies_that_share_their_parameters_draw_at_each_episode_end_of_copy_0(caplog):
    env = GymnasiumEnv("CartPole-v1", num_envs=2, seed=0)  # CartPole's native vector env: one length for all
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        env.reset({"length": SampledValue(Sampler("uniform", {"min_value": 0.4, "max_value": 0.6}), 3)})
        env.reset({"length": SampledValue(Sampler("uniform", {"min_value": 0.4, "max_value": 0.6}), 3)})
    told = [r.getMessage() for r in caplog.records if "share their parameters" in r.getMessage()]
    assert len(told) == 1 and "episode end of copy 0" in told[0]
    rng = np.random.default_rng(0)
    for _ in range(300):
        before = env.env.unwrapped.length
        result = env.step({"CartPole-v1": rng.integers(0, 2, (2, 1))})["CartPole-v1"]
        ended = bool(result.terminated[0] or result.truncated[0])
        assert (env.env.unwrapped.length != before) == ended and 0.4 <= env.env.unwrapped.length < 0.6


class RampFactory:
    """Worker ``i``: two copies of ``Ramp`` seeded ``3 + 2 i`` (as ``WorkerEnvFactory`` seeds them)."""

    def __call__(self, index):
        return GymnasiumEnv(gymnasium.vector.SyncVectorEnv([Ramp, Ramp]), seed=3 + 2 * index, behavior_name=RAMP)


class _ZeroPolicy:
    def get_action(self, result):
        return ActionInfo(np.zeros((len(result.agent_ids), 1), np.int32), None, None, {})


def test_worker_processes_draw_each_copys_episodes_as_one_process_does():
    manager = SubprocessEnvManager(RampFactory(), 2)
    try:
        manager.set_policy(RAMP, _ZeroPolicy())
        rows = [manager.reset({"size": _sampled()})[0].current[RAMP].observations[0][:, 0]]
        rows += [manager.step()[0].current[RAMP].observations[0][:, 0] for _ in range(8)]
    finally:
        manager.close()
    by_copy = [[float(r[c]) for r in rows[::4]] for c in range(4)]
    in_process = _episodes(GymnasiumEnv(RAMP, num_envs=4, seed=3, vectorization_mode="sync"), 8)
    assert by_copy == in_process and len({v for copy in by_copy for v in copy}) == 12


class _Trainer:
    def __init__(self):
        self.reward_buffer, self.behaviors = [], [RAMP]
        self.get_step, self.get_max_steps = 0, 100

    def end_episode(self):
        pass

    def take_policy_change(self):
        return False

    def policy_for(self, behavior):
        return _ZeroPolicy()


def test_a_lesson_whose_value_is_a_sampler_switches_from_a_constant_to_draws_when_it_advances(tmp_path):
    criteria = {"behavior": RAMP, "measure": "progress", "threshold": 0.5, "signal_smoothing": False}
    config = load_trainer_config({"behaviors": {RAMP: {"trainer_type": "ppo"}}, "environment_parameters": {
        "size": {"curriculum": [{"name": "Fixed", "value": 1.5, "completion_criteria": criteria},
                                {"name": "Drawn", "value": UNIFORM}]}}})
    args = build_parser().parse_args(["x.yaml", "--env", RAMP])
    params = EnvParameters.from_args(args, {"environment_parameters": config.run_options["environment_parameters"]}, "c")
    trainer = _Trainer()
    tc = TrainerController({RAMP: trainer}, str(tmp_path), str(tmp_path), "r", 10,
                           **params.controller_kwargs(args, str(tmp_path), seed=1))
    env = GymnasiumEnv(RAMP, num_envs=2, seed=0, vectorization_mode="sync")
    Ramp.log.clear()
    tc.reset_environment(SimpleEnvManager(env))
    for _ in range(8):
        env.step({RAMP: np.zeros((2, 1), np.int64)})
    assert set(Ramp.log) == {1.5}  # the first lesson's constant, episode after episode
    Ramp.log.clear()
    trainer.get_step = 60  # progress 0.6 > 0.5: the lesson advances and the env is reset with its sampler
    tc.reset_env_if_ready(SimpleEnvManager(env), 0)
    for _ in range(8):
        env.step({RAMP: np.zeros((2, 1), np.int64)})
    assert len(Ramp.log) == 6 and len(set(Ramp.log)) == 6 and all(2.0 <= v < 3.0 for v in Ramp.log)


def _learn(tmp_path, run_id, seed, steps, *extra):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "behaviors": {RAMP: {"trainer_type": "ppo", "hyperparameters": {"batch_size": 32, "buffer_size": 64},
                             "network_settings": {"hidden_units": 8}, "summary_freq": 100}},
        "environment_parameters": {"size": UNIFORM}}))
    Ramp.log.clear()
    assert main([str(path), "--env", RAMP, "--num-envs", "2", "--seed", str(seed), "--steps", str(steps),
                 "--results-dir", str(tmp_path), "--run-id", run_id, *extra]) == 0
    return list(Ramp.log)


def test_kerasrl_learn_draws_a_top_level_sampler_per_episode_reproducibly(tmp_path):
    first = _learn(tmp_path, "a", 1, 200)
    assert len(first) > 40 and all(2.0 <= v < 3.0 for v in first) and len(set(first)) == len(first)
    assert _learn(tmp_path, "b", 1, 200) == first
    assert _learn(tmp_path, "c", 2, 200) != first


def test_a_resumed_run_draws_on_reproducibly_rather_than_repeating_its_first_draws(tmp_path):
    first = _learn(tmp_path, "a", 1, 200)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    resumed = _learn(tmp_path, "a", 1, 400, "--resume")
    assert not set(resumed) & set(first) and all(2.0 <= v < 3.0 for v in resumed)
    assert _learn(tmp_path, "b", 1, 400, "--resume") == resumed


def test_an_env_without_the_parameter_refuses_it_in_one_line_before_the_run_folder_is_written(tmp_path, capsys):
    env = "Simple1D"  # the built-in envs take no reset parameters
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"behaviors": {env: {"trainer_type": "ppo"}},
                                    "environment_parameters": {"size": UNIFORM}}))
    assert main([str(path), "--env", env, "--results-dir", str(tmp_path), "--run-id", "r"]) == 2
    err = capsys.readouterr().err
    assert "'size' is not a parameter of the built-in environment" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()
