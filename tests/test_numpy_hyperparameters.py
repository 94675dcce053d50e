"""NumPy scalar hyper-parameters (from a grid search or ``np.linspace``) are numbers: the settings
hold them as plain Python ``int``/``float``, so they dump to YAML and JSON; bools are still refused."""
import json

import numpy as np
import pytest
import yaml

import kerasrl
from kerasrl.api import behavior_settings
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import TrainerSettings

INTS = [np.int64(64), np.int32(64), np.float32(64.0), np.float64(64.0)]
FLOATS = [np.float32(0.25), np.float64(0.25), np.int64(1), np.int32(1)]


@pytest.mark.parametrize("batch_size", INTS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("beta", FLOATS, ids=lambda v: type(v).__name__)
def test_numpy_scalars_become_python_numbers(batch_size, beta):
    settings = behavior_settings(None, "default", {"batch_size": batch_size, "beta": beta, "max_steps": np.int64(500)})
    hp = settings.hyperparameters
    assert type(hp.batch_size) is int and hp.batch_size == 64
    assert type(hp.beta) is float and hp.beta == float(beta)
    assert type(settings.max_steps) is int and settings.max_steps == 500


def test_settings_with_numpy_values_dump_to_yaml_and_json_and_round_trip():
    settings = behavior_settings(None, "default", {"batch_size": np.int64(32), "learning_rate": np.float32(1e-3),
                                                   "max_steps": np.int32(1000)})
    flat = settings.to_dict()
    assert yaml.safe_load(yaml.safe_dump(flat)) == flat
    assert json.loads(json.dumps(flat)) == flat
    assert TrainerSettings.from_dict(flat) == settings


@pytest.mark.parametrize("value", [True, np.bool_(True), "64", [64], None])
def test_bools_and_non_numbers_are_still_refused(value):
    with pytest.raises(TrainerConfigError, match="batch_size"):
        behavior_settings(None, "default", {"batch_size": value})


def test_a_numpy_float_that_is_not_whole_is_refused_for_an_int_key():
    with pytest.raises(TrainerConfigError, match="batch_size .* must be a whole number"):
        behavior_settings(None, "default", {"batch_size": np.float32(64.5)})


def test_ppo_takes_numpy_hyperparameters(tmp_path):
    agent = kerasrl.PPO("CartPole-v1", batch_size=np.int64(32), buffer_size=np.int32(64), learning_rate=np.float32(1e-3),
                        beta=np.float64(5e-3), hidden_units=8, num_layers=1, run_dir=str(tmp_path / "r"))
    try:
        hp = agent.settings.hyperparameters
        assert (type(hp.batch_size), type(hp.buffer_size), type(hp.learning_rate), type(hp.beta)) == (int, int, float, float)
        yaml.safe_dump(agent.settings.to_dict())
    finally:
        agent.close()
