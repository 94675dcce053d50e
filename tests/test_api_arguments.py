"""The fit API's arguments: one clear ``TrainerError`` line for a bad one, Keras's forms accepted."""
import keras
import numpy as np
import pytest

import kerasrl
from kerasrl.exception import TrainerError

SMALL = dict(buffer_size=64, batch_size=32, hidden_units=8, num_layers=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_envs": 2.5}, "num_envs must be an integer, got 2.5"),
    ({"seed": "a"}, "seed must be an integer, got 'a'"),
    ({"seed": True}, "seed must be an integer, got True"),
])
def test_a_seed_or_num_envs_that_is_not_an_integer_is_one_line(kwargs, message):
    with pytest.raises(TrainerError, match=f"^{message}"):
        kerasrl.PPO("CartPole-v1", **kwargs, **SMALL)


def test_numpy_integers_are_integers(tmp_path):
    agent = kerasrl.PPO("CartPole-v1", seed=np.int64(3), num_envs=np.int32(2), run_dir=str(tmp_path / "r"), **SMALL)
    assert agent.seed == 3 and isinstance(agent.seed, int)
    agent.close()


def test_an_unknown_key_names_the_algorithm_whose_config_it_is():
    with pytest.raises(TrainerError, match="kerasrl.SAC's config"):
        kerasrl.SAC("Pendulum-v1", tau_=0.1)


def test_one_callback_alone_is_taken_as_keras_fit_takes_it(tmp_path):
    agent = kerasrl.PPO("CartPole-v1", seed=0, num_envs=2, run_dir=str(tmp_path / "r"), **SMALL)
    history = keras.callbacks.History()
    agent.fit(130, callbacks=history, verbose=0)
    assert len(history.epoch) >= 1 and "loss" in history.history
    agent.close()


def test_predict_refuses_observations_that_are_not_finite_float32_numbers(tmp_path):
    agent = kerasrl.PPO("CartPole-v1", seed=0, num_envs=2, run_dir=str(tmp_path / "r"), **SMALL)
    with pytest.raises(TrainerError, match=r"^predict: observation 0 is not numbers"):
        agent.predict(np.array([["a"] * 4]))
    with pytest.raises(TrainerError, match=r"^predict: observation 0 holds NaN, inf or a value beyond float32's range"):
        agent.predict(np.full((1, 4), 1e39))
    agent.close()
