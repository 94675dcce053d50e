"""``threaded: auto``: updates in a thread of their own where the environment steps in other
processes (environment workers, Ray, a Unity player) and the trainer type can; in the acting
thread otherwise (an environment stepped in this process, a trainer or network that cannot)."""
import logging

import pytest
import yaml
from test_threaded import BASE, SAC

from kerasrl.cli import main
from kerasrl.demo_format import DemoError
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.trainers.factory import create_trainers


def _trainer(tmp_path, other_processes, discrete=True, **overrides):
    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=discrete, seed=0))
    context = RunContext.in_results_dir(str(tmp_path), "run", environment_in_other_processes=other_processes)
    trainers = create_trainers({"default": {**overrides, "threaded": "auto"}}, manager.behavior_specs, context)
    return trainers["Simple1D"]


def test_auto_is_read_from_the_config_beside_true_and_false():
    assert TrainerSettings.from_dict({"threaded": "auto"}).threaded == "auto"
    assert TrainerSettings.from_dict({"threaded": "Auto"}).threaded == "auto"
    assert TrainerSettings.from_dict(TrainerSettings.from_dict({"threaded": "auto"}).to_dict()).threaded == "auto"
    with pytest.raises(TrainerConfigError, match="threaded.*must be true, false or auto"):
        TrainerSettings.from_dict({"threaded": "sometimes"})


def test_auto_updates_in_the_acting_thread_when_the_environment_steps_here(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        trainer = _trainer(tmp_path, other_processes=False, **{k: v for k, v in BASE.items() if k != "threaded"})
    assert not trainer.threaded
    assert "Behavior Simple1D: threaded: auto updates in the acting thread (the environment steps in this" in caplog.text


@pytest.mark.parametrize("overrides", [{k: v for k, v in BASE.items() if k != "threaded"},
                                       {k: v for k, v in SAC.items() if k != "threaded"}], ids=["ppo", "sac"])
def test_auto_updates_in_a_thread_when_the_environment_steps_in_other_processes(tmp_path, caplog, overrides):
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        trainer = _trainer(tmp_path, other_processes=True, discrete=overrides.get("trainer") != "sac", **overrides)
    assert trainer.threaded
    assert "threaded: auto updates in a thread of its own (the environment steps in other processes)" in caplog.text
    trainer.finish_updates(drain=False)
    trainer.close()


@pytest.mark.parametrize("overrides,why", [
    ({"inference": "tf"}, "acts with the numpy mirror of the policy, and inference: tf"),
    ({"trainer": "offline_bc", "batches_per_epoch": 2, "demo_path": "x.demo"}, None),
])
def test_auto_stays_in_the_acting_thread_where_the_trainer_cannot_thread(tmp_path, caplog, overrides, why):
    settings = {k: v for k, v in BASE.items() if k != "threaded"}
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        try:
            trainer = _trainer(tmp_path, other_processes=True, **{**settings, **overrides})
        except DemoError:  # offline_bc reads its demonstration: auto refused nothing before that
            assert why is None
            return
    assert not trainer.threaded
    assert f"threaded: auto updates in the acting thread (Behavior Simple1D: threaded: true {why}" in caplog.text


def test_kerasrl_learn_resolves_auto_from_where_the_environment_steps(tmp_path, caplog):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"default": {"batch_size": 32, "buffer_size": 127, "hidden_units": 16,
                                               "num_epoch": 1, "threaded": "auto"}}))
    base = [str(cfg), "--env", "CartPole-v1", "--num-envs", "2", "--seed", "1", "--steps", "300",
            "--results-dir", str(tmp_path)]
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        assert main(base + ["--run-id", "here"]) == 0
        assert "threaded: auto updates in the acting thread" in caplog.text
        caplog.clear()
        assert main(base + ["--run-id", "workers", "--workers", "2"]) == 0
    assert "threaded: auto updates in a thread of its own" in caplog.text
