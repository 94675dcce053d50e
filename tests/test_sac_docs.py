"""The Python blocks of docs/sac.md run (the training budgets shortened) and do what the text says."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "sac.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def run_block(marker: str, budget: str, short: str, folder: Path, monkeypatch) -> dict:
    """Run the page's one Python block holding ``marker`` in ``folder``, with its ``agent.fit(budget``
    cut to ``short``; returns the block's names."""
    (block,) = [b for b in python_blocks() if marker in b]
    assert f"agent.fit({budget}" in block
    monkeypatch.chdir(folder)
    namespace: dict = {}
    exec(compile(block.replace(budget, short), str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    return namespace


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/sac.md is not in this tree (an installed package)")
def test_sac_page_python_block_runs(tmp_path, monkeypatch):
    namespace = run_block("Pendulum-v1", "20_000", "300", tmp_path, monkeypatch)
    assert (tmp_path / "sac_pendulum.csv").is_file() and (tmp_path / "pendulum_sac.keras").is_file()
    actions = namespace["actions"]
    assert actions.shape == (1, 1) and abs(float(actions[0, 0])) <= 1.0


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/sac.md is not in this tree (an installed package)")
def test_sac_page_cameras_block_runs(tmp_path, monkeypatch, capsys):
    namespace = run_block("VisualSimple1D", "1_500", "200", tmp_path, monkeypatch)
    assert namespace["agent"].spec.visual_observation_shapes == [(36, 36, 1)]
    assert re.fullmatch(r"\[\[[01]\]\]\n", capsys.readouterr().out)


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/sac.md is not in this tree (an installed package)")
def test_sac_page_recurrent_block_runs(tmp_path, monkeypatch, capsys):
    namespace = run_block("use_recurrent=True", "2_000", "150", tmp_path, monkeypatch)
    assert namespace["agent"].networks.recurrent
    printed = capsys.readouterr().out
    assert re.fullmatch(r"\[\[-?[01]\.?\d*(e-\d+)?\]\]\n", printed), printed
