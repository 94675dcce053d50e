"""benchmarks/plot_curves.py: learning curves over seeds from a benchmark's --curves CSV."""
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import plot_curves  # noqa: E402

COMMENT = "# CartPole-v1 (cartpole); x86_64, 2 CPUs"


def _write(path: Path, rows: list[tuple[str, int, int, float]], comment: str = COMMENT) -> Path:
    lines = [comment, "library,seed,step,rolling_return"] + [f"{a},{b},{c},{d}" for a, b, c, d in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_curves_are_read_per_library_and_seed(tmp_path):
    path = _write(tmp_path / "c.csv", [("kerasrl", 0, 10, 1.0), ("kerasrl", 0, 20, 2.0), ("sb3", 3, 15, 5.0)])
    comment, runs = plot_curves.read_curves(str(path))
    assert comment == "CartPole-v1 (cartpole); x86_64, 2 CPUs"
    np.testing.assert_array_equal(runs["kerasrl"][0][0], [10, 20])
    np.testing.assert_array_equal(runs["sb3"][3][1], [5.0])


def test_a_curve_holds_its_value_between_points():
    grid = np.array([0, 5, 10, 15, 20, 25])
    values = plot_curves.on_grid(np.array([10, 20]), np.array([1.0, 2.0]), grid)
    np.testing.assert_array_equal(values, [np.nan, np.nan, 1.0, 1.0, 2.0, 2.0])


def test_median_and_band_are_over_seeds():
    seeds = {s: (np.array([0]), np.array([float(v)])) for s, v in enumerate([1, 2, 3, 4, 100])}
    median, low, high = plot_curves.summarise(seeds, np.array([0, 1]))
    assert median.tolist() == [3.0, 3.0] and low.tolist() == [2.0, 2.0] and high.tolist() == [4.0, 4.0]
    _, low, high = plot_curves.summarise(seeds, np.array([0]), band="minmax")
    assert (low[0], high[0]) == (1.0, 100.0)


def test_a_malformed_file_is_one_error_naming_it(tmp_path, capsys):
    path = _write(tmp_path / "bad.csv", [("kerasrl", 0, 10, 1.0)])
    path.write_text(path.read_text() + "kerasrl,zero,20,2\n")
    assert plot_curves.main([str(path), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.csv, line 4" in err[0]
    assert not (tmp_path / "x.png").exists()


def test_the_figure_is_written(tmp_path):
    pytest.importorskip("matplotlib", reason="plot_curves.py draws with matplotlib (the plot extra)")
    rows = [(lib, seed, step, step / 100 + seed + (5 if lib == "sb3" else 0))
            for lib in ("kerasrl", "sb3") for seed in range(3) for step in range(100, 3000, 100)]
    path = _write(tmp_path / "c.csv", rows)
    assert plot_curves.main([str(path)]) == 0
    png = (tmp_path / "c.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
