"""Learning curves from runs' metrics CSVs (``<run>/<behavior>.csv``) as a PNG (``kerasrl plot``).

Needs the optional extra ``kerasrl[plot]`` (matplotlib). Every run folder given contributes one
line per behavior (labelled ``run/behavior``) to one figure per metric key.
"""
from __future__ import annotations

import csv
import math
import os
from typing import Optional, Sequence

from kerasrl.exception import TrainerError

DEFAULT_KEYS = ("Environment/Cumulative Reward",)
PLOT_MISSING = "kerasrl plot needs the optional extra kerasrl[plot] (pip install matplotlib)"


def read_curves(run_dir: str, key: str) -> dict[str, tuple[list[float], list[float]]]:
    """Per behavior CSV of ``run_dir``: the (steps, values) of ``key`` where it has a value."""
    if not os.path.isdir(run_dir):
        raise TrainerError(f"{run_dir} is not a folder.")
    files = sorted(f for f in os.listdir(run_dir) if f.endswith(".csv"))
    if not files:
        raise TrainerError(f"{run_dir} holds no <behavior>.csv metrics file.")
    curves = {}
    for name in files:
        steps, values = [], []
        path = os.path.join(run_dir, name)
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            for row in reader:
                value, step = row.get(key) or "", row.get("Step") or ""
                if value and step:
                    number = _number(path, reader.line_num, key, value)
                    if math.isfinite(number):
                        steps.append(_number(path, reader.line_num, "Step", step))
                        values.append(number)
        if steps:
            curves[name[: -len(".csv")]] = (steps, values)
    return curves


def _number(path: str, line: int, column: str, text: str) -> float:
    """``text`` of ``column`` on ``line`` of ``path`` as a number; a hand-edited or corrupt cell is a one-line error."""
    try:
        return float(text)
    except ValueError:
        raise TrainerError(f"{path} line {line}, column {column!r}: {text!r} is not a number.") from None


def _cannot_write(output: str, e: OSError) -> TrainerError:
    return TrainerError(f"cannot write {output}: {e.strerror or e}.")


def _check_writable(output: str) -> None:
    """Create ``output``'s folder and a scratch file beside it (removed), or raise a one-line error."""
    tmp = output + ".tmp.png"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with open(tmp, "wb"):
            pass
    except OSError as e:
        raise _cannot_write(output, e) from e
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def plot_runs(run_dirs: Sequence[str], output: str, keys: Sequence[str] = DEFAULT_KEYS,
              title: Optional[str] = None) -> str:
    """Plot ``keys`` (one panel each) against steps for every run of ``run_dirs`` into ``output`` (PNG).
    An output that cannot be written is a one-line error naming it, before anything is drawn."""
    _check_writable(output)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise TrainerError(f"{PLOT_MISSING}; {e}.") from e
    data = {key: {f"{os.path.basename(os.path.normpath(d))}/{b}": c for d in run_dirs
                  for b, c in read_curves(d, key).items()} for key in keys}
    for key, lines in data.items():
        if not lines:
            raise TrainerError(f"no run of {list(run_dirs)} has values for {key!r}.")
    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 3.5 * len(keys)), squeeze=False)
    for ax, (key, lines) in zip(axes[:, 0], data.items()):
        for label, (steps, values) in lines.items():
            ax.plot(steps, values, label=label)
        ax.set_xlabel("environment steps")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    tmp = output + ".tmp.png"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, output)
    except OSError as e:
        raise _cannot_write(output, e) from e
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
    return output
