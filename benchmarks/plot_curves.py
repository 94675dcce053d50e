"""Learning curves of a benchmark, kerasrl beside its peer: the median over seeds and the spread.

    python benchmarks/bench_ppo.py --seeds 5 --curves cartpole.csv
    python benchmarks/plot_curves.py cartpole.csv -o cartpole.png [--title "..."] [--band minmax]

The input is what ``bench_ppo.py --curves`` writes: ``library,seed,step,rolling_return`` rows (the
rolling mean return of the last ≤100 episodes at each episode end), after an optional ``#``
comment line that names the task and the machine. Each run's curve is held constant between its
points and read on a common grid of steps up to the shortest run's last point, so every library's
median and band at a step are over the same seeds. The band is the interquartile range by
default (``--band minmax``: the whole range over seeds). Needs matplotlib (``kerasrl[plot]``).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import warnings
from collections import defaultdict
from typing import Optional, Sequence

import numpy as np

#: Colours per library (others get matplotlib's cycle).
COLOURS = {"kerasrl": "tab:red", "sb3": "tab:blue"}
LABELS = {"kerasrl": "kerasrl", "sb3": "Stable-Baselines3"}


def read_curves(path: str) -> tuple[str, dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]]:
    """``(comment, {library: {seed: (steps, values)}})`` from a ``--curves`` CSV; a malformed file is
    one ``ValueError`` naming the file and the line."""
    comment = ""
    runs: dict[str, dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        lines = [line for line in f]
    if lines and lines[0].startswith("#"):
        comment = lines.pop(0)[1:].strip()
    reader = csv.DictReader(lines)
    if reader.fieldnames != ["library", "seed", "step", "rolling_return"]:
        raise ValueError(f"{path}: expected the columns library,seed,step,rolling_return, got {reader.fieldnames}")
    for number, row in enumerate(reader, start=2 + bool(comment)):
        try:
            runs[row["library"]][int(row["seed"])].append((int(row["step"]), float(row["rolling_return"])))
        except (TypeError, ValueError):
            raise ValueError(f"{path}, line {number}: not library,seed,step,return: {row}") from None
    if not runs:
        raise ValueError(f"{path} holds no curve")
    out = {lib: {seed: (np.array([p[0] for p in pts]), np.array([p[1] for p in pts])) for seed, pts in seeds.items()}
           for lib, seeds in runs.items()}
    return comment, out


def on_grid(steps: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The curve's last value at or before each grid step (NaN before its first point)."""
    index = np.searchsorted(steps, grid, side="right") - 1
    return np.where(index >= 0, values[np.clip(index, 0, None)], np.nan)


def summarise(seeds: dict[int, tuple[np.ndarray, np.ndarray]], grid: np.ndarray,
              band: str = "iqr") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, lower and upper edge of the band over seeds, at each grid step."""
    stacked = np.stack([on_grid(steps, values, grid) for steps, values in seeds.values()])
    low, high = (25, 75) if band == "iqr" else (0, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: before any seed's first episode
        return (np.nanmedian(stacked, axis=0), np.nanpercentile(stacked, low, axis=0),
                np.nanpercentile(stacked, high, axis=0))


def plot(path: str, output: str, title: Optional[str] = None, band: str = "iqr", points: int = 400) -> str:
    """Draw the file's curves to ``output`` (PNG); returns ``output``.

    The file is read first, so a malformed one is named even where matplotlib is missing."""
    comment, runs = read_curves(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SystemExit(f"plot_curves.py needs matplotlib: pip install \"kerasrl[plot]\" ({e})") from None
    end = min(steps[-1] for seeds in runs.values() for steps, _ in seeds.values())
    grid = np.linspace(0, end, points)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for library, seeds in sorted(runs.items()):
        median, low, high = summarise(seeds, grid, band)
        colour = COLOURS.get(library)
        label = f"{LABELS.get(library, library)} (median of {len(seeds)} seeds)"
        ax.plot(grid, median, color=colour, label=label, linewidth=1.8)
        ax.fill_between(grid, low, high, color=colour, alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps (every copy's)")
    ax.set_ylabel("rolling mean return (last 100 episodes)")
    spread = "interquartile range" if band == "iqr" else "min–max"
    ax.set_title(title or comment or os.path.basename(path), fontsize=10)
    ax.legend(loc="lower right", fontsize=8, title=f"band: {spread} over seeds", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = f"{output}.tmp.png"
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, output)  # a whole PNG or none
    return output


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", help="CSV written by bench_ppo.py --curves")
    parser.add_argument("-o", "--output", default=None, help="PNG to write (default: the CSV's name with .png)")
    parser.add_argument("--title", default=None, help="default: the CSV's comment line (task and machine)")
    parser.add_argument("--band", choices=("iqr", "minmax"), default="iqr", help="the spread over seeds")
    args = parser.parse_args(argv)
    output = args.output or os.path.splitext(args.curves)[0] + ".png"
    try:
        print(plot(args.curves, output, args.title, args.band))
    except (OSError, ValueError) as e:
        print(f"plot_curves.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
