"""The BC trainers through the command line, and what a resume says about its checkpoints.

``trainer: offline_bc`` trains, resumes, acts (``--inference``) and exports through
``kerasrl-learn`` and ``kerasrl export`` like PPO; a resume says nothing false about the
checkpoint state file; a checkpoint that does not fit the configuration (``hidden_units``
changed) is one line naming the variable and both shapes, not "damaged", and no TensorFlow
warning. Each run is a subprocess, as a user's is, with the CLI's own TensorFlow log level.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from test_bc_trainers import ScriptedTeacher, TeacherAndStudent, expert
from test_faults_checkpoints import new_saver, save_history

from kerasrl import recording
from kerasrl.bc.trainer import OnlineBCTrainer
from kerasrl.cli import main
from kerasrl.cli.tools import main as tools_main
from kerasrl.configs import config_path
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.export import export_run
from kerasrl.settings import RunContext
from kerasrl.trainers import TrainerController, create_trainers

#: Lines that TensorFlow's C++ runtime writes while it loads, whatever the log level (absl's banner).
NATIVE_LOG = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:\d\d|WARNING: All log messages before absl::InitializeLog)")


def run(args, cwd):
    """``args`` as a subprocess in ``cwd``, with the CLI's own TensorFlow log level."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env)


def own_lines(stderr: str) -> list[str]:
    """The stderr lines that kerasrl or TensorFlow's Python side wrote."""
    return [line for line in stderr.splitlines() if line.strip() and not NATIVE_LOG.match(line)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A folder with a demo where the shipped config ``offline_bc`` looks for it, and a run ``bc``
    of that config trained by ``kerasrl-learn`` (in this process; results under the relative
    ``results``, as by default)."""
    folder = tmp_path_factory.mktemp("bc")
    demo = folder / yaml.safe_load(Path(config_path("offline_bc")).read_text())["default"]["demo_path"]
    recording.record(Simple1DEnvironment(True, seed=7), expert(True), 300, str(demo))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert learn_main("offline_bc", "--steps", "150") == 0  # it failed at the end, on BCLearner.trace_seconds
    return folder, "offline_bc"


def learn_args(config: str, *flags: str) -> list[str]:
    return [config, "--env", "Simple1D", "--run-id", "bc", "--seed", "1", *flags]


def learn_main(config: str, *flags: str) -> int:
    return main(learn_args(config, *flags))


def assert_clean(proc) -> None:
    """Exit 0, and nothing on stderr but TensorFlow's native banner."""
    assert proc.returncode == 0, proc.stderr
    assert own_lines(proc.stderr) == [], proc.stderr


def test_offline_bc_trains_resumes_acts_and_exports_through_the_cli(trained, monkeypatch, capsys, caplog):
    folder, config = trained
    monkeypatch.chdir(folder)
    models = folder / "results" / "bc" / "models" / "Simple1D"
    assert (models / "model-151.index").is_file()

    resumed = run(["kerasrl.cli", *learn_args(config, "--resume", "--steps", "250")], folder)
    assert_clean(resumed)  # no "did not list", no "damaged", no TensorFlow warning
    assert "Resumed Simple1D at step 151" in resumed.stdout and "final steps=251" in resumed.stdout
    assert "model-251" in (models / "checkpoint").read_text()

    assert learn_main(config, "--inference", "--steps", "40") == 0
    assert "final steps=40" in capsys.readouterr().out

    assert tools_main(["export", os.path.join("results", "bc")]) == 0
    assert "damaged" not in capsys.readouterr().err + caplog.text
    policy = tf.saved_model.load(str(models / "Simple1D.savedmodel"))
    obs = np.array([[-0.7], [-0.2], [0.3], [0.9]], np.float32)
    out = policy.signatures["deterministic"](vector_obs=tf.constant(obs), action_mask=tf.ones([4, 2]))
    np.testing.assert_array_equal(out["action"].numpy(), expert(True)(obs))  # it imitated the expert


def test_a_resume_with_another_hidden_units_says_so_in_one_line(trained):
    folder, _ = trained
    shipped = yaml.safe_load(Path(config_path("offline_bc")).read_text())
    shipped["default"]["hidden_units"] = 16
    other = "bc16.yaml"
    (folder / other).write_text(yaml.safe_dump(shipped))
    models = folder / "results" / "bc" / "models" / "Simple1D"
    before = sorted(p.name for p in models.iterdir())
    proc = run(["kerasrl.cli", *learn_args(other, "--resume", "--steps", "400")], folder)
    assert proc.returncode == 2, proc.stderr
    (line,) = own_lines(proc.stderr)
    assert line.startswith("kerasrl-learn: error: Checkpoint ") and "does not fit this configuration" in line
    assert "variable actor_critic/" in line and "[1, 32] there and [1, 16] here" in line
    assert "--force" in line and "--run-id" in line
    assert "damaged" not in proc.stderr  # and no TensorFlow warning: the error is the only line
    assert sorted(p.name for p in models.iterdir()) == before  # nothing saved over, nothing removed


def test_a_resume_in_a_relative_folder_does_not_rewrite_the_state_file(tmp_path, monkeypatch, caplog):
    """TensorFlow lists checkpoints by relative paths and joins them to the folder as given; a
    relative folder (``--results-dir`` defaults to ``results``) was joined twice, so every
    checkpoint looked unlisted and each resume said so, falsely. A state file that really
    misses one is still repaired, and said so."""
    monkeypatch.chdir(tmp_path)
    folder = os.path.join("results", "r", "models", "B")
    save_history(folder, (10, 20))
    state = Path(folder, "checkpoint")
    before = state.read_text()
    saver, model, optimizer = new_saver(folder)
    assert saver.restore() == (20, 2)
    saver.save(30, 3)
    assert "did not list" not in caplog.text
    assert state.read_text().count("all_model_checkpoint_paths") == 3 and 'model_checkpoint_path: "model-30"' in (
        state.read_text()), before
    state.write_text(before)  # lists 10 and 20, not 30
    new_saver(folder)[0].save(40, 4)
    assert "did not list model-30; now it does." in caplog.text


def test_online_bc_exports_from_its_behavior_record(tmp_path):
    """No built-in environment has a teacher behavior, so the run folder is made in-process (as
    ``kerasrl-learn`` lays it out); ``kerasrl export`` rebuilds the student's BC model from
    ``behavior.json`` and gives the trained student's actions."""
    manager = SimpleEnvManager(TeacherAndStudent(seed=3))
    manager.set_policy("Teacher", ScriptedTeacher())
    behaviors = {"default": {"trainer": "ppo"},
                 "Student": {"trainer": "online_bc", "brain_to_imitate": "Teacher", "batches_per_epoch": 2,
                             "batch_size": 16, "hidden_units": 8, "num_layers": 1, "max_steps": 80,
                             "time_horizon": 8}}
    run_dir = tmp_path / "run"
    context = RunContext(summaries_dir=str(run_dir), model_path=str(run_dir / "models"), seed=1, keep_checkpoints=1)
    trainers = create_trainers(behaviors, manager.behavior_specs, context)
    TrainerController(trainers, context.model_path, context.summaries_dir, "id", save_freq=99999,
                      training_seed=1).start_learning(manager)
    student = trainers["Student"]
    assert isinstance(student, OnlineBCTrainer) and student.update_count > 0
    (run_dir / "configuration.yaml").write_text(yaml.safe_dump({"behaviors": {"Student": student.parameters}}))
    paths = export_run(str(run_dir))
    assert list(paths) == ["Student"]
    policy = tf.saved_model.load(paths["Student"]["savedmodel"])
    obs = np.array([[-0.5], [0.5]], np.float32)
    out = policy.signatures["deterministic"](vector_obs=tf.constant(obs), action_mask=tf.ones([2, 2]))
    logits = student.model({"vector_obs": tf.constant(obs), "action_mask": tf.ones([2, 2])})["logits"].numpy()
    np.testing.assert_array_equal(out["action"].numpy()[:, 0], logits.argmax(-1))


def test_offline_bc_without_its_demo_names_demo_path_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["offline_bc", "--env", "Simple1D", "--run-id", "nodemo", "--steps", "10"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "demo_path demos/Simple1D.demo does not exist" in line and str(tmp_path) in line and "--record-demo" in line
    assert not (tmp_path / "results" / "nodemo" / "models" / "Simple1D").exists()
