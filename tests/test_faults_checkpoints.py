"""Checkpoints are complete or absent: damaged files, killed saves and Ctrl-C during a save.

Each test saves real checkpoints of a small Keras model and its Adam optimizer with
``CheckpointSaver``, damages them as a crash or a bad disk would, and restores with a fresh
saver (as a resumed run does).
"""
import logging
import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasrl.exception import UnityTrainerException
from kerasrl.trainers import checkpoint as checkpoint_module
from kerasrl.trainers.checkpoint import CheckpointSaver, export_weights, verify_checkpoint

STEPS = (10, 20, 30, 40, 50)
DATA = "data-00000-of-00001"


def new_saver(folder: Path, keep: int = 5, width: int = 8):
    """A saver over a fresh ``width``-unit model and its built Adam optimizer."""
    model = keras.Sequential([keras.Input((width,)), keras.layers.Dense(width), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    return CheckpointSaver(str(folder), keep, model=model, optimizer=optimizer), model, optimizer


def variables(model, optimizer) -> list:
    return list(model.weights) + list(optimizer.variables)


def fill(model, optimizer, step: int) -> None:
    """Every variable holds a value that identifies ``step`` (and the variable)."""
    for i, v in enumerate(variables(model, optimizer)):
        v.assign(np.full(v.shape, step + i, dtype=v.dtype))


def assert_filled(model, optimizer, step: int) -> None:
    for i, v in enumerate(variables(model, optimizer)):
        np.testing.assert_array_equal(np.asarray(v.numpy()), np.full(v.shape, step + i), err_msg=v.path)


def save_history(folder: Path, steps=STEPS, keep: int = 5) -> None:
    saver, model, optimizer = new_saver(folder, keep)
    for step in steps:
        fill(model, optimizer, step)
        saver.save(step, step // 10)


def restore(folder: Path, keep: int = 5):
    """``(step, updates)`` restored by a fresh saver, after checking every variable's value."""
    saver, model, optimizer = new_saver(folder, keep)
    step, updates = saver.restore()
    assert_filled(model, optimizer, step)
    assert updates == step // 10
    return step, updates


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbage(path: Path, size: int = 300) -> None:
    path.write_bytes(random.Random(path.name).randbytes(size))


def warnings_of(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records
                     if r.name == "kerasrl.trainers" and r.levelno == logging.WARNING)


@pytest.fixture
def folder(tmp_path) -> Path:
    save_history(tmp_path / "models")
    return tmp_path / "models"


def test_intact_checkpoints_restore_the_newest(folder, caplog):
    assert restore(folder) == (50, 5)
    assert warnings_of(caplog) == ""
    assert sorted(p.name for p in folder.glob("*.index")) == [f"model-{s}.index" for s in STEPS]


@pytest.mark.parametrize("damage, damaged_file", [
    (lambda d: truncate(d / f"model-50.{DATA}"), f"model-50.{DATA}"),
    (lambda d: garbage(d / "model-50.index"), "model-50.index"),
    (lambda d: (d / "model-50.index").write_bytes(b""), "model-50.index"),
    (lambda d: (d / f"model-50.{DATA}").unlink(), f"model-50.{DATA}"),
], ids=["truncated_data", "garbage_index", "empty_index", "missing_data"])
def test_damaged_newest_falls_back_to_previous(folder, caplog, damage, damaged_file):
    damage(folder)
    assert restore(folder) == (40, 4)
    assert str(folder / damaged_file) in warnings_of(caplog)


@pytest.mark.parametrize("state", [b"", b"\xf6\x01garbage\x00" * 20, b'model_checkpoint_path: "model-5', b"garbage {"],
                         ids=["empty", "binary", "cut_short", "text"])
def test_unreadable_state_file_still_restores_newest(folder, caplog, state):
    (folder / "checkpoint").write_bytes(state)
    assert restore(folder) == (50, 5)
    assert str(folder / "checkpoint") in warnings_of(caplog)


def test_every_checkpoint_damaged_is_one_error_and_only_older_ones_are_promised(folder, caplog):
    for step in STEPS:
        truncate(folder / f"model-{step}.{DATA}")
    with pytest.raises(UnityTrainerException, match=f"^No intact checkpoint in {folder}: model-50.{DATA} .*; "
                                                    f"model-{STEPS[0]}.{DATA} "):
        restore(folder)
    lines = warnings_of(caplog).splitlines()
    assert len(lines) == len(STEPS) and all(line.endswith("trying an older checkpoint.") for line in lines[:-1])
    assert f"model-{STEPS[0]}.{DATA}" in lines[-1] and lines[-1].endswith("it was the oldest.")


def test_unreadable_state_file_and_damaged_newest(folder, caplog):
    garbage(folder / "checkpoint")
    truncate(folder / f"model-50.{DATA}")
    assert restore(folder) == (40, 4)
    assert str(folder / "checkpoint") in warnings_of(caplog) and f"model-50.{DATA}" in warnings_of(caplog)


def leave_killed_save(folder: Path, step: int) -> None:
    """What a save of ``step`` killed at various moments leaves: TF's temporary folder (holding a
    whole checkpoint of step 50 under its temporary names), a temporary state file pointing at
    it, and a data file without its index."""
    temp = folder / f"model-{step}_temp"
    temp.mkdir()
    (temp / f"part-00000-of-00001.{DATA}").write_bytes((folder / f"model-50.{DATA}").read_bytes())
    (temp / "part-00000-of-00001.index").write_bytes((folder / "model-50.index").read_bytes())
    (temp / "part-00000-of-00001.index.tempstate123456789").write_bytes(b"half")
    (folder / "checkpoint.tmp0123456789abcdef0123456789abcdef").write_text(
        f'model_checkpoint_path: "model-{step}_temp/part-00000-of-00001"\n')
    (folder / f"model-{step + 1}.{DATA}").write_bytes(b"orphan")


def test_stale_temporaries_are_ignored_then_removed_at_the_first_save(folder, caplog):
    leave_killed_save(folder, 60)
    saver, model, optimizer = new_saver(folder)
    assert saver.restore() == (50, 5)
    assert_filled(model, optimizer, 50)
    fill(model, optimizer, 60)
    saver.save(60, 6)
    assert sorted(os.listdir(folder)) == ["checkpoint"] + sorted(
        f"model-{s}.{ext}" for s in (20, 30, 40, 50, 60) for ext in ("index", DATA))
    assert "model-60_temp" in warnings_of(caplog)
    assert restore(folder) == (60, 6)


def test_index_cut_short_by_a_kill_with_an_unreadable_state_file(folder, caplog):
    """Killed while TF wrote ``model-60.index`` in place, and the state file lost: the globbed
    ``model-60`` is tried first, found damaged and skipped."""
    (folder / f"model-60.{DATA}").write_bytes((folder / f"model-50.{DATA}").read_bytes())
    (folder / "model-60.index").write_bytes((folder / "model-50.index").read_bytes()[:100])
    (folder / "checkpoint").write_bytes(b"")
    assert restore(folder) == (50, 5)
    assert str(folder / "model-60.index") in warnings_of(caplog)


def test_first_save_after_an_unreadable_state_file_adopts_the_old_checkpoints(folder):
    garbage(folder / "checkpoint")
    saver, model, optimizer = new_saver(folder)
    assert saver.restore() == (50, 5)
    fill(model, optimizer, 60)
    saver.save(60, 6)
    state = tf.train.get_checkpoint_state(str(folder))
    kept = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    assert kept == [f"model-{s}" for s in (20, 30, 40, 50, 60)]
    assert sorted(p.name for p in folder.glob("*.index")) == [f"model-{s}.index" for s in (20, 30, 40, 50, 60)]
    assert restore(folder) == (60, 6)


def test_every_checkpoint_damaged_names_each_file(folder, caplog):
    for step in STEPS[:-1]:
        truncate(folder / f"model-{step}.{DATA}")
    garbage(folder / "model-50.index")
    with pytest.raises(UnityTrainerException) as e:
        new_saver(folder)[0].restore()
    message = str(e.value)
    assert "\n" not in message and str(folder) in message
    for step in STEPS[:-1]:
        assert f"model-{step}.{DATA} (IndexError" in message
    assert "model-50.index (" in message
    assert len(caplog.records) >= len(STEPS)


def test_no_checkpoint_keeps_the_run_id_message(tmp_path):
    for folder in (tmp_path / "missing", tmp_path):
        with pytest.raises(UnityTrainerException, match="could not be found. Make sure you specified the right"):
            new_saver(folder)[0].restore()


def test_a_checkpoint_that_does_not_fit_stops_the_restore_before_assigning(folder, caplog):
    """``model-60`` holds the model but no optimizer: an intact checkpoint that does not fit
    is one error naming what it lacks, not "damaged", and no variable is assigned from it
    (nor from an older checkpoint, which would silently undo training)."""
    model = new_saver(folder)[1]
    for i, v in enumerate(model.weights):
        v.assign(np.full(v.shape, -1000.0 - i, dtype=np.float32))
    CheckpointSaver(str(folder), 5, model=model).save(60, 6)
    saver, fresh, optimizer = new_saver(folder)
    fill(fresh, optimizer, 7)
    with pytest.raises(UnityTrainerException, match=r"model-60 does not fit this configuration: it has no optimizer/"):
        saver.restore()
    assert_filled(fresh, optimizer, 7)
    assert "damaged" not in warnings_of(caplog)


def test_a_checkpoint_of_other_shapes_names_the_variable_and_both_shapes(folder, caplog):
    saver = new_saver(folder, width=16)[0]
    with pytest.raises(UnityTrainerException) as error:
        saver.restore()
    message = str(error.value)
    assert "model-50 does not fit this configuration: variable " in message and "\n" not in message
    assert "[8, 8] there and [16, 16] here" in message and "--force" in message and "--run-id" in message
    assert "damaged" not in warnings_of(caplog)


class Branches(keras.Model):
    """A model whose action layers sit in a list, as ``ActorCritic``'s branches do: the checkpoint
    holds their weights only by position, in the optimizer's list of the model's weights."""

    def __init__(self, action_bias: bool, branches: int = 1) -> None:
        super().__init__(name="actor_critic")
        self.hidden = keras.layers.Dense(16, name="hidden")
        self.branch_logits = [keras.layers.Dense(2, use_bias=action_bias, name=f"branch_{k}") for k in range(branches)]
        self.value = keras.layers.Dense(1, name="value")

    def call(self, x):
        h = self.hidden(x)
        return [branch(h) for branch in self.branch_logits], self.value(h)


def branches_saver(folder: Path, action_bias: bool, branches: int = 1) -> CheckpointSaver:
    model = Branches(action_bias, branches)
    model(np.zeros((1, 4), np.float32))
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    return CheckpointSaver(str(folder), 1, model=model, optimizer=optimizer)


@pytest.mark.parametrize("saved_bias, branches, counts, lacking", [
    (False, 1, "it holds 5 model weights and this configuration 6", "the checkpoint lacks actor_critic/branch_0/bias"),
    (True, 1, "it holds 6 model weights and this configuration 5",
     "this configuration lacks the checkpoint's variable of shape [2] after actor_critic/branch_0/kernel"),
    (False, 2, "it holds 6 model weights and this configuration 8", "the checkpoint lacks actor_critic/branch_0/bias"),
], ids=["bias_added", "bias_removed", "two_biases_added"])
def test_a_checkpoint_with_another_number_of_weights_says_so(tmp_path, caplog, saved_bias, branches, counts, lacking):
    """A weight added or removed (``action_bias``) shifts every later one in the optimizer's list:
    the error gives both counts and the first weight one side lacks, not a reshape of the
    variable that happens to sit at that position."""
    branches_saver(tmp_path, saved_bias, branches).save(10, 1)
    with pytest.raises(UnityTrainerException) as error:
        branches_saver(tmp_path, not saved_bias, branches).restore()
    message = str(error.value)
    assert f"model-10 does not fit this configuration: {counts} ({lacking}), as when a setting that adds or removes " \
           "weights (action_bias, " in message
    assert "there and" not in message and "\n" not in message and "--force" in message
    assert "damaged" not in warnings_of(caplog)


def test_export_weights_creates_the_folder(tmp_path):
    model = new_saver(tmp_path)[1]
    path = tmp_path / "a" / "b" / "Behavior.weights.h5"
    export_weights(model, str(path))
    assert os.listdir(path.parent) == [path.name]
    fresh = new_saver(tmp_path)[1]
    fresh.load_weights(str(path))
    for mine, theirs in zip(model.weights, fresh.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


# -- Ctrl-C during a save --------------------------------------------------------------
def test_two_sigints_during_a_save_interrupt_after_it(tmp_path, signals_in_process):
    """Two SIGINTs 10 ms apart, sent from a timer thread started as TF's save of a ~12 MB model
    begins (and joined before it returns, so both land inside ``CheckpointSaver.save``): both
    checkpoints stay whole and ``KeyboardInterrupt`` comes once, after the save."""
    folder = tmp_path / "models"
    saver, model, optimizer = new_saver(folder, width=1024)
    fill(model, optimizer, 10)
    saver.save(10, 1)
    manager = saver._checkpoint_manager()
    real_save, events = manager.save, []

    def signal_twice() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        events.append("signalled")

    def save_while_signalled(*args, **kwargs):
        timer = threading.Timer(0.0, signal_twice)
        timer.start()
        path = real_save(*args, **kwargs)
        timer.join()  # the second signal is always in before the save ends
        events.append("saved")
        return path

    manager.save = save_while_signalled
    fill(model, optimizer, 20)
    with pytest.raises(KeyboardInterrupt):
        saver.save(20, 2)
    assert events == ["signalled", "saved"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    for step in (10, 20):
        verify_checkpoint(str(folder / f"model-{step}"))
    assert tf.train.get_checkpoint_state(str(folder)).model_checkpoint_path.endswith("model-20")
    saver, model, optimizer = new_saver(folder, width=1024)
    assert saver.restore() == (20, 2)
    assert_filled(model, optimizer, 20)
    saver._checkpoint.restore(str(folder / "model-10")).assert_existing_objects_matched()
    assert_filled(model, optimizer, 10)


def test_save_without_sigint_restores_the_handler(folder):
    saver, model, optimizer = new_saver(folder)
    before = signal.getsignal(signal.SIGINT)
    saver.save(60, 6)
    assert signal.getsignal(signal.SIGINT) is before


def test_save_off_the_main_thread_leaves_signals_alone(folder):
    saver, model, optimizer = new_saver(folder)
    fill(model, optimizer, 60)
    before, seen, errors = signal.getsignal(signal.SIGINT), [], []

    def save() -> None:
        try:
            seen.append(saver.save(60, 6))
        except BaseException as e:  # surfaced below
            errors.append(e)

    thread = threading.Thread(target=save)
    thread.start()
    thread.join()
    assert not errors and seen[0].endswith("model-60")
    assert signal.getsignal(signal.SIGINT) is before
    assert restore(folder) == (60, 6)


# -- SIGKILL at random moments ----------------------------------------------------------
DRIVER = textwrap.dedent('''
    """Forks a worker per line on stdin; each worker resumes from the folder and saves ~4 MB
    checkpoints (every variable holding the step) in a loop, printing each completed step. Lines go
    out in one write each: a worker killed inside a buffered print could leave half a line that the
    driver's next line would join."""
    import importlib.util, os, sys
    import tensorflow as tf  # no TF op runs before the fork

    spec = importlib.util.spec_from_file_location("checkpoint_under_test", sys.argv[1])
    ckpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ckpt)
    folder, interval, keep = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def work():
        weights = [tf.Variable(tf.zeros([512, 512])) for _ in range(4)]
        saver = ckpt.CheckpointSaver(folder, keep, weights=weights)
        try:
            step, _ = saver.restore()
        except ckpt.UnityTrainerException:
            step = 0
        while True:
            step += interval
            for w in weights:
                w.assign(tf.fill(w.shape, float(step)))
            saver.save(step, step // interval)
            os.write(1, f"saved {step}\\n".encode())

    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        pid = os.fork()
        if pid == 0:
            try:
                work()
            finally:
                os._exit(1)
        os.write(1, f"worker {pid}\\n".encode())
        os.waitpid(pid, 0)
        os.write(1, f"dead {pid}\\n".encode())
''')


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_a_completed_save(tmp_path):
    folder, interval, keep, rng = tmp_path / "models", 10, 3, random.Random(1234)
    (tmp_path / "driver.py").write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), checkpoint_module.__file__, str(folder),
                               str(interval), str(keep)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              bufsize=1, cwd=Path(__file__).parent.parent)
    lines: "queue.Queue[str]" = queue.Queue()
    def read() -> None:
        for line in driver.stdout:
            lines.put(line.split())
        lines.put(["eof", f"(the driver exited with code {driver.wait()})"])  # a failure shows at once

    threading.Thread(target=read, daemon=True).start()

    def expect(word: str, timeout: float = 60) -> list:
        while True:
            got = lines.get(timeout=timeout)
            if got[0] == word:
                return got
            assert got[0] == "saved", got

    def saves_until_dead(pid: int) -> list[int]:
        """The steps the killed worker completed before its parent saw it die."""
        steps = []
        while True:
            try:
                got = lines.get(timeout=60)
            except queue.Empty:
                state = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else "gone"
                raise AssertionError(f"the driver never reported worker {pid} dead (its state: {state})") from None
            if got[0] == "dead":
                return steps
            assert got[0] == "saved", got
            steps.append(int(got[1]))

    try:
        expect("ready", timeout=300)  # importing TensorFlow on a loaded machine
        for _ in range(10):
            driver.stdin.write("go\n")
            driver.stdin.flush()
            pid, saved = int(expect("worker")[1]), []
            saved.append(int(expect("saved")[1]))
            time.sleep(rng.uniform(0.0, 0.3))
            os.kill(pid, signal.SIGKILL)
            saved += saves_until_dead(pid)
            weights = [tf.Variable(tf.zeros([512, 512])) for _ in range(4)]
            step, updates = CheckpointSaver(str(folder), keep, weights=weights).restore()
            assert saved[-1] <= step <= saved[-1] + interval, (saved[-1], step, sorted(os.listdir(folder)))
            assert updates == step // interval
            for w in weights:
                np.testing.assert_array_equal(w.numpy(), np.full((512, 512), float(step), dtype=np.float32))
    finally:
        driver.stdin.close()
        driver.wait(timeout=60)
    weights = [tf.Variable(tf.zeros([512, 512])) for _ in range(4)]
    saver = CheckpointSaver(str(folder), keep, weights=weights)
    step, _ = saver.restore()
    saver.save(step + interval, 0)
    names = [os.path.basename(p) for p in tf.train.get_checkpoint_state(str(folder)).all_model_checkpoint_paths]
    assert len(names) == keep
    expected = ["checkpoint"] + [f"{n}.{ext}" for n in names for ext in ("index", DATA)]
    assert sorted(os.listdir(folder)) == sorted(expected)
