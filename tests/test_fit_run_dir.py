"""The fit API's run folder and stop signals: a ``run_dir`` that holds a run is refused, changing
nothing; SIGTERM during ``fit`` saves and stops as Ctrl-C does; ``save`` errors are one line."""
import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import zipfile

import keras
import numpy as np
import pytest
from process_tools import killed_on_exit, read_until

import kerasrl
from kerasrl.exception import TrainerError

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# ML-Agents 0.9's Simple1D test config: an update every ~64 agent steps.
HP = dict(batch_size=16, buffer_size=64, learning_rate=5e-3)
AGENTS = {"PPO": (kerasrl.PPO, HP), "SAC": (kerasrl.SAC, dict(hidden_units=8, num_layers=1))}


def tree(folder) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> contents) and every folder (-> b"/")."""
    found = {}
    for root, dirs, names in os.walk(folder):
        for d in dirs:
            found[os.path.relpath(os.path.join(root, d), folder)] = b"/"
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                found[os.path.relpath(os.path.join(root, n), folder)] = f.read()
    return found


def refused(make, run_dir) -> str:
    """The one-line error of ``make()`` on a ``run_dir`` that holds a run, which it left as it was."""
    before = tree(run_dir)
    with pytest.raises(TrainerError) as e:
        make()
    message = str(e.value)
    assert "\n" not in message and f"run_dir {run_dir} already holds a run" in message, message
    assert "kerasrl.load(" in message and "Nothing was changed" in message, message
    assert tree(run_dir) == before
    return message


class Interrupt(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


@pytest.mark.parametrize("algorithm", sorted(AGENTS))
def test_a_copied_kerasrl_learn_run_is_refused_and_left_as_it_was(tmp_path, algorithm):
    cls, hp = AGENTS[algorithm]
    run_dir = tmp_path / "copy"
    models = run_dir / "models" / "Simple1D"
    models.mkdir(parents=True)
    for name in ("model-35584.index", "model-35584.data-00000-of-00001", "checkpoint"):
        (models / name).write_bytes(b"an old run's " + name.encode())
    (run_dir / ".kerasrl-run").write_text("kerasrl run folder\n")
    (run_dir / "Simple1D.csv").write_text("step,reward\n35584,1.0\n")
    message = refused(lambda: cls("Simple1D", seed=0, run_dir=str(run_dir), **hp), str(run_dir))
    assert f"kerasrl.{algorithm}:" in message and ".kerasrl-run, Simple1D.csv, models" in message, message

    only_marker = tmp_path / "marked"  # a kerasrl-learn run that stopped before its first checkpoint
    only_marker.mkdir()
    (only_marker / ".kerasrl-lock").write_text("12345\n")
    refused(lambda: cls("Simple1D", seed=0, run_dir=str(only_marker), **hp), str(only_marker))


def test_the_folder_of_an_interrupted_fit_is_refused_and_a_missing_empty_or_foreign_one_is_used(tmp_path):
    run_dir = str(tmp_path / "run")
    first = kerasrl.PPO("Simple1D", seed=3, run_dir=run_dir, **HP)
    with pytest.raises(KeyboardInterrupt):
        first.fit(1000, callbacks=[Interrupt()], verbose=0)
    first.save(str(tmp_path / "agent.keras"))
    first.close()
    assert any(n.endswith(".index") for n in os.listdir(os.path.join(run_dir, "models", "Simple1D")))
    refused(lambda: kerasrl.PPO("Simple1D", seed=3, run_dir=run_dir, **HP), run_dir)
    refused(lambda: kerasrl.load(str(tmp_path / "agent.keras"), env="Simple1D", run_dir=run_dir), run_dir)
    resumed = kerasrl.load(str(tmp_path / "agent.keras"), env="Simple1D", run_dir=str(tmp_path / "next"))
    resumed.fit(64, verbose=0)
    resumed.close()

    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("mine")
    for name in ("empty", "notes"):
        agent = kerasrl.PPO("Simple1D", seed=3, run_dir=str(tmp_path / name), **HP)
        agent.fit(64, verbose=0)
        agent.fit(64, verbose=0)  # its own run: the next fit goes on in it
        agent.close()
    assert (tmp_path / "notes" / "README.txt").read_text() == "mine"


def test_two_agents_never_share_a_run_dir(tmp_path):
    """Both start on the same new folder; once one trained in it the other's fit is refused."""
    run_dir = str(tmp_path / "shared")
    first = kerasrl.PPO("Simple1D", seed=3, run_dir=run_dir, **HP)
    second = kerasrl.PPO("Simple1D", seed=4, run_dir=run_dir, **HP)
    first.fit(64, verbose=0)
    refused(lambda: second.fit(64, verbose=0), run_dir)
    first.fit(64, verbose=0)
    first.close()
    second.close()


# -- SIGTERM -----------------------------------------------------------------------------
FIT_UNTIL_STOPPED = textwrap.dedent("""
    import signal, sys, keras, kerasrl

    class Epochs(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            print("epoch", epoch, flush=True)

    agent = kerasrl.PPO("Simple1D", seed=3, run_dir=sys.argv[1], batch_size=16, buffer_size=64, jit_compile=False)
    try:
        agent.fit(10_000_000, callbacks=[Epochs()], verbose=0)
    except KeyboardInterrupt:
        restored = all(signal.getsignal(s) == signal.SIG_DFL for s in (signal.SIGTERM, signal.SIGHUP))
        print("KeyboardInterrupt; defaults restored:", restored, flush=True)
        raise
    print("not reached", flush=True)
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_during_fit_saves_a_checkpoint_and_stops_as_ctrl_c_does(tmp_path, signum):
    """A script whose ``fit`` gets SIGTERM or SIGHUP: the run saves, ``fit`` raises ``KeyboardInterrupt``
    (uncaught, Python then exits as after Ctrl-C: by SIGINT, status 130) with the handlers restored."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", FIT_UNTIL_STOPPED, str(run_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    with killed_on_exit(proc):
        read_until(proc, "epoch")
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGINT, (proc.returncode, err)
    assert "KeyboardInterrupt; defaults restored: True" in out and "not reached" not in out, out
    assert f"kerasrl: stopped by {signal.Signals(signum).name} at step" in err and f"run_dir={str(run_dir)!r}, kept" in err, err
    assert any(n.endswith(".index") for n in os.listdir(run_dir / "models" / "Simple1D")), "no checkpoint"


class SigtermHandler(keras.callbacks.Callback):
    """Keeps the SIGTERM handler that the callbacks see."""

    def on_epoch_end(self, epoch, logs=None):
        self.seen = signal.getsignal(signal.SIGTERM)


def test_fit_takes_sigterm_only_in_the_main_thread_and_only_while_it_runs(tmp_path):
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    agent = kerasrl.PPO("Simple1D", seed=3, run_dir=str(tmp_path / "run"), **HP)
    main = SigtermHandler()
    agent.fit(130, callbacks=[main], verbose=0)  # two updates
    assert callable(main.seen) and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    other = SigtermHandler()
    thread = threading.Thread(target=agent.fit, args=(130,), kwargs={"callbacks": [other], "verbose": 0})
    thread.start()
    thread.join()
    assert other.seen == signal.SIG_DFL
    def mine(signum, frame):
        pass

    signal.signal(signal.SIGTERM, mine)
    try:
        agent.fit(130, callbacks=[main], verbose=0)  # the program's own handler stays (taken at the safe points)
        assert main.seen.__self__.previous[signal.SIGTERM] is mine and signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    agent.close()


# -- save --------------------------------------------------------------------------------
def test_save_to_a_folder_or_a_full_disk_is_one_line_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    agent = kerasrl.PPO("Simple1D", seed=3, run_dir=str(tmp_path / "run"), **HP)
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(TrainerError, match=f"^Cannot save the agent to {folder}: it is a folder") as e:
        agent.save(str(folder))
    assert "\n" not in str(e.value) and os.listdir(folder) == []

    path = str(folder / "agent.keras")
    agent.save(path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(zipfile.ZipFile, "write", full)
    with pytest.raises(TrainerError, match=f"^Cannot save the agent to {path}: No space left on device"):
        agent.save(path)
    monkeypatch.undo()
    assert os.listdir(folder) == ["agent.keras"]  # no temporary file; the earlier archive is whole
    assert kerasrl.load(path).predict(np.array([[1.0]], np.float32)).shape == (1, 1)
    agent.close()
