"""The Python blocks of docs/sac.md run (the training budgets shortened) and do what the text says."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "sac.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/sac.md is not in this tree (an installed package)")
def test_sac_page_python_block_runs(tmp_path, monkeypatch):
    (block,) = [b for b in python_blocks() if "Pendulum-v1" in b]
    assert "agent.fit(20_000" in block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block.replace("20_000", "300"), str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    assert (tmp_path / "sac_pendulum.csv").is_file() and (tmp_path / "pendulum_sac.keras").is_file()
    actions = namespace["actions"]
    assert actions.shape == (1, 1) and abs(float(actions[0, 0])) <= 1.0


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/sac.md is not in this tree (an installed package)")
def test_sac_page_cameras_block_runs(tmp_path, monkeypatch, capsys):
    (block,) = [b for b in python_blocks() if "VisualSimple1D" in b]
    assert "agent.fit(1_500" in block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block.replace("1_500", "200"), str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    assert namespace["agent"].spec.visual_observation_shapes == [(36, 36, 1)]
    assert re.fullmatch(r"\[\[[01]\]\]\n", capsys.readouterr().out)


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/sac.md is not in this tree (an installed package)")
def test_sac_page_recurrent_block_runs(tmp_path, monkeypatch, capsys):
    (block,) = [b for b in python_blocks() if "use_recurrent=True" in b]
    assert "agent.fit(2_000" in block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block.replace("2_000", "150"), str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    assert namespace["agent"].networks.recurrent
    printed = capsys.readouterr().out
    assert re.fullmatch(r"\[\[-?[01]\.?\d*(e-\d+)?\]\]\n", printed), printed
