"""Learning curves from runs' metrics CSVs (``<run>/<behavior>.csv``) as an image (``kerasrl plot``).

Needs the optional extra ``kerasrl[plot]`` (matplotlib). Every run folder given contributes one
line per behavior (labelled ``run/behavior``) to one figure per metric key.
"""
from __future__ import annotations

import csv
import io
import math
import os
from typing import Optional, Sequence

from kerasrl.exception import TrainerError, one_line

DEFAULT_KEYS = ("Environment/Cumulative Reward",)
PLOT_MISSING = "kerasrl plot needs the optional extra kerasrl[plot] (pip install matplotlib)"


def read_curves(run_dir: str, key: str) -> dict[str, tuple[list[float], list[float]]]:
    """Per behavior CSV of ``run_dir``: the (steps, values) of ``key`` where it has a value. A file
    that cannot be read as a CSV (not UTF-8 text, say) is a one-line error naming it."""
    if not os.path.isdir(run_dir):
        raise TrainerError(f"{run_dir} is not a folder.")
    files = sorted(f for f in os.listdir(run_dir) if f.endswith(".csv"))
    if not files:
        raise TrainerError(f"{run_dir} holds no <behavior>.csv metrics file.")
    curves = {}
    for name in files:
        path = os.path.join(run_dir, name)
        steps, values = _read_curve(path, key)
        if steps:
            curves[name[: -len(".csv")]] = (steps, values)
    return curves


def _read_curve(path: str, key: str) -> tuple[list[float], list[float]]:
    steps: list[float] = []
    values: list[float] = []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            for row in reader:
                value, step = row.get(key) or "", row.get("Step") or ""
                if value and step:
                    number = _number(path, reader.line_num, key, value)
                    if math.isfinite(number):
                        steps.append(_number(path, reader.line_num, "Step", step))
                        values.append(number)
    except UnicodeDecodeError as e:
        raise TrainerError(f"{path} is not a metrics CSV: byte {e.start} is not UTF-8 text.") from None
    except csv.Error as e:
        raise TrainerError(f"{path} is not a metrics CSV ({one_line(e)}).") from None
    except OSError as e:
        raise TrainerError(f"cannot read {path}: {e.strerror or one_line(e)}.") from None
    return steps, values


def _number(path: str, line: int, column: str, text: str) -> float:
    """``text`` of ``column`` on ``line`` of ``path`` as a number; a hand-edited or corrupt cell is a one-line error."""
    try:
        return float(text)
    except ValueError:
        raise TrainerError(f"{path} line {line}, column {column!r}: {text!r} is not a number.") from None


def _cannot_write(output: str, e: OSError) -> TrainerError:
    return TrainerError(f"cannot write {output}: {e.strerror or one_line(e)}.")


def output_format(output: str) -> str:
    """The image format that ``output``'s suffix names (``png`` without one), as matplotlib writes
    it; a suffix that matplotlib does not write (``.py``, ``.csv``) is a one-line error."""
    suffix = os.path.splitext(output)[1][1:].lower()
    if not suffix:
        return "png"
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix not in formats:
        raise TrainerError(f"cannot write {output}: .{suffix} is not an image format matplotlib writes; name a .png "
                           f"file (or one of {', '.join('.' + f for f in sorted(formats))}).")
    return suffix


def _scratch(output: str) -> str:
    """A new, empty file beside ``output`` (created here: nothing else is overwritten)."""
    folder, name = os.path.split(output)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    with open(tmp, "xb"):
        pass
    return tmp


def _check_output(output: str, force: bool) -> str:
    """The format to write ``output`` in, once it is known that it can be written: its suffix names
    an image format, it is not a folder, it exists only with ``force``, its folder exists (it is
    not created) and a file can be created there. Else a one-line error naming it."""
    if not output.strip():
        raise TrainerError(f"the output file name {output!r} is blank; name the image file to write.")
    fmt = output_format(output)
    if os.path.isdir(output):
        raise TrainerError(f"{output} is a folder; name the image file to write.")
    if os.path.lexists(output) and not force:
        raise TrainerError(f"{output} already exists: add --force to overwrite it, or name another file.")
    folder = os.path.dirname(output)
    if folder and not os.path.isdir(folder):
        state = "is not a folder" if os.path.lexists(folder) else "does not exist"
        raise TrainerError(f"cannot write {output}: the folder {folder} {state} (kerasrl plot does not create it).")
    try:
        os.remove(_scratch(output))
    except OSError as e:
        raise _cannot_write(output, e) from e
    return fmt


def _write(output: str, data: bytes) -> None:
    """``data`` to ``output`` atomically (a scratch file beside it, then a rename)."""
    tmp = None
    try:
        tmp = _scratch(output)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, output)
        tmp = None
    except OSError as e:
        raise _cannot_write(output, e) from e
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)


def plot_runs(run_dirs: Sequence[str], output: str, keys: Sequence[str] = DEFAULT_KEYS,
              title: Optional[str] = None, force: bool = False) -> str:
    """Plot ``keys`` (one panel each) against steps for every run of ``run_dirs`` into ``output``,
    in the image format its suffix names (PNG without a suffix). An output that cannot be written
    (a suffix that names no image format, a missing folder, which is not created, or an existing
    file, which only ``force`` replaces) is a one-line error naming it, before anything is drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise TrainerError(f"{PLOT_MISSING}; {e}.") from e
    fmt = _check_output(output, force)
    data = {key: {f"{os.path.basename(os.path.normpath(d))}/{b}": c for d in run_dirs
                  for b, c in read_curves(d, key).items()} for key in keys}
    for key, lines in data.items():
        if not lines:
            raise TrainerError(f"no run of {list(run_dirs)} has values for {key!r}.")
    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 3.5 * len(keys)), squeeze=False)
    image = io.BytesIO()
    try:
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
        fig.savefig(image, format=fmt, dpi=100)
    except (RuntimeError, ValueError, OSError) as e:  # .pgf without LaTeX, say
        raise TrainerError(f"cannot write {output}: matplotlib could not draw it as {fmt}: {one_line(e)}") from e
    finally:
        plt.close(fig)
    _write(output, image.getvalue())
    return output
