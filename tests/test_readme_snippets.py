"""Every Python block of the README runs and does what its text says (long runs shortened)."""
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np

import kerasrl

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)

#: A phrase of each Python block, and the test that runs it.
RUN_BY = {
    "kerasrl.create_trainers": "tests/test_public_api.py::test_readme_python_example_trains",
    "recording.record(": "tests/test_demos.py::test_readme_demonstration_example_records_and_loads",
    "agent.fit(100_000": "tests/test_readme_snippets.py::test_fit_example",
    "CartPole-v1.savedmodel": "tests/test_readme_snippets.py::test_savedmodel_example",
}


def block_with(phrase: str) -> str:
    (block,) = [b for b in BLOCKS if phrase in b]
    return block


def test_every_python_block_is_run_by_a_test():
    for block in BLOCKS:
        runners = [test for phrase, test in RUN_BY.items() if phrase in block]
        assert len(runners) == 1, f"no test runs this README block:\n{block}"
        path, name = runners[0].split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), runners[0]


def test_fit_example(tmp_path, monkeypatch, capsys):
    """The fit example at 2,000 steps: 8 updates, its files, a prediction, and fit's default output
    (one line per summary period off a terminal, not Keras's two lines per update)."""
    block = block_with("agent.fit(100_000")
    short = block.replace("agent.fit(100_000", "agent.fit(2_000")
    assert short != block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(short, "README.md", "exec"), namespace)  # noqa: S102
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
    """What the README warns of: with a ``baseline`` not beaten, fit stops at the first update past
    ``patience`` updates that does not improve on the best, long before the return nears it."""
    agent = kerasrl.PPO("CartPole-v1", config="cartpole_zoo", seed=0, run_dir=str(tmp_path / "run"))
    stop = keras.callbacks.EarlyStopping(monitor="episode_reward_mean", mode="max", baseline=475, patience=3)
    history = agent.fit(100_000, callbacks=[stop], verbose=0)
    rewards = history.history["episode_reward_mean"]
    assert stop.stopped_epoch == len(rewards) - 1 >= 3 and agent.trainer.step < 20_000
    assert rewards[-1] <= max(rewards) < 475
    agent.close()


def test_savedmodel_example(tmp_path, monkeypatch):
    """The SavedModel example on the run its comment names, trained for 2,000 steps."""
    block = block_with("CartPole-v1.savedmodel")
    command = re.search(r"# the run of: kerasrl-learn (.*)\n", block).group(1).split()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "kerasrl.cli", *command, "--steps", "2000"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    action = np.asarray(namespace["action"])
    assert action.shape == (1, 1) and action[0, 0] in (0, 1)
