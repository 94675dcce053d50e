"""The registry of trainer types: kerasrl's own, those registered in Python, and plugins found
through the ``kerasrl.trainer_type`` entry point (trained by kerasrl-learn, exported by kerasrl export)."""
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import tomllib

import kerasrl
from kerasrl.envs import Simple1DEnvironment, SimpleEnvManager
from kerasrl.exception import TrainerConfigError
from kerasrl.ppo.trainer import PPOTrainer
from kerasrl.sac.trainer import SACTrainer
from kerasrl.settings import PPOSettings, RunContext, SACSettings, load_trainer_config, trainer_types
from kerasrl.settings.registry import trainer_types as registry_function
from kerasrl.settings.registry import type_of_record
from kerasrl.trainers import create_trainers

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "trainer_plugin"


@pytest.fixture
def registry(monkeypatch):
    """The registry as loaded, restored after the test (a registration lives for the process)."""
    import kerasrl.settings.registry as module

    module.trainer_types()
    monkeypatch.setattr(module, "_registry", dict(module._registry))
    return module


def test_kerasrl_registers_its_own_types_with_their_classes():
    types = trainer_types()
    assert list(types)[:4] == ["ppo", "sac", "offline_bc", "online_bc"]
    assert types["ppo"].trainer_cls is PPOTrainer and types["ppo"].settings_cls is PPOSettings
    assert types["sac"].trainer_cls is SACTrainer and types["sac"].settings_cls is SACSettings
    assert types["offline_bc"].trainer_cls.__name__ == "OfflineBCTrainer"
    assert kerasrl.trainer_types is registry_function


def test_reading_a_config_does_not_load_tensorflow():
    code = ("import sys, kerasrl; c = kerasrl.load_trainer_config({'default': {'trainer': 'sac', 'tau': 0.01}}); "
            "assert c.default.hyperparameters.tau == 0.01; print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_name_belongs_to_its_registration_not_its_class(registry, tmp_path):
    kerasrl.register_trainer_type("house_ppo", PPOTrainer, PPOSettings)
    config = load_trainer_config({"default": {"trainer": "house_ppo", "batch_size": 16, "buffer_size": 64,
                                              "hidden_units": 8}})
    assert isinstance(config.default.hyperparameters, PPOSettings)
    env = SimpleEnvManager(Simple1DEnvironment(True, seed=0))
    context = RunContext.in_results_dir(str(tmp_path), "r", seed=0)
    (trainer,) = create_trainers(config, env.behavior_specs, context).values()
    assert type(trainer) is PPOTrainer
    assert trainer.behavior_record()["trainer"] == "house_ppo"  # checkpoints record the name
    env.close()


def test_each_type_reads_its_own_hyperparameters():
    config = load_trainer_config({"default": {"trainer": "ppo", "beta": 0.01},
                                  "Pendulum": {"trainer": "sac", "tau": 0.02, "batch_size": 64}})
    assert config.default.hyperparameters.beta == 0.01
    sac = config.sections["Pendulum"].hyperparameters
    assert isinstance(sac, SACSettings) and sac.tau == 0.02 and sac.batch_size == 64  # default's beta left out
    with pytest.raises(TrainerConfigError, match=r"^tau in section X of .* is a hyper-parameter of the sac trainer, "
                                                 r"which the ppo trainer does not use"):
        load_trainer_config({"default": {}, "X": {"tau": 0.5}})
    with pytest.raises(TrainerConfigError, match=r"trainer in section default of .* must be one of \['ppo', 'sac', "
                                                 r"'offline_bc', 'online_bc', 'poca'.*got 'dqn'"):
        load_trainer_config({"default": {"trainer": "dqn"}})


def test_checkpoints_recorded_with_class_names_still_name_their_type():
    assert type_of_record("ppo") == "ppo"
    assert type_of_record("PPOTrainer") == "ppo"
    assert type_of_record("MultiHostPPOTrainer") == "ppo"
    assert type_of_record("SACTrainer") == "sac"
    assert type_of_record("OfflineBCTrainer") == "offline_bc" and type_of_record("OnlineBCTrainer") == "online_bc"
    with pytest.raises(TrainerConfigError, match="'GhostTrainer', which no registered trainer type trains"):
        type_of_record("GhostTrainer")


def test_a_broken_plugin_is_skipped_with_a_warning_naming_it(registry, monkeypatch, caplog):
    broken = EntryPoint("broken", "no_such_module_for_kerasrl:trainer_types", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    monkeypatch.setattr(registry, "_registry", {})
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    types = registry.trainer_types()
    assert {"ppo", "sac", "offline_bc", "online_bc"} <= set(types) and "broken" not in types
    assert "Trainer plugin broken (no_such_module_for_kerasrl:trainer_types) could not be loaded" in caplog.text


def test_bad_registrations_are_one_clear_error(registry):
    with pytest.raises(TrainerConfigError, match="name must be a non-empty string"):
        kerasrl.register_trainer_type(" ", PPOTrainer, PPOSettings)
    with pytest.raises(TrainerConfigError, match="its settings class must be a class"):
        kerasrl.register_trainer_type("x", PPOTrainer, PPOSettings())
    kerasrl.register_trainer_type("lazy", "no_such_module_for_kerasrl:Trainer", PPOSettings)
    with pytest.raises(TrainerConfigError, match="trainer type lazy: no_such_module_for_kerasrl:Trainer cannot be loaded"):
        _ = trainer_types()["lazy"].trainer_cls


def test_sac_reward_signals_train_with_sacs_own_settings(tmp_path):
    """The reward signals' models take the trainer's own jit_compile (SAC's here, not PPO's default)."""
    config = load_trainer_config({"default": {"trainer": "sac", "jit_compile": False, "batch_size": 32,
                                              "buffer_size": 256, "hidden_units": 8,
                                              "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99},
                                                                 "curiosity": {"strength": 0.1, "gamma": 0.9,
                                                                               "encoding_size": 8}}}})
    env = SimpleEnvManager(Simple1DEnvironment(True, seed=0))
    context = RunContext.in_results_dir(str(tmp_path), "r", seed=0)
    (trainer,) = create_trainers(config, env.behavior_specs, context).values()
    assert trainer.reward_signals["curiosity"].jit_compile is False  # PPO's default (None) would have given XLA
    env.close()


def _install_plugin(site: Path) -> None:
    """The example plugin as pip would install it: its module and its metadata's entry points."""
    site.mkdir()
    shutil.copy(PLUGIN / "steady_ppo.py", site)
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    points = project["entry-points"]["kerasrl.trainer_type"]
    (info / "entry_points.txt").write_text("[kerasrl.trainer_type]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))


@pytest.mark.slow
def test_an_installed_plugin_trains_through_kerasrl_learn_and_exports(tmp_path):
    site = tmp_path / "site"
    _install_plugin(site)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "TF_CPP_MIN_LOG_LEVEL": "3"}
    learn = [sys.executable, "-m", "kerasrl.cli", str(PLUGIN / "steady_ppo.yaml"), "--env", "Simple1D", "--steps", "600",
             "--seed", "0", "--results-dir", str(tmp_path), "--run-id", "steady"]
    done = subprocess.run(learn, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^final steps=601 ", done.stdout, re.M), done.stdout[-2000:]
    assert "STEADY_PPO on Simple1D" in done.stdout
    models = tmp_path / "steady" / "models" / "Simple1D"
    record = json.loads((models / "behavior.json").read_text())
    assert record["trainer"] == "steady_ppo"
    assert record["settings"]["learning_rate_schedule"] == "constant" and record["settings"]["epsilon_end"] == 0.2
    shutil.rmtree(models / "Simple1D.savedmodel")
    export = [sys.executable, "-m", "kerasrl.cli.tools", "export", str(tmp_path / "steady"), "--no-onnx"]
    done = subprocess.run(export, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (models / "Simple1D.savedmodel").is_dir()


def test_the_guide_shows_the_example_plugin_as_it_is(monkeypatch):
    """The guide's module is the example's file, and it is what its docstring says (a module,
    as the plugin is imported: dataclasses need one)."""
    import importlib.util

    guide = (ROOT / "docs" / "guides" / "adding-a-trainer.md").read_text()
    assert (PLUGIN / "steady_ppo.py").read_text().strip() in guide
    spec = importlib.util.spec_from_file_location("steady_ppo", PLUGIN / "steady_ppo.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "steady_ppo", module)
    spec.loader.exec_module(module)
    trainers, settings = module.trainer_types()
    assert issubclass(trainers["steady_ppo"], PPOTrainer) and issubclass(settings["steady_ppo"], PPOSettings)
    hp = settings["steady_ppo"](beta=0.01)
    assert (hp.learning_rate_schedule, hp.beta_end, hp.epsilon_end) == ("constant", 0.01, hp.epsilon)
    points = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]["entry-points"]["kerasrl.trainer_type"]
    assert points == {"steady_ppo": "steady_ppo:trainer_types"}
    assert '[project.entry-points."kerasrl.trainer_type"]\nsteady_ppo = "steady_ppo:trainer_types"' in guide
