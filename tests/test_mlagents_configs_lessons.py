"""A curriculum lesson whose value is a sampler (ML-Agents' ``environment_parameters`` allow it, as
its WallJump curriculum does): read, sent to a Unity scene as that sampler from the start of its
lesson on (the scene draws it each episode), sent so to Gymnasium envs too (which draw it per
episode: tests/test_env_parameter_samplers.py), and refused in one line by an environment that
has no such parameter."""
import os
import pickle

import pytest

from kerasrl.cli import build_parser
from kerasrl.cli.env_parameters import EnvParameters, LessonSamplers
from kerasrl.envs import EnvironmentException, Simple1DEnvironment
from kerasrl.envs.unity import UnityEnvironment
from kerasrl.settings import load_trainer_config
from kerasrl.settings.environment_parameters import SampledValue
from tests.process_tools import free_ports

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unity_standin", "StandIn")
CRITERIA = {"behavior": "Simple1D", "measure": "progress", "signal_smoothing": True, "min_lesson_length": 5}
CONFIG = {
    "behaviors": {"Simple1D": {"trainer_type": "ppo", "hyperparameters": {"batch_size": 32, "buffer_size": 256}}},
    "environment_parameters": {
        "goal": {"curriculum": [
            {"name": "Near", "completion_criteria": {**CRITERIA, "threshold": 0.2},
             "value": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.0, "max_value": 4.0}}},
            {"name": "Far", "completion_criteria": {**CRITERIA, "threshold": 0.5},
             "value": {"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[4, 5], [7, 8]],
                                                                                    "seed": 11}}},
            {"name": "Fixed", "value": 8.0}]},
        "step_size": {"curriculum": [
            {"name": "Near", "completion_criteria": {**CRITERIA, "threshold": 0.2}, "value": 0.5},
            {"name": "Far", "completion_criteria": {**CRITERIA, "threshold": 0.5}, "value": 0.75},
            {"name": "Fixed", "value": 1.0}]},
        "wind": {"sampler_type": "gaussian", "sampler_parameters": {"mean": 0.0, "st_dev": 0.1}},
    },
}


def _parameters(env, without=()):
    config = load_trainer_config({**CONFIG, "environment_parameters": {
        k: v for k, v in CONFIG["environment_parameters"].items() if k not in without}})
    args = build_parser().parse_args(["x.yaml", "--env", env])
    return args, EnvParameters.from_args(args, {"environment_parameters": config.run_options["environment_parameters"]},
                                         "c.yaml")


def test_a_lessons_sampler_is_its_value_for_a_unity_scene_seeded_from_the_run():
    args, params = _parameters("editor")
    kwargs = params.controller_kwargs(args, "/nonexistent", seed=100)
    curriculum = kwargs["meta_curriculum"].curricula["Simple1D"]
    assert isinstance(curriculum, LessonSamplers) and curriculum.thresholds == [0.2, 0.5]
    assert params.episode_samplers(100) == (("wind", "gaussian", (0.0, 0.1), 100),)  # seed + 0
    first = curriculum.get_config()
    assert first["goal"].sampler == ("uniform", (0.0, 4.0), 101) and first["goal"] == 2.0  # seed + 1 (wind is 0)
    assert first["step_size"] == 0.5 and not hasattr(first["step_size"], "sampler")
    curriculum.lesson_num = 1
    assert curriculum.get_config()["goal"].sampler == ("multirangeuniform", (4.0, 5.0, 7.0, 8.0), 11)  # its own seed
    curriculum.lesson_num = 2
    last = curriculum.get_config()
    assert last == {"goal": 8.0, "step_size": 1.0} and not hasattr(last["goal"], "sampler")


def test_a_sampled_value_crosses_a_worker_pipe_with_its_sampler():
    args, params = _parameters("editor")
    value = params.controller_kwargs(args, "/nonexistent", seed=3)["meta_curriculum"].get_config()["goal"]
    again = pickle.loads(pickle.dumps(value))
    assert isinstance(again, SampledValue) and again.sampler == value.sampler and again == value


def test_a_lessons_sampler_goes_to_other_environments_too_and_one_without_the_parameter_refuses_it():
    args, params = _parameters("CartPole-v1")
    kwargs = params.controller_kwargs(args, "/nonexistent", seed=100)
    first = kwargs["meta_curriculum"].get_config()
    assert first["goal"].sampler == ("uniform", (0.0, 4.0), 101) and first["goal"].offset == 0
    assert kwargs["sampler_manager"].sample_all()["wind"].sampler == ("gaussian", (0.0, 0.1), 100)
    with pytest.raises(EnvironmentException, match=r"'goal' is not a parameter of the built-in environment") as e:
        Simple1DEnvironment(use_discrete=True).reset(first)
    assert "\n" not in str(e.value)


def test_each_lessons_sampler_reaches_the_scene_through_the_parameters_channel(tmp_path):
    args, params = _parameters("editor")
    meta = params.controller_kwargs(args, "/nonexistent", seed=40)["meta_curriculum"]
    (port,) = free_ports(1)
    env = UnityEnvironment(STANDIN, base_port=port, log_folder=str(tmp_path), timeout_wait=30.0,
                           samplers=params.episode_samplers(40))
    try:
        env.reset(meta.get_config())
        meta.curricula["Simple1D"].lesson_num = 1
        env.reset(meta.get_config())
        meta.curricula["Simple1D"].lesson_num = 2
        env.reset(meta.get_config())
    finally:
        env.close()
    with open(tmp_path / "Player-0.log") as f:
        log = f.read()
    sent = [line for line in log.splitlines() if line.startswith(("sampler ", "parameter "))]
    assert sent == ["sampler wind 1 40 0 0.1", "sampler goal 0 41 0 4", "parameter step_size 0.5",
                    "sampler goal 2 11 4 5 7 8", "parameter step_size 0.75",
                    "parameter goal 8", "parameter step_size 1"]
