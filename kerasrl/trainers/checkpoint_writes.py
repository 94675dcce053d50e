"""What is written beside the checkpoints, and how a failed write is told: write errors as one
line (:class:`CheckpointWriteError`, :func:`write_failure`), the behavior record (``behavior.json``)
and the export of a model's weights (``.weights.h5``), each written atomically."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from typing import Any, Optional

import tensorflow as tf

from kerasrl.exception import UnityTrainerException, one_line

#: Beside the checkpoints: the behavior's spec, settings and seed (``Trainer.behavior_record``).
BEHAVIOR_FILE = "behavior.json"
#: What writing a checkpoint or an export raises on a full disk or a folder that cannot be written:
#: TensorFlow's ``OpError`` (``ResourceExhaustedError``, ``PermissionDeniedError``...), Python's ``OSError``.
WRITE_ERRORS = (tf.errors.OpError, OSError)


class CheckpointWriteError(UnityTrainerException):
    """A checkpoint could not be written (a full disk, a folder that cannot be written): one line
    naming the folder and the cause; the checkpoints written before it are intact."""


def write_failure(error: BaseException) -> str:
    """Why a write failed, on one line: the OS's reason and the error's type, without the path
    and the op that TensorFlow's message adds (the caller names the folder)."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror} ({type(error).__name__})"
    text = one_line(getattr(error, "message", None) or error)
    text = re.sub(r"\s*\[Op:\w+\]$", "", re.sub(r"^\{\{.*?\}\}\s*", "", text))
    quoted = re.search(r"error message = '([^']+)'", text)  # HDF5's report of the OS's error
    reason = quoted.group(1) if quoted else text.rsplit("; ", 1)[-1].strip() or text
    reason = reason if len(reason) <= 200 else reason[:197] + "..."
    return f"{reason} ({type(error).__name__})"



def write_json_atomically(path: str, value: Any) -> None:
    """``value`` as JSON at ``path``, whole or not at all (no temporary file left when it fails)."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def read_behavior_record(model_path: str) -> Optional[dict[str, Any]]:
    """The behavior record beside ``model_path``'s checkpoints; None for folders written before it existed."""
    path = os.path.join(model_path, BEHAVIOR_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    return record if isinstance(record, dict) else None


def export_weights(model: Any, path: str) -> None:
    """Write ``model``'s weights to ``path`` (``.weights.h5``) atomically, creating its folder."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp.weights.h5"
    try:
        _save_weights(model, tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def _save_weights(model: Any, path: str) -> None:
    """``model.save_weights(path)``; a failed write raises a plain ``OSError`` with h5py's reason.
    After a failed write (a full disk) h5py prints a traceback for each handle it cannot close,
    as the error's traceback is released: that happens here, with stderr set aside, so the
    failure is said once (what a successful save writes to stderr is passed on)."""
    failure: Optional[OSError] = None
    with contextlib.redirect_stderr(io.StringIO()) as noise:
        try:
            model.save_weights(path)
        except OSError as e:
            failure = OSError(e.errno, os.strerror(e.errno) if e.errno else one_line(e), path)
    if failure is not None:
        raise failure
    if noise.getvalue():
        sys.stderr.write(noise.getvalue())
