"""Writes that fail (a full disk, a folder that cannot be written) are one line, exit 2, and lose
nothing already saved: a failed checkpoint leaves no ``_temp`` folder and the earlier checkpoints
intact, a failed export leaves no temporary folder, and a ``models`` folder that cannot be written
is reported before training. Also: an unreadable state file is reported once, the threaded
rejection gives only advice that works, an export without tf2onnx says ONNX was skipped, and a
timers file, buffer or demo that cannot be written is one message with the OS's cause.

The failures are simulated without root: TensorFlow's checkpoint write and SavedModel save are
replaced by ones that leave what the real ones leave on a full disk, then raise its error.
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import re
import resource
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from test_faults_checkpoints import assert_filled, fill, new_saver

from kerasrl import demos
from kerasrl import export as export_module
from kerasrl.buffer import AgentBuffer, BufferException
from kerasrl.cli import main, tools
from kerasrl.cli import train as train_module
from kerasrl.cli.run_folder import RETURNS
from kerasrl.demos import DemoError
from kerasrl.envs.env_manager import SimpleEnvManager
from kerasrl.exception import EnvironmentException, TrainerConfigError, TrainerError
from kerasrl.export import export_policy
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.sac.replay import ReplayBuffer
from kerasrl.settings import NetworkSettings
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers import controller as controller_module
from kerasrl.trainers import initialize_trainers
from kerasrl.trainers.checkpoint import CheckpointWriteError, verify_checkpoint

CONFIG = "default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n  num_layers: 1\n"
SAC_CONFIG = ("default:\n  trainer: sac\n  batch_size: 16\n  buffer_size: 256\n  buffer_init_steps: 20\n  hidden_units: 8\n"
              "  num_layers: 1\n  save_replay_buffer: true\n")
FULL = "No space left on device"


def _full_disk_write(fail_from: int):
    """A ``tf.train.Checkpoint._write`` that, from step ``fail_from``, leaves what a save that
    ran out of space leaves (``model-N_temp/``, a data file, TF's state temporary), then raises."""
    real = tf.train.Checkpoint._write

    def write(self, prefix, options=None):
        if int(prefix.rsplit("-", 1)[1]) < fail_from:
            return real(self, prefix, options=options)
        os.makedirs(f"{prefix}_temp")
        Path(f"{prefix}_temp/part-00000-of-00001.data-00000-of-00001.tempstate123").write_bytes(b"x")
        Path(f"{prefix}.data-00000-of-00001").write_bytes(b"x")
        Path(os.path.dirname(prefix), "checkpoint.tmp0a1b").write_text("model")
        raise tf.errors.ResourceExhaustedError(None, None, f"{prefix}_temp/part-00000; {FULL} [Op:SaveV2]")

    return write


@contextlib.contextmanager
def files_cut_at(size: int):
    """Writes that would make a file longer than ``size`` bytes fail in the OS (``EFBIG``, as
    under ``ulimit -f``), as writes fail on a full disk; SIGXFSZ is ignored meanwhile."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def learn(tmp_path: Path, *argv: str, config: str = CONFIG) -> subprocess.CompletedProcess:
    """``kerasrl-learn`` on Simple1D with a tiny config, run by its ``main`` in this process."""
    (tmp_path / "cfg.yaml").write_text(config)
    out, err, previous = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(tmp_path / "cfg.yaml"), "--env", "Simple1D", "--seed", "1", "--results-dir",
                           str(tmp_path / "results"), "--run-id", "r", *argv])
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("kerasrl-learn: error: ") and run.stderr.count("\n") == 1, run.stderr
    return run.stderr


def assert_returns_recorded(tmp_path: Path, run: subprocess.CompletedProcess, steps: int) -> None:
    """The run's last stdout line is the final summary of at least ``steps`` steps, and returns.json holds that step's returns."""
    final = re.match(r"final steps=(\d+) mean_return=", run.stdout.splitlines()[-1])
    assert final and int(final.group(1)) >= steps, run.stdout
    returns = json.loads((tmp_path / "results" / "r" / RETURNS).read_text())
    assert returns["Simple1D"]["step"] == int(final.group(1)) and returns["Simple1D"]["returns"], returns


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if "_temp" in p.name or ".tmp" in p.name or "tempstate" in p.name)


# -- the saver ---------------------------------------------------------------------------
def saved_at_step_10(folder: Path):
    """A saver over a fresh model and optimizer (returned with them) that wrote its first
    checkpoint in ``folder``: step 10, 1 update, every variable filled for step 10."""
    saver, model, optimizer = new_saver(folder)
    fill(model, optimizer, 10)
    saver.save(10, 1)
    return saver, model, optimizer


def test_a_checkpoint_that_cannot_be_written_is_one_error_and_leaves_the_earlier_ones(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    saver, model, optimizer = saved_at_step_10(folder)
    (folder / "notes.txt").write_text("mine")
    monkeypatch.setattr(tf.train.Checkpoint, "_write", _full_disk_write(fail_from=20))
    fill(model, optimizer, 20)
    with pytest.raises(CheckpointWriteError) as failure:
        saver.save(20, 2)
    message = str(failure.value)
    assert "\n" not in message and str(folder) in message and f"{FULL} (ResourceExhaustedError)" in message
    assert "model-20" in message and "[Op:" not in message
    assert leftovers(folder) == [] and not list(folder.glob("model-20*"))
    assert (folder / "notes.txt").read_text() == "mine"  # only what the save made is removed
    verify_checkpoint(str(folder / "model-10"))
    restored, model2, optimizer2 = new_saver(folder)
    assert restored.restore() == (10, 1)
    assert_filled(model2, optimizer2, 10)
    monkeypatch.undo()  # space again: the same saver goes on
    fill(model, optimizer, 30)
    saver.save(30, 3)
    state = tf.train.get_checkpoint_state(str(folder))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model-10", "model-30"]


def sac_trainer(tmp_path: Path):
    """A small SAC trainer that checkpoints its replay, in ``tmp_path / "m"``."""
    config = {"default": {"trainer": "sac", "batch_size": 16, "buffer_size": 64, "hidden_units": 8, "num_layers": 1,
                          "save_replay_buffer": True}}
    (trainer,) = initialize_trainers(config, {"B": BehaviorSpec(((3,),), "continuous", (2,))}, str(tmp_path / "s"),
                                     "run", str(tmp_path / "m"), keep_checkpoints=5, train_model=True,
                                     load_model=False, seed=0).values()
    return trainer


def test_a_failed_sac_save_removes_the_replay_it_wrote(tmp_path, monkeypatch):
    """The replay is written before the checkpoint; when the checkpoint then fails, the replay
    file of that step goes with it, and the earlier checkpoint keeps its own replay."""
    trainer = sac_trainer(tmp_path)
    folder = Path(trainer.model_path)
    trainer.step = 10
    trainer.save_model()
    (folder / "model-30.replay.h5").write_text("not this save's")
    monkeypatch.setattr(tf.train.Checkpoint, "_write", _full_disk_write(fail_from=20))
    for step in (20, 30):
        trainer.step = step
        with pytest.raises(CheckpointWriteError, match=f"model-{step} could not be written"):
            trainer.save_model()
    assert sorted(p.name for p in folder.glob("*.replay.h5*")) == ["model-10.replay.h5", "model-30.replay.h5"]
    assert leftovers(folder) == [] and (folder / "model-10.index").exists()


def test_a_replay_that_cannot_be_written_is_a_checkpoint_write_error_and_changes_nothing(tmp_path):
    """A replay write that the OS refuses (past a file-size limit, as on a full disk) is one
    CheckpointWriteError naming the replay file, its folder and the cause, as a failed checkpoint
    is: the folder is as before (no replay, temporary file or checkpoint of that step, the earlier
    checkpoint and its replay untouched), and with room again the next save goes on."""
    trainer = sac_trainer(tmp_path)
    folder = Path(trainer.model_path)
    trainer.replay.add({"obs": np.arange(24, dtype=np.float32).reshape(8, 3)})
    trainer.step = 10
    trainer.save_model()
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    trainer.step = 20
    with files_cut_at(1024), pytest.raises(CheckpointWriteError) as failure:
        trainer.save_model()
    message = str(failure.value)
    assert message.startswith(f"Replay buffer model-20.replay.h5 could not be written in {folder}: File too large "
                              "(OSError). The checkpoints written before it are intact") and "\n" not in message
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    trainer.step = 30
    trainer.save_model()
    assert (folder / "model-30.index").exists() and len(ReplayBuffer.load(str(folder / "model-30.replay.h5"))) == 8


def incompressible_buffer() -> AgentBuffer:
    """About 64 KB of rows that gzip cannot shrink below a 1 KB file-size limit."""
    buffer = AgentBuffer()
    buffer["obs"] = np.random.default_rng(0).standard_normal((2000, 8)).astype(np.float32)
    return buffer


def test_a_buffer_that_cannot_be_written_is_one_error_with_the_oss_cause_and_changes_nothing(tmp_path, capfd):
    """``AgentBuffer.save_to_file`` past a file-size limit (as on a full disk) raises one
    BufferException caused by the OS's error, prints nothing (no HDF5 error stack), leaves no
    temporary file and the earlier file whole."""
    path = tmp_path / "buffer.h5"
    small = AgentBuffer()
    small["obs"] = np.zeros((2, 8), np.float32)
    small.save_to_file(path)
    before = path.read_bytes()
    capfd.readouterr()
    with files_cut_at(1024), pytest.raises(BufferException) as failure:
        incompressible_buffer().save_to_file(path)
    assert isinstance(failure.value.__cause__, OSError) and failure.value.__cause__.errno == errno.EFBIG
    assert "File too large" in str(failure.value) and capfd.readouterr() == ("", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buffer.h5"] and path.read_bytes() == before
    incompressible_buffer().save_to_file(path)  # with room again
    loaded = AgentBuffer()
    loaded.load_from_file(path)
    np.testing.assert_array_equal(loaded["obs"].array, incompressible_buffer()["obs"].array)


def test_a_demo_that_cannot_be_written_is_one_demo_error_with_the_oss_cause(tmp_path, capfd):
    """Recording a demo past a file-size limit (as on a full disk) is one DemoError naming the
    file and the OS's cause, prints nothing and leaves no file."""
    path = tmp_path / "expert.demo"
    spec = BehaviorSpec(((8,),), "continuous", (1,))
    capfd.readouterr()
    with files_cut_at(1024), pytest.raises(DemoError) as failure:
        demos.write(path, spec, incompressible_buffer())
    message = str(failure.value)
    assert message.startswith(f"Unable to write the demonstration {path}: ") and "File too large" in message
    assert "\n" not in message and isinstance(failure.value.__cause__, OSError)
    assert capfd.readouterr() == ("", "") and list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_made_is_one_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    saver, _, _ = new_saver(blocker / "models")
    with pytest.raises(CheckpointWriteError, match=rf"could not be written in {blocker / 'models'}: Not a directory"):
        saver.save(10, 1)


def test_an_unreadable_state_file_is_reported_once_and_by_kerasrl_only(tmp_path, caplog):
    folder = tmp_path / "models"
    saved_at_step_10(folder)
    (folder / "checkpoint").write_text("garbage {{\n")
    tf_logger = logging.getLogger("tensorflow")
    tf_logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING):
            again, model2, optimizer2 = new_saver(folder)
            assert again.restore() == (10, 1)
            fill(model2, optimizer2, 20)
            again.save(20, 2)
    finally:
        tf_logger.removeHandler(caplog.handler)
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "Checkpoint ignored" in m], messages
    unreadable = [m for m in messages if "is unreadable" in m]
    assert len(unreadable) == 1 and "ParseError" in unreadable[0], messages


# -- the command line --------------------------------------------------------------------
def test_kerasrl_learn_on_a_full_disk_is_one_line_and_keeps_the_earlier_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(tf.train.Checkpoint, "_write", _full_disk_write(fail_from=100))
    run = learn(tmp_path, "--steps", "200", "--save-freq", "50", "--keep-checkpoints", "10")
    err = one_line_error(run)
    models = tmp_path / "results" / "r" / "models" / "Simple1D"
    assert f"could not be written in {models}: {FULL} (ResourceExhaustedError)" in err
    assert leftovers(models) == []
    saved = sorted(models.glob("model-*.index"))
    assert saved and all(int(p.name[6:-6]) < 100 for p in saved)
    for index in saved:
        verify_checkpoint(str(index)[: -len(".index")])


def test_kerasrl_learn_with_a_replay_that_cannot_be_written_is_one_line_and_keeps_the_earlier_checkpoints(tmp_path,
                                                                                                         monkeypatch):
    """SAC with save_replay_buffer: the replay write of step 100 fails in the OS; the error is
    one line naming the replay file and the cause, exit 2, and each earlier checkpoint keeps its replay."""
    real_save = ReplayBuffer.save

    def refused_from_step_100(self, path):
        step = int(re.search(r"model-(\d+)\.replay\.h5$", path).group(1))
        with files_cut_at(1024) if step >= 100 else contextlib.nullcontext():
            real_save(self, path)

    monkeypatch.setattr(ReplayBuffer, "save", refused_from_step_100)
    run = learn(tmp_path, "--steps", "200", "--save-freq", "50", "--keep-checkpoints", "10", config=SAC_CONFIG)
    err = one_line_error(run)
    models = tmp_path / "results" / "r" / "models" / "Simple1D"
    assert f"Replay buffer model-100.replay.h5 could not be written in {models}: File too large (OSError)" in err
    assert leftovers(models) == []
    saved = sorted(p.name[: -len(".index")] for p in models.glob("model-*.index"))
    assert saved == ["model-50"] and sorted(p.name for p in models.glob("*.replay.h5")) == ["model-50.replay.h5"]
    verify_checkpoint(str(models / "model-50"))
    assert len(ReplayBuffer.load(str(models / "model-50.replay.h5"))) > 0


def _full_disk_saved_model(obj, path, signatures=None, options=None):
    """A ``tf.saved_model.save`` that leaves what one that ran out of space leaves, then raises."""
    os.makedirs(os.path.join(path, "variables"))
    Path(path, "variables", "variables.data-00000-of-00001").write_bytes(b"x")
    raise tf.errors.ResourceExhaustedError(None, None, f"{path}/variables/variables_temp; {FULL}")


def _checkpoint_error_on_export(trainers):
    raise CheckpointWriteError(f"Checkpoint model-100 could not be written in models: {FULL} (OSError).")


def test_an_export_on_a_full_disk_is_one_line_and_leaves_no_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tf.saved_model, "save", _full_disk_saved_model)
    err = one_line_error(learn(tmp_path, "--steps", "100"))
    models = tmp_path / "results" / "r" / "models" / "Simple1D"
    assert f"Exporting Simple1D to {models} failed: {FULL} (ResourceExhaustedError)" in err
    assert leftovers(models) == [] and not (models / "Simple1D.savedmodel").exists()
    assert list(models.glob("model-*.index"))  # the final checkpoint was written before the export
    assert (tmp_path / "results" / "r" / "timers.json").exists()  # the run's end went on after the export failed


def timers_cut_at(size: int, monkeypatch) -> None:
    """The end-of-run timers write fails in the OS (past a file-size limit of ``size`` bytes, as on a full disk)."""
    real = controller_module.write_timer_tree

    def refused(path, timer_stack=None):
        with files_cut_at(size):
            real(path, timer_stack)

    monkeypatch.setattr(controller_module, "write_timer_tree", refused)


def timers_warnings(caplog) -> list[str]:
    """The warnings about the timers (others depend on what ran before in this process)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "timers" in r.getMessage()]


def test_timers_that_cannot_be_written_are_one_warning_naming_the_file_and_the_cause(tmp_path, monkeypatch, caplog):
    """The run otherwise succeeds (exit 0); its one warning (a line on stderr) names timers.json
    and the OS's cause, and no timers file or temporary file is left."""
    timers_cut_at(64, monkeypatch)
    run = learn(tmp_path, "--steps", "100")
    folder = tmp_path / "results" / "r"
    assert run.returncode == 0, run.stderr
    assert timers_warnings(caplog) == [f"The timers could not be written to {folder / 'timers.json'}: "
                                       "File too large (OSError)."]
    assert not (folder / "timers.json").exists() and leftovers(folder) == []
    assert_returns_recorded(tmp_path, run, 100)


def test_a_full_disk_at_the_end_of_a_run_is_the_runs_one_line_only(tmp_path, monkeypatch, caplog):
    """The export and the timers both fail on a full disk: stderr is the export's one-line error
    alone (the timers' failure is no warning, only a debug message naming the file and the
    cause), and no timers file or temporary file is left."""
    monkeypatch.setattr(tf.saved_model, "save", _full_disk_saved_model)
    timers_cut_at(64, monkeypatch)
    with caplog.at_level(logging.DEBUG, logger="kerasrl"):
        err = one_line_error(learn(tmp_path, "--steps", "100"))
    assert timers_warnings(caplog) == []
    assert f"timers could not be written to {tmp_path / 'results' / 'r' / 'timers.json'}: File too large" in caplog.text
    folder = tmp_path / "results" / "r"
    assert f"Exporting Simple1D to {folder / 'models' / 'Simple1D'} failed: {FULL}" in err
    assert not (folder / "timers.json").exists() and leftovers(folder) == []


@pytest.mark.parametrize("target,name,failing,said", [
    (tf.saved_model, "save", _full_disk_saved_model, f"Exporting Simple1D to {{models}} failed: {FULL}"),
    (train_module, "export_trainers", _checkpoint_error_on_export, "Checkpoint model-100 could not be written"),
], ids=["export write error", "CheckpointWriteError"])
def test_a_failed_export_after_training_still_records_the_returns_and_the_final_line(tmp_path, monkeypatch, target,
                                                                                      name, failing, said):
    """Training ended before the export failed: returns.json and the final summary line are
    written, and only then the export's one-line error and exit 2."""
    monkeypatch.setattr(target, name, failing)
    run = learn(tmp_path, "--steps", "100")
    err = one_line_error(run)
    assert said.format(models=tmp_path / "results" / "r" / "models" / "Simple1D") in err
    assert_returns_recorded(tmp_path, run, 100)


def test_an_environment_that_fails_to_close_after_training_still_records_the_returns_and_the_final_line(tmp_path,
                                                                                                       monkeypatch):
    """The environment fails as it is closed, after the final checkpoint and the export: returns.json
    and the final line are written, then the environment's one-line error (training had finished:
    no advice to resume) and exit 2."""
    real_close = SimpleEnvManager.close

    def failing_close(self):
        real_close(self)
        raise EnvironmentException("The environment could not be closed: its process is gone.")

    monkeypatch.setattr(SimpleEnvManager, "close", failing_close)
    run = learn(tmp_path, "--steps", "100")
    assert one_line_error(run) == "kerasrl-learn: error: The environment could not be closed: its process is gone.\n"
    assert_returns_recorded(tmp_path, run, 100)
    assert (tmp_path / "results" / "r" / "models" / "Simple1D" / "Simple1D.weights.h5").exists()  # exported before



def test_a_models_folder_that_cannot_be_written_is_reported_before_training(tmp_path, monkeypatch):
    assert learn(tmp_path, "--steps", "60").returncode == 0
    models = tmp_path / "results" / "r" / "models" / "Simple1D"
    before = sorted(p.name for p in models.iterdir())
    real = tempfile.TemporaryFile

    def immutable(*args, **kwargs):  # what chattr +i on models/Simple1D does to a new file
        if kwargs.get("dir") == str(models):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", immutable)
    run = learn(tmp_path, "--steps", "200", "--resume")
    err = one_line_error(run)
    assert f"cannot be written: {models}: Operation not permitted" in err
    assert "Resumed" not in run.stdout and sorted(p.name for p in models.iterdir()) == before


# -- the threaded rejection ----------------------------------------------------------------
@pytest.mark.parametrize("spec,network,advice", [
    (BehaviorSpec(((20, 20, 3),), "discrete", (2,)),
     {"use_recurrent": True, "memory_size": 16, "sequence_length": 4}, "set threaded: false."),
    (BehaviorSpec(((4,),), "discrete", (2,)), {"inference": "tf"}, "set inference: auto or threaded: false."),
])
def test_the_threaded_rejection_gives_only_advice_that_works(tmp_path, spec, network, advice):
    config = {"default": {"batch_size": 16, "buffer_size": 64, "hidden_units": 8, "num_layers": 1, "threaded": True,
                          **network}}
    with pytest.raises(TrainerConfigError) as rejected:
        initialize_trainers(config, {"B": spec}, str(tmp_path / "s"), "run", str(tmp_path / "m"), keep_checkpoints=1,
                            train_model=True, load_model=False, seed=0)
    message = str(rejected.value)
    assert message.startswith("Behavior B: threaded: true acts with the numpy mirror") and message.endswith(advice)
    if "inference" not in network:
        assert "inference: auto" not in message


# -- ONNX skipped --------------------------------------------------------------------------
def test_an_export_without_tf2onnx_says_once_that_onnx_was_skipped(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(export_module, "onnx_available", lambda: False)
    monkeypatch.setattr(export_module, "_onnx_skip_told", False, raising=False)
    model = ActorCritic(BehaviorSpec(((3,),), "discrete", (2,)), network=NetworkSettings(hidden_units=8), seed=0)
    export_policy(model, str(tmp_path / "a"), "a", onnx=False)
    assert "ONNX" not in capsys.readouterr().out  # --no-onnx: asked for, nothing to say
    export_policy(model, str(tmp_path / "b"), "b")
    export_policy(model, str(tmp_path / "c"), "c")
    out = capsys.readouterr()
    assert out.out.count("ONNX export skipped") == 1 and "pip install 'kerasrl[onnx]'" in out.out and out.err == ""


def test_kerasrl_learn_and_kerasrl_export_say_that_onnx_was_skipped(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(export_module, "onnx_available", lambda: False)
    monkeypatch.setattr(export_module, "_onnx_skip_told", False, raising=False)
    run = learn(tmp_path, "--steps", "60")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert "kerasrl: ONNX export skipped: tf2onnx is not installed; pip install 'kerasrl[onnx]'" in run.stdout
    monkeypatch.setattr(export_module, "_onnx_skip_told", False)  # a new process
    assert tools.main(["export", str(tmp_path / "results" / "r")]) == 0
    out = capsys.readouterr()
    assert out.out.count("ONNX export skipped") == 1 and "Simple1D.savedmodel" in out.out and out.err == ""


def test_kerasrl_export_into_a_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    assert learn(tmp_path, "--steps", "60").returncode == 0
    models = tmp_path / "results" / "r" / "models" / "Simple1D"
    def denied(obj, path, signatures=None, options=None):
        raise tf.errors.PermissionDeniedError(None, None, f"{path}/saved_model.pb; Permission denied")

    monkeypatch.setattr(tf.saved_model, "save", denied)
    assert tools.main(["export", str(tmp_path / "results" / "r"), "--no-onnx"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"Exporting Simple1D to {models} failed: Permission denied (PermissionDeniedError)" in err
    assert leftovers(models) == []


def test_export_trainers_names_the_weights_file_failure(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")

    class Trainer:
        writes_results = True
        model_path = str(blocker / "models")
        trained_model = ActorCritic(BehaviorSpec(((3,),), "discrete", (2,)), network=NetworkSettings(hidden_units=8))

    with pytest.raises(TrainerError, match=rf"Exporting B to {blocker / 'models'} failed: Not a directory"):
        export_module.export_trainers({"B": Trainer()})
