"""MA-POCA with ``threaded: true``: the update thread estimates the handed-over trajectories and
updates; the clipped ratio starts from the learner's weights; resets, checkpoints and learning."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.groups import GroupSimple1DEnvironment
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.poca.trainer import GROUP_REWARD_STAT, POCATrainer
from kerasrl.settings import RunContext, load_trainer_config
from kerasrl.trainers import TrainerController, create_trainers
from kerasrl.trainers.threaded import TakenTrajectories

NAME = "GroupSimple1D"
SMALL = {"trainer": "poca", "hidden_units": 16, "num_layers": 1, "batch_size": 32, "buffer_size": 128,
         "time_horizon": 16, "summary_freq": 500, "max_steps": 400, "threaded": True}


def _trainer(tmp_path, max_steps=400, load=False, **overrides):
    manager = SimpleEnvManager(GroupSimple1DEnvironment(num_agents=3, seed=0, max_steps=40))
    context = RunContext.in_results_dir(str(tmp_path), "poca", seed=1, max_steps=max_steps, load_model=load)
    trainers = create_trainers(load_trainer_config({"default": {**SMALL, **overrides}}), manager.behavior_specs, context)
    return trainers[NAME], manager, context


def _learn(trainer, manager, context):
    TrainerController({NAME: trainer}, context.model_path, context.summaries_dir, "poca", save_freq=10**6,
                      training_seed=1).start_learning(manager)


class _Trajectory:
    def __init__(self, n, version):
        self.n, self.policy_version = n, version

    def __len__(self):
        return self.n


def test_taken_trajectories_count_rows_and_versions_and_split_at_resets():
    data, a, b, c = TakenTrajectories(), _Trajectory(3, 0), _Trajectory(5, 1), _Trajectory(2, 1)
    data.take(a)
    data.mark_reset()
    data.take(b)
    data.take(c)
    assert data.rows == 10 and data.versions == [0, 1, 1]
    assert data.between_resets() == [[a], [b, c]]
    assert TakenTrajectories().between_resets() == [[]]


def test_threaded_poca_updates_in_its_thread_and_checkpoints_resume(tmp_path):
    trainer, manager, context = _trainer(tmp_path, max_steps=400)
    assert trainer.threaded
    _learn(trainer, manager, context)
    assert trainer.update_count >= 2 and not trainer.threaded_updates.thread
    assert trainer.updates_applied == trainer.update_count  # the end of training applies every update
    assert {"Losses/Baseline Loss", "Policy/Extrinsic Baseline Estimate", "Policy/Staleness"} <= \
        {k for k, v in trainer.stats.items() if v}
    trainer.save_model()
    restored, manager, context = _trainer(tmp_path, max_steps=600, load=True)
    assert restored.get_step == trainer.get_step and restored.updates_applied == trainer.update_count
    _learn(restored, manager, context)
    assert restored.get_step > trainer.get_step and restored.update_count > trainer.update_count


def test_the_ratio_starts_from_the_learners_weights_not_the_acting_ones(tmp_path, monkeypatch):
    """Threaded, the stored log-probabilities are those of weights one update older; the update
    clips against the learner's own (taken at its start), as an unthreaded update does."""
    trainer, manager, context = _trainer(tmp_path, max_steps=600)
    seen, acting = [], []
    update, run_update = trainer.learner.update, trainer.run_update

    def keep_acting(data, step, stats):  # the acting policy's log-probabilities, in the update buffer's order
        acting.append(np.concatenate([t.steps[Field.ACTION_LOG_PROBS].get_batch().sum(-1)
                                      for run in data.between_resets() for t in run]))
        return run_update(data, step, stats)

    def spy(batch, step, seed):
        seen.append((batch[Field.ACTION_LOG_PROBS].sum(-1), trainer.learner.log_probs(batch)))
        return update(batch, step, seed)

    monkeypatch.setattr(trainer, "run_update", keep_acting)
    monkeypatch.setattr(trainer.learner, "update", spy)
    _learn(trainer, manager, context)
    assert len(seen) >= 3 and len(acting) == len(seen)
    for stored, own in seen:
        np.testing.assert_allclose(stored, own, rtol=1e-5, atol=1e-5)
    # the first update's data was acted by the learner's own weights (equal to float rounding); after
    # it the acting weights are one update old and their log-probabilities differ beyond rounding
    assert np.abs(seen[0][0] - acting[0]).max() < 1e-5
    assert all(np.abs(stored - old).max() > 1e-4 for (stored, _), old in zip(seen[1:], acting[1:]))


def test_a_reset_drops_the_unfinished_episodes_group_rewards_where_the_update_thread_reaches_it(tmp_path, monkeypatch):
    trainer, _, _ = _trainer(tmp_path)
    trainer._next.take(_Trajectory(4, 0))
    trainer.end_episode()
    trainer._next.take(_Trajectory(4, 0))
    assert trainer._next.trajectories[1] is None
    trainer._episode_returns[7][GROUP_REWARD_STAT] = 0.5
    seen = []

    class Stop(Exception):
        pass

    def record(trajectories):
        seen.append(({a: dict(r) for a, r in trainer._episode_returns.items()}, len(trajectories)))
        if len(seen) == 2:
            raise Stop

    monkeypatch.setattr(trainer, "process_trajectory_batch", record)
    with pytest.raises(Stop):
        trainer.run_update(trainer._next, 0, defaultdict(list))
    assert seen == [({7: {GROUP_REWARD_STAT: 0.5}}, 1), ({}, 1)]


def test_threaded_poca_with_tensorflow_inference_is_one_clear_error(tmp_path):
    with pytest.raises(TrainerConfigError, match=r"threaded: true acts with the numpy mirror.*set threaded: false"):
        _trainer(tmp_path, inference="tf")


LEARNING = {"trainer": "poca", "hidden_units": 32, "num_layers": 2, "batch_size": 64, "buffer_size": 512,
            "time_horizon": 32, "summary_freq": 1000, "max_steps": 8000, "learning_rate": 3e-3, "beta": 0.01,
            "threaded": True}


@pytest.mark.slow
def test_threaded_poca_learns_group_simple1d_from_its_group_reward(tmp_path):
    """As the unthreaded test in ``test_poca.py``: two walkers whose only reward is their group's,
    from none at first to nearly every episode by 8,000 steps (seeded)."""
    manager = SimpleEnvManager(GroupSimple1DEnvironment(num_agents=2, seed=0, max_steps=40))
    context = RunContext.in_results_dir(str(tmp_path), "learn", seed=3, max_steps=8000)
    trainers = create_trainers(load_trainer_config({"default": LEARNING}), manager.behavior_specs, context)
    assert isinstance(trainers[NAME], POCATrainer) and trainers[NAME].threaded
    TrainerController(trainers, context.model_path, context.summaries_dir, "learn", save_freq=10**6,
                      training_seed=3).start_learning(manager)
    curve = [row.get(GROUP_REWARD_STAT, 0.0) for row in trainers[NAME].summary_log]
    assert curve[0] < 0.1 and np.mean(curve[-2:]) > 0.8, curve
