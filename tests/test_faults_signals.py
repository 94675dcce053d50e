"""SIGTERM and SIGHUP stop ``kerasrl-learn`` as Ctrl-C does (save, close the workers, exit
128 + the signal), a signal during a save waits for it, and a command-line start shows no
TensorFlow start-up chatter (unless ``--debug``)."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from typing import Optional

import pytest
from process_tools import group_members, killed_on_exit, read_until

from kerasrl.cli import main
from kerasrl.cli.main import is_start_up_chatter
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.interrupts import raise_if_stopping, sigint_deferred, stops_at_safe_points
from kerasrl.trainers import TrainerController, initialize_trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TINY = "default:\n  batch_size: 16\n  buffer_size: 64\n  hidden_units: 8\n  num_epoch: 1\n"
FINAL = re.compile(r"^final steps=(\d+) ", re.M)
#: Lines TensorFlow 2.21 writes while it is imported, before its log level applies.
CHATTER = ("absl::InitializeLog", "oneDNN custom operations", "Could not find cuda drivers", "cpu_feature_guard")


def _learn(tmp_path, *flags: str) -> list[str]:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    return [sys.executable, "-m", "kerasrl.cli", str(cfg), "--env", "Simple1D", "--results-dir", str(tmp_path),
            "--run-id", "r", "--seed", "1", "--save-every-minutes", "0", *flags]


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup does


def _stop_once_training(cmd: list[str], signum: int, group: bool = False, then: Optional[int] = None,
                        nohup: bool = False) -> tuple[subprocess.Popen, str, str]:
    """Start ``cmd`` in its own session (with SIGHUP ignored when ``nohup``), send ``signum`` (to
    the process group when ``group``) after the second progress line, and ``then`` 50 ms later
    if given; return the process with its stdout and stderr."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ignore_sighup if nohup else None)
    with killed_on_exit(proc):
        head = read_until(proc, "steps=")
        if group:
            assert len(group_members(proc.pid)) >= 3, "the main process and its 2 workers"
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        if then is not None:
            time.sleep(0.05)
            os.kill(proc.pid, then)
        out, err = proc.communicate(timeout=60)
    return proc, "".join(head) + out, err


def _saved_step(tmp_path) -> int:
    steps = [int(p.name[len("model-"):-len(".index")]) for p in (tmp_path / "r" / "models" / "Simple1D").glob("model-*.index")]
    assert steps, "no checkpoint"
    return max(steps)


def test_sigterm_saves_exits_143_and_resume_continues(tmp_path, capsys):
    proc, out, err = _stop_once_training(_learn(tmp_path, "--steps", "10000000", "--progress-every", "50"),
                                         signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "the model was saved; continue with --resume" in out and "stopped by SIGTERM" in err
    step = _saved_step(tmp_path)
    assert step >= 100 and int(FINAL.search(out).group(1)) == step
    status = main(_learn(tmp_path, "--steps", str(step + 100), "--resume")[3:])  # the resume: in this process
    resumed = capsys.readouterr()
    assert status == 0, resumed.err
    assert f"Resumed Simple1D at step {step}" in resumed.out
    assert int(FINAL.search(resumed.out).group(1)) > step and _saved_step(tmp_path) > step


def test_sighup_saves_and_exits_129_and_a_second_signal_changes_nothing(tmp_path):
    proc, out, err = _stop_once_training(_learn(tmp_path, "--steps", "10000000", "--progress-every", "50"),
                                         signal.SIGHUP, then=signal.SIGTERM)
    assert proc.returncode == 129, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "continue with --resume" in out and "stopped by SIGHUP" in err
    assert _saved_step(tmp_path) >= 100


def test_under_nohup_sighup_stays_ignored(tmp_path):
    """An inherited ignored SIGHUP is left alone: the run goes on, and a SIGTERM then stops it."""
    proc, out, err = _stop_once_training(_learn(tmp_path, "--steps", "10000000", "--progress-every", "50"),
                                         signal.SIGHUP, then=signal.SIGTERM, nohup=True)
    assert proc.returncode == 143 and "stopped by SIGTERM" in err, err
    assert _saved_step(tmp_path) >= 100


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process groups from /proc")
def test_sigterm_to_the_group_with_workers_saves_and_leaves_no_process(tmp_path):
    """SIGTERM to the whole process group, as ``timeout`` or Docker send it: the workers ignore
    it, the main process saves, closes them and exits 143; no worker outlives it."""
    cmd = _learn(tmp_path, "--steps", "10000000", "--progress-every", "50", "--num-envs", "2", "--workers", "2")
    proc, out, err = _stop_once_training(cmd, signal.SIGTERM, group=True)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "worker" not in err, err
    assert "continue with --resume" in out
    assert _saved_step(tmp_path) >= 100
    deadline = time.monotonic() + 5
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(proc.pid) == []


def test_signals_during_a_save_wait_for_it(signals_in_process):
    """SIGTERM and SIGINT inside the block reach their handlers once each, after it, in order."""
    seen: list[int] = []
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for s in handlers:
            signal.signal(s, lambda signum, frame: seen.append(signum))
        with sigint_deferred("a test"):
            for s in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
                os.kill(os.getpid(), s)
                time.sleep(0.01)
            assert seen == []
        assert seen == [signal.SIGTERM, signal.SIGINT]
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)


def test_a_signal_during_a_periodic_save_is_not_followed_by_a_second_save_of_the_same_step(tmp_path, signals_in_process):
    """Ctrl-C during the save at step 64: the controller stops after it, without writing
    ``model-64`` again (an overwrite in place, which a kill could cut short)."""
    manager, trainers = _simple_trainers(tmp_path)
    trainer = trainers["Simple1D"]
    saves: list[int] = []
    real_save = trainer.save_model

    def save_while_interrupted() -> str:
        saves.append(trainer.get_step)
        if len(saves) == 1:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        return real_save()

    trainer.save_model = save_while_interrupted
    tc = TrainerController(trainers, str(tmp_path / "models"), str(tmp_path / "summaries"), "run-0", save_freq=64)
    tc.start_learning(manager)
    assert tc.interrupted and saves == [64] and tc.saved_steps == {"Simple1D": 64}
    assert [p.name for p in (tmp_path / "models" / "Simple1D").glob("model-*.index")] == ["model-64.index"]


def _simple_trainers(tmp_path, max_steps: int = 1000):
    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=1))
    config = {"default": {"batch_size": 16, "buffer_size": 64, "hidden_units": 8, "max_steps": max_steps}}
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "summaries"), "run",
                                   str(tmp_path / "models"), keep_checkpoints=2, train_model=True, load_model=False,
                                   seed=1)
    return manager, trainers


def test_a_stop_signal_waits_for_the_next_safe_point(capsys, signals_in_process):
    """Recorded, not raised, until ``raise_if_stopping``; a second one only says so; the
    handler is back afterwards."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt), stops_at_safe_points() as stops:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert stops.pending == signal.SIGINT and not stops.taken
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert "Ctrl-C: already stopping" in capsys.readouterr().err
        raise_if_stopping()
    assert stops.taken and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_during_an_update_lets_it_finish_then_saves_its_result(tmp_path, signals_in_process):
    """Ctrl-C inside the trainer's update (where TensorFlow traces and runs) is taken after it:
    the update completes and the saved step is the one after it."""
    manager, trainers = _simple_trainers(tmp_path)
    trainer = trainers["Simple1D"]
    real_update, finished = trainer.update_policy, []

    def update_interrupted() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # Python's own handler would raise here, inside the update
        real_update()
        finished.append(trainer.get_step)

    trainer.update_policy = update_interrupted
    tc = TrainerController(trainers, str(tmp_path / "models"), str(tmp_path / "summaries"), "run-0", save_freq=10**6)
    tc.start_learning(manager)
    assert tc.interrupted and len(finished) == 1 and tc.saved_steps == {"Simple1D": finished[0]}


def test_a_signal_during_the_final_save_still_marks_the_run_interrupted(tmp_path, signals_in_process):
    """A stop that comes after the last safe point (training done, final save running) is not
    lost: the run reports it (``kerasrl-learn`` then exits 130)."""
    manager, trainers = _simple_trainers(tmp_path, max_steps=64)
    trainer = trainers["Simple1D"]
    real_save = trainer.save_model

    def save_interrupted() -> str:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        return real_save()

    trainer.save_model = save_interrupted
    tc = TrainerController(trainers, str(tmp_path / "models"), str(tmp_path / "summaries"), "run-0", save_freq=10**6)
    tc.start_learning(manager)
    assert tc.interrupted and tc.saved_steps == {"Simple1D": trainer.get_step} and trainer.get_step >= 64
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_with_the_default_action_ends_the_process_after_the_block(tmp_path):
    """In a library process (no handler), a SIGTERM during a save ends the process after it."""
    done = tmp_path / "done"
    code = textwrap.dedent(f"""
        import os, signal, time
        from kerasrl.interrupts import raise_if_stopping, sigint_deferred, stops_at_safe_points
        with sigint_deferred("a test"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            open({str(done)!r}, "w").close()
        print("not reached")
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGTERM and done.exists() and "not reached" not in proc.stdout, proc.stderr


def test_the_library_installs_no_handler_and_main_restores_them(tmp_path, capsys):
    code = ("import signal, kerasrl, kerasrl.cli, kerasrl.trainers, kerasrl.envs\n"
            "print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGHUP) == signal.SIG_DFL,"
            " signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["True", "True", "True"], proc.stderr
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    assert main([str(tmp_path / "missing.yaml"), "--env", "Simple1D"]) == 2
    assert {s: signal.getsignal(s) for s in before} == before


# -- a quiet start ----------------------------------------------------------------------
def _no_chatter(err: str) -> None:
    assert not [line for line in err.splitlines() if any(c in line for c in CHATTER)], err


@pytest.mark.slow
def test_a_short_run_starts_with_kerasrl_and_shows_no_tensorflow_chatter(tmp_path):
    proc = subprocess.run(_learn(tmp_path, "--steps", "100"), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("kerasrl: PPO on Simple1D"), proc.stdout
    _no_chatter(proc.stderr)


def test_errors_show_one_line_and_no_tensorflow_chatter(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("default:\n  batch_sizee: 16\n")
    config_error = subprocess.run(
        [sys.executable, "-m", "kerasrl.cli", str(bad), "--env", "Simple1D", "--results-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert config_error.returncode == 2
    assert config_error.stderr.startswith("kerasrl-learn: error: ") and config_error.stderr.count("\n") == 1
    assert "batch_sizee" in config_error.stderr
    export = subprocess.run([sys.executable, "-m", "kerasrl.cli.tools", "export", str(tmp_path / "nowhere")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert export.returncode == 2
    assert export.stderr.startswith("kerasrl export: error: ") and export.stderr.count("\n") == 1, export.stderr
    assert "nowhere" in export.stderr
    debug = subprocess.run(
        [sys.executable, "-m", "kerasrl.cli", str(bad), "--env", "Simple1D", "--results-dir", str(tmp_path), "--debug"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr  # --debug: the traceback,
    assert debug.stderr.splitlines()[-1].startswith("kerasrl-learn: error: ") and "batch_sizee" in debug.stderr  # exit 2
    assert not any(is_start_up_chatter(line) for line in debug.stderr.splitlines())  # found before TensorFlow loads
    env_error = subprocess.run(  # an error found once TensorFlow is loaded: --debug hides none of its chatter
        [sys.executable, "-m", "kerasrl.cli", "cartpole_zoo", "--env", "NoSuchEnv-v9", "--results-dir", str(tmp_path),
         "--debug"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert env_error.returncode == 2 and "NoSuchEnv-v9" in env_error.stderr.splitlines()[-1]
    assert any(is_start_up_chatter(line) for line in env_error.stderr.splitlines()), env_error.stderr


def test_what_is_not_chatter_still_shows():
    """A real error written to file descriptor 2 during the import comes out; the banner does not."""
    code = textwrap.dedent("""
        import os, sys
        from kerasrl.cli.main import tensorflow_start_up_hidden
        with tensorflow_start_up_hidden(False):
            os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
            os.write(2, b"I0000 00:00:1796179454.240251    5799 port.cc:153] oneDNN custom operations are on. "
                        b"You may see slightly different numerical results.\\n")
            os.write(2, b"E0000 00:00:1796179454.240251    5799 cuda_driver.cc:152] failed call to cuInit: "
                        b"CUDA_ERROR_NO_DEVICE\\n")
            print("a Python warning", file=sys.stderr)
        print("after", file=sys.stderr)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "E0000 00:00:1796179454.240251    5799 cuda_driver.cc:152] failed call to cuInit: CUDA_ERROR_NO_DEVICE",
        "a Python warning", "after"]


def test_a_closed_terminal_saves_and_exits_129_though_its_output_is_gone(tmp_path):
    """A run in a real terminal (a pseudo-terminal whose session it leads) that is then closed:
    the kernel sends SIGHUP, the run saves and exits 129, even though every later write to the
    terminal fails."""
    import pty

    cmd = _learn(tmp_path, "--steps", "10000000", "--progress-every", "50")
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once (the terminal is its stdin, stdout and stderr)
        os.chdir(ROOT)
        os.execve(sys.executable, cmd, {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"})
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while seen.count(b"steps/s") < 2 and time.monotonic() < deadline:  # the progress bar, twice
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
        assert seen.count(b"steps/s") >= 2, seen.decode(errors="replace")[-2000:]
        assert seen.lstrip().startswith(b"kerasrl: PPO on Simple1D"), seen[:300]  # a terminal sees kerasrl's line first
    finally:
        os.close(fd)  # the terminal goes away: its session leader gets SIGHUP
    for _ in range(600):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the run did not stop after its terminal closed")
    assert os.waitstatus_to_exitcode(status) == 129
    assert _saved_step(tmp_path) > 0


def test_a_reader_that_goes_away_does_not_stop_training(tmp_path):
    """``kerasrl-learn ... | head``: once the pipe's reader is gone the run trains on with its
    output dropped, and SIGTERM still saves and exits 143."""
    proc = subprocess.Popen(_learn(tmp_path, "--steps", "10000000", "--progress-every", "50"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        head = [proc.stdout.readline() for _ in range(3)]  # type: ignore[union-attr]
        assert any(line.startswith("steps=") for line in head), head
        proc.stdout.close()  # type: ignore[union-attr]
        time.sleep(3)
        assert proc.poll() is None, "the run ended when its output went away"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _saved_step(tmp_path) > 0
