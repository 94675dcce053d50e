"""The offline_bc / online_bc trainers, PPO with BC pretraining, and --record-demo."""
from typing import Mapping, Optional

import numpy as np
import pytest

from kerasrl import demos, recording
from kerasrl.bc.trainer import OfflineBCTrainer, OnlineBCTrainer
from kerasrl.cli import main
from kerasrl.envs import Environment, SimpleEnvManager, StepResult
from kerasrl.envs.env_manager import ActionInfo
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import TrainerError
from kerasrl.fields import Field
from kerasrl.settings import RunContext
from kerasrl.trainers import TrainerController, create_trainers, initialize_trainers


def expert(discrete):
    if discrete:
        return lambda obs: (obs > 0).astype(np.int32)
    return lambda obs: np.where(obs > 0, 1.0, -1.0).astype(np.float32)


@pytest.fixture(scope="module")
def expert_demos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demos")
    paths = {}
    for discrete in (True, False):
        paths[discrete] = str(folder / f"expert-{discrete}.demo")
        recording.record(Simple1DEnvironment(discrete, seed=7), expert(discrete), 500, paths[discrete])
    return paths


def bc_config(demo_path, **over):
    return {"default": {"trainer": "offline_bc", "demo_path": demo_path, "batches_per_epoch": 10, "batch_size": 64,
                        "learning_rate": 3e-3, "max_steps": 600, "summary_freq": 200, "hidden_units": 32, **over}}


def train(config, env, tmp_path, seed=1, progress=None):
    manager = env if isinstance(env, SimpleEnvManager) else SimpleEnvManager(env)
    context = RunContext(summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=seed,
                         keep_checkpoints=1)
    trainers = create_trainers(config, manager.behavior_specs, context)
    tc = TrainerController(trainers, context.model_path, context.summaries_dir, "id", save_freq=99999,
                           training_seed=seed, progress=progress, progress_freq=1 if progress else 0)
    tc.start_learning(manager)
    return trainers


@pytest.mark.slow
@pytest.mark.parametrize("discrete", [True, False], ids=["discrete", "continuous"])
def test_offline_bc_imitates_a_scripted_expert(discrete, expert_demos, tmp_path):
    trainer = train(bc_config(expert_demos[discrete]), Simple1DEnvironment(discrete, seed=1), tmp_path)["Simple1D"]
    assert isinstance(trainer, OfflineBCTrainer)
    returns = list(trainer.recent_returns)[-10:]
    assert len(returns) == 10 and np.mean(returns) >= 0.9
    assert trainer.summary_log[-1]["Losses/Cloning Loss"] < trainer.summary_log[0]["Losses/Cloning Loss"] + 1e-6


def test_offline_bc_checkpoints_and_resumes(expert_demos, tmp_path):
    config = bc_config(expert_demos[True], max_steps=30)
    trainer = train(config, Simple1DEnvironment(True, seed=1), tmp_path)["Simple1D"]
    assert trainer.update_count > 0
    weights = trainer.model.get_weights()
    context = RunContext(summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=1, load_model=True)
    resumed = create_trainers(config, {"Simple1D": trainer.spec}, context)["Simple1D"]
    assert resumed.get_step == trainer.get_step and resumed.update_count == trainer.update_count
    for a, b in zip(weights, resumed.model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_offline_bc_refuses_a_demo_of_another_spec(expert_demos, tmp_path):
    with pytest.raises(demos.DemoError, match="not compatible.*discrete actions .*continuous actions"):
        train(bc_config(expert_demos[True]), Simple1DEnvironment(False, seed=1), tmp_path)


class TeacherAndStudent(Environment):
    """Two Simple1D behaviors in one environment: ``Teacher`` reports the actions it took
    (``previous_actions``), ``Student`` learns from them."""

    def __init__(self, seed: int) -> None:
        self.envs = {"Teacher": Simple1DEnvironment(True, seed=seed, behavior_name="Teacher"),
                     "Student": Simple1DEnvironment(True, seed=seed + 1, behavior_name="Student")}

    @property
    def behavior_specs(self):
        return {name: env.behavior_specs[name] for name, env in self.envs.items()}

    def reset(self, config: Optional[Mapping[str, float]] = None):
        return {name: env.reset()[name] for name, env in self.envs.items()}

    def step(self, actions):
        out = {name: env.step({name: actions[name]})[name] for name, env in self.envs.items()}
        out["Teacher"].previous_actions = np.asarray(actions["Teacher"], np.int32).reshape(1, -1)
        return out


class ScriptedTeacher:
    def get_action(self, result: StepResult) -> ActionInfo:
        action = expert(True)(result.observations[0])
        return ActionInfo(action, None, None, {Field.ACTIONS: action})


@pytest.mark.slow
def test_online_bc_imitates_the_teacher_behavior(tmp_path):
    manager = SimpleEnvManager(TeacherAndStudent(seed=3))
    manager.set_policy("Teacher", ScriptedTeacher())
    config = {"default": {"trainer": "ppo"},
              "Student": {"trainer": "online_bc", "brain_to_imitate": "Teacher", "batches_per_epoch": 5,
                          "batch_size": 32, "learning_rate": 3e-3, "max_steps": 500, "summary_freq": 100,
                          "hidden_units": 32, "time_horizon": 16}}
    trainers = train(config, manager, tmp_path)
    assert list(trainers) == ["Student"]  # the imitated behavior gets no trainer
    student = trainers["Student"]
    assert isinstance(student, OnlineBCTrainer) and student.update_count > 0
    returns = list(student.recent_returns)[-10:]
    assert len(returns) == 10 and np.mean(returns) >= 0.9


def test_online_bc_without_the_teachers_actions_is_an_error(tmp_path):
    class Silent(TeacherAndStudent):
        def step(self, actions):
            return {name: env.step({name: actions[name]})[name] for name, env in self.envs.items()}

    manager = SimpleEnvManager(Silent(seed=3))
    manager.set_policy("Teacher", ScriptedTeacher())
    config = {"default": {"trainer": "online_bc", "brain_to_imitate": "Teacher", "batches_per_epoch": 5,
                          "hidden_units": 8, "max_steps": 20}}
    with pytest.raises(TrainerError, match="Teacher.*previous_actions"):
        train(config, manager, tmp_path)


def first_step_at_099(config, discrete, tmp_path, seed=1337):
    """The trainer step at which the last 5 episodes all returned more than 0.99 (None: never)."""
    manager = SimpleEnvManager(Simple1DEnvironment(discrete, seed=seed))
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "s"), "id", str(tmp_path / "m"),
                                   1, True, False, seed)
    hit = []

    def progress(tc):
        trainer = tc.trainers["Simple1D"]
        last = list(trainer.recent_returns)[-5:]
        if not hit and len(last) == 5 and min(last) > 0.99:
            hit.append(trainer.get_step)

    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "id", save_freq=99999, training_seed=seed,
                      progress=progress, progress_freq=1).start_learning(manager)
    return hit[0] if hit else None


@pytest.mark.slow
@pytest.mark.parametrize("discrete", [True, False], ids=["discrete", "continuous"])
def test_ppo_with_bc_pretraining_learns_in_fewer_steps(discrete, expert_demos, tmp_path):
    ppo = {"batch_size": 16, "buffer_size": 64, "learning_rate": 5.0e-3, "max_steps": 1000, "summary_freq": 500,
           "jit_compile": False}  # short runs: XLA's compilation would cost more than it saves
    plain = first_step_at_099({"default": ppo}, discrete, tmp_path / "plain")
    pretraining = {"demo_path": expert_demos[discrete], "strength": 1.0, "steps": 0}
    with_bc = first_step_at_099({"default": {**ppo, "pretraining": pretraining}}, discrete, tmp_path / "bc")
    assert with_bc is not None
    assert plain is None or with_bc < plain, (with_bc, plain)


def test_cli_records_a_demo_from_a_trained_run(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 64\n  hidden_units: 16\n  num_layers: 1\n")
    base = [str(cfg), "--env", "Simple1D", "--results-dir", str(tmp_path), "--run-id", "r", "--seed", "1"]
    assert main(base + ["--steps", "100"]) == 0
    demo = tmp_path / "out" / "r.demo"
    demo.parent.mkdir()  # kerasrl creates no folder outside the run folder
    assert main(base + ["--record-demo", str(demo), "--steps", "40"]) == 2  # needs --resume
    assert "--resume" in capsys.readouterr().err
    assert main(base + ["--resume", "--record-demo", str(demo), "--steps", "40"]) == 0
    spec, buffer = demos.load(demo)
    assert spec.is_discrete and len(buffer[Field.ACTIONS]) == 40
    assert "Recorded 40 steps" in capsys.readouterr().out


def test_ppo_with_pretraining_checkpoints_the_bc_optimizer(expert_demos, tmp_path):
    config = {"default": {"batch_size": 16, "buffer_size": 32, "hidden_units": 16, "num_layers": 1, "max_steps": 80,
                          "time_horizon": 8,
                          "pretraining": {"demo_path": expert_demos[True], "strength": 0.5, "steps": 1000}}}
    trainer = train(config, Simple1DEnvironment(True, seed=1), tmp_path)["Simple1D"]
    assert trainer.bc_module is not None and trainer.bc_module.update_count > 0
    assert all(np.isfinite(trainer.stats["Losses/Pretraining Loss"])) and trainer.stats["Losses/Pretraining Loss"]
    iterations = int(trainer.bc_module.optimizer.iterations.numpy())
    assert iterations > 0
    context = RunContext(summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=1, load_model=True)
    resumed = create_trainers(config, {"Simple1D": trainer.spec}, context)["Simple1D"]
    assert int(resumed.bc_module.optimizer.iterations.numpy()) == iterations


def test_offline_bc_is_reproducible_under_a_seed(expert_demos, tmp_path):
    config = bc_config(expert_demos[False], max_steps=25)
    runs = [train(config, Simple1DEnvironment(False, seed=1), tmp_path / str(i))["Simple1D"] for i in range(2)]
    assert runs[0].update_count > 0
    for a, b in zip(runs[0].model.get_weights(), runs[1].model.get_weights()):
        np.testing.assert_array_equal(a, b)


MLAGENTS_OFFLINE_BC = """
default:
    trainer: offline_bc
    batch_size: 64
    summary_freq: 1000
    max_steps: 5.0e4
    batches_per_epoch: 10
    use_recurrent: false
    hidden_units: 128
    learning_rate: 3.0e-4
    num_layers: 2
    sequence_length: 32
    memory_size: 256
    demo_path: ./UnitySDK/Assets/Demonstrations/<Your_Demo_File>.demo

HallwayLearning:
    trainer: offline_bc
    max_steps: 5.0e5
    num_epoch: 5
    batch_size: 64
    batches_per_epoch: 5
    num_layers: 2
    hidden_units: 128
    sequence_length: 16
    use_recurrent: true
    memory_size: 256
    demo_path: ./UnitySDK/Assets/Demonstrations/Hallway.demo
"""

MLAGENTS_ONLINE_BC = """
default:
    trainer: online_bc
    brain_to_imitate: <Your_Brain_Asset_Name>
    batch_size: 64
    time_horizon: 64
    summary_freq: 1000
    max_steps: 5.0e4
    batches_per_epoch: 10
    use_recurrent: false
    hidden_units: 128
    learning_rate: 3.0e-4
    num_layers: 2
    sequence_length: 32
    memory_size: 256
"""


def test_mlagents_0_9_bc_configs_load_unchanged(tmp_path):
    from kerasrl.settings import load_trainer_config

    offline = tmp_path / "offline_bc_config.yaml"
    offline.write_text(MLAGENTS_OFFLINE_BC)
    hallway = load_trainer_config(str(offline)).settings_for("HallwayLearning")
    assert hallway.trainer == "offline_bc" and hallway.behavioral_cloning.batches_per_epoch == 5
    assert hallway.behavioral_cloning.demo_path.endswith("Hallway.demo") and hallway.network.sequence_length == 16
    online = tmp_path / "online_bc_config.yaml"
    online.write_text(MLAGENTS_ONLINE_BC)
    default = load_trainer_config(str(online)).default
    assert default.trainer == "online_bc" and default.behavioral_cloning.brain_to_imitate == "<Your_Brain_Asset_Name>"
    assert default.to_dict()["brain_to_imitate"] == "<Your_Brain_Asset_Name>"
