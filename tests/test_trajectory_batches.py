"""The trajectories that close in the same step, processed together (``process_trajectory_batch``:
one reward call, one critic call and one GAE call per signal for all of them), give the update
buffer that processing them one by one gives: the same rows, in the same order, bit for bit."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from kerasrl.common.gae import gae_and_returns
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.groups import GroupSimple1DEnvironment
from kerasrl.fields import Field
from kerasrl.poca import numpy_critic
from kerasrl.settings import RunContext, load_trainer_config
from kerasrl.trainers import TrainerController, create_trainers

NAME = "GroupSimple1D"
SMALL = {"hidden_units": 16, "num_layers": 1, "batch_size": 16, "buffer_size": 64, "time_horizon": 8,
         "summary_freq": 10**6, "max_steps": 10**6}
CURIOSITY = {"extrinsic": {"strength": 1.0, "gamma": 0.99},
             "curiosity": {"strength": 0.02, "gamma": 0.9, "encoding_size": 8}}
RECURRENT = {"use_recurrent": True, "memory_size": 8, "sequence_length": 4}


def _trainer(tmp_path, name, discrete, **overrides):
    manager = SimpleEnvManager(GroupSimple1DEnvironment(num_agents=6, seed=0, max_steps=30, use_discrete=discrete))
    context = RunContext.in_results_dir(str(tmp_path / name), name, seed=1, max_steps=200)
    config = load_trainer_config({"default": {**SMALL, **overrides}})
    return create_trainers(config, manager.behavior_specs, context)[NAME], manager, context


def _closed_batches(tmp_path, discrete, **overrides):
    """The trajectories that a 200-step run closes, as ``process_trajectories`` takes them (copies)."""
    trainer, manager, context = _trainer(tmp_path, "acting", discrete, **overrides)
    batches = []
    trainer.process_trajectories = lambda: batches.append(trainer.trajectory_queue.take_all())  # nothing trains
    TrainerController({NAME: trainer}, context.model_path, context.summaries_dir, "acting", save_freq=10**6,
                      training_seed=1).start_learning(manager)
    batches = [b for b in batches if b]
    assert max(len(b) for b in batches) > 1, "no two trajectories closed together"
    return batches


def _model_signals_reward(trainer):
    """The model signals give their (untrained) rewards, not the zeros of before their first update."""
    for signal in trainer.reward_signals.values():
        if hasattr(signal, "_updates"):
            signal._updates.assign(1)


def _processed(tmp_path, name, batches, together, discrete, **overrides):
    trainer, _, _ = _trainer(tmp_path, name, discrete, **overrides)
    _model_signals_reward(trainer)
    for batch in copy.deepcopy(batches):
        if together:
            trainer.process_trajectory_batch(batch)
        else:
            for trajectory in batch:
                trainer.process_trajectory(trajectory)
    return trainer


def _assert_same_buffers(a, b, estimated=()):
    """Every field equal bit for bit, but those ``estimated`` (by the critic, and what follows
    from its estimates): equal to float32 round-off (its products over more rows may sum in
    another order)."""
    ua, ub = a.training_buffer.update_buffer, b.training_buffer.update_buffer
    assert set(ua) == set(ub) and len(ua[Field.MASKS]) > 0
    for key in ua:
        if key in estimated:
            np.testing.assert_allclose(ua[key].get_batch(), ub[key].get_batch(), rtol=1e-5, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(ua[key].get_batch(), ub[key].get_batch(), err_msg=str(key))


@pytest.mark.parametrize("discrete,overrides", [
    (True, {"reward_signals": CURIOSITY}),
    (False, {"reward_signals": CURIOSITY, "normalize": True}),
    (True, {**RECURRENT, "normalize_rewards": True}),
    (False, {**RECURRENT, "reward_signals": CURIOSITY}),
])
def test_ppo_batches_give_the_update_buffer_of_one_by_one(tmp_path, discrete, overrides):
    batches = _closed_batches(tmp_path, discrete, **overrides)
    together = _processed(tmp_path, "together", batches, True, discrete, **overrides)
    alone = _processed(tmp_path, "alone", batches, False, discrete, **overrides)
    _assert_same_buffers(together, alone)
    assert together.processor.deferred.segments == alone.processor.deferred.segments
    lambd = together.hyperparameters.lambd
    for trainer in (together, alone):
        trainer.processor.deferred.finish(trainer.training_buffer.update_buffer, lambd)
    _assert_same_buffers(together, alone)
    normalizer = together.learner.actor_critic.normalizer
    if normalizer is not None:
        for a, b in zip(normalizer.weights, alone.learner.actor_critic.normalizer.weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    if "reward_signals" not in overrides:  # each trajectory's own GAE, as gae_and_returns gives it
        _assert_each_trajectorys_gae(together, batches)


def _assert_each_trajectorys_gae(trainer, batches):
    update, seq, row = trainer.training_buffer.update_buffer, trainer.sequence_length, 0
    signal = trainer.reward_signals["extrinsic"]
    rewards = update[Field.rewards("extrinsic")].get_batch()
    for trajectory in (t for batch in batches for t in batch):
        n = len(trajectory.steps[Field.MASKS])
        v_next = 0.0 if trajectory.terminated else trajectory.bootstrap["extrinsic"]
        values = update[Field.value_estimates("extrinsic")].get_batch()[row:row + n]
        adv, ret = gae_and_returns(rewards[row:row + n], values, v_next, signal.gamma, trainer.hyperparameters.lambd)
        np.testing.assert_array_equal(update[Field.ADVANTAGES].get_batch()[row:row + n], adv)
        np.testing.assert_array_equal(update[Field.DISCOUNTED_RETURNS].get_batch()[row:row + n], ret)
        row += -(-n // seq) * seq


@pytest.mark.parametrize("discrete,overrides", [
    (True, {}),
    (False, {"reward_signals": CURIOSITY}),
    (True, {"reward_signals": CURIOSITY, "inference": "tf"}),
])
def test_poca_batches_give_the_update_buffer_and_statistics_of_one_by_one(tmp_path, discrete, overrides):
    overrides = {"trainer": "poca", **overrides}
    batches = _closed_batches(tmp_path, discrete, **overrides)
    together = _processed(tmp_path, "together", batches, True, discrete, **overrides)
    alone = _processed(tmp_path, "alone", batches, False, discrete, **overrides)
    estimated = {Field.ADVANTAGES, Field.DISCOUNTED_RETURNS}
    for name in together.reward_signals:
        estimated |= {f(name) for f in (Field.value_estimates, Field.baseline_estimates, Field.returns, Field.advantage)}
    _assert_same_buffers(together, alone, estimated)
    stats = {k: v for k, v in together.stats.items() if v}
    assert stats.keys() == {k for k, v in alone.stats.items() if v} and stats
    for key, values in stats.items():
        np.testing.assert_allclose(values, alone.stats[key], rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("inference", ["auto", "tf"])
def test_poca_estimates_in_chunks_of_rows_are_those_of_one_call(tmp_path, monkeypatch, inference):
    """Many rows go through the critic in chunks (their attention scores stay small): the same
    estimates, to float32 round-off, as one call of them all."""
    trainer, _, _ = _trainer(tmp_path, "chunks", True, trainer="poca", inference=inference)
    rng = np.random.default_rng(0)
    rows, width = 50, 5
    trainer.learner.critic.note_group_size(width + 1)
    args = (rng.normal(size=(rows, 2)).astype(np.float32), rng.normal(size=(rows, width, 2)).astype(np.float32),
            rng.integers(0, 2, size=(rows, width, 1)).astype(np.int32), (rng.random((rows, width)) > 0.3).astype(np.float32))
    whole = trainer._estimates(*args)
    monkeypatch.setattr(numpy_critic, "CHUNK_SCORES", 7 * 4 * (width + 1) ** 2)  # chunks of 7 rows
    chunked = trainer._estimates(*args)
    for a, b in zip(whole, chunked):
        assert set(a) == set(b)
        for key in a:
            assert len(b[key]) == rows
            np.testing.assert_allclose(np.asarray(b[key]), np.asarray(a[key]), rtol=1e-5, atol=1e-6)


def test_a_larger_group_reaches_the_numpy_mirror_of_the_poca_critic(tmp_path):
    """The member count is scaled by the largest group seen: when the first trajectories bring a
    larger group, the numpy mirror's estimates use the new scale, as the compiled critic's do."""
    batch = _closed_batches(tmp_path, True, trainer="poca")[0]
    baselines = {}
    for inference in ("auto", "tf"):
        trainer, _, _ = _trainer(tmp_path, f"scale_{inference}", True, trainer="poca", inference=inference)
        trainer.process_trajectory_batch(copy.deepcopy(batch))
        baselines[inference] = trainer.training_buffer.update_buffer[Field.baseline_estimates("extrinsic")].get_batch()
        assert float(trainer.learner.critic.max_entities.numpy()) == 6.0  # six agents in the group
        if inference == "auto":
            assert trainer._numpy_critic.count_scale == 6.0
    np.testing.assert_allclose(baselines["auto"], baselines["tf"], rtol=1e-5, atol=1e-6)
