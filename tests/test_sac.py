"""SAC: its settings, replay buffer, discrete policy with masks, checkpoints with the replay, and learning."""
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.buffer import BufferException
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.sac.learner import NEXT_NOISE, NOISE, REWARDS, SACLearner
from kerasrl.sac.replay import ReplayBuffer
from kerasrl.sac.trainer import SACTrainer
from kerasrl.settings import SACSettings, TrainerSettings, load_trainer_config
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers import TrainerController, initialize_trainers

# ML-Agents' first SAC release's default section, as its sac_trainer_config.yaml wrote it.
MLAGENTS_SAC = {"default": {
    "trainer": "sac", "batch_size": 128, "buffer_size": 50000, "buffer_init_steps": 0, "hidden_units": 128,
    "init_entcoef": 1.0, "learning_rate": 3.0e-4, "learning_rate_schedule": "constant", "max_steps": "5.0e5",
    "memory_size": 256, "normalize": False, "num_update": 1, "train_interval": 1, "num_layers": 2,
    "time_horizon": 64, "sequence_length": 64, "summary_freq": 1000, "tau": 0.005, "use_recurrent": False,
    "vis_encode_type": "simple", "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}}},
    "Walker": {"steps_per_update": 20, "save_replay_buffer": True, "buffer_size": 500000}}

SMALL = {"trainer": "sac", "batch_size": 32, "buffer_size": 5000, "hidden_units": 32, "num_layers": 2,
         "learning_rate": 3e-3, "time_horizon": 8, "summary_freq": 500}


# -- settings -----------------------------------------------------------------------------
def test_mlagents_sac_config_loads_and_reads_the_older_keys(caplog):
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config = load_trainer_config(MLAGENTS_SAC)
    assert "steps_per_update" in caplog.text
    default, walker = config.default, config.settings_for("Walker")
    assert default.trainer == "sac" and default.max_steps == 500_000
    assert default.hyperparameters == SACSettings(batch_size=128, buffer_size=50_000, steps_per_update=1.0)
    hp = walker.hyperparameters
    assert hp.steps_per_update == 20 and hp.save_replay_buffer and hp.buffer_size == 500_000
    assert TrainerSettings.from_dict(walker.to_dict()) == walker
    assert SACSettings(train_interval=10, num_update=5).steps_per_update == 2.0


@pytest.mark.parametrize("section,words", [
    ({"trainer": "sac", "beta": 0.01}, ["beta", "of the ppo trainer", "the sac trainer does not use"]),
    ({"trainer": "ppo", "tau": 0.01}, ["tau", "of the sac trainer", "the ppo trainer does not use"]),
    ({"trainer": "sac", "tau": 1.5}, ["tau", "1.5"]),
    ({"trainer": "sac", "learning_rate_schedule": "cosine"}, ["learning_rate_schedule", "cosine"]),
    ({"trainer": "sac", "batch_size": 512, "buffer_size": 100}, ["batch_size", "512", "100"]),
    ({"trainer": "sac", "steps_per_updat": 2}, ["steps_per_updat", "steps_per_update"]),
], ids=["ppo key", "sac key", "tau", "schedule", "batch", "typo"])
def test_bad_sac_keys_name_the_key(section, words):
    with pytest.raises(TrainerConfigError) as e:
        load_trainer_config({"default": section})
    assert "\n" not in str(e.value)
    for word in words:
        assert word in str(e.value)


def test_a_ppo_default_under_a_sac_behavior_keeps_only_shared_keys():
    config = load_trainer_config({"default": {"beta": 0.01, "batch_size": 64, "buffer_size": 1024},
                                  "Agent": {"trainer": "sac", "tau": 0.01}})
    agent = config.settings_for("Agent")
    assert agent.trainer == "sac" and agent.hyperparameters.batch_size == 64 and agent.hyperparameters.tau == 0.01


# -- replay buffer ------------------------------------------------------------------------
def rows(start, n):
    return {"x": np.arange(start, start + n, dtype=np.float32)[:, None] * [1, -1],
            "a": np.arange(start, start + n, dtype=np.int32)}


def test_replay_wraps_around_and_samples_uniformly_from_what_it_holds():
    replay = ReplayBuffer(5)
    replay.add(rows(0, 3))
    replay.add(rows(3, 4))  # 0 and 1 are overwritten
    assert len(replay) == 5
    np.testing.assert_array_equal(replay.chronological()["a"], [2, 3, 4, 5, 6])
    batch = replay.sample(np.random.default_rng(0), (200, 4))
    assert batch["x"].shape == (200, 4, 2) and batch["a"].shape == (200, 4)
    np.testing.assert_array_equal(batch["x"][..., 0], batch["a"])
    assert set(np.unique(batch["a"])) == {2, 3, 4, 5, 6}
    replay.add(rows(10, 12))  # more than the capacity: the newest 5
    np.testing.assert_array_equal(replay.chronological()["a"], [17, 18, 19, 20, 21])


def test_replay_rejects_other_fields_and_shapes():
    replay = ReplayBuffer(4)
    replay.add(rows(0, 2))
    with pytest.raises(BufferException, match="fields"):
        replay.add({"x": np.zeros((1, 2), np.float32)})
    with pytest.raises(BufferException, match="shape"):
        replay.add({"x": np.zeros((1, 3), np.float32), "a": np.zeros(1, np.int32)})


def test_replay_file_round_trip_keeps_rows_order_dtypes_and_capacity(tmp_path):
    replay = ReplayBuffer(6)
    replay.add(rows(0, 9))
    path = str(tmp_path / "replay.h5")
    replay.save(path)
    assert os.listdir(tmp_path) == ["replay.h5"]
    loaded = ReplayBuffer.load(path)
    assert loaded.capacity == 6 and len(loaded) == 6
    for key, column in replay.chronological().items():
        np.testing.assert_array_equal(loaded.chronological()[key], column)
        assert loaded.columns[key].dtype == column.dtype
    with pytest.raises(BufferException, match="missing.h5"):
        ReplayBuffer.load(str(tmp_path / "missing.h5"))


@pytest.mark.parametrize("kind", [{}, {"next_of": {"next_x": "x"}}, {"sequences": True}],
                         ids=["plain", "next_of", "sequences"])
def test_an_empty_replay_round_trips_and_then_takes_rows(tmp_path, kind):
    """A replay saved before any rows came (a checkpoint at a run's start) loads empty with its
    capacity and kind, and then takes rows and samples them as a new one does."""
    path = str(tmp_path / "replay.h5")
    ReplayBuffer(6, **kind).save(path)
    loaded = ReplayBuffer.load(path)
    assert len(loaded) == 0 and loaded.capacity == 6 and ReplayBuffer.load(path, 3).capacity == 3
    assert loaded.next_of == kind.get("next_of", {}) and loaded.sequences == kind.get("sequences", False)
    trajectory = rows(0, 5)
    added = {"x": trajectory["x"][:4], "a": trajectory["a"][:4], Field.DONE: np.zeros(4, bool)}
    if "next_of" in kind:
        added["next_x"] = trajectory["x"][1:]
    loaded.add(added, agent="A")
    assert len(loaded) == 4
    np.testing.assert_array_equal(loaded.chronological()["a"][:4], [0, 1, 2, 3])
    batch = loaded.sample(np.random.default_rng(0), (50,))
    assert set(np.unique(batch["a"])) == {0, 1, 2, 3}
    if "next_of" in kind:
        np.testing.assert_array_equal(batch["next_x"][:, 0], batch["a"] + 1)
    if "sequences" in kind:
        steps = loaded.sample_sequences(np.random.default_rng(0), (50,), 2)
        np.testing.assert_array_equal(steps["a"][:, 1][steps[Field.MASKS][:, 1] == 1],
                                      steps["a"][:, 0][steps[Field.MASKS][:, 1] == 1] + 1)


# -- discrete actions ---------------------------------------------------------------------
def test_discrete_step_gives_masked_actions_no_probability_and_moves_every_network():
    settings = TrainerSettings.from_dict({**SMALL, "batch_size": 16})
    spec = BehaviorSpec(((4,),), "discrete", (3, 2))
    learner = SACLearner.for_behavior(spec, settings, seed=0, max_steps=100)
    nets = learner.networks
    rng = np.random.default_rng(0)
    mask = np.ones((16, 5), np.float32)
    mask[:, 1] = 0.0  # action 1 of branch 0 is never allowed
    batch = {Field.VECTOR_OBS: rng.standard_normal((16, 4), dtype=np.float32),
             Field.NEXT_VECTOR_OBS: rng.standard_normal((16, 4), dtype=np.float32),
             Field.ACTIONS: np.stack([rng.choice([0, 2], 16), rng.integers(0, 2, 16)], -1).astype(np.int32),
             REWARDS: rng.standard_normal((16, 1), dtype=np.float32), Field.TERMINATED: np.zeros(16, np.float32),
             Field.ACTION_MASK: mask, Field.NEXT_ACTION_MASK: mask}
    probs = nets.distribution(tf.constant(batch[Field.VECTOR_OBS]), tf.constant(mask)).probs.numpy()
    assert (probs[:, 1] == 0).all()
    np.testing.assert_allclose(probs[:, :3].sum(-1), 1.0, rtol=1e-6)
    before = [v.numpy().copy() for v in nets.trainable_variables]
    metrics = learner.update({k: v[None] for k, v in batch.items()}, 1, 1e-3)
    assert all(np.isfinite(v) for v in metrics.values())
    assert all(not np.array_equal(b, v.numpy()) for b, v in zip(before, nets.trainable_variables))
    assert nets.log_ent_coef.shape == (2,)


# -- trainer --------------------------------------------------------------------------------
def run(env, tmp_path, section, seed=0, load=False):
    manager = SimpleEnvManager(env)
    trainers = initialize_trainers({"default": section}, manager.behavior_specs, str(tmp_path / "summaries"), "sac",
                                   str(tmp_path / "models"), 2, True, load, seed)
    controller = TrainerController(trainers, str(tmp_path / "models"), str(tmp_path / "summaries"), "sac",
                                   save_freq=10**9, meta_curriculum=None, train=True, training_seed=seed,
                                   fast_simulation=True, sampler_manager=None, resampling_interval=None)
    controller.start_learning(manager)
    return next(iter(trainers.values()))


def test_masked_discrete_training_never_takes_a_masked_action(tmp_path):
    env = MultiBranchMaskedEnvironment(seed=3)
    trainer = run(env, tmp_path, {**SMALL, "max_steps": 300, "buffer_init_steps": 50})
    assert isinstance(trainer, SACTrainer) and trainer.update_steps > 200
    assert env.masked_actions_taken == 0
    replay = trainer.replay.chronological()
    assert replay[Field.ACTIONS].shape[1] == 2 and len(replay[Field.ACTIONS]) > 250


def test_resume_continues_with_the_checkpointed_replay(tmp_path):
    section = {**SMALL, "max_steps": 200, "save_replay_buffer": True}
    first = run(Simple1DEnvironment(use_discrete=False, seed=1), tmp_path, section)
    folder = first.model_path
    replays = sorted(f for f in os.listdir(folder) if f.endswith(".replay.h5"))
    assert replays == [f"model-{first.step}.replay.h5"]
    held = first.replay.chronological()
    section["max_steps"] = 300
    second = run(Simple1DEnvironment(use_discrete=False, seed=1), tmp_path, section, load=True)
    assert second.step > first.step and second.update_steps > first.update_steps
    resumed = second.replay.chronological()
    # the first run's transitions are still there, oldest first, followed by the new ones
    np.testing.assert_array_equal(resumed[Field.VECTOR_OBS][: len(first.replay)], held[Field.VECTOR_OBS])
    assert len(second.replay) > len(first.replay)


def test_an_update_samples_only_the_mini_batches_it_uses(tmp_path):
    trainer = run(Simple1DEnvironment(use_discrete=False, seed=1), tmp_path,
                  {**SMALL, "max_steps": 120, "buffer_init_steps": 40})
    batch = trainer.learning_batches(3)
    held = {float(v) for v in trainer.replay.chronological()[Field.VECTOR_OBS].ravel()}
    for field, stack in batch.items():
        assert stack.shape[:2] == (trainer.steps_per_call, SMALL["batch_size"]), field
        assert not stack[3:].any(), f"{field}: padding past the 3 mini-batches used"
    assert {float(v) for v in batch[Field.VECTOR_OBS][:3].ravel()} <= held
    assert (batch[NOISE][:3] != 0).all() and (batch[NEXT_NOISE][:3] != 0).all()


@pytest.mark.slow
def test_curiosity_and_gail_train_and_reward_sampled_transitions(tmp_path):
    from kerasrl import recording

    demo = tmp_path / "expert.demo"
    recording.record(Simple1DEnvironment(use_discrete=False, seed=5), lambda obs: np.where(obs > 0, 1.0, -1.0)
                     .astype(np.float32), 60, demo)
    signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99},
               "curiosity": {"strength": 0.1, "gamma": 0.9, "encoding_size": 8},
               "gail": {"strength": 0.1, "gamma": 0.9, "demo_path": str(demo), "encoding_size": 8}}
    trainer = run(Simple1DEnvironment(use_discrete=False, seed=1), tmp_path,
                  {**SMALL, "max_steps": 150, "reward_signals": signals})
    curiosity, gail = trainer.reward_signals["curiosity"], trainer.reward_signals["gail"]
    # each update trains them in a few compiled calls (the due mini-batches in power-of-two chunks)
    assert curiosity.update_count == gail.update_count >= trainer.update_count > 3
    batch = trainer.learning_batches(1)
    rewards = batch[REWARDS][:1].copy()
    trainer._model_signal_rewards(batch, 1)
    assert np.array_equal(batch[REWARDS][0, :, 0], rewards[0, :, 0])  # extrinsic: as stored
    assert (np.abs(batch[REWARDS][0, :, 1:]).sum(axis=0) > 0).all()  # each model signal's, computed now


@pytest.mark.slow
@pytest.mark.parametrize("use_discrete", [False, True], ids=["continuous", "discrete"])
def test_sac_solves_simple1d(use_discrete, tmp_path):
    trainer = run(Simple1DEnvironment(use_discrete=use_discrete, seed=1337), tmp_path,
                  {**SMALL, "max_steps": 1500, "buffer_init_steps": 100}, seed=1337)
    recent = list(trainer.reward_buffer)
    assert recent and np.mean(recent) > 0.9, recent


# -- fit-style API ------------------------------------------------------------------------
def test_fit_with_stock_callbacks_save_and_load(tmp_path):
    import keras

    import kerasrl

    agent = kerasrl.SAC("Pendulum-v1", config="sac_pendulum", seed=0, run_dir=str(tmp_path / "run"),
                        batch_size=32, hidden_units=32, buffer_init_steps=50, time_horizon=16)
    csv, weights = tmp_path / "log.csv", tmp_path / "ckpt.weights.h5"
    callbacks = [keras.callbacks.CSVLogger(str(csv)),
                 keras.callbacks.ModelCheckpoint(str(weights), save_weights_only=True),
                 keras.callbacks.EarlyStopping(monitor="critic_loss", mode="min", patience=10**6, restore_best_weights=True)]
    history = agent.fit(200, callbacks=callbacks, verbose=0)
    assert agent.trainer is not None and agent.trainer.step >= 200
    assert {"critic_loss", "actor_loss", "ent_coef", "episode_reward_mean", "fps"} <= set(history.history)
    assert csv.read_text().count("\n") == len(history.history["critic_loss"]) + 1
    step = agent.trainer.step
    agent.fit(50, verbose=0)
    agent.model.load_weights(str(weights))  # the checkpoint carries the training position
    assert agent.trainer.step == step
    observations = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    actions = agent.predict(observations)
    assert actions.shape == (5, 1) and (np.abs(actions) <= 1).all()
    path = agent.save(str(tmp_path / "sac.keras"))
    loaded = kerasrl.load(path)
    np.testing.assert_allclose(loaded.predict(observations), actions, rtol=1e-6)
    agent.close()


def test_the_temporary_run_folder_goes_with_the_agent():
    import kerasrl

    agent = kerasrl.SAC("Pendulum-v1", config="sac_pendulum", seed=0, batch_size=32, hidden_units=32,
                        buffer_init_steps=50, time_horizon=16)
    folder = agent.run_dir
    agent.fit(100, verbose=0)
    assert os.path.isdir(folder)
    agent.close()
    assert not os.path.exists(folder)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_numpy_policy_acts_as_the_keras_actor(discrete):
    from kerasrl.sac.policy import SACPolicy

    spec = BehaviorSpec(((4,),), "discrete" if discrete else "continuous", (3, 2) if discrete else (2,))
    settings = TrainerSettings.from_dict({**SMALL, "normalize": True, "activation": "swish"})
    nets = SACLearner.for_behavior(spec, settings, seed=0, max_steps=100).networks
    rng = np.random.default_rng(0)
    nets.normalizer.update(rng.normal(2.0, 3.0, (100, 4)))
    obs = rng.normal(2.0, 3.0, (20, 4)).astype(np.float32)
    mask = np.ones((20, 5), np.float32)
    mask[::2, 0] = 0.0
    inputs = {Field.VECTOR_OBS: tf.constant(obs)}
    if discrete:
        inputs[Field.ACTION_MASK] = tf.constant(mask)
    want = nets.act(inputs, None)[0].numpy()
    got = SACPolicy(nets, deterministic=True).actions(obs, mask if discrete else None)
    if discrete:
        np.testing.assert_array_equal(got, want)
        assert (got[::2, 0] != 0).all()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_exported_actor_acts_as_the_networks(tmp_path):
    from kerasrl.export import export_policy

    spec = BehaviorSpec(((4,),), "continuous", (2,))
    nets = SACLearner.for_behavior(spec, TrainerSettings.from_dict({**SMALL, "normalize": True}), seed=0,
                                   max_steps=100).networks
    paths = export_policy(nets, str(tmp_path), "Agent", onnx=False)
    loaded = tf.saved_model.load(paths["savedmodel"])
    obs = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    out = loaded.signatures["deterministic"](vector_obs=tf.constant(obs))
    np.testing.assert_allclose(out["action"].numpy(), nets.act({Field.VECTOR_OBS: tf.constant(obs)}, None)[0].numpy(),
                               rtol=1e-6)
    sampled = loaded.signatures["stochastic"](vector_obs=tf.constant(obs))["action"].numpy()
    assert sampled.shape == (6, 2) and (np.abs(sampled) <= 1).all()
