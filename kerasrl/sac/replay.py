"""SAC's replay buffer: a circular store of transitions with uniform sampling.

Each field is one preallocated numpy column of ``capacity`` rows; appending writes a whole
trajectory at once at the write position (wrapping around, the oldest rows overwritten) and
sampling draws every mini-batch of an update in one index array, so no Python runs per row.
Files are the experience buffer's HDF5 format (``kerasrl.buffer.AgentBuffer``), rows oldest
first, with the capacity beside them, written atomically.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

import h5py
import numpy as np

from kerasrl.buffer import AgentBuffer, BufferException, atomic_h5_file

_CAPACITY = "kerasrl_replay_capacity"


class ReplayBuffer:
    """At most ``capacity`` transitions, each a row of every field."""

    def __init__(self, capacity: int) -> None:
        if int(capacity) < 1:
            raise ValueError(f"A replay buffer needs a capacity >= 1, got {capacity}.")
        self.capacity = int(capacity)
        self.columns: dict[str, np.ndarray] = {}
        #: Rows held, and where the next row is written.
        self.size = 0
        self.position = 0

    def __len__(self) -> int:
        return self.size

    def add(self, rows: Mapping[str, np.ndarray]) -> None:
        """Append rows (one array per field, all of one length); the first call fixes the fields,
        their dtypes and row shapes."""
        arrays = {k: np.asarray(v) for k, v in rows.items()}
        lengths = {len(v) for v in arrays.values()}
        if len(lengths) != 1:
            raise BufferException(f"Replay rows must be of one length per field, got {sorted(lengths)}.")
        if not self.columns:
            self.columns = {k: np.zeros((self.capacity, *v.shape[1:]), v.dtype) for k, v in arrays.items()}
        elif arrays.keys() != self.columns.keys():
            raise BufferException(f"Replay rows have fields {sorted(arrays)}, the buffer {sorted(self.columns)}.")
        n = lengths.pop()
        if n == 0:
            return
        if n > self.capacity:  # only the newest ``capacity`` rows would survive
            arrays = {k: v[-self.capacity :] for k, v in arrays.items()}
            n = self.capacity
        index = (self.position + np.arange(n)) % self.capacity
        for k, v in arrays.items():
            column = self.columns[k]
            if v.shape[1:] != column.shape[1:]:
                raise BufferException(f"Replay field {k} has rows of shape {column.shape[1:]}, got {v.shape[1:]}.")
            column[index] = v
        self.position = int((self.position + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Rows drawn uniformly with replacement, every field gathered as ``[*shape, ...]``."""
        if self.size == 0:
            raise BufferException("Cannot sample from an empty replay buffer.")
        index = rng.integers(0, self.size, size=shape)
        return {k: v[index] for k, v in self.columns.items()}

    def chronological(self) -> dict[str, np.ndarray]:
        """Every held row, oldest first."""
        order = (self.position - self.size + np.arange(self.size)) % self.capacity
        return {k: v[order] for k, v in self.columns.items()}

    # -- files ----------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the rows (oldest first) and the capacity to ``path``, atomically."""
        buffer = AgentBuffer()
        for key, rows in self.chronological().items():
            buffer[key] = rows
        try:
            with atomic_h5_file(os.fspath(path)) as hf:
                buffer.save_to_file(hf)
                hf.attrs[_CAPACITY] = self.capacity
        except BufferException:
            raise
        except OSError as e:
            raise BufferException(f"Unable to save the replay buffer to {path!r}: {e}") from e

    @classmethod
    def load(cls, path: str, capacity: Optional[int] = None) -> "ReplayBuffer":
        """The buffer saved at ``path``; ``capacity`` (default: the saved one) keeps the newest rows."""
        buffer = AgentBuffer()
        buffer.load_from_file(path)
        try:
            with h5py.File(path, "r") as hf:
                saved = int(hf.attrs.get(_CAPACITY, 0))
        except OSError as e:
            raise BufferException(f"Unable to load a replay buffer from {path!r}: {e}") from e
        replay = cls(capacity or saved or max((len(buffer[k]) for k in buffer), default=0) or 1)
        replay.add({k: field.array for k, field in buffer.items()})
        return replay
