"""The ``rnd`` reward signal (random network distillation): settings in both config layouts, the
reward's formula, novelty (seen observations lose their reward, new ones keep it), the fixed
target, short PPO and SAC runs on Simple1D and checkpoint/resume."""
import math

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.buffer import AgentBuffer
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.rewards import create_reward_signal
from kerasrl.rewards.rnd import RNDRewardSignal
from kerasrl.settings import CuriositySettings, NetworkSettings, load_trainer_config
from kerasrl.settings.reward_signals import REWARD_SIGNAL_SETTINGS, RNDSettings
from kerasrl.spec import ActionType, BehaviorSpec

VECTOR_SPEC = BehaviorSpec(((3,),), ActionType.CONTINUOUS, (2,))


def make_signal(spec: BehaviorSpec = VECTOR_SPEC, seed: int = 1, jit_compile: bool = False,
                **kw) -> RNDRewardSignal:
    settings = RNDSettings(**{"strength": 1.0, "gamma": 0.99, "encoding_size": 32, "learning_rate": 1e-3, **kw})
    return RNDRewardSignal(settings, spec, NetworkSettings(), seed=seed, jit_compile=jit_compile)


def region(rng: np.random.Generator, centre: float, n: int, size: int = 3) -> np.ndarray:
    """``n`` vector observations near ``centre`` (one region of observation space)."""
    return (centre + 0.3 * rng.normal(size=(n, size))).astype(np.float32)


def as_buffer(obs: np.ndarray) -> AgentBuffer:
    buffer = AgentBuffer()
    buffer.extend_fields({Field.VECTOR_OBS: obs, Field.MASKS: np.ones(len(obs), np.float32)})
    return buffer


def weights(variables) -> dict[str, np.ndarray]:
    return {v.path: np.array(v.numpy()) for v in variables}


# -- settings --------------------------------------------------------------------------------

def test_settings_load_from_a_flat_config_with_mlagents_defaults():
    config = load_trainer_config({"default": {"reward_signals": {
        "extrinsic": {"strength": 1.0, "gamma": 0.99}, "rnd": {"strength": 0.01, "gamma": 0.99}}}})
    rnd = config.sections["default"].reward_signals["rnd"]
    assert type(rnd) is RNDSettings and REWARD_SIGNAL_SETTINGS["rnd"] is RNDSettings
    assert (rnd.strength, rnd.gamma) == (0.01, 0.99)
    assert (rnd.encoding_size, rnd.learning_rate, rnd.num_epoch) == (128, 1e-4, 3)


def test_settings_load_from_todays_layout_with_the_networks_hidden_units():
    config = load_trainer_config({"behaviors": {"B": {"reward_signals": {
        "rnd": {"network_settings": {"hidden_units": 32}}}}}})
    rnd = config.sections["B"].reward_signals["rnd"]
    assert type(rnd) is RNDSettings
    assert (rnd.encoding_size, rnd.strength, rnd.gamma, rnd.learning_rate) == (32, 1.0, 0.99, 1e-4)
    plain = load_trainer_config({"behaviors": {"B": {"reward_signals": {"rnd": {"strength": 0.01}}}}})
    assert plain.sections["B"].reward_signals["rnd"].encoding_size == 128


@pytest.mark.parametrize("signal,message", [
    ({"strength": 0.01, "gamma": 0.99, "lr": 1e-3}, "Unknown parameter lr for reward signal rnd"),
    ({"strength": 0.01, "gamma": 0.99, "encoding_size": 0}, "encoding_size"),
])
def test_bad_rnd_keys_name_the_signal_and_key(signal, message):
    with pytest.raises(TrainerConfigError, match=message):
        load_trainer_config({"default": {"reward_signals": {"rnd": signal}}})


def test_the_factory_makes_rnd_and_refuses_settings_of_another_kind():
    signal = create_reward_signal("rnd", RNDSettings(strength=0.5, gamma=0.9, encoding_size=8), VECTOR_SPEC,
                                  NetworkSettings())
    assert isinstance(signal, RNDRewardSignal) and signal.stat_name == "Policy/RND Reward"
    with pytest.raises(TrainerConfigError, match="takes RNDSettings"):
        create_reward_signal("rnd", CuriositySettings(strength=0.5, gamma=0.9, encoding_size=8), VECTOR_SPEC)


# -- what it computes ------------------------------------------------------------------------

def test_it_reads_current_observations_only():
    visual = BehaviorSpec(((3,), (20, 20, 3)), ActionType.DISCRETE, (2,))
    signal = make_signal(visual)
    assert signal.batch_fields == [Field.VECTOR_OBS, Field.visual_obs(0)]
    assert not signal.needs_next_observations and not signal.use_terminal_states and not signal.per_step
    rng = np.random.default_rng(0)
    rows = {Field.VECTOR_OBS: region(rng, 0.0, 16), Field.visual_obs(0): rng.uniform(size=(16, 20, 20, 3))
            .astype(np.float32), Field.MASKS: np.ones(16, np.float32)}
    assert not signal.evaluate_batch(rows).scaled_reward.any()  # 0 before the first update
    buffer = AgentBuffer()
    buffer.extend_fields(rows)
    losses = signal.update(buffer, n_sequences=8)
    assert list(losses) == ["Losses/RND Loss"] and math.isfinite(losses["Losses/RND Loss"])
    result = signal.evaluate_batch(rows)
    assert result.scaled_reward.shape == (16,) and (result.scaled_reward > 0).all()


@pytest.mark.parametrize("jit_compile", [False, True], ids=["eager-graph", "xla"])
def test_reward_is_strength_times_the_squared_error_without_normalisation_or_clipping(jit_compile):
    signal = make_signal(strength=3.0, jit_compile=jit_compile)
    rng = np.random.default_rng(1)
    signal.update(as_buffer(region(rng, 0.0, 64)), n_sequences=16)
    obs = region(rng, 5.0, 10)  # far away: errors well above 1, which clipping would cut
    result = signal.evaluate_batch({Field.VECTOR_OBS: obs})
    x = {Field.VECTOR_OBS: tf.constant(obs)}
    expected = tf.reduce_sum(tf.square(signal.model.predictor(x) - signal.model.target(x)), axis=-1).numpy()
    np.testing.assert_allclose(result.unscaled_reward, expected, rtol=1e-4)
    np.testing.assert_allclose(result.scaled_reward, 3.0 * expected, rtol=1e-4)
    assert result.scaled_reward.max() > 1.0
    again = signal.evaluate_batch({Field.VECTOR_OBS: obs})  # no running statistics: the same rewards
    np.testing.assert_array_equal(again.scaled_reward, result.scaled_reward)


def test_seen_observations_lose_their_reward_while_novel_ones_keep_it():
    signal = make_signal()
    rng = np.random.default_rng(0)
    seen, novel = region(rng, 1.0, 256), region(rng, -1.0, 256)  # held-out rows of each region
    signal.update(as_buffer(region(rng, 1.0, 128)), n_sequences=32)
    first_seen = float(signal.evaluate_batch({Field.VECTOR_OBS: seen}).unscaled_reward.mean())
    first_novel = float(signal.evaluate_batch({Field.VECTOR_OBS: novel}).unscaled_reward.mean())
    for _ in range(30):
        signal.update(as_buffer(region(rng, 1.0, 128)), n_sequences=32)
    last_seen = float(signal.evaluate_batch({Field.VECTOR_OBS: seen}).unscaled_reward.mean())
    last_novel = float(signal.evaluate_batch({Field.VECTOR_OBS: novel}).unscaled_reward.mean())
    assert last_seen < 0.1 * first_seen, (first_seen, last_seen)
    assert last_novel > 0.3 * first_novel, (first_novel, last_novel)
    assert last_novel > 20 * last_seen, (last_seen, last_novel)


def test_the_target_never_changes_and_only_the_predictor_trains():
    signal = make_signal()
    model = signal.model
    assert {v.path for v in model.trainable_variables} == {v.path for v in model.predictor.weights}
    assert not model.target.trainable_weights and model.target.weights
    target, predictor = weights(model.target.weights), weights(model.predictor.weights)
    twin = make_signal()  # the same seed re-creates the same target
    for path, value in weights(twin.model.target.weights).items():
        np.testing.assert_array_equal(value, target[path])
    rng = np.random.default_rng(2)
    for _ in range(5):
        signal.update(as_buffer(region(rng, 0.0, 64)), n_sequences=16)
    for path, value in weights(model.target.weights).items():
        np.testing.assert_array_equal(value, target[path], err_msg=path)
    assert all(not np.array_equal(v, predictor[k]) for k, v in weights(model.predictor.weights).items())
    assert signal.update_count == 5 and signal.optimizer.iterations.numpy() == 5 * 3 * 4  # epochs × mini-batches


# -- with the trainers -----------------------------------------------------------------------

RND = {"strength": 0.01, "gamma": 0.99, "encoding_size": 16, "learning_rate": 1e-3}


def ppo_config(max_steps: int) -> dict:
    return {"default": {"batch_size": 16, "buffer_size": 64, "learning_rate": 5.0e-3, "summary_freq": 100_000,
                        "jit_compile": False, "max_steps": max_steps,
                        "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}, "rnd": RND}}}


def test_ppo_with_rnd_trains_the_signal_and_reports_its_stats(tmp_path):
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_simple_rl import run_training

    tc = run_training(Simple1DEnvironment(use_discrete=True, seed=1), tmp_path, config=ppo_config(300), seed=1)
    trainer = next(iter(tc.trainers.values()))
    assert not trainer.processor.store_next_obs  # RND needs no next observations
    signal = trainer.reward_signals["rnd"]
    assert isinstance(signal, RNDRewardSignal) and signal.update_count == trainer.update_count > 0
    stats = trainer.stats
    assert stats["Losses/RND Loss"] and all(math.isfinite(v) for v in stats["Losses/RND Loss"])
    assert any(v > 0 for v in stats["Policy/RND Reward"])
    assert stats["Policy/RND Value Estimate"]


def test_sac_with_rnd_trains_the_signal_and_rewards_sampled_transitions(tmp_path):
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.sac.learner import REWARDS
    from tests.test_sac import SMALL, run

    signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99}, "rnd": RND}
    trainer = run(Simple1DEnvironment(use_discrete=False, seed=1), tmp_path,
                  {**SMALL, "max_steps": 120, "reward_signals": signals})
    signal = trainer.reward_signals["rnd"]
    assert isinstance(signal, RNDRewardSignal) and signal.update_count >= trainer.update_count > 0
    assert trainer.stats["Losses/RND Loss"] and any(v > 0 for v in trainer.stats["Policy/RND Reward"])
    batch = trainer.learning_batches(1)
    trainer._model_signal_rewards(batch, 1)
    assert (batch[REWARDS][0, :, 1] > 0).all()  # RND's column, computed from the current predictor


def test_a_resumed_run_keeps_the_predictor_its_optimizer_and_the_target(tmp_path):
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_simple_rl import run_training

    tc = run_training(Simple1DEnvironment(use_discrete=True, seed=1), tmp_path, config=ppo_config(200), seed=1)
    trainer = next(iter(tc.trainers.values()))
    trainer.save_model()
    signal = trainer.reward_signals["rnd"]
    assert "reward_signal_rnd" in trainer.reward_state()
    saved, iterations = weights(signal.model.weights), int(signal.optimizer.iterations.numpy())
    assert iterations > 0

    from kerasrl.trainers import initialize_trainers

    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=1))
    resumed = next(iter(initialize_trainers(  # another seed: the target comes from the checkpoint
        ppo_config(300), manager.behavior_specs, str(tmp_path / "summaries"), "id", str(tmp_path / "models"), 1,
        True, True, 7).values()))
    restored = resumed.reward_signals["rnd"]
    assert restored.update_count == signal.update_count and restored.has_updated
    assert int(restored.optimizer.iterations.numpy()) == iterations
    for path, value in weights(restored.model.weights).items():
        np.testing.assert_array_equal(value, saved[path], err_msg=path)
    obs = {Field.VECTOR_OBS: np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, trainer.spec.vector_observation_size)}
    np.testing.assert_allclose(restored.evaluate_batch(obs).scaled_reward, signal.evaluate_batch(obs).scaled_reward,
                               rtol=1e-6)
