"""A plain-Python, list-based reference of the buffer semantics.

Structured like the 2019 ML-Agents buffer (fields are lists of numpy rows, one Python
operation per row, rows stored as given or as views of the extending array, never copied
one by one) but with the fixed behaviours of :mod:`kerasrl.buffer`: dtypes fixed by the
first row and preserved, ``training_length=None`` meaning 1, the trailing partial sequence
kept at the end by ``shuffle``, numpy RNG draws, numpy mini-batches.  The property tests
compare the Cython buffer to this; the benchmark uses it as the "2019 style" baseline.
Callers must not modify arrays after handing them over (the rows may be views of them).
"""
from __future__ import annotations

import operator
from typing import Any, Hashable, Iterable, Mapping, Sequence

import h5py
import numpy as np

from kerasrl.buffer import BufferException

TOO_LARGE = (
    "The batch size and training length requested for get_batch where too large given the "
    "current number of data points."
)

_CATEGORY = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


def _numpy_origin(x: Any) -> bool:
    while isinstance(x, (list, tuple)) and len(x) > 0:
        x = x[0]
    return isinstance(x, (np.ndarray, np.generic, RefField))


def _as_array(x: Any, label: str) -> np.ndarray:
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as e:
        raise BufferException(f"Field {label}: cannot convert {type(x).__name__}: {e}") from e


def _native(dtype: np.dtype) -> np.dtype:
    return np.dtype(dtype.newbyteorder("=").str)


def _index(value: Any, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise BufferException(f"{what} must be an integer, got {value!r}") from None


class RefField(list):
    """A list of rows (numpy arrays of the field's dtype and row shape)."""

    def __init__(self, padding_value: Any = 0, name: Any = None) -> None:
        super().__init__()
        self.padding_value = padding_value
        self.name = name
        self.dtype: np.dtype | None = None
        self.row_shape: tuple | None = None

    def _label(self) -> str:
        return "<unnamed>" if self.name is None else repr(self.name)

    def _rows(self, x: Any, single: bool,
              fresh: bool) -> tuple[list, np.dtype | None, tuple | None]:
        python = not _numpy_origin(x)
        arr = _as_array(x, self._label())
        if not single:
            if arr.ndim == 0:
                raise BufferException(f"Field {self._label()}: expected a sequence of rows")
            if arr.shape[0] == 0:
                return [], self.dtype, self.row_shape
        shape = arr.shape if single else arr.shape[1:]
        if arr.dtype.kind not in _CATEGORY:
            raise BufferException(f"Field {self._label()}: unsupported dtype {arr.dtype}")
        if fresh or self.dtype is None:
            target = _native(arr.dtype)
            if python and target == np.float64:
                target = np.dtype(np.float32)
        else:
            if shape != self.row_shape or _CATEGORY[arr.dtype.kind] != _CATEGORY[self.dtype.kind]:
                raise BufferException(
                    f"Field {self._label()}: cannot add a row of shape {shape} and dtype "
                    f"{arr.dtype} to a field whose rows have shape {self.row_shape} and dtype "
                    f"{self.dtype}"
                )
            target = self.dtype
        arr = arr.astype(target, copy=False)
        rows = [arr] if single else list(arr)
        return rows, target, shape

    def append(self, element: Any, padding_value: Any = 0) -> None:
        if (isinstance(element, (np.ndarray, np.generic)) and element.dtype == self.dtype
                and element.shape == self.row_shape):
            super().append(element)
            self.padding_value = padding_value
            return
        rows, dtype, shape = self._rows(element, True, False)
        if self.dtype is None:
            self.dtype, self.row_shape = dtype, shape
        super().append(np.array(rows[0], dtype=dtype))
        self.padding_value = padding_value

    def extend(self, data: Any) -> None:
        rows, dtype, shape = self._rows(data, False, False)
        if rows and self.dtype is None:
            self.dtype, self.row_shape = dtype, shape
        super().extend(rows)

    def set(self, data: Any) -> None:
        rows, dtype, shape = self._rows(data, False, True)
        self.reset_field()
        if rows:
            self.dtype, self.row_shape = dtype, shape
        super().extend(rows)

    def reset_field(self) -> None:
        self[:] = []
        self.dtype = None
        self.row_shape = None

    @property
    def array(self) -> np.ndarray:
        return self._stack(list(self))

    def _stack(self, rows: list) -> np.ndarray:
        if self.dtype is None:
            return np.empty((0,), np.float32)
        if not rows:
            return np.empty((0,) + self.row_shape, self.dtype)
        return np.array(rows, dtype=self.dtype)

    def pad_row(self) -> np.ndarray:
        try:
            with np.errstate(all="ignore"):
                last = np.asarray(self[-1])[np.newaxis]
                return (last * self.padding_value).astype(self.dtype)[0]
        except (OverflowError, TypeError, ValueError) as e:
            raise BufferException(
                f"Field {self._label()}: cannot pad with {self.padding_value!r}"
            ) from e

    def get_batch(self, batch_size: int | None = None, training_length: int | None = 1,
                  sequential: bool = True) -> np.ndarray:
        length = 1 if training_length is None else _index(training_length, "training_length")
        if length < 1:
            raise BufferException("training_length must be at least 1")
        if batch_size is not None:
            batch_size = _index(batch_size, "batch_size")
            if batch_size < 0:
                raise BufferException("batch_size must be non-negative")
        n = len(self)
        if sequential:
            leftover = n % length
            max_batch = n // length + (leftover != 0)
            if batch_size is None:
                batch_size = max_batch
            if batch_size > max_batch:
                raise BufferException(TOO_LARGE)
            if batch_size * length > n:
                pad = self.pad_row()
                return self._stack([pad] * (length - leftover) + list(self))
            return self._stack(list(self[n - batch_size * length:]))
        if batch_size is None:
            batch_size = n - length + 1
        if n - length + 1 < batch_size:
            raise BufferException(TOO_LARGE)
        rows: list = []
        for end in range(n - batch_size + 1, n + 1):
            rows += self[end - length:end]
        return self._stack(rows)


class RefAgentBuffer(dict):
    def __missing__(self, key: Any) -> RefField:
        field = RefField(name=key)
        self[key] = field
        return field

    def reset_agent(self) -> None:
        for field in self.values():
            field.reset_field()

    def check_length(self, key_list: Sequence[Any]) -> bool:
        if len(key_list) < 2:
            return True
        length = None
        for key in key_list:
            if key not in self:
                return False
            if length is not None and length != len(self[key]):
                return False
            length = len(self[key])
        return True

    def shuffle(self, sequence_length: int, key_list: Iterable[Any] | None = None,
                rng: np.random.Generator | None = None) -> None:
        if sequence_length < 1:
            raise BufferException("sequence_length must be at least 1")
        keys = list(dict.fromkeys(self.keys() if key_list is None else key_list))
        if not self.check_length(keys):
            raise BufferException("Unable to shuffle if the fields are not of same length")
        if not keys:
            return
        n = len(self[keys[0]])
        s = n // sequence_length
        perm = rng.permutation(s)
        for key in keys:
            field = self[key]
            seqs = [field[i * sequence_length:(i + 1) * sequence_length] for i in range(s)]
            rows = [row for p in perm for row in seqs[p]] + field[s * sequence_length:]
            field[:] = rows

    def make_mini_batch(self, start: int, end: int) -> dict[Any, np.ndarray]:
        return {key: field._stack(field[start:end]) for key, field in self.items()}

    def sample_mini_batch(self, batch_size: int, sequence_length: int = 1,
                          rng: np.random.Generator | None = None) -> "RefAgentBuffer":
        if sequence_length < 1:
            raise BufferException("sequence_length must be at least 1")
        if batch_size < 0:
            raise BufferException("batch_size must be non-negative")
        num_seq = batch_size // sequence_length
        keys = list(self.keys())
        if not self.check_length(keys):
            raise BufferException("Unable to sample if the fields are not of same length")
        out = RefAgentBuffer()
        if not keys:
            return out
        if num_seq == 0:
            for key in keys:
                out[key] = RefField(self[key].padding_value, key)
            return out
        n_in_buf = len(self[keys[0]]) // sequence_length
        if n_in_buf == 0:
            raise BufferException("Unable to sample: not enough rows")
        starts = rng.integers(0, n_in_buf, size=num_seq) * sequence_length
        for key in keys:
            field = RefField(self[key].padding_value, key)
            for start in starts:
                field.extend(self[key][start:start + sequence_length])
            out[key] = field
        return out

    def save_to_file(self, path: str) -> None:
        with h5py.File(path, "w") as hf:
            for key, field in self.items():
                arr = field.array
                hf.create_dataset(key, data=arr, compression="gzip" if arr.size else None)

    def load_from_file(self, path: str) -> None:
        with h5py.File(path, "r") as hf:
            for key in list(hf.keys()):
                field = RefField(name=key)
                field.extend(hf[key][()])
                self[key] = field


class RefBuffer(dict):
    def __init__(self) -> None:
        super().__init__()
        self.update_buffer = RefAgentBuffer()

    def __missing__(self, agent_id: Hashable) -> RefAgentBuffer:
        agent = RefAgentBuffer()
        self[agent_id] = agent
        return agent

    def append_batch(self, agent_ids: Sequence[Hashable], fields: Mapping[Any, Any],
                     padding_values: Mapping[Any, Any] | None = None) -> None:
        """One Python append per agent and field (validating everything first)."""
        arrays = {}
        for key, value in fields.items():
            python = not _numpy_origin(value)
            arr = np.asarray(value)
            if arr.ndim == 0 or arr.shape[0] != len(agent_ids):
                raise BufferException(f"append_batch: field {key!r} needs one row per agent")
            if arr.dtype.kind not in _CATEGORY:
                raise BufferException(f"append_batch: field {key!r} has unsupported dtype")
            arrays[key] = (arr.astype(np.float32) if python and arr.dtype == np.float64 else arr)
        for key, arr in arrays.items():
            row_shape = arr.shape[1:]
            for i, agent_id in enumerate(agent_ids):
                field = self.get(agent_id, {}).get(key)
                if (field is not None and field.dtype is not None
                        and (field.dtype != arr.dtype or field.row_shape != row_shape)):
                    field._rows(arr[i], True, False)
        for i, agent_id in enumerate(agent_ids):
            agent = self[agent_id]
            for key, arr in arrays.items():
                pv = 0 if padding_values is None else padding_values.get(key, 0)
                agent[key].append(arr[i], pv)

    def reset_update_buffer(self) -> None:
        self.update_buffer.reset_agent()

    def reset_local_buffers(self) -> None:
        for agent in self.values():
            agent.reset_agent()

    def append_update_buffer(self, agent_id: Hashable, key_list: Iterable[Any] | None = None,
                             batch_size: int | None = None,
                             training_length: int | None = None) -> None:
        agent = self[agent_id]
        keys = list(agent.keys()) if key_list is None else list(key_list)
        if not agent.check_length(keys):
            raise BufferException(
                f"The length of the fields {keys} for agent {agent_id} where not of same length"
            )
        batches = [agent[key].get_batch(batch_size, training_length) for key in keys]
        for key, batch in zip(keys, batches):
            target = self.update_buffer.get(key)
            if target is not None and len(batch) and target.dtype is not None:
                target._rows(batch, False, False)
        for key, batch in zip(keys, batches):
            self.update_buffer[key].extend(batch)

    def append_all_agent_batch_to_update_buffer(self, key_list: Iterable[Any] | None = None,
                                                batch_size: int | None = None,
                                                training_length: int | None = None) -> None:
        for agent_id in list(self.keys()):
            self.append_update_buffer(agent_id, key_list, batch_size, training_length)

    def truncate_update_buffer(self, max_length: int, sequence_length: int = 1) -> None:
        if sequence_length < 1 or max_length < 0:
            raise BufferException("bad truncation request")
        max_length -= max_length % sequence_length
        for field in self.update_buffer.values():
            if len(field) > max_length:
                field[:] = field[len(field) - max_length:]
