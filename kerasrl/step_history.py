"""Small JSON files that keep run state beside the checkpoints, one entry per save.

Each entry holds the trainers' steps at the save and a value (the curricula's lessons, the
samplers' draw count). The file keeps the entries of the latest saves, so that ``--resume`` can
take the one its restored checkpoint belongs to: the newest at or before the restored steps
(older when a crash came between the checkpoint and this file, or the newest checkpoint was
damaged). Written atomically: a crash leaves the previous file whole.
"""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

#: Saves kept in each file.
KEPT = 10


def write_entry(path: str, steps: Mapping[str, int], key: str, value: Any) -> None:
    """Add ``{"steps": steps, key: value}`` to the file at ``path`` (made with its folder if
    missing), keeping the entries of the ``KEPT`` latest saves; the newest entry is also at the top."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    entry = {"steps": {k: int(v) for k, v in steps.items()}, key: value}
    history = [e for e in read_entries(path, key) if e["steps"] != entry["steps"]][-(KEPT - 1):] + [entry]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({**entry, "history": history}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_entries(path: str, key: str) -> list[dict[str, Any]]:
    """The entries the file keeps, oldest first (none when it is missing; a file with no
    history holds one). Raises ``OSError``, ``ValueError``, ``KeyError``, ``TypeError`` or
    ``AttributeError`` for a file that cannot be read: the caller names it."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    entries = data.get("history") or [{"steps": data.get("steps", {}), key: data[key]}]
    return [{"steps": {str(k): int(v) for k, v in e["steps"].items()}, key: e[key]} for e in entries]


def entry_at(entries: list[dict[str, Any]], steps: Optional[Mapping[str, int]]) -> Optional[dict[str, Any]]:
    """The newest of ``entries`` at or before ``steps`` (every behavior's), or the newest of all
    without ``steps``; None when there is none."""
    if steps is not None:
        entries = [e for e in entries if all(v <= steps.get(k, v) for k, v in e["steps"].items())]
    return entries[-1] if entries else None
