"""PPOTrainer's flow of data: one vocabulary from the policy to the learner, the learner's
numbers, the reward signals' updates, and the controller's refusals."""
import numpy as np
import pytest

from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment
from kerasrl.exception import TrainerError
from kerasrl.fields import Field
from kerasrl.settings import RunContext, load_trainer_config
from kerasrl.trainers import TrainerController, create_trainers

SMALL = {"hidden_units": 16, "num_layers": 1, "batch_size": 16, "buffer_size": 32, "time_horizon": 16,
         "summary_freq": 50, "max_steps": 120}


def run(tmp_path, env, max_steps=120, **overrides):
    manager = SimpleEnvManager(env)
    context = RunContext.in_results_dir(str(tmp_path), "t", seed=3, max_steps=max_steps)
    trainers = create_trainers(load_trainer_config({"default": {**SMALL, **overrides}}), manager.behavior_specs,
                               context)
    tc = TrainerController(trainers, context.model_path, context.summaries_dir, "t", save_freq=10**6, training_seed=3)
    return tc, manager, next(iter(trainers.values()))


@pytest.mark.parametrize("make_env,recurrent", [
    (lambda: MultiBranchMaskedEnvironment(seed=1), True),
    (lambda: Simple1DEnvironment(use_discrete=False, seed=1), False),
])
def test_learner_reads_the_update_buffer_fields_by_their_own_names(tmp_path, make_env, recurrent):
    tc, manager, trainer = run(tmp_path, make_env(), use_recurrent=recurrent, memory_size=8, sequence_length=4)
    seen = {}
    original = trainer.learner.update

    def spy(batch, step, seed):
        seen["fields"] = set(trainer.training_buffer.update_buffer)
        seen["batch"] = set(batch)
        return original(batch, step, seed)

    trainer.learner.update = spy
    tc.start_learning(manager)
    assert seen, "no update ran"
    assert seen["batch"] == set(trainer.learner.batch_fields) <= seen["fields"]
    assert set(trainer.policy.experience_fields) <= seen["fields"]
    assert Field.ACTION_LOG_PROBS in seen["batch"]
    assert (Field.ACTION_MASK in seen["batch"]) == trainer.spec.is_discrete
    assert (Field.ACTIONS_PRE in seen["batch"]) == trainer.spec.is_continuous


def test_update_returns_every_metric_and_the_schedules(tmp_path):
    tc, manager, trainer = run(tmp_path, Simple1DEnvironment(use_discrete=True, seed=2))
    steps = []
    original = trainer.learner.update
    trainer.learner.update = lambda batch, step, seed: steps.append(step) or original(batch, step, seed)
    tc.start_learning(manager)
    metrics = trainer.last_update_metrics
    assert {"loss", "policy_loss", "value_loss", "entropy", "learning_rate", "epsilon", "beta"} <= set(metrics)
    assert metrics["learning_rate"] == pytest.approx(trainer.learner.schedules(steps[-1])["learning_rate"])
    assert metrics["epsilon"] == pytest.approx(0.2 - 0.1 * steps[-1] / 120)
    assert not hasattr(trainer.policy, "step") and not hasattr(trainer.policy, "learning_rate")


def test_learning_rate_statistic_comes_from_the_updates(tmp_path):
    tc, manager, trainer = run(tmp_path, Simple1DEnvironment(use_discrete=True, seed=2), max_steps=200,
                               summary_freq=200)
    rates = []
    original = trainer.learner.update

    def spy(batch, step, seed):
        out = original(batch, step, seed)
        rates.append(out["learning_rate"])
        return out

    trainer.learner.update = spy
    tc.start_learning(manager)
    assert len(rates) >= 2 and rates == sorted(rates, reverse=True)
    assert trainer.summary_log[0]["Policy/Learning Rate"] == pytest.approx(np.mean(rates), rel=1e-6)


def test_reward_signal_update_is_called_each_update_and_logged(tmp_path):
    tc, manager, trainer = run(tmp_path, Simple1DEnvironment(use_discrete=True, seed=2), max_steps=200,
                               summary_freq=200)
    calls = []
    signal = trainer.reward_signals["extrinsic"]
    signal.update = lambda buffer, n: calls.append((len(buffer[Field.ACTIONS]), n)) or {"Losses/Test Loss": 2.5}
    tc.start_learning(manager)
    assert len(calls) == trainer.update_count >= 2
    assert all(rows > 32 and n == 16 for rows, n in calls)
    assert trainer.summary_log[0]["Losses/Test Loss"] == 2.5


@pytest.mark.parametrize("interval", [0, -5, 2.5, True])
def test_controller_refuses_a_bad_resampling_interval(tmp_path, interval):
    """Curricula and samplers are tested in test_curriculum.py / test_samplers.py."""
    with pytest.raises(TrainerError, match="resampling_interval must be a positive integer"):
        TrainerController({}, str(tmp_path), str(tmp_path), "r", save_freq=10, resampling_interval=interval)


def test_an_mlagents_0_9_config_trains_the_behavior_its_section_names(tmp_path, caplog):
    """ML-Agents' shared config, unchanged: a Gymnasium env named after one of its sections
    trains with that section's settings; the other sections are reported and ignored."""
    from pathlib import Path

    from kerasrl.envs import GymnasiumEnv

    config = Path(__file__).parent / "data" / "mlagents_0_9_trainer_config.yaml"
    manager = SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=4, seed=0, behavior_name="BasicLearning"))
    context = RunContext.in_results_dir(str(tmp_path), "basic", seed=0, max_steps=600)
    trainer = create_trainers(str(config), manager.behavior_specs, context)["BasicLearning"]
    settings = trainer.settings
    assert (settings.hyperparameters.batch_size, settings.network.hidden_units, settings.time_horizon) == (32, 20, 3)
    assert settings.reward_signals["extrinsic"].gamma == 0.9
    assert "PushBlockLearning" in caplog.text  # one of the sections for other environments
    TrainerController({"BasicLearning": trainer}, context.model_path, context.summaries_dir, "basic",
                      save_freq=10**6).start_learning(manager)
    assert trainer.get_step == 604 and trainer.update_count >= 2 and trainer.episodes_completed > 0


@pytest.mark.parametrize("style", ["mlagents", "sb3"])
def test_recurrent_sequences_replay_the_acting_policy(tmp_path, style):
    """Every sequence of the update buffer starts at a real row (padding at the end), so the
    model run over it from the stored memory gives back the acting policy's log-probs and values
    on every real row; with ML-Agents 0.9's front padding the short trajectories would start from the
    padding's zero memory after running the LSTM over padding rows. Both ``recurrent_style``s."""
    length = 8
    tc, manager, trainer = run(tmp_path, MultiBranchMaskedEnvironment(seed=1), max_steps=100, use_recurrent=True,
                               memory_size=8, sequence_length=length, time_horizon=12, buffer_size=40,
                               recurrent_style=style)
    checked = []
    original = trainer.learner.update

    def spy(batch, step, seed):
        ub = trainer.training_buffer.update_buffer
        arrays = {k: np.asarray(ub[k].get_batch()) for k in trainer.learner.batch_fields}
        masks = arrays[Field.MASKS] > 0
        assert len(masks) % length == 0 and masks[::length].all()
        inputs = {k: v for k, v in arrays.items() if k != Field.MEMORY}
        inputs[Field.MEMORY] = arrays[Field.MEMORY][::length]
        log_prob, _, values = trainer.learner.actor_critic.evaluate_actions(inputs, arrays[Field.ACTIONS], length)
        stored = arrays[Field.ACTION_LOG_PROBS].sum(axis=-1)
        np.testing.assert_allclose(np.asarray(log_prob)[masks], stored[masks], atol=2e-5)
        np.testing.assert_allclose(np.asarray(values["extrinsic"])[masks],
                                   arrays[Field.value_estimates("extrinsic")][masks], atol=2e-5)
        checked.append(int((~masks).sum()))
        return original(batch, step, seed)

    trainer.learner.update = spy
    tc.start_learning(manager)
    assert checked and sum(checked) > 0, "no update had a padded sequence to check"


def test_sb3_recurrent_style_checkpoint_restores_and_resumes(tmp_path):
    """A ``recurrent_style: sb3`` run's checkpoint restores every weight into a new trainer,
    which trains on from there (separate streams, memory of 2 × [c, h])."""
    keys = {"use_recurrent": True, "memory_size": 16, "sequence_length": 4, "recurrent_style": "sb3",
            "separate_value_network": True}
    tc, manager, trainer = run(tmp_path, MultiBranchMaskedEnvironment(seed=1), max_steps=100, **keys)
    tc.start_learning(manager)
    trainer.save_model()
    saved = {v.path: v.numpy() for v in trainer.learner.actor_critic.weights}
    assert trainer.learner.actor_critic.lstm_first and Field.PREV_ACTION not in trainer.policy.experience_fields
    manager = SimpleEnvManager(MultiBranchMaskedEnvironment(seed=2))
    context = RunContext.in_results_dir(str(tmp_path), "t", seed=3, max_steps=200, load_model=True)
    restored = next(iter(create_trainers(load_trainer_config({"default": {**SMALL, **keys}}),
                                         manager.behavior_specs, context).values()))
    assert restored.get_step == trainer.get_step
    for v in restored.learner.actor_critic.weights:
        np.testing.assert_array_equal(v.numpy(), saved[v.path], err_msg=v.path)
    TrainerController({restored.behavior_name: restored}, context.model_path, context.summaries_dir, "t",
                      save_freq=10**6, training_seed=3).start_learning(manager)
    assert restored.get_step > trainer.get_step
