"""Buffers on disk: a field per HDF5 dataset, and files written whole or not at all (made in
memory, written beside the target and renamed into place)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
from typing import Any, Iterator

import h5py
import numpy as np

from kerasrl._buffer import AgentBufferField, BufferException

_META = "kerasrl_buffer_fields"


@contextlib.contextmanager
def atomic_h5_file(path: str) -> Iterator[h5py.File]:
    """A new HDF5 file that appears at ``path`` only once complete. It is made in memory, then
    written whole by :func:`write_atomically`, so that a failed write (a full disk, a folder that
    cannot be written) is the OS's ``OSError`` and leaves no file (HDF5 writing to the disk fails
    messily: a ``RuntimeError``, errors printed as it cleans up, at times a crash at exit)."""
    image = io.BytesIO()
    with h5py.File(image, "w") as hf:
        yield hf
    with image.getbuffer() as data:
        write_atomically(path, data)


def write_atomically(path: str, data: memoryview) -> None:
    """``data`` as a new file at ``path``, whole or not at all: written as ``path + ".tmp-XXXX"``
    and renamed into place; on any failure (Ctrl-C included) the temporary file is removed and
    an existing ``path`` is left untouched."""
    tmp = f"{path}.tmp-{secrets.token_hex(4)}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_fields(group: h5py.Group, items: list[tuple[str, AgentBufferField]]) -> None:
    """One gzip dataset per field; padding values and empty fields in one JSON attribute."""
    meta: dict[str, dict[str, Any]] = {}
    for key, field in items:
        arr = field.array
        group.create_dataset(key, data=arr, compression="gzip" if arr.size else None)
        entry: dict[str, Any] = {}
        if field.dtype is None:
            entry["uninitialised"] = True
        pv = field.padding_value
        if isinstance(pv, (np.bool_, np.number)):
            pv = pv.item()
        if isinstance(pv, (bool, int, float)):
            entry["padding_value"] = pv
        meta[key] = entry
    group.attrs[_META] = json.dumps(meta)


def _read_fields(group: h5py.Group) -> dict[str, AgentBufferField]:
    """Every dataset (nested groups give 'a/b' keys) as a new field."""
    datasets: dict[str, h5py.Dataset] = {}

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            datasets[name] = obj

    group.visititems(visit)
    raw = group.attrs.get(_META)
    meta = json.loads(raw) if raw is not None else {}
    loaded: dict[str, AgentBufferField] = {}
    for key, ds in datasets.items():
        data = ds[()]
        if not isinstance(data, np.ndarray) or data.ndim == 0:
            raise BufferException(f"dataset {key!r} is not an array of rows")
        entry = meta.get(key, {})
        pv = entry.get("padding_value", 0)
        if entry.get("uninitialised", False):
            field = AgentBufferField(padding_value=pv)
        else:
            field = AgentBufferField.from_array(data, padding_value=pv)
        loaded[key] = field
    return loaded
