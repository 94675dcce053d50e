"""The command line and the main job's summary line; Gymnasium CartPole is learned."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from kerasrl.cli import build_parser, main, run_training

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FINAL = re.compile(r"^final steps=(\d+) mean_return=(\S+) steps_per_sec=(\S+) wall_s=(\S+)$", re.M)


def test_cli_trains_builtin_env_and_resumes(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 64\n  hidden_units: 16\n  learning_rate: 5.0e-3\n"
                   "  summary_freq: 100\n")
    base = [str(cfg), "--env", "Simple1D", "--num-envs", "1", "--seed", "3", "--results-dir", str(tmp_path),
            "--run-id", "r", "--progress-every", "100"]
    assert main(base + ["--steps", "300"]) == 0
    out = capsys.readouterr().out
    m = FINAL.search(out)
    assert m and int(m.group(1)) == 301
    assert float(m.group(3)) > 0 and float(m.group(4)) > 0
    models = tmp_path / "r" / "models" / "Simple1D"
    assert (models / "model-301.index").exists()
    assert main(base + ["--steps", "500", "--resume"]) == 0
    m = FINAL.search(capsys.readouterr().out)
    assert int(m.group(1)) == 200  # 301 → 501
    assert (models / "model-501.index").exists()
    assert main(base + ["--steps", "50", "--resume", "--inference"]) == 0
    m = FINAL.search(capsys.readouterr().out)
    assert int(m.group(1)) == 50
    assert sorted(p.name for p in models.glob("model-*.index"))[-1] == "model-501.index"  # nothing new saved


def test_cli_errors_name_the_problem(tmp_path, capsys):
    assert main([str(tmp_path / "missing.yaml"), "--env", "Simple1D", "--num-envs", "1"]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n")
    assert main([str(cfg), "--env", "Simple1D", "--num-envs", "4"]) == 2
    assert "--num-envs" in capsys.readouterr().err


@pytest.mark.slow
def test_cartpole_reaches_475_within_100k_steps(tmp_path):
    # Seed 1 reaches a rolling mean of 475 at ~68k steps. Learning curves are chaotic in the float
    # round-off: a change of numerics re-draws every seed's curve (see benchmarks/bench_ppo.py for
    # the spread over seeds; SB3 also misses 475 at 100k on about one seed in ten).
    args = build_parser("train_ppo.py", config_required=False).parse_args(
        ["--config", os.path.join(ROOT, "config", "cartpole_zoo.yaml"), "--steps", "100000", "--seed", "1",
         "--results-dir", str(tmp_path), "--progress-every", "100000"]
    )
    result = run_training(args)
    assert result["steps"] >= 100000
    assert result["mean_return"] >= 475, result


def test_main_job_script_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "train_ppo.py"), "--steps", "4000", "--results-dir",
         str(tmp_path), "--progress-every", "2000"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    m = FINAL.search(proc.stdout)
    assert m, proc.stdout
    assert int(m.group(1)) >= 4000
    assert np.isfinite(float(m.group(2)))
    assert (tmp_path / "cartpole_ppo" / "models" / "CartPole-v1").exists()
