"""benchmarks/bench_compare.py reads bench_ppo.py's result lines of every task and reports them."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "benchmarks" / "bench_compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_compare"] = module  # its dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_compare", None)


@pytest.mark.parametrize("line, sps, threshold, reach, final", [
    ("kerasrl seed 3: 18234 steps/s (13001 with compile, XLA True), 475 reached at 61440, final mean 500.0",
     (18234, 13001), "475", 61440, 500.0),
    ("kerasrl seed 3: 2849 steps/s (2696 with compile, XLA True), 1000 reached at None, final mean 674.9",
     (2849, 2696), "1000", None, 674.9),
    ("kerasrl seed 3: 1500 steps/s (1400 with compile, XLA False), -200 reached at 90112, final mean -180.5",
     (1500, 1400), "-200", 90112, -180.5),
])
def test_result_line_of_any_task_is_parsed(compare, line, sps, threshold, reach, final):
    run = compare.parse_output(compare.Run("current", 3, 1.0), f"noise\n{line}\nmore noise\n")
    assert run.ok and (run.sps, run.sps_all) == sps
    assert (run.threshold, run.reach, run.final) == (threshold, reach, final)
    assert "reached at" in compare.format_run(run, 1, 2) and threshold in compare.format_run(run, 1, 2)


def test_missing_line_or_other_seed_is_a_failed_run(compare):
    line = "kerasrl seed 4: 2849 steps/s (2696 with compile, XLA True), 1000 reached at None, final mean 1.0"
    run = compare.parse_output(compare.Run("current", 3, 1.0), line)
    assert not run.ok and "no 'kerasrl seed" in run.error


def test_summary_names_the_task_and_its_threshold(compare, capsys):
    args = compare.parse_args(["--task", "hopper", "--seeds", "2", "--steps", "1000"])
    runs = []
    for tree, sps in (("baseline", 100.0), ("current", 150.0)):
        for seed in (0, 1):
            line = f"kerasrl seed {seed}: {sps} steps/s ({sps} with compile), 1000 reached at None, final mean 1.0"
            runs.append(compare.parse_output(compare.Run(tree, seed, 1.0), line))
    compare.summarize(runs, args)
    out = capsys.readouterr().out
    assert "--task hopper" in out and "steps to rolling mean 1000" in out and "1.500x" in out
