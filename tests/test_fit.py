"""kerasrl.PPO(...).fit(...) with stock Keras callbacks: one epoch per policy update."""
import csv
import glob
import math
import os
import shutil

import keras
import numpy as np
import pytest

import kerasrl
from kerasrl.callbacks import Callback
from kerasrl.exception import TrainerConfigError, TrainerError

# ML-Agents 0.9's Simple1D test config: an update every ~64 agent steps.
HP = dict(batch_size=16, buffer_size=64, learning_rate=5e-3)
OBS = np.array([[1.0], [-1.0], [1.0]], np.float32)
LOG_KEYS = ("episode_reward_mean", "episode_length_mean", "fps", "policy_loss", "value_loss", "entropy", "approx_kl",
            "clip_fraction", "learning_rate")


def agent(tmp_path, name="run", **kwargs):
    return kerasrl.PPO("Simple1D", seed=3, run_dir=str(tmp_path / name), **{**HP, **kwargs})


class Recorder(Callback):
    """Counts the RL hooks and keeps the actor-critic weights at each epoch's end."""

    def __init__(self, ppo):
        super().__init__()
        self.ppo, self.episodes, self.rollouts, self.begins, self.weights = ppo, [], 0, 0, {}

    def on_train_begin(self, logs=None):
        self.start = (self.ppo.trainer.step, [w.numpy().copy() for w in self.ppo.actor_critic.weights])

    def on_rollout_begin(self, logs=None):
        self.begins += 1

    def on_rollout_end(self, logs=None):
        self.rollouts += 1

    def on_episode_end(self, logs=None):
        self.episodes.append(logs)

    def on_epoch_end(self, epoch, logs=None):
        self.weights[epoch] = [w.numpy().copy() for w in self.ppo.actor_critic.weights]


def test_fit_logs_history_csv_tensorboard_checkpoint_and_reload(tmp_path, capsys):
    ppo = agent(tmp_path)
    rec = Recorder(ppo)
    callbacks = [keras.callbacks.CSVLogger(str(tmp_path / "log.csv")), keras.callbacks.TensorBoard(str(tmp_path / "tb")),
                 keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras")), rec]
    history = ppo.fit(700, callbacks=callbacks, verbose=1)
    updates = ppo.trainer.update_count
    assert updates >= 5 and history.epoch == list(range(updates))
    for key in LOG_KEYS:
        assert len(history.history[key]) == updates, key
    assert 700 <= ppo.trainer.step < 700 + 2
    assert all(0.0 <= c <= 1.0 for c in history.history["clip_fraction"])
    assert history.history["learning_rate"][-1] < HP["learning_rate"]
    out = capsys.readouterr().out.splitlines()  # off a terminal: a line per summary period (1000 steps), one at the end
    assert len(out) == 1 and out[0].startswith("step=700 episode_reward_mean=") and "Epoch" not in out[0], out
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == updates and all(k in rows[0] for k in LOG_KEYS)
    assert float(rows[-1]["policy_loss"]) == pytest.approx(history.history["policy_loss"][-1])
    finished = [r for r in history.history["episode_reward_mean"] if not math.isnan(r)]
    assert finished and len(rec.episodes) == ppo.trainer.episodes_completed
    assert np.mean([e["episode_reward"] for e in rec.episodes[-5:]]) == pytest.approx(
        np.mean(list(ppo.trainer.recent_returns)[-5:]))
    assert rec.rollouts == updates and rec.begins in (updates, updates + 1)
    assert glob.glob(str(tmp_path / "run" / "models" / "*" / "*.index"))  # the run's checkpoint at the end

    import tensorflow as tf

    tags = {v.tag for path in glob.glob(str(tmp_path / "tb" / "train" / "events*"))
            for event in tf.compat.v1.train.summary_iterator(path) for v in event.summary.value}
    assert {"epoch_episode_reward_mean", "epoch_approx_kl", "epoch_learning_rate"} <= tags

    # ModelCheckpoint wrote the last epoch's model: it reloads and acts identically.
    loaded = kerasrl.load(str(tmp_path / "best.keras"))
    for a, b in zip(loaded.actor_critic.weights, ppo.actor_critic.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(loaded.predict(OBS), ppo.predict(OBS))
    assert ppo.predict(OBS).tolist() == [[1], [0], [1]]  # Simple1D: move towards the goal
    with pytest.raises(TrainerError, match="observation 0 has shape"):
        loaded.predict(np.zeros((2, 3)))
    with pytest.raises(TrainerError, match="without an environment"):
        loaded.fit(10)
    for rows in (OBS.tolist(), [[1.0]], tuple(map(tuple, OBS.tolist()))):  # rows of the one observation, as numpy reads them
        np.testing.assert_array_equal(loaded.predict(rows), loaded.predict(np.asarray(rows, np.float32)))
    np.testing.assert_array_equal(loaded.predict([OBS]), ppo.predict(OBS))  # one array per observation
    with pytest.raises(TrainerError, match=r"the observations have shape \(3,\); expected \(n, 1\) \(or a list"):
        loaded.predict([1.0, -1.0, 1.0])
    resumed = kerasrl.load(str(tmp_path / "best.keras"), env="Simple1D", run_dir=str(tmp_path / "resumed"))
    assert (resumed.trainer.step, resumed.trainer.update_count) == (int(history.history["step"][-1]), updates)
    np.testing.assert_array_equal(resumed.predict(OBS), ppo.predict(OBS))
    assert len(resumed.fit(150, verbose=0).epoch) >= 1
    resumed.close()
    ppo.close()


def test_early_stopping_on_the_reward_baseline_stops(tmp_path):
    ppo = agent(tmp_path)
    rec = Recorder(ppo)
    stop = keras.callbacks.EarlyStopping(monitor="episode_reward_mean", mode="max", baseline=1.5, patience=2,
                                         restore_best_weights=True)
    history = ppo.fit(5000, callbacks=[rec, stop], verbose=0)
    assert 0 < stop.stopped_epoch == history.epoch[-1] and ppo.trainer.step < 2000
    # The best epoch's weights are back (the trainer keeps its step), and the policy acts with them.
    for a, b in zip(ppo.actor_critic.weights, rec.weights[stop.best_epoch]):
        np.testing.assert_array_equal(a.numpy(), b)
    assert ppo.trainer.update_count == len(history.epoch)
    ppo.close()


def test_terminate_on_nan_stops_and_saves_no_nan_checkpoint(tmp_path):
    ppo = agent(tmp_path)
    learner, real_update = ppo.trainer.learner, ppo.trainer.learner.update
    calls = []

    def update(*args, **kwargs):
        metrics = real_update(*args, **kwargs)
        calls.append(1)
        return {**metrics, "loss": float("nan")} if len(calls) >= 3 else metrics

    learner.update = update
    history = ppo.fit(2000, callbacks=[keras.callbacks.TerminateOnNaN()], verbose=0)
    assert len(history.epoch) == 3 and math.isnan(history.history["loss"][-1])
    assert not glob.glob(str(tmp_path / "run" / "models" / "*" / "*.index"))
    with pytest.raises(kerasrl.UnityTrainerException, match="loss became nan"):  # without TerminateOnNaN: an error
        ppo.fit(500, verbose=0)
    ppo.close()


class Interrupt(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 2:
            raise KeyboardInterrupt


def test_backup_and_restore_resumes_an_interrupted_fit(tmp_path):
    first = agent(tmp_path, "a")
    backup = str(tmp_path / "backup")
    rec = Recorder(first)
    with pytest.raises(KeyboardInterrupt):
        first.fit(1000, callbacks=[keras.callbacks.BackupAndRestore(backup), rec, Interrupt()], verbose=0)
    step, weights = first.trainer.step, rec.weights[2]
    first.close()

    second = agent(tmp_path, "b")
    rec2 = Recorder(second)
    history = second.fit(1000, callbacks=[keras.callbacks.BackupAndRestore(backup), rec2], verbose=0)
    assert rec2.start[0] == step and second.trainer.update_count > 3
    for a, b in zip(rec2.start[1], weights):
        np.testing.assert_array_equal(a, b)
    assert history.epoch[0] == 3 and history.epoch == list(range(3, second.trainer.update_count))
    assert int(second.trainer.learner.optimizer.iterations.numpy()) > 0
    second.close()


def test_keyword_hyperparameters_are_checked_like_the_yaml(tmp_path):
    with pytest.raises(TrainerConfigError, match="batch_sise"):
        kerasrl.PPO("Simple1D", batch_sise=16, run_dir=str(tmp_path / "x"))
    with pytest.raises(TrainerConfigError, match="learning_rate"):
        kerasrl.PPO("Simple1D", learning_rate=-1.0, run_dir=str(tmp_path / "y"))
    with pytest.raises(TrainerError, match="behavior 'Nope'"):
        kerasrl.PPO("Simple1D", behavior="Nope", run_dir=str(tmp_path / "z"))
    ppo = kerasrl.PPO("Simple1D", config={"default": {"batch_size": 32}, "Simple1D": {"buffer_size": 128}},
                      num_layers=1, run_dir=str(tmp_path / "w"))
    hp = ppo.settings.hyperparameters
    assert (hp.batch_size, hp.buffer_size, ppo.settings.network.num_layers) == (32, 128, 1)
    ppo.close()


def test_the_temporary_run_folder_goes_with_the_agent_unless_ctrl_c_saved_into_it(monkeypatch):
    """Without ``run_dir`` the agent trains in a temporary folder: ``close`` removes it; after a
    Ctrl-C, whose checkpoint it holds, it stays (and stderr names it)."""
    agent = kerasrl.PPO("Simple1D", seed=3, **HP)
    folder = agent.run_dir
    agent.fit(64, verbose=0)
    assert os.path.isdir(folder)
    agent.close()
    assert not os.path.exists(folder)
    agent = kerasrl.PPO("Simple1D", seed=3, **HP)
    folder = agent.run_dir

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            agent.fit(256, callbacks=[Interrupt()], verbose=0)
        agent.close()
        assert any(name.endswith(".index") for _, _, names in os.walk(folder) for name in names)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
