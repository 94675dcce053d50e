"""The run folder is safe: a run id is a plain name, ``--force`` deletes only a kerasrl run
folder (nothing beside it, nothing that is not a run), two processes never run in one folder
(an OS lock that dies with its process), and ``--record-demo`` does not overwrite a demo."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kerasrl.cli import main
from kerasrl.cli.run_folder import (
    LOCK,
    MARKER,
    REPLACED,
    check_run_dir,
    is_run_folder,
    prepare_run_dir,
    release_run_dirs,
)
from kerasrl.demos import load
from kerasrl.exception import TrainerError
from kerasrl.fields import Field

ROOT = str(Path(__file__).resolve().parents[1])
CONFIG = "default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n"
#: ``kerasrl-learn`` that, once the run is under way (step ``PAUSE_AT``), waits for the file
#: named by $KERASRL_TEST_GO (so that a test acts while it holds its run folder).
PAUSING = textwrap.dedent('''
    import os, sys, time
    from kerasrl.trainers import TrainerController
    advance = TrainerController.advance

    def paused(self, env):
        if self.global_step == int(os.environ["KERASRL_TEST_PAUSE_AT"]):
            print("paused", flush=True)
            deadline = time.monotonic() + 120
            while not os.path.exists(os.environ["KERASRL_TEST_GO"]) and time.monotonic() < deadline:
                time.sleep(0.05)
        return advance(self, env)

    TrainerController.advance = paused
    from kerasrl.cli.main import main
    sys.exit(main())
''')
PAUSE_AT = 60


def learn_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               KERASRL_TEST_GO=str(tmp_path / "go"), KERASRL_TEST_PAUSE_AT=str(PAUSE_AT))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # kerasrl-learn silences TensorFlow itself
    return env


def learn(tmp_path: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``kerasrl-learn`` with the tiny config, run in ``cwd`` by its ``main`` in this process (the
    runs that must be another process, holding the folder or killed, are ``start_pausing``'s)."""
    out, err, previous = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd or tmp_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(tmp_path / "cfg.yaml"), "--env", "Simple1D", "--seed", "1", *argv])
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def start_pausing(tmp_path: Path, *argv: str) -> subprocess.Popen:
    """A run that stops at step ``PAUSE_AT`` until ``tmp_path / "go"`` exists."""
    return subprocess.Popen([sys.executable, "-c", PAUSING, str(tmp_path / "cfg.yaml"), "--env", "Simple1D",
                             "--seed", "1", *argv], cwd=tmp_path, env=learn_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until_paused(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "paused":
            return
    raise AssertionError(f"the run ended before pausing: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}")


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The run failed with status 2 and one error line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kerasrl-learn: error: ")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """``tmp_path`` with the config, some code beside ``results/``, and a run and a file in it."""
    (tmp_path / "cfg.yaml").write_text(CONFIG)
    (tmp_path / "mycode").mkdir()
    (tmp_path / "mycode" / "train.py").write_text("print('mine')\n")
    (tmp_path / "notes.txt").write_text("keep\n")
    (tmp_path / "results" / "other").mkdir(parents=True)
    (tmp_path / "results" / "other" / "weights.bin").write_bytes(b"x" * 10)
    (tmp_path / "results" / "readme.txt").write_text("keep\n")
    return tmp_path


@pytest.mark.parametrize("run_id", ["", ".", "..", "../outside", "a/b", "/tmp"])
def test_a_run_id_that_is_not_a_plain_name_is_refused(world, run_id):
    before = tree(world)
    line = error_line(learn(world, "--steps", "20", "--run-id", run_id, "--force"))
    assert "--run-id" in line and "plain folder name" in line
    assert f"--run-id {shlex.quote(run_id)}: " in line
    assert tree(world) == before


def test_initialize_from_must_be_a_plain_name(world):
    line = error_line(learn(world, "--steps", "20", "--run-id", "new", "--initialize-from", "../other"))
    assert "--initialize-from ../other" in line
    assert not (world / "results" / "new").exists()


def test_force_never_deletes_a_folder_that_is_not_a_run(world):
    before = tree(world)
    line = error_line(learn(world, "--steps", "20", "--results-dir", ".", "--run-id", "mycode", "--force"))
    assert "mycode is not a kerasrl run folder (no marker" in line and "nothing was deleted" in line
    line = error_line(learn(world, "--steps", "20", "--results-dir", str(world.parent), "--run-id", world.name,
                            "--force"))
    assert "nothing was deleted" in line
    line = error_line(learn(world, "--steps", "20", "--results-dir", ".", "--run-id", "mycode", "--resume"))
    assert "is not a kerasrl run folder" in line and "nothing was changed" in line  # nor continues in it
    for flags in ({"inference": True}, {}):  # nor runs a policy in it, nor starts a run in it (nor locks it)
        with pytest.raises(TrainerError, match="is not a kerasrl run folder .*nothing was changed"):
            prepare_run_dir(run_args(world, "mycode", **flags))
    assert tree(world) == before


def test_force_starts_a_marked_run_afresh_and_touches_nothing_beside_it(world):
    first = learn(world, "--steps", "40", "--run-id", "r")
    assert first.returncode == 0, first.stderr[-2000:]
    run = world / "results" / "r"
    assert (run / MARKER).read_text().startswith("kerasrl run folder\n")
    assert (run / LOCK).read_text().strip().isdigit()
    (run / "scratch.txt").write_text("made during the run\n")
    beside = [p for p in tree(world) if not p.startswith(os.path.join("results", "r"))]
    second = learn(world, "--steps", "30", "--run-id", "r", "--force")
    assert second.returncode == 0, second.stderr[-2000:]
    assert not (run / "scratch.txt").exists()
    assert sorted(p.name for p in (run / "models" / "Simple1D").glob("model-*.index")) == ["model-31.index"]
    assert (run / MARKER).exists()
    assert [p for p in tree(world) if not p.startswith(os.path.join("results", "r"))] == beside


def run_args(results: Path, run_id: str, **flags) -> argparse.Namespace:
    return argparse.Namespace(**{"results_dir": str(results), "run_id": run_id, "load": False, "inference": False,
                                 "force": False, **flags})


def old_run(results: Path, run_id: str, record: bool = True) -> Path:
    """A run folder as a kerasrl from before the marker left it."""
    run = results / run_id
    (run / "models" / "Simple1D").mkdir(parents=True)
    (run / "models" / "Simple1D" / "model-100.index").write_bytes(b"")
    (run / "summaries").mkdir()
    (run / "Simple1D.csv").write_text("step\n")
    if record:
        (run / "configuration.yaml").write_text("command_line: kerasrl-learn c.yaml\nseed: 1\nkerasrl_version: 0.1.0\n"
                                                "behaviors: {}\n")
    return run


def test_run_folders_of_earlier_versions_are_still_runs(tmp_path):
    with_record = old_run(tmp_path, "a")
    (with_record / "notes.txt").write_text("mine\n")  # the recorded configuration decides
    checkpoints_only = old_run(tmp_path, "b", record=False)
    assert is_run_folder(str(with_record)) and is_run_folder(str(checkpoints_only))
    prepare_run_dir(run_args(tmp_path, "a", force=True))
    assert sorted(os.listdir(with_record)) == [LOCK, MARKER]
    prepare_run_dir(run_args(tmp_path, "b", load=True))
    assert (checkpoints_only / "models" / "Simple1D" / "model-100.index").exists()
    assert (checkpoints_only / MARKER).exists()  # marked from now on


def test_force_before_a_unity_player_starts_deletes_the_old_run_only_once_it_has(tmp_path):
    """``prepare_run_dir(started=False)`` moves the old run aside: deleted when the environment
    has started, put back when the process ends without that (a killed start: at the next check)."""
    run = old_run(tmp_path, "a")
    before = tree(run)
    args = run_args(tmp_path, "a", force=True)
    prepare_run_dir(args, started=False)
    assert sorted(os.listdir(run)) == sorted([REPLACED, LOCK, MARKER])
    release_run_dirs()  # the start failed
    assert tree(run) == sorted([*before, LOCK, MARKER])
    prepare_run_dir(args, started=False)
    (run / "run_logs").mkdir()
    prepare_run_dir(args)  # the environment started
    assert sorted(os.listdir(run)) == [LOCK, MARKER, "run_logs"]
    release_run_dirs()
    run = old_run(tmp_path, "b")
    before = tree(run)
    (run / MARKER).write_text("kerasrl run folder\n")
    before = tree(run)
    (run / REPLACED).mkdir()  # a start killed with the old run moved aside
    for name in sorted(set(os.listdir(run)) - {REPLACED, MARKER}):
        os.replace(run / name, run / REPLACED / name)
    with pytest.raises(TrainerError, match="already exists: continue it with --resume"):
        check_run_dir(run_args(tmp_path, "b"))
    assert tree(run) == before


def test_what_only_looks_like_a_run_is_not_one(tmp_path):
    stranger = old_run(tmp_path, "c", record=False)
    (stranger / "main.py").write_text("code\n")  # checkpoints beside someone's own files
    other = tmp_path / "d"
    other.mkdir()
    (other / "configuration.yaml").write_text("learning_rate: 0.1\n")
    (other / MARKER).write_text("something else\n")
    for run_id, folder in (("c", stranger), ("d", other)):
        before = tree(folder)
        assert not is_run_folder(str(folder))
        with pytest.raises(TrainerError, match="not a kerasrl run folder .*nothing was deleted"):
            prepare_run_dir(run_args(tmp_path, run_id, force=True))
        assert tree(folder) == before


def test_a_second_run_on_the_same_folder_stops_at_once_and_the_first_completes(world):
    go = world / "go"
    first = start_pausing(world, "--steps", "120", "--run-id", "r")
    try:
        wait_until_paused(first)
        lock = world / "results" / "r" / LOCK
        assert lock.read_text().strip() == str(first.pid)
        for flags in ([], ["--force"]):
            started = time.monotonic()
            line = error_line(learn(world, "--steps", "40", "--run-id", "r", *flags))
            assert f"in use by process {first.pid}" in line and "nothing was changed" in line
            assert time.monotonic() - started < 60
            assert first.poll() is None
        assert (world / "results" / "r" / "models").is_dir()  # --force deleted nothing
        go.write_text("")
        out, err = first.communicate(timeout=120)
    finally:
        go.write_text("")
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err[-2000:]
    assert "final steps=121 " in out
    assert (world / "results" / "r" / "models" / "Simple1D" / "model-121.index").exists()


def test_a_killed_run_leaves_no_lock_behind(world):
    first = start_pausing(world, "--steps", "200", "--run-id", "r", "--save-freq", "50")
    try:
        wait_until_paused(first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    run = world / "results" / "r"
    assert (run / LOCK).read_text().strip() == str(first.pid)  # the file stays; its lock died with the process
    resumed = learn(world, "--steps", "100", "--run-id", "r", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Resumed Simple1D at step 50" in resumed.stdout
    assert (run / LOCK).read_text().strip() != str(first.pid)


def test_record_demo_does_not_overwrite_a_demo_without_force(world, capsys):
    results = world / "results"
    base = [str(world / "cfg.yaml"), "--env", "Simple1D", "--seed", "1", "--results-dir", str(results), "--run-id", "d"]
    assert main(base + ["--steps", "40"]) == 0
    demo = world / "mine.demo"
    demo.write_bytes(b"someone's demo")
    capsys.readouterr()
    assert main(base + ["--resume", "--record-demo", str(demo), "--steps", "30"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--record-demo {demo} already exists" in err and "--force" in err
    assert demo.read_bytes() == b"someone's demo"
    assert main(base + ["--resume", "--record-demo", str(demo), "--steps", "30", "--force"]) == 0
    assert len(load(demo)[1][Field.ACTIONS]) == 30
    assert (results / "d" / "models" / "Simple1D" / "model-41.index").exists()  # --force left the run alone


def test_a_parameter_the_environment_rejects_writes_nothing(world):
    """The environment meets its first parameters before the run folder is written: a misspelled
    sampler parameter leaves no folder behind (so the corrected command needs no ``--force``),
    and with ``--force`` the run it would have replaced is still whole."""
    bad = world / "bad.yaml"
    bad.write_text("resampling-interval: 100\nlenght: {sampler-type: uniform, min_value: 1, max_value: 2}\n")
    line = error_line(learn(world, "--steps", "40", "--run-id", "r", "--sampler", str(bad)))
    assert "'lenght'" in line and "continue with --resume" not in line
    assert not (world / "results" / "r").exists()
    assert learn(world, "--steps", "40", "--run-id", "r").returncode == 0  # no --force needed
    before = tree(world / "results" / "r")
    assert "models/Simple1D/model-41.index" in before
    line = error_line(learn(world, "--steps", "40", "--run-id", "r", "--force", "--sampler", str(bad)))
    assert "'lenght'" in line
    assert tree(world / "results" / "r") == before
