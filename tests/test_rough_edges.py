"""Rough edges a newcomer hit on the command line: each is one line on stderr with exit status 2
(argparse's for a bad flag value), and nothing is written.

* ``--seed`` outside NumPy's range (0 to 2**32 - 1; -1 draws one) is refused as the flags are parsed;
* ``kerasrl plot`` of a metrics CSV that is not text names the file;
* ``kerasrl plot -o`` refuses an existing file (unless ``force``), a suffix that names no image
  format (``.py``), and a missing folder (not created); a ``.jpg`` is JPEG;
* ``--record-demo`` into a missing folder is refused (the folder is not created);
* a blank ``--run-id`` or ``--results-dir`` is refused;
* ``kerasrl-learn --version`` prints ``kerasrl <version>``.
"""
import os

import pytest

import kerasrl
from kerasrl.cli import build_parser, main, tools
from kerasrl.exception import TrainerError
from kerasrl.plot import plot_runs
from kerasrl.settings.run_context import MAX_SEED, check_seed

KEY = "Environment/Cumulative Reward"
#: Flags that would make a run that the checks let through short (a failing test stays quick).
SHORT = ["--env", "Simple1D", "--steps", "1", "--progress-every", "1"]


def one_line(err: str, prog: str) -> str:
    assert err.startswith(f"{prog}: error: ") and err.count("\n") == 1, err
    return err


def write_run(folder, text=f"Step,{KEY}\n100,1.0\n200,3.0\n"):
    folder.mkdir(parents=True)
    (folder / "B.csv").write_text(text)
    return folder


@pytest.fixture
def matplotlib():
    return pytest.importorskip("matplotlib", reason="kerasrl plot needs the plot extra (matplotlib)")


# -- --seed ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [str(2**32), str(2**64), "-2", "-4294967296"])
def test_a_seed_out_of_range_is_one_line_naming_the_flag_and_range(seed, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["trainer_config", *SHORT, "--seed", seed, "--results-dir", str(tmp_path / "results")])
    assert exit_info.value.code == 2
    err = one_line(capsys.readouterr().err, "kerasrl-learn")
    assert "--seed" in err and f"0 to {MAX_SEED}" in err and seed in err, err
    assert os.listdir(tmp_path) == []  # stopped at parsing: nothing written


@pytest.mark.parametrize("seed", [0, MAX_SEED, -1])
def test_the_seeds_numpy_takes_and_minus_one_are_parsed(seed):
    assert build_parser().parse_args(["trainer_config", "--seed", str(seed)]).seed == seed


def test_check_seed_takes_numpys_range_and_names_the_argument():
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == MAX_SEED
    for bad in (MAX_SEED + 1, -1, 1.5, True, "3"):
        with pytest.raises(TrainerError, match=f"^seed must be an integer from 0 to {MAX_SEED}, got "):
            check_seed(bad, "seed")


# -- kerasrl plot: the CSV -----------------------------------------------------------------------
def test_plot_of_a_csv_that_is_not_text_is_one_line_naming_the_file(tmp_path, capsys, matplotlib):
    run = tmp_path / "run"
    run.mkdir()
    (run / "B.csv").write_bytes(b"\xff\xfe\x80" + bytes(range(256)) * 4)
    out = tmp_path / "g.png"
    assert tools.main(["plot", str(run), "-o", str(out)]) == 2
    err = one_line(capsys.readouterr().err, "kerasrl plot")
    assert str(run / "B.csv") in err and "not UTF-8" in err, err
    assert not out.exists()


# -- kerasrl plot: the output --------------------------------------------------------------------
def test_plot_refuses_an_existing_file_and_force_replaces_it(tmp_path, capsys, matplotlib):
    run = write_run(tmp_path / "run")
    out = tmp_path / "curves.png"
    out.write_bytes(b"keep me")
    assert tools.main(["plot", str(run), "-o", str(out)]) == 2
    err = one_line(capsys.readouterr().err, "kerasrl plot")
    assert str(out) in err and "already exists" in err and "--force" in err, err
    assert out.read_bytes() == b"keep me"
    assert plot_runs([str(run)], str(out), force=True) == str(out)
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(os.listdir(tmp_path)) == ["curves.png", "run"]  # no scratch file left
    out.write_bytes(b"keep me")
    assert tools.main(["plot", str(run), "-o", str(out), "--force"]) == 0  # the command line's --force
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_the_python_api_refuses_a_seed_numpy_cannot_take():
    import kerasrl

    with pytest.raises(TrainerError, match=f"^seed must be an integer from 0 to {MAX_SEED}, got 4294967296"):
        kerasrl.PPO("CartPole-v1", seed=2**32)


def test_plot_refuses_a_suffix_that_is_no_image_format(tmp_path, capsys, matplotlib):
    run = write_run(tmp_path / "run")
    source = tmp_path / "important.py"
    source.write_text("print('hello')\n")
    for out in (source, tmp_path / "new.py", tmp_path / "notes.txt"):
        assert tools.main(["plot", str(run), "-o", str(out)]) == 2
        err = one_line(capsys.readouterr().err, "kerasrl plot")
        assert str(out) in err and "not an image format" in err, err
    assert source.read_text() == "print('hello')\n"
    assert sorted(os.listdir(tmp_path)) == ["important.py", "run"]
    with pytest.raises(TrainerError, match="important.py"):  # force does not make a .py an image
        plot_runs([str(run)], str(source), force=True)
    assert source.read_text() == "print('hello')\n"


@pytest.mark.parametrize("suffix, magic", [(".jpg", b"\xff\xd8\xff"), (".JPEG", b"\xff\xd8\xff"), (".pdf", b"%PDF"),
                                           (".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_plot_writes_the_format_its_suffix_names(suffix, magic, tmp_path, capsys, matplotlib):
    run = write_run(tmp_path / "run")
    out = tmp_path / f"curves{suffix}"
    assert tools.main(["plot", str(run), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}\n"
    assert out.read_bytes().startswith(magic)


def test_plot_does_not_create_a_missing_folder(tmp_path, capsys, matplotlib):
    run = write_run(tmp_path / "run")
    out = tmp_path / "missing" / "deeper" / "x.png"
    assert tools.main(["plot", str(run), "-o", str(out)]) == 2
    err = one_line(capsys.readouterr().err, "kerasrl plot")
    assert str(out.parent) in err and "does not exist" in err, err
    assert not (tmp_path / "missing").exists()


# -- --record-demo -------------------------------------------------------------------------------
def test_record_demo_into_a_missing_folder_is_refused_and_not_created(tmp_path, capsys):
    demo = tmp_path / "missing" / "deeper" / "new.demo"
    assert main(["trainer_config", *SHORT, "--resume", "--results-dir", str(tmp_path / "results"), "--run-id", "r",
                 "--record-demo", str(demo)]) == 2
    err = one_line(capsys.readouterr().err, "kerasrl-learn")
    assert "--record-demo" in err and str(demo.parent) in err and "does not exist" in err, err
    assert os.listdir(tmp_path) == []


# -- blank names ---------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, flag", [(["--run-id", " "], "--run-id"), (["--run-id", "\t"], "--run-id"),
                                         (["--run-id", ""], "--run-id"),
                                         (["--results-dir", ""], "--results-dir"),
                                         (["--results-dir", "  "], "--results-dir"),
                                         (["--initialize-from", " "], "--initialize-from")])
def test_a_blank_run_id_or_results_dir_is_refused(flags, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["trainer_config", *SHORT, *flags]
    if flag != "--results-dir":
        argv += ["--results-dir", "results"]
    assert main(argv) == 2
    err = one_line(capsys.readouterr().err, "kerasrl-learn")
    assert err.startswith(f"kerasrl-learn: error: {flag} ") and "blank" in err, err
    assert os.listdir(tmp_path) == []  # no "results/ /", nothing in the working folder


# -- --version -----------------------------------------------------------------------------------
def test_version_prints_kerasrl_and_its_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"kerasrl {kerasrl.__version__}\n"


# -- the Python API: TensorFlow's start-up lines -------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("level", [None, "1"])
def test_the_python_api_keeps_tensorflows_start_up_lines_off_stderr(level, tmp_path):
    """The first name that loads TensorFlow (kerasrl.PPO) prints none of its start-up lines; a
    user's own TF_CPP_MIN_LOG_LEVEL is left as it was."""
    import subprocess
    import sys

    from kerasrl.tf_startup import is_start_up_chatter

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    code = ("import os, kerasrl; kerasrl.PPO; import tensorflow as tf; tf.constant(1.0) + 1.0; "
            "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (level or "3")
    chatter = [line for line in done.stderr.splitlines() if is_start_up_chatter(line)]
    assert not chatter, done.stderr
    if level is None:
        assert done.stderr == "", done.stderr


def test_every_flag_the_migration_guide_maps_exists():
    """The ML-Agents migration guide's command-line table: each mlagents-learn flag it says kerasrl
    takes is a flag of kerasrl-learn (rows whose answer is "none" list flags kerasrl does not have)."""
    import pathlib
    import re

    guide = pathlib.Path(__file__).resolve().parents[1] / "docs" / "migrating" / "ml-agents.md"
    table = guide.read_text().split("## The command line", 1)[1].split("\n## ", 1)[0]
    flags = {s for a in build_parser()._actions for s in a.option_strings}
    checked = 0
    for row in (line for line in table.splitlines() if line.startswith("| `")):
        theirs, ours = (cell.strip() for cell in row.strip("|").split("|")[:2])
        if ours.startswith("none"):
            assert not set(re.findall(r"--[a-z][a-z-]*", theirs)) & flags, row
            continue
        for flag in re.findall(r"--[a-z][a-z-]*", theirs):
            assert flag in flags, f"{flag} ({row})"
            checked += 1
    assert checked >= 20
