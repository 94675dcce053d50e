"""The examples that work in a temporary folder of their own remove it when they end."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
@pytest.mark.parametrize("example, args, prefix", [
    ("train_gail.py", ["--expert-steps", "1000", "--demo-steps", "300", "--gail-steps", "1000"], "train_gail_"),
    ("train_curiosity.py", ["--steps", "1000", "--seeds", "1", "--variants", "curiosity"], "train_curiosity_"),
])
def test_an_example_leaves_no_temporary_folder(tmp_path, example, args, prefix):
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", example), *args], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, TMPDIR=str(temp)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "final " in proc.stdout
    assert not [p.name for p in temp.iterdir() if p.name.startswith(prefix)]
