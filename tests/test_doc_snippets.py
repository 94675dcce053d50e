"""Every code block of the README and of docs/ is run by a test, and does what its text says.

* ``python`` blocks: a block with a phrase of ``RUN_BY`` is run by that test (long runs shortened,
  results checked); any other is run as written, in a scratch folder.
* ``bash`` blocks: run by bash in a scratch folder, with ``kerasrl-learn`` and ``kerasrl`` running
  this tree's package; a ``kerasrl-learn`` line without ``--steps`` (which would train to the
  config's ``max_steps``) is given ``--steps DOC_STEPS``.
* ``yaml`` blocks are loaded as trainer configs (or sampler files), ``json`` blocks as curricula.
* ``text`` blocks are output and diagrams, not code.

A block whose code is the same as an earlier block's (README.md's and docs/index.md's first
command) is run once.

A block opts out only with ``<!-- not run: REASON -->`` on the line before it (an install, a
server, two hosts, a GPU, a benchmark of minutes); such blocks are still checked without running:
every ``kerasrl-learn`` line parses with the real parser, and every flag of a benchmark command is
one its script defines.
"""
import csv
import json
import os
import re
import runpy
import shlex
import stat
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import keras
import numpy as np
import pytest
import yaml

import kerasrl

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LANGUAGES = ("python", "bash", "yaml", "json", "text")
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
OPT_OUT = re.compile(r"^\s*<!-- not run: (?P<reason>.+?) -->\s*$")
#: The most blocks that may opt out of running, all pages together.
MAX_OPT_OUTS = 27
DOC_STEPS = 1000


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    lang: str
    code: str
    reason: Optional[str]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def _snippets() -> list[Snippet]:
    out = []
    for path in PAGES:
        text = path.read_text()
        for m in FENCE.finditer(text):
            before = [line for line in text[: m.start()].splitlines() if line.strip()]
            opt_out = OPT_OUT.match(before[-1]) if before else None
            body = textwrap.dedent("\n".join(line[len(m["indent"]):] for line in m["body"].splitlines()))
            out.append(Snippet(str(path.relative_to(ROOT)), text.count("\n", 0, m.start()) + 1, m["lang"], body,
                               opt_out["reason"] if opt_out else None))
    return out


SNIPPETS = _snippets()

#: A phrase of a Python block, and the test that runs it (with checks of its results).
RUN_BY = {
    "agent.save(\"cartpole.keras\")": "tests/test_doc_snippets.py::test_landing_example",
    "BackupAndRestore(\"backup\")": "tests/test_doc_snippets.py::test_fit_example",
    "class StopAtReturn": "tests/test_doc_snippets.py::test_stop_at_return_example",
    "CartPole-v1.savedmodel": "tests/test_doc_snippets.py::test_export_examples",
    "CartPole-v1.onnx": "tests/test_doc_snippets.py::test_export_examples",
    "kerasrl.create_trainers": "tests/test_public_api.py::test_documented_trainer_example_trains",
    "recording.record(": "tests/test_demos.py::test_documented_demonstration_example_records_and_loads",
    "kerasrl.SAC(\"Pendulum-v1\"": "tests/test_sac_docs.py::test_sac_page_python_block_runs",
    "kerasrl.SAC(\"VisualSimple1D\"": "tests/test_sac_docs.py::test_sac_page_cameras_block_runs",
    "kerasrl.SAC(\"Simple1DContinuous\"": "tests/test_sac_docs.py::test_sac_page_recurrent_block_runs",
    "seed=0, threaded=True)": "tests/test_threaded.py::test_the_docs_page_python_example_runs",
    "Pendulum-v1.unity.onnx": "tests/test_sac_unity_export.py::test_unity_page_sac_block_runs",
    "class SteadyPPOSettings": "tests/test_trainer_registry.py::test_the_guide_shows_the_example_plugin_as_it_is",
}


def _runner(snippet: Snippet) -> Optional[str]:
    runners = [test for phrase, test in RUN_BY.items() if phrase in snippet.code]
    assert len(runners) <= 1, f"{snippet}: several RUN_BY phrases match"
    return runners[0] if runners else None


def _blocks(lang: str, run: bool = True) -> list:
    """The blocks of ``lang`` that are run (or not), each code once (a page may repeat another's)."""
    chosen: dict[str, Snippet] = {}
    for s in SNIPPETS:
        if s.lang == lang and (s.reason is None) == run and (lang != "python" or _runner(s) is None):
            chosen.setdefault(s.code, s)
    return [pytest.param(s, id=str(s)) for s in chosen.values()]


def _with(phrase: str, page: Optional[str] = None) -> list[Snippet]:
    found = [s for s in SNIPPETS if s.lang == "python" and phrase in s.code and (page is None or s.page == page)]
    assert found, f"no Python block holds {phrase!r}"
    return found


def _exec(code: str, where: str) -> dict:
    namespace: dict = {"__name__": "__doc_snippet__"}
    exec(compile(code, where, "exec"), namespace)  # noqa: S102
    return namespace


# -- every block is accounted for -----------------------------------------------------------
def test_the_pages_have_blocks_of_every_kind():
    assert {s.lang for s in SNIPPETS} >= {"python", "bash", "yaml", "json"}
    assert any(s.page == "README.md" for s in SNIPPETS) and len(SNIPPETS) > 40


def test_every_block_names_a_known_language():
    for s in SNIPPETS:
        assert s.lang in LANGUAGES, f"{s}: a code block needs one of {LANGUAGES} after its fence, got {s.lang!r}"


def test_registered_runners_exist():
    for s in SNIPPETS:
        runner = _runner(s) if s.lang == "python" else None
        if runner:
            path, name = runner.split("::")
            assert f"def {name}(" in (ROOT / path).read_text(), runner


def test_opt_outs_are_few_and_give_a_reason():
    opted = [s for s in SNIPPETS if s.reason is not None]
    assert len(opted) <= MAX_OPT_OUTS, [str(s) for s in opted]
    for s in opted:
        assert s.lang in ("bash", "python") and len(s.reason) >= 10, f"{s}: say why it is not run"


def _command_lines(code: str) -> list[list[str]]:
    """The commands of a bash block, continuation lines joined, comments and heredoc bodies dropped."""
    lines, heredoc = [], None
    for line in code.replace("\\\n", " ").splitlines():
        if heredoc:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        words = shlex.split(line, comments=True)
        if "<<" in line:
            heredoc = re.search(r"<<\s*'?(\w+)'?", line).group(1)
        if words:
            lines.append(words)
    return lines


@pytest.mark.parametrize("snippet", _blocks("bash", run=False))
def test_blocks_not_run_are_still_valid_commands(snippet):
    """A block that is not run still names real flags: kerasrl-learn's parse, benchmarks' exist."""
    from kerasrl.cli.parser import build_parser

    for words in _command_lines(snippet.code):
        for command in " ".join(words).split("&&"):
            args = shlex.split(command)
            if args and args[0] == "kerasrl-learn":
                build_parser().parse_args(args[1:])
            elif len(args) > 1 and args[0] == "python3" and args[1].startswith(("benchmarks/", "examples/")):
                source = (ROOT / args[1]).read_text()
                for flag in (a.split("=")[0] for a in args[2:] if a.startswith("--")):
                    assert f'"{flag}"' in source, f"{snippet}: {args[1]} has no flag {flag}"


# -- running the blocks ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def xla_cache(tmp_path_factory) -> str:
    """One XLA cache for this module's command-line runs (never the user's ``~/.cache``): most
    blocks train the same config, so every run after the first loads its compiled update."""
    return str(tmp_path_factory.mktemp("xla_cache"))


@pytest.fixture
def shell_env(tmp_path, xla_cache) -> dict:
    """PATH with kerasrl-learn, kerasrl and python3 running this tree; examples/ and benchmarks/ at
    hand; the module's XLA cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    learn = f'"{sys.executable}" -m kerasrl.cli "$@"'
    shims = {"kerasrl-learn": f'for a in "$@"; do case "$a" in --steps|--steps=*) exec {learn};; esac; done\n'
                              f'exec {learn} --steps {DOC_STEPS}',
             "kerasrl": f'exec "{sys.executable}" -m kerasrl.cli.tools "$@"',
             "python3": f'exec "{sys.executable}" "$@"'}
    for name, line in shims.items():
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{line}\n")
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "work"
    work.mkdir()
    for folder in ("examples", "benchmarks"):
        (work / folder).symlink_to(ROOT / folder)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TF_CPP_MIN_LOG_LEVEL": "3",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "WORK": str(work),
            "KERASRL_XLA_CACHE": xla_cache}


@pytest.mark.slow
@pytest.mark.parametrize("snippet", _blocks("bash"))
def test_bash_block_runs(snippet, shell_env):
    if "kerasrl plot" in snippet.code:
        pytest.importorskip("matplotlib", reason="kerasrl plot needs the plot extra (matplotlib)")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", snippet.code], cwd=shell_env["WORK"], env=shell_env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{snippet} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if "kerasrl-learn" in snippet.code and "--inference" not in snippet.code:
        assert "final steps=" in done.stdout or "nothing left to train" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("snippet", _blocks("python"))
def test_python_block_runs(snippet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _exec(snippet.code, str(snippet))


@pytest.mark.parametrize("snippet", _blocks("yaml"))
def test_yaml_block_loads(snippet, tmp_path):
    """A trainer config loads through kerasrl's own checks; a sampler file through the sampler loader."""
    path = tmp_path / "block.yaml"
    path.write_text(snippet.code)
    if "resampling-interval" in snippet.code:
        from kerasrl.samplers import load_sampler_file

        manager, interval = load_sampler_file(str(path), seed=0)
        assert interval == yaml.safe_load(snippet.code)["resampling-interval"]
    else:
        config = kerasrl.load_trainer_config(path)
        assert config.settings_for("default").trainer == "ppo" or "trainer" in snippet.code


@pytest.mark.parametrize("snippet", _blocks("json"))
def test_json_block_is_a_curriculum(snippet, tmp_path):
    from kerasrl.curriculum import Curriculum

    path = tmp_path / "Behavior.json"
    path.write_text(snippet.code)
    curriculum = Curriculum(str(path))
    data = json.loads(snippet.code)
    assert len(data["thresholds"]) + 1 == len(next(iter(data["parameters"].values())))
    assert curriculum.lesson_num == 0


# -- the registered Python blocks -----------------------------------------------------------
def test_landing_example(tmp_path, monkeypatch):
    """The README's and the site's front-page example at 2,000 steps: it trains, acts and saves."""
    blocks = _with('agent.save("cartpole.keras")')
    assert {s.page for s in blocks} >= {"README.md", "docs/index.md"}
    monkeypatch.chdir(tmp_path)
    for snippet in blocks:
        short = snippet.code.replace("agent.fit(100_000", "agent.fit(2_000")
        assert short != snippet.code
        namespace = _exec(short, str(snippet))
        agent = namespace["agent"]
        assert 2000 <= agent.trainer.step < 2008 and len(namespace["history"].epoch) == 7
        loaded = kerasrl.load("cartpole.keras")
        obs = np.zeros((3, 4), np.float32)
        np.testing.assert_array_equal(loaded.predict(obs), agent.predict(obs))
        if "actions" in namespace:
            assert namespace["actions"].shape == (1, 1) and namespace["actions"][0, 0] in (0, 1)
            assert (tmp_path / "cartpole.csv").exists()
        agent.close()
        (tmp_path / "cartpole.keras").unlink()


def test_stop_at_return_example(tmp_path, monkeypatch):
    """The custom callback stops training at the first update whose mean return reaches its target."""
    (snippet,) = _with("class StopAtReturn")
    monkeypatch.chdir(tmp_path)
    namespace = _exec(snippet.code, str(snippet))
    rewards = namespace["history"].history["episode_reward_mean"]
    assert rewards[-1] >= 60 and all(r < 60 for r in rewards[:-1])
    assert namespace["agent"].trainer.step < 30_000


def test_fit_example(tmp_path, monkeypatch, capsys):
    """The fit example at 2,000 steps: 8 updates, its files, a prediction, and fit's default output
    (one line per summary period off a terminal, not Keras's two lines per update)."""
    (snippet,) = _with("BackupAndRestore(\"backup\")")
    block = snippet.code
    short = block.replace("agent.fit(100_000", "agent.fit(2_000")
    assert short != block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(short, str(snippet), "exec"), namespace)  # noqa: S102
    agent, history = namespace["agent"], namespace["history"]
    assert agent.trainer.update_count == 7 and 2000 <= agent.trainer.step < 2008  # 256 steps per update
    assert history.epoch == list(range(7))
    with open(tmp_path / "cartpole.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 7 and "episode_reward_mean" in rows[0]
    assert (tmp_path / "cartpole.keras").exists() and (tmp_path / "tb").is_dir()
    assert not (tmp_path / "backup").exists()  # BackupAndRestore removes its backup when fit ends
    actions = namespace["actions"]
    assert actions.shape == (1, 1) and actions[0, 0] in (0, 1)  # one row, one branch
    out = capsys.readouterr().out.splitlines()
    progress = [line for line in out if line.startswith("step=")]
    assert len(progress) == 1 and progress[0].startswith("step=2") and "episode_reward_mean=" in progress[0], out
    assert not any("Epoch" in line for line in out)
    agent.close()


def test_fit_baseline_is_beaten_within_patience_updates(tmp_path):
    """What the fit guide warns of: with a ``baseline`` not beaten, fit stops at the first update past
    ``patience`` updates that does not improve on the best, long before the return nears it."""
    agent = kerasrl.PPO("CartPole-v1", config="cartpole_zoo", seed=0, run_dir=str(tmp_path / "run"))
    stop = keras.callbacks.EarlyStopping(monitor="episode_reward_mean", mode="max", baseline=475, patience=3)
    history = agent.fit(100_000, callbacks=[stop], verbose=0)
    rewards = history.history["episode_reward_mean"]
    assert stop.stopped_epoch == len(rewards) - 1 >= 3 and agent.trainer.step < 20_000
    assert rewards[-1] <= max(rewards) < 475
    agent.close()


def test_export_examples(tmp_path, monkeypatch):
    """The SavedModel and ONNX examples on the run their comment names, trained for 2,000 steps."""
    blocks = _with("CartPole-v1.savedmodel") + _with("CartPole-v1.onnx")
    commands = {re.search(r"# the run of: kerasrl-learn (.*)\n", s.code).group(1) for s in blocks}
    (command,) = commands
    from kerasrl.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([*command.split(), "--steps", "2000"]) == 0  # in this process: its TensorFlow is loaded
    onnx = (tmp_path / "results" / "cartpole" / "models" / "CartPole-v1" / "CartPole-v1.onnx").exists()
    for snippet in blocks:
        if "onnxruntime" in snippet.code and not onnx:
            pytest.importorskip("tf2onnx", reason="the onnx extra (tf2onnx, onnxruntime) is not installed")
            pytest.fail("tf2onnx is installed, yet the run exported no ONNX policy")
        action = np.asarray(_exec(snippet.code, str(snippet))["action"])
        assert action.shape == (1, 1) and action[0, 0] in (0, 1), snippet


@pytest.mark.slow
def test_fit_keras_example_script(tmp_path, monkeypatch, capsys):
    """examples/fit_keras.py (the fit guide's complete script), shortened and run as ``__main__`` in
    this process: every callback's file, a greedy episode of the saved model, and its final line."""
    out = tmp_path / "fit"
    script = str(ROOT / "examples" / "fit_keras.py")
    monkeypatch.setattr(sys, "argv", [script, "--steps", "3000", "--out", str(out)])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the repository first
    monkeypatch.chdir(tmp_path)
    runpy.run_path(script, run_name="__main__")
    stdout = capsys.readouterr().out
    final = re.search(r"^final steps=(\d+) updates=(\d+) mean_return=([\d.]+) greedy_return=([\d.]+)$",
                      stdout, re.M)
    assert final, stdout[-2000:]
    steps, updates = int(final.group(1)), int(final.group(2))
    assert 3000 <= steps < 3008 and updates >= 10 and 1 <= float(final.group(4)) <= 500
    with open(out / "cartpole.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == updates
    assert (out / "cartpole.keras").is_file() and (out / "tb").is_dir() and not (out / "backup").exists()
