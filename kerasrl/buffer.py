"""Experience buffers with the names and semantics of ML-Agents 0.9 (Aug 2019).

``Buffer`` (agent id → ``AgentBuffer``) → ``AgentBuffer`` (field name → ``AgentBufferField``).
Fields are contiguous typed numpy columns kept by the Cython core :mod:`kerasrl._buffer`; the
hot operations (batched appends, ``get_batch``, shuffles, mini-batches, sampling, truncation)
copy raw rows in C.

Differences from ML-Agents 0.9 (its bugs fixed, and additions):

* ``training_length=None`` means 1.
* ``shuffle`` keeps a trailing partial sequence: the ``len // L`` whole sequences are
  permuted and the remaining ``len % L`` rows stay, in order, at the end, so every sequence
  still starts at a multiple of ``L``.
* Files are HDF5 opened with explicit modes ("w"/"r"); every dtype is preserved
  exactly; saving to a path writes ``path + ".tmp-XXXX"`` and renames it into place.
* ``make_mini_batch`` returns numpy arrays (#2371); sampling uses a seedable numpy RNG (#2524).
* A field's dtype and row shape are fixed by its first row (Python floats → float32, Python
  ints/bools and numpy data keep their dtype); a row of another shape or of another dtype
  category (bool / integer / float / complex — so also an int into a float field) raises
  ``BufferException``; within a category rows are cast to the field's dtype.
* ``Buffer.append_batch(agent_ids, fields, padding_values)`` appends one env step for many
  agents with a few calls into the core.

Views returned by ``AgentBufferField.array`` / ``as_arrays`` are read-only and never change
afterwards: operations that reorder or drop rows move the field to new storage.

Randomness: ``shuffle`` and ``sample_mini_batch`` take ``rng`` (a ``np.random.Generator``
or an int seed); without it they use a module generator reseeded by :func:`seed`.
"""
from __future__ import annotations

import operator
import os
from typing import Any, Hashable, Iterable, Mapping, Sequence

import h5py
import numpy as np

from kerasrl import _buffer as _core
from kerasrl._buffer import AgentBufferField, BufferException, VersionCell
from kerasrl.buffer_files import _read_fields, _write_fields, atomic_h5_file, write_atomically

__all__ = ["AgentBuffer", "AgentBufferField", "Buffer", "BufferException", "atomic_h5_file", "seed",
           "write_atomically"]

_rng: np.random.Generator = np.random.default_rng()


def seed(value: int | None) -> None:
    """Reseed the module generator used by shuffle/sample calls that get no ``rng``."""
    global _rng
    _rng = np.random.default_rng(value)


def _resolve_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if rng is None:
        return _rng
    if isinstance(rng, (int, np.integer)):
        return np.random.default_rng(int(rng))
    return rng


def _positive(value: Any, what: str) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise BufferException(f"{what} must be an integer, got {value!r}") from None
    if v < 1:
        raise BufferException(f"{what} must be at least 1, got {v}")
    return v


def _non_negative(value: Any, what: str) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise BufferException(f"{what} must be an integer, got {value!r}") from None
    if v < 0:
        raise BufferException(f"{what} must be non-negative, got {v}")
    return v


class _VersionedDict(dict):
    """A dict that bumps a :class:`VersionCell` whenever keys are added, removed or replaced.

    The batched append caches field lookups and uses the cells to notice stale caches.
    """

    def __init__(self) -> None:
        super().__init__()
        self._vc = VersionCell()

    def _changed(self) -> None:
        self._vc.bump()

    def _wrap(self, key: Any, value: Any) -> Any:
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, self._wrap(key, value))
        self._changed()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._changed()

    def pop(self, *args: Any) -> Any:
        result = super().pop(*args)
        self._changed()
        return result

    def popitem(self) -> tuple[Any, Any]:
        result = super().popitem()
        self._changed()
        return result

    def clear(self) -> None:
        super().clear()
        self._changed()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    # typeshed's dict.__or__ is overloaded, and mypy accepts an __ior__ beside it only with the same overloads;
    # like dict's own, this one takes any mapping or iterable of pairs.
    def __ior__(self, other: Any) -> "_VersionedDict":  # type: ignore[misc]
        self.update(other)
        return self

    def __reduce__(self) -> tuple:
        skip = ("_vc", "_appenders", "_last_appender")
        state = {k: v for k, v in self.__dict__.items() if k not in skip}
        return (_restore, (type(self), list(self.items()), state))


def _restore(cls: type, items: list, state: dict) -> Any:
    """Unpickle helper for AgentBuffer and Buffer."""
    obj = cls()
    for key, value in items:
        obj[key] = value
    obj.__dict__.update(state)
    return obj


class AgentBuffer(_VersionedDict):
    """Field name → :class:`AgentBufferField`; missing fields are created on access.

    Assigning something other than a field (e.g. an array) stores a new field set to it.
    """

    def __missing__(self, key: Any) -> AgentBufferField:
        field = AgentBufferField()
        self[key] = field
        return field

    def _wrap(self, key: Any, value: Any) -> AgentBufferField:
        if not isinstance(value, AgentBufferField):
            value = AgentBufferField(value)
        value.name = key
        return value

    def __str__(self) -> str:
        return ", ".join(f"'{k}' : {v!s}" for k, v in self.items())

    def reset_agent(self) -> None:
        """Empty every field."""
        for field in self.values():
            field.reset_field()

    def take(self) -> "AgentBuffer":
        """A new buffer holding this one's rows (copied), which is then emptied. Its fields stay
        (with their storage), so batched appends to it go on without a new lookup."""
        out = AgentBuffer()
        dict.update(out, {key: field.take_rows() for key, field in self.items()})  # named by key already
        out._changed()
        return out

    def check_length(self, key_list: Sequence[Any]) -> bool:
        """True if the fields ``key_list`` all exist and have one length (always for < 2 keys)."""
        if len(key_list) < 2:
            return True
        length = None
        for key in key_list:
            if key not in self:
                return False
            n = len(dict.__getitem__(self, key))
            if length is not None and n != length:
                return False
            length = n
        return True

    def append_step(self, fields: Mapping[Any, Any],
                    padding_values: Mapping[Any, Any] | None = None) -> None:
        """Append one row to each field of ``fields``; all rows are checked before any is added.

        ``padding_values`` sets the padding value of the named fields (others get 0, as with
        :meth:`AgentBufferField.append`).
        """
        keys = list(fields)
        pvs = [0 if padding_values is None else padding_values.get(k, 0) for k in keys]
        _core.append_fields([self[k] for k in keys], [fields[k] for k in keys], pvs, True)

    def extend_fields(self, fields: Mapping[Any, Any]) -> None:
        """Extend each field of ``fields`` with its rows; all are checked before any is added."""
        keys = list(fields)
        _core.append_fields([self[k] for k in keys], [fields[k] for k in keys], [], False)

    def shuffle(self, sequence_length: int, key_list: Iterable[Any] | None = None,
                rng: np.random.Generator | int | None = None) -> None:
        """Shuffle whole sequences of ``sequence_length`` rows, the same way for every key.

        All keys must have the same length.  Rows after the last whole sequence stay at the
        end in their order (ML-Agents 0.9 dropped them).  Duplicate keys count once.
        """
        length = _positive(sequence_length, "sequence_length")
        keys = list(dict.fromkeys(self.keys() if key_list is None else key_list))
        if not self.check_length(keys):
            raise BufferException("Unable to shuffle if the fields are not of same length")
        if not keys:
            return
        fields = [self[k] for k in keys]
        perm = _resolve_rng(rng).permutation(len(fields[0]) // length)
        _core.shuffle_fields(fields, perm, length)

    def make_mini_batch(self, start: int, end: int) -> dict[Any, np.ndarray]:
        """Rows ``[start:end]`` of every field as new contiguous arrays, ready to feed TF."""
        return {key: field.copy_rows(start, end) for key, field in self.items()}

    def sample_mini_batch(self, batch_size: int, sequence_length: int = 1,
                          rng: np.random.Generator | int | None = None) -> "AgentBuffer":
        """A new AgentBuffer of ``batch_size // sequence_length`` whole sequences drawn
        uniformly with replacement (the same draws for every field).

        Sequences start at multiples of ``sequence_length``; all fields must have one length.
        """
        length = _positive(sequence_length, "sequence_length")
        num_seq = _non_negative(batch_size, "batch_size") // length
        keys = list(self.keys())
        if not self.check_length(keys):
            raise BufferException("Unable to sample if the fields are not of same length")
        out = AgentBuffer()
        if not keys:
            return out
        fields = [self[k] for k in keys]
        if num_seq == 0:
            for key, field in zip(keys, fields):
                out[key] = AgentBufferField(padding_value=field.padding_value)
            return out
        n_in_buf = len(fields[0]) // length
        if n_in_buf == 0:
            raise BufferException(
                f"Unable to sample sequences of length {length}: the buffer holds "
                f"{len(fields[0])} rows"
            )
        index = _resolve_rng(rng).integers(0, n_in_buf, size=num_seq)
        arrays = _core.gather_sequences(fields, index, length)
        for key, field, arr in zip(keys, fields, arrays):
            out[key] = AgentBufferField.from_array(arr, padding_value=field.padding_value)
        return out

    def to_dict(self) -> dict[Any, np.ndarray]:
        """Every field as a read-only contiguous array (views, no copy)."""
        return {key: field.array for key, field in self.items()}

    def as_arrays(self, keys: Iterable[Any] | None = None) -> dict[Any, np.ndarray]:
        """The fields ``keys`` (default: all) as read-only contiguous arrays (views, no copy)."""
        if keys is None:
            return self.to_dict()
        return {key: self[key].array for key in keys}

    # ------------------------------------------------------------------ files
    def save_to_file(self, file: str | os.PathLike | Any) -> None:
        """Write every field to HDF5 (one gzip dataset per key, dtype preserved).

        ``file`` is a path, a binary file object or an open ``h5py.Group``.  A path is
        written by :func:`atomic_h5_file` (made in memory, written as ``path + ".tmp-XXXX"``
        and renamed into place), so a failed save is one error with the OS's cause, leaves no
        (partial) file behind and an existing file untouched.
        """
        items = list(self.items())
        for key, _ in items:
            if not isinstance(key, str):
                raise BufferException(f"Unable to save field {key!r}: HDF5 keys must be strings")
        if isinstance(file, h5py.Group):
            _write_fields(file, items)
            return
        if isinstance(file, (str, os.PathLike)):
            path = os.fspath(file)
            try:
                with atomic_h5_file(path) as hf:
                    _write_fields(hf, items)
            except BufferException:
                raise
            except Exception as e:
                raise BufferException(f"Unable to save the buffer to {path!r}: {e}") from e
            return
        name = getattr(file, "name", repr(file))
        try:
            with h5py.File(file, "w") as hf:
                _write_fields(hf, items)
        except BufferException:
            raise
        except Exception as e:
            raise BufferException(f"Unable to save the buffer to {name!r}: {e}") from e

    def load_from_file(self, file: str | os.PathLike | Any) -> None:
        """Load every dataset of an HDF5 file into a new field of the same key.

        Fields not in the file are kept.  A missing, truncated or non-HDF5 file raises a
        BufferException naming the file and leaves the buffer unchanged.
        """
        if isinstance(file, h5py.Group):
            name = file.file.filename
        elif isinstance(file, (str, os.PathLike)):
            name = os.fspath(file)
        else:
            name = getattr(file, "name", repr(file))
        try:
            if isinstance(file, h5py.Group):
                loaded = _read_fields(file)
            else:
                if isinstance(file, (str, os.PathLike)) and not os.path.exists(name):
                    raise FileNotFoundError(f"no such file: {name!r}")
                with h5py.File(file, "r") as hf:
                    loaded = _read_fields(hf)
        except Exception as e:
            raise BufferException(f"Unable to load a buffer from {name!r}: {e}") from e
        for key, field in loaded.items():
            self[key] = field


class Buffer(_VersionedDict):
    """Agent id → :class:`AgentBuffer` (created on access), plus the shared ``update_buffer``."""

    def __init__(self) -> None:
        super().__init__()
        self.update_buffer: AgentBuffer = AgentBuffer()
        self._appenders: dict = {}
        self._last_appender: Any = None

    def __missing__(self, agent_id: Hashable) -> AgentBuffer:
        agent = AgentBuffer()
        self[agent_id] = agent
        return agent

    def _wrap(self, key: Any, value: Any) -> AgentBuffer:
        if not isinstance(value, AgentBuffer):
            raise BufferException(f"Buffer values must be AgentBuffers, got {type(value).__name__}")
        return value

    def _changed(self) -> None:
        self._vc.bump()
        self._appenders.clear()
        self._last_appender = None

    def _create_agents(self, agent_ids: list) -> None:
        """Add empty AgentBuffers for ``agent_ids`` (one structural change for all)."""
        for agent_id in agent_ids:
            dict.__setitem__(self, agent_id, AgentBuffer())
        self._changed()

    def __str__(self) -> str:
        return "update buffer :\n\t{0}\nlocal_buffers :\n{1}".format(
            str(self.update_buffer),
            "\n".join(f"\tagent {k} :{v!s}" for k, v in self.items()),
        )

    def append_batch(self, agent_ids: Sequence[Hashable] | np.ndarray,
                     fields: Mapping[Any, Any],
                     padding_values: Mapping[Any, Any] | None = None) -> None:
        """Append one step for many agents: row ``i`` of ``fields[key]`` goes to
        ``self[agent_ids[i]][key]``.

        Every array has one row per agent along its first axis.  ``padding_values`` gives the
        padding value per key (default 0, like ``AgentBufferField.append``).  The field lookups
        are cached per (agent ids, keys) and the rows are copied by one C loop per key.
        Plain Python data (lists of floats) becomes float32 like single appends.  A row that
        does not fit its field raises BufferException before anything is appended (and no
        agent or field is created by the failed call).
        """
        _core.buffer_append_batch(self, agent_ids, fields, padding_values)

    def reset_update_buffer(self) -> None:
        """Empty the update buffer."""
        self.update_buffer.reset_agent()

    def reset_local_buffers(self) -> None:
        """Empty every agent's buffer."""
        for agent in self.values():
            agent.reset_agent()

    def append_update_buffer(self, agent_id: Hashable, key_list: Iterable[Any] | None = None,
                             batch_size: int | None = None,
                             training_length: int | None = None, pad_end: bool = False) -> None:
        """Extend the update buffer with ``get_batch(batch_size, training_length, pad_end=pad_end)``
        of every field ``key_list`` (default: all) of agent ``agent_id``.

        The fields must have one length, else BufferException names the fields and the agent.
        """
        agent = self[agent_id]
        keys = list(agent.keys()) if key_list is None else list(key_list)
        _core.append_update(self.update_buffer, agent, keys, agent_id, batch_size,
                            training_length, pad_end)

    def append_agent_buffer(self, agent: AgentBuffer, key_list: Iterable[Any] | None = None,
                            batch_size: int | None = None, training_length: int | None = None,
                            pad_end: bool = False, agent_id: Hashable = None) -> None:
        """:meth:`append_update_buffer` for an agent's steps held outside this buffer (a closed
        trajectory's); ``agent_id`` names it in errors."""
        keys = list(agent.keys()) if key_list is None else list(key_list)
        _core.append_update(self.update_buffer, agent, keys, agent_id, batch_size, training_length, pad_end)

    def append_all_agent_batch_to_update_buffer(self, key_list: Iterable[Any] | None = None,
                                                batch_size: int | None = None,
                                                training_length: int | None = None,
                                                pad_end: bool = False) -> None:
        """:meth:`append_update_buffer` for every agent (in order; stops at the first error)."""
        keys = None if key_list is None else list(key_list)
        update = self.update_buffer
        agents = list(self.items())
        for index, (agent_id, agent) in enumerate(agents):
            agent_keys = list(agent.keys()) if keys is None else keys
            _core.append_update(update, agent, agent_keys, agent_id, batch_size, training_length, pad_end)
            if index == 0 and len(agents) > 1:
                self._reserve_update(agents[1:], keys, batch_size, training_length)

    def _reserve_update(self, agents: list, keys: list | None, batch_size: int | None,
                        training_length: int | None) -> None:
        """Grow the update buffer's fields once for the rows the remaining agents will add."""
        total = 0
        for _, agent in agents:
            first = next(iter(agent), None) if keys is None else (keys[0] if keys else None)
            if first is None or first not in agent:
                continue
            try:
                total += _core.batch_rows(len(dict.__getitem__(agent, first)), batch_size,
                                          training_length)
            except BufferException:
                return
        for field in self.update_buffer.values():
            field.reserve(total)

    def truncate_update_buffer(self, max_length: int, sequence_length: int = 1) -> None:
        """Keep the newest ``max_length - max_length % sequence_length`` rows of every field."""
        length = _positive(sequence_length, "sequence_length")
        keep = _non_negative(max_length, "max_length")
        keep -= keep % length
        for field in self.update_buffer.values():
            field.keep_last(keep)
