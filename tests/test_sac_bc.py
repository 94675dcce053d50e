"""SAC with behavioral cloning (``pretraining``): the actor imitates a scripted expert's
demonstration, and a SAC run with it checkpoints the BC optimizer and reports its loss."""
import numpy as np
import pytest
import tensorflow as tf
from test_bc_trainers import expert

from kerasrl import recording
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.fields import Field
from kerasrl.sac.bc import LOSS_STAT, sac_pretraining
from kerasrl.sac.learner import SACLearner
from kerasrl.sac.trainer import SACTrainer
from kerasrl.settings import BehavioralCloningSettings, TrainerSettings, load_trainer_config

SMALL = {"trainer": "sac", "batch_size": 32, "buffer_size": 5000, "hidden_units": 32, "num_layers": 2,
         "learning_rate": 3e-3, "time_horizon": 8, "summary_freq": 500}


@pytest.fixture(scope="module")
def expert_demos(tmp_path_factory):
    """The scripted expert's demonstrations (tests/test_bc_trainers.py's expert), discrete and continuous."""
    paths = {discrete: str(tmp_path_factory.mktemp("sac-demos") / "expert.demo") for discrete in (True, False)}
    for discrete, path in paths.items():
        recording.record(Simple1DEnvironment(discrete, seed=7), expert(discrete), 300, path)
    return paths


@pytest.mark.parametrize("discrete", [True, False], ids=["discrete", "continuous"])
def test_bc_makes_the_actor_act_as_the_expert(discrete, expert_demos):
    env = Simple1DEnvironment(discrete, seed=1)
    spec = env.behavior_specs[next(iter(env.behavior_specs))]
    settings = TrainerSettings.from_dict(SMALL)
    networks = SACLearner.for_behavior(spec, settings, seed=0, max_steps=100).networks
    bc = sac_pretraining(networks, BehavioralCloningSettings(demo_path=expert_demos[discrete], strength=1.0, steps=0,
                                                             num_epoch=3),
                         settings.hyperparameters.learning_rate, 32, seed=0)
    obs = bc.data[Field.VECTOR_OBS].numpy()
    inputs = {Field.VECTOR_OBS: tf.constant(obs)}
    if discrete:
        inputs[Field.ACTION_MASK] = tf.ones((len(obs), 2))
    wanted = expert(discrete)(obs[:, :1]).reshape(len(obs), -1)
    before = networks(inputs).numpy()
    losses = [bc.update(step=0)[LOSS_STAT] for _ in range(8)]
    after = networks(inputs).numpy()
    assert losses[-1] < 0.5 * losses[0], losses
    if discrete:
        assert (after == wanted).mean() == 1.0 and (before == wanted).mean() < 1.0
    else:  # tanh(μ) on the expert's side of 0, and nearer ±1 than before
        assert (np.sign(after) == wanted).all()
        assert np.abs(after - wanted).mean() < 0.5 * np.abs(before - wanted).mean()


def test_bc_learning_rate_decays_over_steps_then_stops(expert_demos):
    env = Simple1DEnvironment(True, seed=1)
    spec = env.behavior_specs[next(iter(env.behavior_specs))]
    networks = SACLearner.for_behavior(spec, TrainerSettings.from_dict(SMALL), seed=0, max_steps=100).networks
    bc = sac_pretraining(networks, BehavioralCloningSettings(demo_path=expert_demos[True], strength=0.5, steps=100),
                         2e-3, 32)
    assert bc.learning_rate(0) == pytest.approx(1e-3) and bc.learning_rate(50) == pytest.approx(5e-4)
    before = [v.numpy().copy() for v in networks.actor_variables]
    assert bc.update(step=100) == {LOSS_STAT: 0.0}
    assert all(np.array_equal(b, v.numpy()) for b, v in zip(before, networks.actor_variables))


def test_sac_run_with_pretraining_reports_and_checkpoints_it(expert_demos, tmp_path):
    from test_sac import run

    section = {**SMALL, "max_steps": 120, "pretraining": {"demo_path": expert_demos[False], "strength": 1.0, "steps": 0}}
    assert load_trainer_config({"default": section}).default.pretraining.demo_path == expert_demos[False]
    trainer = run(Simple1DEnvironment(use_discrete=False, seed=1), tmp_path, section)
    assert isinstance(trainer, SACTrainer) and trainer.bc_module is not None
    assert int(trainer.bc_module.optimizer.iterations.numpy()) > 0
    losses = [row[LOSS_STAT] for row in trainer.summary_log if LOSS_STAT in row] + list(trainer.stats[LOSS_STAT])
    assert losses and all(np.isfinite(losses)) and max(losses) > 0
    saved = tf.train.latest_checkpoint(trainer.model_path)
    assert saved and any(name.startswith("bc_optimizer/") for name, _ in tf.train.list_variables(saved))


def test_sac_bc_is_kerasrl_bc_with_the_actor_and_its_checkpointed_adam(expert_demos):
    """SAC's pretraining is ``kerasrl.bc``'s with SAC's actor: its Adam keeps the name SAC
    checkpoints were written with, holds moments for the actor's variables only, and an update
    moves the actor and nothing else."""
    from kerasrl.bc.module import Pretraining

    env = Simple1DEnvironment(False, seed=1)
    spec = env.behavior_specs[next(iter(env.behavior_specs))]
    networks = SACLearner.for_behavior(spec, TrainerSettings.from_dict(SMALL), seed=0, max_steps=100).networks
    bc = sac_pretraining(networks, BehavioralCloningSettings(demo_path=expert_demos[False], strength=1.0, steps=0), 3e-3, 32)
    assert isinstance(bc, Pretraining) and bc.optimizer.name == "sac_bc_adam" and bc.num_epoch == 1
    actor = {id(v) for v in networks.actor_variables}
    assert [id(v) for v in bc.learner.imitator.variables] == [id(v) for v in networks.actor_variables]
    others = [v for v in networks.trainable_variables if id(v) not in actor]
    assert others
    before = [v.numpy().copy() for v in others]
    assert bc.update(step=0)[LOSS_STAT] > 0
    assert int(bc.optimizer.iterations.numpy()) == bc.batches_per_update
    assert all(np.array_equal(b, v.numpy()) for b, v in zip(before, others))
