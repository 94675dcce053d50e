"""Checkpoints written by kerasrl 0.1 before the settings refactor (commit ea1fa61) still load,
and SAC checkpoints written before the target critics were saved (commit 96d4b04) resume.

``tests/data/checkpoints_v0_1`` holds, per case, the checkpoint, the config it was trained
with and every variable's value at save time (see its README and make_v0_1_checkpoints.py);
``tests/data/checkpoints_sac_v0_2`` the same for SAC (make_sac_v0_2_checkpoint.py).
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.trainers import TrainerController, initialize_trainers

DATA = Path(__file__).parent / "data" / "checkpoints_v0_1"
SAC_DATA = Path(__file__).parent / "data" / "checkpoints_sac_v0_2"
CASES = {"discrete": True, "continuous_recurrent": False}


def restore(case: str, tmp_path: Path, max_steps=None):
    model_path = tmp_path / "models"
    shutil.copytree(DATA / case, model_path)
    config = json.loads((DATA / case / "config.json").read_text())
    env = SimpleEnvManager(Simple1DEnvironment(use_discrete=CASES[case], seed=0))
    trainers = initialize_trainers(config, env.behavior_specs, str(tmp_path / "summaries"), "v0_1", str(model_path),
                                   keep_checkpoints=2, train_model=True, load_model=True, seed=0, max_steps=max_steps)
    return trainers["Simple1D"], env


@pytest.mark.parametrize("case", sorted(CASES))
def test_v0_1_checkpoint_restores_every_variable(case, tmp_path):
    expected = np.load(DATA / case / "expected.npz")
    trainer, _ = restore(case, tmp_path)
    assert trainer.get_step == int(expected["step"]) and trainer.update_count == int(expected["updates"])
    restored = {v.path: v.numpy() for v in trainer.learner.actor_critic.weights}
    assert sorted(restored) == sorted(expected["paths"].tolist())
    for path in expected["paths"].tolist():
        np.testing.assert_array_equal(restored[path], expected[f"var/{path}"], err_msg=path)
    assert int(trainer.learner.optimizer.iterations.numpy()) > 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_v0_1_checkpoint_resumes_training(case, tmp_path):
    trainer, env = restore(case, tmp_path, max_steps=240)
    start = trainer.get_step
    tc = TrainerController({"Simple1D": trainer}, str(tmp_path / "models"), str(tmp_path / "summaries"), "v0_1",
                           save_freq=10**6, training_seed=0)
    tc.start_learning(env)
    assert trainer.get_step > start and trainer.update_count > int(np.load(DATA / case / "expected.npz")["updates"])
    assert sorted(p.name for p in (tmp_path / "models" / "Simple1D").glob("model-*.index"))[-1] == \
        f"model-{trainer.get_step}.index"


def test_a_sac_checkpoint_written_before_the_target_critics_were_saved_resumes(tmp_path, caplog):
    """It restores the actor, the critics and the counters, warns that the targets start as
    copies of the critics (where a fresh run starts them), and trains on."""
    shutil.copytree(SAC_DATA, tmp_path / "models")
    config = json.loads((SAC_DATA / "config.json").read_text())
    config["default"]["max_steps"] = 240
    env = SimpleEnvManager(Simple1DEnvironment(use_discrete=False, seed=0))
    trainers = initialize_trainers(config, env.behavior_specs, str(tmp_path / "summaries"), "old",
                                   str(tmp_path / "models"), keep_checkpoints=2, train_model=True, load_model=True,
                                   seed=0)
    trainer, expected = trainers["Simple1D"], np.load(SAC_DATA / "expected.npz")
    assert "did not save the target critics: they start as copies of the critics" in caplog.text
    assert trainer.get_step == int(expected["step"]) and trainer.update_steps == int(expected["updates"])
    nets = trainer.networks
    for i, v in enumerate(nets.actor_variables):
        np.testing.assert_array_equal(v.numpy(), expected[f"actor/{i}"])
    for i, v in enumerate(nets.critic_variables):
        np.testing.assert_array_equal(v.numpy(), expected[f"critic/{i}"])
    for target, critic in zip(nets.target_variables, nets.critic_variables):
        np.testing.assert_array_equal(target.numpy(), critic.numpy())
    TrainerController(trainers, str(tmp_path / "models"), str(tmp_path / "summaries"), "old", save_freq=10**6,
                      ).start_learning(env)
    assert trainer.get_step >= 240 and trainer.update_steps > int(expected["updates"])
    assert (tmp_path / "models" / "Simple1D" / f"model-{trainer.get_step}.index").exists()
