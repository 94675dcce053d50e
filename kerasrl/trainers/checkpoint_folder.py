"""The checkpoint folder on disk: the ``checkpoint`` state file (read, written atomically, made to
list every ``model-N`` checkpoint), the candidates a restore tries, and what an interrupted save
leaves behind (see :mod:`kerasrl.trainers.checkpoint` for what TensorFlow writes, in which order)."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
import uuid
from typing import Any, Optional

import tensorflow  # noqa: F401  (its import registers tensorflow.CheckpointState, the state file's message)
from google.protobuf import descriptor_pool, message_factory, text_format
from google.protobuf.text_format import ParseError

from kerasrl.exception import describe

logger = logging.getLogger("kerasrl.trainers")

CHECKPOINT_NAME = "model"
STATE_FILE = "checkpoint"
_INDEX_FILE = re.compile(r"^model-(\d+)\.index$")
_DATA_FILE = re.compile(r"^(model-\d+)\.data-\d{5}-of-\d{5}$")
#: Names only an interrupted write leaves behind (TF's temporaries and export_weights').
STALE_NAMES = (
    re.compile(r"^model-\d+_temp$"),
    re.compile(r"^checkpoint\.tmp[0-9a-f]+$"),
    re.compile(r"\.tempstate\d+$"),
    re.compile(r"\.tmp\.weights\.h5$"),
    re.compile(r"^behavior\.json\.tmp$"),
)
#: The state file's message, ``tensorflow.CheckpointState`` (TF's public API has no constructor for it).
_CHECKPOINT_STATE = message_factory.GetMessageClass(
    descriptor_pool.Default().FindMessageTypeByName("tensorflow.CheckpointState"))
#: State files already reported unreadable (path, inode, size, mtime): a restore and the first
#: save read the same file, and the user is told once.
_reported_states: set[tuple[str, int, int, int]] = set()


def _step_of(prefix: str) -> int:
    """The step number of a ``.../model-N`` prefix (-1 for a prefix that is not ours)."""
    match = _INDEX_FILE.match(os.path.basename(prefix) + ".index")
    return int(match.group(1)) if match else -1


def read_state(folder: str) -> Optional[Any]:
    """The ``checkpoint`` state file's ``CheckpointState`` (paths made absolute), or None when
    it is missing or unreadable (empty, cut short, garbage): a warning names an unreadable one
    (once per version of the file), and the caller then relies on the ``model-*.index`` files
    instead. Parsed here rather than by ``tf.train.get_checkpoint_state``, which would log its
    own warnings about the same file and hide the reason."""
    path = os.path.join(folder, STATE_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        state = _CHECKPOINT_STATE()
        text_format.Merge(text, state)
        if not state.model_checkpoint_path:
            raise ValueError("it names no checkpoint")
    except (ValueError, ParseError, OSError) as e:
        _report_unreadable(path, describe(e, 200))
        return None
    state.model_checkpoint_path = os.path.join(folder, state.model_checkpoint_path)
    for i, listed in enumerate(state.all_model_checkpoint_paths):
        state.all_model_checkpoint_paths[i] = os.path.join(folder, listed)
    return state


def _report_unreadable(path: str, reason: str) -> None:
    """Warn that the state file ``path`` is unreadable, unless this version of it was reported already."""
    try:
        stat = os.stat(path)
        key = (os.path.realpath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    except OSError:
        key = (os.path.realpath(path), -1, -1, -1)
    if key in _reported_states:
        return
    _reported_states.add(key)
    logger.warning("Checkpoint state file %s is unreadable (%s); looking for model-*.index files instead.", path, reason)


def state_prefixes(folder: str, state: Any) -> list[str]:
    """The prefixes ``state`` lists, newest first (its latest, then the others in reverse).

    ``folder`` must be absolute: TF joins a relative listed path to the folder as given, so a
    relative folder would be joined twice and no listed prefix would match one on disk."""
    listed = [state.model_checkpoint_path, *reversed(state.all_model_checkpoint_paths)]
    return _unique([os.path.normpath(os.path.join(folder, p)) for p in listed if p])


def _disk_prefixes(folder: str) -> list[str]:
    """The ``model-N`` prefixes with an index file in ``folder``, highest step first."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    steps = sorted((int(m.group(1)) for m in map(_INDEX_FILE.match, names) if m), reverse=True)
    return [os.path.normpath(os.path.join(folder, f"{CHECKPOINT_NAME}-{step}")) for step in steps]


def folder_names(folder: str) -> set[str]:
    """The names in ``folder`` (none when it cannot be listed)."""
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _unique(prefixes: list[str]) -> list[str]:
    return list(dict.fromkeys(prefixes))


def initialize_from_advice(model_path: str) -> str:
    """What to check when ``model_path`` (``<run>/models/<behavior>``, given to --initialize-from)
    holds no checkpoint: the behaviors that the source run does have."""
    models = os.path.dirname(os.path.normpath(model_path))
    run = os.path.dirname(models) if os.path.basename(models) == "models" else models
    names = sorted(os.listdir(models)) if os.path.isdir(models) else []
    behaviors = [n for n in names if os.path.isdir(os.path.join(models, n)) and checkpoint_candidates(os.path.join(models, n))]
    has = f"it has {', '.join(behaviors)}" if behaviors else "it has no checkpoint at all"
    return f"--initialize-from {run} has no checkpoint of behavior {os.path.basename(os.path.normpath(model_path))}; {has}."


def checkpoint_candidates(folder: str) -> list[str]:
    """Checkpoint prefixes to try, newest first: those the state file lists (when it parses),
    then any other ``model-N.index`` by step; only prefixes whose index file exists (absolute)."""
    folder = os.path.abspath(folder)
    state = read_state(folder)
    listed = state_prefixes(folder, state) if state is not None else []
    return [p for p in _unique(listed + _disk_prefixes(folder)) if os.path.isfile(p + ".index")]


def remove_stale_files(folder: str) -> list[str]:
    """Delete what an interrupted save leaves in ``folder`` (temporary folders and files, data
    files without an index); returns the names removed. Never a complete checkpoint's file."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    indexed = {m.group(0)[: -len(".index")] for m in map(_INDEX_FILE.match, names) if m}
    stale = [n for n in names if any(p.search(n) for p in STALE_NAMES)]
    stale += [n for n in names if (m := _DATA_FILE.match(n)) and m.group(1) not in indexed]
    for name in stale:
        path = os.path.join(folder, name)
        try:
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
        except FileNotFoundError:
            pass
    if stale:
        logger.warning("Removed what an interrupted save left in %s: %s", folder, ", ".join(sorted(stale)))
    return stale


def write_state(folder: str, latest: str, prefixes: list[str]) -> None:
    """Write the ``checkpoint`` state file atomically (a temporary file, fsync, ``os.replace``)
    with paths relative to ``folder``, so that the folder can move; ``prefixes`` oldest first."""
    stamps = [_mtime(p + ".index") for p in prefixes]
    lines = [f'model_checkpoint_path: "{os.path.basename(latest)}"']
    lines += [f'all_model_checkpoint_paths: "{os.path.basename(p)}"' for p in prefixes]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in stamps]
    # The manager only tracks checkpoints newer than the last preserved one.
    lines.append(f"last_preserved_timestamp: {min(stamps, default=time.time()) - 1.0!r}")
    path = os.path.join(folder, STATE_FILE)
    tmp = f"{path}.tmp{uuid.uuid4().hex}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return time.time()


def adopt_untracked(folder: str) -> None:
    """Make the state file list every ``model-N`` checkpoint in ``folder`` (by step), when it is
    unreadable or misses some (a killed save's), so that TF's manager neither fails on it nor
    leaves those files outside ``keep`` forever. A listed checkpoint stays the latest."""
    folder = os.path.abspath(folder)
    state = read_state(folder)
    on_disk = _disk_prefixes(folder)
    listed = state_prefixes(folder, state) if state is not None else []
    if not set(on_disk) - set(listed):
        if state is None and os.path.exists(os.path.join(folder, STATE_FILE)) and not on_disk:
            os.remove(os.path.join(folder, STATE_FILE))  # unreadable and lists nothing we have
        return
    prefixes = sorted(set(on_disk) | {p for p in listed if os.path.isfile(p + ".index")}, key=_step_of)
    latest = listed[0] if listed and listed[0] in prefixes else prefixes[-1]
    logger.warning("Checkpoint state file %s did not list %s; now it does.", os.path.join(folder, STATE_FILE),
                   ", ".join(os.path.basename(p) for p in sorted(set(on_disk) - set(listed), key=_step_of)))
    write_state(folder, latest, prefixes)
