"""Parameter samplers and how reset parameters reach environments."""
import gymnasium
import numpy as np
import pytest
import yaml

from kerasrl.envs import EnvironmentException, GymnasiumEnv, Simple1DEnvironment, SimpleEnvManager
from kerasrl.envs.subprocess_env_manager import SubprocessEnvManager
from kerasrl.samplers import GaussianSampler, SamplerException, SamplerFactory, SamplerManager, load_sampler_file
from kerasrl.trainers import TrainerController

CONFIG = {
    "mass": {"sampler-type": "uniform", "min_value": 0.5, "max_value": 10},
    "gravity": {"sampler-type": "gaussian", "mean": 9.8, "st_dev": 0.5},
    "scale": {"sampler-type": "multirange_uniform", "intervals": [[0.0, 1.0], [2.0, 5.0]]},
}


def draws(manager, n=4000):
    samples = [manager.sample_all() for _ in range(n)]
    return {k: np.array([s[k] for s in samples]) for k in samples[0]}


def test_distributions_and_seeding():
    d = draws(SamplerManager(CONFIG, seed=3))
    assert d["mass"].min() >= 0.5 and d["mass"].max() < 10 and abs(d["mass"].mean() - 5.25) < 0.2
    assert abs(d["gravity"].mean() - 9.8) < 0.05 and abs(d["gravity"].std() - 0.5) < 0.05
    scale = d["scale"]
    assert ((scale <= 1.0) | ((scale >= 2.0) & (scale <= 5.0))).all()
    assert abs((scale <= 1.0).mean() - 0.25) < 0.03  # intervals chosen in proportion to their widths 1 : 3
    again = draws(SamplerManager(CONFIG, seed=3), 10)
    assert all(np.array_equal(again[k], d[k][:10]) for k in again)
    assert not np.array_equal(draws(SamplerManager(CONFIG, seed=4), 10)["mass"], again["mass"])
    assert SamplerManager(None).is_empty() and SamplerManager({}).sample_all() == {}


def test_register_sampler():
    class MeanOnly(GaussianSampler):
        def sample_parameter(self):
            return self.mean

    built_in = dict(SamplerFactory.NAME_TO_CLASS)
    SamplerFactory.register_sampler("mean_only", MeanOnly)
    try:
        assert SamplerManager({"x": {"sampler-type": "mean_only", "mean": 2, "st_dev": 0}}).sample_all() == {"x": 2.0}
    finally:
        SamplerFactory.NAME_TO_CLASS.clear()
        SamplerFactory.NAME_TO_CLASS.update(built_in)  # the built-in types, "constant" among them, as before


@pytest.mark.parametrize("entry, pattern", [
    ({"min_value": 1, "max_value": 2}, "'sampler_type' argument hasn't been supplied for the p parameter"),
    ({"sampler-type": "beta"}, "sampler-type 'beta' of the p parameter"),
    ({"sampler-type": "uniform", "min_value": 1}, "p parameter's uniform sampler got wrong arguments"),
    ({"sampler-type": "uniform", "min_value": 3, "max_value": 2}, "max_value 2 is below its min_value 3"),
    ({"sampler-type": "gaussian", "mean": "a", "st_dev": 1}, "mean of the p parameter must be a finite number"),
    ({"sampler-type": "gaussian", "mean": 0, "st_dev": -1}, "st_dev of the p parameter must be >= 0"),
    ({"sampler-type": "multirange_uniform", "intervals": [[1]]}, "intervals of the p parameter"),
    ({"sampler-type": "multirange_uniform", "intervals": [[2, 1]]}, "max >= min"),
])
def test_entry_errors_name_the_parameter(entry, pattern):
    with pytest.raises(SamplerException, match=pattern):
        SamplerManager({"p": entry})


def test_sampler_file_and_its_interval_errors(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("resampling-interval: 500\nmass: {sampler-type: uniform, min_value: 1, max_value: 2}\n")
    manager, interval = load_sampler_file(str(path), seed=0)
    assert interval == 500 and list(manager.samplers) == ["mass"]
    for text, pattern in [("mass: {sampler-type: uniform, min_value: 1, max_value: 2}\n",
                           "Resampling interval was not specified"),
                          ("resampling-interval: 0\n", "resampling-interval is not valid .*: 0"),
                          ("resampling-interval: 2.5\n", "resampling-interval is not valid .*: 2.5"),
                          ("resampling-interval: [\n", "not valid YAML")]:
        path.write_text(text)
        with pytest.raises(SamplerException, match=pattern):
            load_sampler_file(str(path))
    with pytest.raises(SamplerException, match="missing.yaml could not be opened"):
        load_sampler_file(str(tmp_path / "missing.yaml"))


class _Trainer:
    def __init__(self):
        self.reward_buffer, self.ended = [], 0
        self.get_step, self.get_max_steps = 0, 10

    def end_episode(self):
        self.ended += 1


class _Env:
    def __init__(self):
        self.configs = []

    def reset(self, config=None, train_mode=True):
        self.configs.append(config)


def test_controller_resamples_each_resampling_interval(tmp_path):
    trainer = _Trainer()
    tc = TrainerController({"b": trainer}, str(tmp_path), str(tmp_path), "r", 10,
                           sampler_manager=SamplerManager(CONFIG, seed=0), resampling_interval=100)
    env = _Env()
    for steps in (40, 80, 120, 160, 200, 240):  # 40 agent steps per env manager step
        tc.env_steps = steps
        tc.reset_env_if_ready(env, steps - 40)
    assert len(env.configs) == 2 and trainer.ended == 2  # at 120 (past 100) and 200
    assert env.configs[0] != env.configs[1] and set(env.configs[0]) == set(CONFIG)
    with pytest.raises(Exception, match="resampling_interval must be a positive integer, got 0"):
        TrainerController({"b": trainer}, str(tmp_path), str(tmp_path), "r", 10, resampling_interval=0)


def test_parameters_reach_cartpoles_unwrapped_attribute_and_unknown_ones_are_errors():
    single = GymnasiumEnv("CartPole-v1", seed=0)
    single.reset({"length": 0.8, "masspole": 0.3})
    assert single.env.unwrapped.length == 0.8 and single.env.unwrapped.masspole == 0.3
    vec = GymnasiumEnv("CartPole-v1", num_envs=3, seed=0, vectorization_mode="sync")
    SimpleEnvManager(vec).reset({"length": 0.9})
    assert [e.unwrapped.length for e in vec.env.envs] == [0.9] * 3
    with pytest.raises(EnvironmentException, match="'lenght' cannot be set on Gymnasium env 'CartPole-v1'.*CartPoleEnv"):
        vec.reset({"length": 0.1, "lenght": 1.0})
    assert [e.unwrapped.length for e in vec.env.envs] == [0.9] * 3  # nothing half-applied
    with pytest.raises(EnvironmentException, match="'length' is not a parameter of the built-in environment Simple1D"):
        Simple1DEnvironment(use_discrete=True).reset({"length": 1.0})


def test_set_reset_parameters_is_used_when_the_env_has_it():
    class Settable(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-1, 1, (2,))
        action_space = gymnasium.spaces.Discrete(2)
        received = None

        def set_reset_parameters(self, params):
            Settable.received = params

        def reset(self, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            return np.zeros(2, np.float32), 0.0, False, False, {}

    GymnasiumEnv(Settable()).reset({"anything": 2.0})
    assert Settable.received == {"anything": 2.0}


class ShowLength(gymnasium.ObservationWrapper):
    """CartPole with its unwrapped ``length`` appended to the observation (to see it from outside)."""

    def __init__(self):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float32)

    def observation(self, obs):
        return np.append(obs, self.env.unwrapped.length).astype(np.float32)


class ShowLengthFactory:
    def __call__(self, index):
        return GymnasiumEnv(ShowLength(), seed=index)


def test_parameters_reach_cartpole_in_subprocess_workers():
    manager = SubprocessEnvManager(ShowLengthFactory(), 2)
    try:
        first = manager.reset()[0].current
        (name,) = first
        assert np.allclose(first[name].observations[0][:, 4], 0.5)
        info = manager.reset({"length": 0.75})[0].current
        assert np.allclose(info[name].observations[0][:, 4], 0.75)  # both workers' CartPoles
        with pytest.raises(EnvironmentException, match="'nope' cannot be set on Gymnasium env"):
            manager.reset({"nope": 1.0})
    finally:
        manager.close()


def test_cli_sampler_resamples_cartpole_and_reports_parameters(tmp_path, capsys):
    import csv

    from kerasrl.cli import main

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 32\n  buffer_size: 64\n  hidden_units: 8\n  summary_freq: 100\n")
    sampler = tmp_path / "s.yaml"
    sampler.write_text("resampling-interval: 100\nlength: {sampler-type: uniform, min_value: 0.4, max_value: 0.6}\n")
    base = [str(cfg), "--env", "CartPole-v1", "--num-envs", "2", "--seed", "1", "--results-dir", str(tmp_path)]
    assert main(base + ["--run-id", "s", "--steps", "300", "--sampler", str(sampler)]) == 0
    with open(tmp_path / "s" / "CartPole-v1.csv", newline="") as f:
        lengths = [float(r["Environment/Parameter/length"]) for r in csv.DictReader(f)]
    assert len(lengths) == 3 and len(set(lengths)) == 3 and all(0.4 <= x < 0.6 for x in lengths)
    sampler.write_text("length: {sampler-type: uniform, min_value: 0.4, max_value: 0.6}\n")
    capsys.readouterr()
    assert main(base + ["--run-id", "t", "--sampler", str(sampler)]) == 2
    assert "Resampling interval was not specified" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("entry, words", [
    ({"sampler-type": "uniform", "min_value": 0.4, "max_value": 0.6, "max_valu": 3}, ["length", "max_valu"]),
    ({"sampler-type": "gaussian", "mean": 1.0, "st_dev": 0.1, "min_value": 0.0}, ["length", "min_value"]),
    ({"sampler-type": ["uniform"], "min_value": 0.4, "max_value": 0.6}, ["length", "['uniform']"]),
])
def test_unknown_keys_and_unhashable_types_are_one_line_naming_the_file_and_key(tmp_path, entry, words):
    path = tmp_path / "sampler.yaml"
    path.write_text(yaml.safe_dump({"resampling-interval": 10, "length": entry}))
    with pytest.raises(SamplerException) as e:
        load_sampler_file(str(path))
    assert str(path) in str(e.value) and all(w in str(e.value) for w in words), e.value
    assert "\n" not in str(e.value)


def test_a_parameter_name_must_be_a_string():
    with pytest.raises(SamplerException, match="parameter name 3 must be a string"):
        SamplerManager({3: {"sampler-type": "uniform", "min_value": 0, "max_value": 1}})


def test_a_resumed_run_draws_on_where_its_checkpoint_was_saved(tmp_path):
    """``--resume`` with ``--sampler``: the parameters go on as in a run never stopped (same values on
    the same steps), not from the start of the seeded sequence."""
    import csv

    from kerasrl.cli import main

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 32\n  buffer_size: 64\n  hidden_units: 8\n  summary_freq: 100\n")
    sampler = tmp_path / "s.yaml"
    sampler.write_text("resampling-interval: 100\nlength: {sampler-type: uniform, min_value: 0.4, max_value: 0.6}\n")
    base = [str(cfg), "--env", "CartPole-v1", "--num-envs", "2", "--seed", "1", "--results-dir", str(tmp_path),
            "--sampler", str(sampler)]
    assert main(base + ["--run-id", "whole", "--steps", "600"]) == 0
    assert main(base + ["--run-id", "parts", "--steps", "300"]) == 0
    assert main(base + ["--run-id", "parts", "--steps", "600", "--resume"]) == 0

    def lengths(run):
        with open(tmp_path / run / "CartPole-v1.csv", newline="") as f:
            return {int(r["Step"]): float(r["Environment/Parameter/length"]) for r in csv.DictReader(f)}

    whole, parts = lengths("whole"), lengths("parts")
    assert len(whole) == 6 and len(set(whole.values())) == 6
    assert parts == whole
