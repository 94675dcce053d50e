"""kerasrl.PPO.fit's callback contract: learning-rate callbacks, paired epochs, the train-end logs, a closed agent."""
import os
import tempfile

import keras
import numpy as np
import pytest

import kerasrl
from kerasrl.exception import TrainerError

# ML-Agents 0.9's Simple1D test config: an update every ~64 agent steps.
HP = dict(batch_size=16, buffer_size=64, learning_rate=5e-3)


def agent(tmp_path, **kwargs):
    """A Simple1D PPO agent in a new run folder under ``tmp_path`` (a run folder holds one run)."""
    return kerasrl.PPO("Simple1D", seed=3, run_dir=tempfile.mkdtemp(dir=tmp_path), **{**HP, **kwargs})


def weights(ppo):
    return [w.numpy().copy() for w in ppo.actor_critic.trainable_weights]


def test_learning_rate_scheduler_sets_the_rate_the_updates_use_and_log(tmp_path):
    ppo = agent(tmp_path)
    ppo.fit(130, verbose=0)  # the schedule's rate moved the weights
    before = weights(ppo)
    history = ppo.fit(300, callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.0)], verbose=0)
    assert len(history.epoch) >= 3 and history.history["learning_rate"] == [0.0] * len(history.epoch)
    for a, b in zip(weights(ppo), before):  # Adam with a rate of 0 moves nothing
        np.testing.assert_array_equal(a, b)
    history = ppo.fit(130, verbose=0)  # the callback's rate stays, as after Keras's fit
    assert history.history["learning_rate"] == [0.0] * len(history.epoch)
    for a, b in zip(weights(ppo), before):
        np.testing.assert_array_equal(a, b)
    ppo.close()

    ppo = agent(tmp_path)
    history = ppo.fit(300, callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch, lr: 1e-3 / (epoch + 1))],
                      verbose=0)
    assert len(history.epoch) >= 3
    assert history.history["learning_rate"] == pytest.approx([1e-3 / (e + 1) for e in history.epoch])
    ppo.close()


def test_reduce_lr_on_plateau_sets_the_rate_of_the_next_updates(tmp_path):
    ppo = agent(tmp_path)
    # ``step`` never decreases: every epoch from the second on reduces the rate tenfold.
    reduce = keras.callbacks.ReduceLROnPlateau(monitor="step", mode="min", patience=1, factor=0.1, min_lr=0.0)
    rates = ppo.fit(400, callbacks=[reduce], verbose=0).history["learning_rate"]
    assert len(rates) >= 4
    assert rates[2:] == pytest.approx([rates[1] * 0.1 ** k for k in range(1, len(rates) - 1)], rel=1e-5)
    ppo.close()


class Epochs(keras.callbacks.Callback):
    """Records the epoch hooks and the train-end logs."""

    def __init__(self):
        super().__init__()
        self.begins, self.ends, self.train_end = [], [], None

    def on_epoch_begin(self, epoch, logs=None):
        self.begins.append(epoch)

    def on_epoch_end(self, epoch, logs=None):
        self.ends.append(epoch)

    def on_train_end(self, logs=None):
        self.train_end = dict(logs)


@pytest.mark.parametrize("threaded", [False, True])
def test_every_epoch_begun_ends_with_its_update(tmp_path, threaded):
    ppo = agent(tmp_path, threaded=threaded)
    ppo.fit(150, verbose=0)
    rec = Epochs()
    history = ppo.fit(300, callbacks=[rec], verbose=0)
    if not threaded:  # (threaded: the update in flight at the end ends its epoch there)
        assert history.history["step"][-1] < ppo.trainer.step  # training stopped in a rollout without its update
    assert rec.begins == rec.ends == history.epoch and len(history.epoch) >= 3
    assert history.epoch[-1] == ppo.trainer.update_count - 1
    ppo.close()


def test_train_end_logs_all_describe_where_training_stopped(tmp_path):
    ppo = agent(tmp_path)
    rec, stale = Epochs(), 0
    for total in (1000, 100, 100, 100):
        history = ppo.fit(total, callbacks=[rec], verbose=0)
        trainer, end = ppo.trainer, rec.train_end
        stale += end["episodes"] > history.history["episodes"][-1]  # episodes ended after the last update
        assert end["step"] == trainer.step and end["episodes"] == trainer.episodes_completed
        assert end["episode_reward_mean"] == pytest.approx(np.mean(trainer.recent_returns))
        assert end["episode_length_mean"] == pytest.approx(np.mean(trainer.processor.recent_lengths))
        assert end["loss"] == history.history["loss"][-1] and end["fps"] > 0
    assert stale
    ppo.close()


def test_a_closed_agent_cannot_fit_and_leaves_no_folder():
    ppo = kerasrl.PPO("Simple1D", seed=3, **HP)
    folder = ppo.run_dir
    ppo.fit(64, verbose=0)
    ppo.close()
    with pytest.raises(TrainerError, match="agent is closed"):
        ppo.fit(64, verbose=0)
    assert not os.path.exists(folder)
    assert ppo.predict(np.array([[1.0]], np.float32)).shape == (1, 1)  # it still acts


def test_sac_refuses_learning_rate_callbacks(tmp_path):
    sac = kerasrl.SAC("Simple1D", seed=0, run_dir=str(tmp_path / "sac"), hidden_units=8, num_layers=1)
    for callback in (keras.callbacks.LearningRateScheduler(lambda e, lr: lr), keras.callbacks.ReduceLROnPlateau()):
        with pytest.raises(TrainerError, match=f"{type(callback).__name__} cannot set SAC's learning rate"):
            sac.fit(64, callbacks=[callback], verbose=0)
    sac.close()
