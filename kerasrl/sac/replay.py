"""SAC's replay buffer: a circular store of transitions with uniform sampling.

Each field is one preallocated numpy column of ``capacity`` rows; appending writes a whole
trajectory at once at the write position (wrapping around, the oldest rows overwritten) and
sampling draws every mini-batch of an update in one index array, so no Python runs per row.

Next observations stored once (``next_of``, for cameras): a trajectory of ``n`` transitions
takes ``n + 1`` rows, the last holding only the trajectory's final next observation (it is
never sampled); the next observation of row ``i`` is then row ``i + 1``'s observation, so a
camera's frames are held once instead of twice. Files are the experience buffer's HDF5 format
(``kerasrl.buffer.AgentBuffer``), rows oldest first, with the capacity beside them, written
atomically.

Sequences (recurrent SAC, ``sequences=True``): trajectories of different agents interleave in
the buffer, so each row also holds how many rows back its episode's previous step is and how
many rows on its next step is (``LINK_PREV``, ``LINK_NEXT``; 0: none). An agent's next
trajectory of the same episode is linked to its previous one as it is added. Being distances,
the links survive saving (rows keep their order); a link to a row overwritten since is void.
``sample_sequences`` draws start steps uniformly and follows the links: a sequence never
crosses an episode's end (its steps past it are padding, masked), nor its burn-in the episode's
start.
"""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

import h5py
import numpy as np

from kerasrl.buffer import AgentBuffer, BufferException, atomic_h5_file
from kerasrl.fields import Field

_CAPACITY = "kerasrl_replay_capacity"
_NEXT_OF = "kerasrl_replay_next_of"
#: The column saying which rows are transitions (``next_of`` only: a trajectory's extra row is not).
VALID = "kerasrl_replay_valid"
#: Rows back to the episode's previous step, rows on to its next one (0: none; ``sequences`` only).
LINK_PREV, LINK_NEXT = "kerasrl_replay_link_prev", "kerasrl_replay_link_next"
_SEQUENCES = "kerasrl_replay_sequences"
#: The 1/0 mask of a sequence's burn-in steps (``sample_sequences``; ``Field.MASKS`` its steps'),
#: and the prefix of the burn-in's fields (``burn_in_vector_obs``, ...).
BURN_IN_MASKS = "burn_in_masks"
BURN_IN = "burn_in_"


class ReplayBuffer:
    """At most ``capacity`` rows, each a transition of every field (with ``next_of``, one row per
    trajectory holds its final next observation instead).

    ``next_of`` maps a next-observation field to the field it follows (``next_visual_obs0`` →
    ``visual_obs0``): rows added carry both, the buffer stores the first once, and samples give both.
    """

    def __init__(self, capacity: int, next_of: Optional[Mapping[str, str]] = None, sequences: bool = False) -> None:
        if int(capacity) < 1:
            raise ValueError(f"A replay buffer needs a capacity >= 1, got {capacity}.")
        self.capacity = int(capacity)
        self.next_of = dict(next_of or {})
        if self.next_of and self.capacity < 2:
            raise ValueError(f"A replay buffer with next_of needs a capacity >= 2, got {capacity}.")
        self.columns: dict[str, np.ndarray] = {}
        #: Rows held, and where the next row is written.
        self.size = 0
        self.position = 0
        self._transitions = 0
        #: Rows carry episode links (``add`` with ``agent``; ``sample_sequences``).
        self.sequences = bool(sequences)
        #: Rows written in all, and each agent's open episode's last row (in that count).
        self.written = 0
        self._open: dict[Any, int] = {}

    def __len__(self) -> int:
        """Transitions held (rows that can be sampled)."""
        return self._transitions if self.next_of else self.size

    def add(self, rows: Mapping[str, np.ndarray], agent: Any = None) -> None:
        """Append one trajectory's transitions in order (one array per field, all of one length;
        with ``next_of``, each next observation but the last is the following row's observation).
        The first call fixes the fields, their dtypes and row shapes. With ``sequences``: ``agent``
        names whose trajectory it is, so that it continues the agent's previous one unless that
        one's last step was ``done`` (the rows need a ``done`` field)."""
        arrays = {k: np.asarray(v) for k, v in rows.items()}
        lengths = {len(v) for v in arrays.values()}
        if len(lengths) != 1:
            raise BufferException(f"Replay rows must be of one length per field, got {sorted(lengths)}.")
        n = lengths.pop()
        if self.next_of and n:
            arrays = self._with_final_row(arrays)
        if not self.sequences or not n:
            self._write(arrays)
            return
        if Field.DONE not in arrays:
            raise BufferException("Replay rows for sequences need a done field (where episodes end).")
        done = bool(arrays[Field.DONE][n - 1])
        first = self.written
        rows_in = len(next(iter(arrays.values())))
        arrays[LINK_PREV] = np.ones(rows_in, np.int64)
        arrays[LINK_PREV][0] = 0
        arrays[LINK_PREV][n:] = 0
        arrays[LINK_NEXT] = np.ones(rows_in, np.int64)
        arrays[LINK_NEXT][n - 1 :] = 0
        previous = self._open.pop(agent, None) if agent is not None else None
        if previous is not None and self.written + rows_in - previous <= self.capacity:
            arrays[LINK_PREV][0] = first - previous
        self._write(arrays)
        if previous is not None and arrays[LINK_PREV][0]:
            self.columns[LINK_NEXT][previous % self.capacity] = first - previous
        if agent is not None and not done:
            self._open[agent] = first + n - 1

    def close_episodes(self) -> None:
        """The agents' next trajectories start new episodes (the environment was reset)."""
        self._open.clear()

    def _with_final_row(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The trajectory's rows plus one holding only its final next observations (not valid)."""
        missing = sorted(k for k in self.next_of if k not in arrays)
        if missing:
            raise BufferException(f"Replay rows lack the next-observation field {missing[0]}.")
        out: dict[str, np.ndarray] = {}
        for key, value in arrays.items():
            if key in self.next_of:
                continue
            nxt = next((n for n, f in self.next_of.items() if f == key), None)
            if nxt is None:
                out[key] = np.concatenate([value, np.zeros_like(value[:1])])
                continue
            following = arrays[nxt]
            if not np.array_equal(following[:-1], value[1:]):
                raise BufferException(f"Replay field {nxt}: a trajectory's next observations must be its following "
                                      f"rows' {key} (the rows are not one trajectory in order).")
            out[key] = np.concatenate([value, following[-1:]])
        valid = np.ones(len(next(iter(arrays.values()))) + 1, bool)
        valid[-1] = False
        out[VALID] = valid
        return out

    def _write(self, arrays: dict[str, np.ndarray]) -> None:
        if not self.columns:
            self.columns = {k: np.zeros((self.capacity, *v.shape[1:]), v.dtype) for k, v in arrays.items()}
        elif arrays.keys() != self.columns.keys():
            stored = sorted(set(self.columns) - {VALID} | set(self.next_of))
            raise BufferException(f"Replay rows have fields {sorted(set(arrays) - {VALID})}, the buffer {stored}.")
        n = len(next(iter(arrays.values())))
        if n == 0:
            return
        if n > self.capacity:  # only the newest ``capacity`` rows would survive
            arrays = {k: v[-self.capacity :] for k, v in arrays.items()}
            n = self.capacity
        index = (self.position + np.arange(n)) % self.capacity
        for k, v in arrays.items():
            if v.shape[1:] != self.columns[k].shape[1:]:
                raise BufferException(f"Replay field {k} has rows of shape {self.columns[k].shape[1:]}, "
                                      f"got {v.shape[1:]}.")
        if VALID in self.columns:
            self._transitions -= int(np.count_nonzero(self.columns[VALID][index]))
            self._transitions += int(np.count_nonzero(arrays[VALID]))
        for k, v in arrays.items():
            self.columns[k][index] = v
        self.written += n
        self.position = int((self.position + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def _draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Rows of transitions drawn uniformly with replacement."""
        if len(self) == 0:
            raise BufferException("Cannot sample from an empty replay buffer.")
        index = rng.integers(0, self.size, size=shape)
        if self.next_of:
            valid = self.columns[VALID]
            bad = ~valid[index]
            while bad.any():  # redraw the trajectories' extra rows (one per trajectory: few)
                index[bad] = rng.integers(0, self.size, size=int(np.count_nonzero(bad)))
                bad = ~valid[index]
        return index

    def _gather(self, index: np.ndarray, fields: Optional[set[str]] = None) -> dict[str, np.ndarray]:
        """Every field (or ``fields``) at rows ``index``, next observations included."""
        hidden = {VALID, LINK_PREV, LINK_NEXT}
        out = {k: v[index] for k, v in self.columns.items() if k not in hidden and (fields is None or k in fields)}
        following = (index + 1) % self.capacity
        for nxt, field in self.next_of.items():
            if fields is None or nxt in fields:
                out[nxt] = self.columns[field][following]
        return out

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Transitions drawn uniformly with replacement, every field gathered as ``[*shape, ...]``."""
        return self._gather(self._draw(rng, shape))

    def sample_sequences(self, rng: np.random.Generator, shape: tuple[int, ...], length: int, burn_in: int = 0,
                         first_only: tuple[str, ...] = (), burn_in_fields: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """Sequences of ``length`` steps of one episode from start steps drawn uniformly, every
        field ``[*shape, length, ...]`` (``first_only`` fields: the first step's, ``[*shape, ...]``),
        ``Field.MASKS`` 1 for the steps within the episode (the rest repeat its last step). With
        ``burn_in``: the ``burn_in`` steps before, of ``burn_in_fields`` only, as ``burn_in_{field}``,
        and ``BURN_IN_MASKS`` (0 before the episode's start)."""
        if not self.sequences:
            raise BufferException("This replay buffer keeps no episode links: build it with sequences=True.")
        start = self._draw(rng, shape)
        rows, masks = self._follow(start, length, LINK_NEXT)
        out = self._gather(rows, (set(self.columns) | set(self.next_of)) - set(first_only))
        out.update(self._gather(start, set(first_only)))
        out[Field.MASKS] = masks.astype(np.float32)
        if burn_in:
            back, back_masks = self._follow(start, burn_in + 1, LINK_PREV)
            before = self._gather(back[..., :0:-1], set(burn_in_fields))
            out.update({BURN_IN + k: v for k, v in before.items()})
            out[BURN_IN_MASKS] = back_masks[..., :0:-1].astype(np.float32)
        return out

    def _follow(self, start: np.ndarray, steps: int, link: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows ``steps - 1`` links on from ``start`` (``[*start.shape, steps]``, ``start`` first)
        and whether each is still the episode's (a void link repeats the last row)."""
        rows = np.empty((*start.shape, steps), np.int64)
        alive = np.ones((*start.shape, steps), bool)
        rows[..., 0] = row = start
        forward = link == LINK_NEXT
        for t in range(1, steps):
            distance = self.columns[link][row]
            age = (self.position - 1 - row) % self.capacity  # rows written after this one
            room = age if forward else self.size - 1 - age
            ok = alive[..., t - 1] & (distance > 0) & (distance <= room)
            row = np.where(ok, (row + (distance if forward else -distance)) % self.capacity, row)
            rows[..., t], alive[..., t] = row, ok
        return rows, alive

    def chronological(self) -> dict[str, np.ndarray]:
        """Every held row as stored, oldest first (with ``next_of``: the extra rows and ``VALID`` too)."""
        order = (self.position - self.size + np.arange(self.size)) % self.capacity
        return {k: v[order] for k, v in self.columns.items()}

    # -- files ----------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the rows (oldest first) and the capacity to ``path``, atomically
        (:func:`~kerasrl.buffer.atomic_h5_file`): a failed write (a full disk, a folder that cannot
        be written) is the OS's ``OSError`` and leaves no file."""
        buffer = AgentBuffer()
        for key, rows in self.chronological().items():
            buffer[key] = rows
        with atomic_h5_file(os.fspath(path)) as hf:
            try:
                buffer.save_to_file(hf)
                hf.attrs[_CAPACITY] = self.capacity
                if self.next_of:
                    hf.attrs[_NEXT_OF] = json.dumps(self.next_of)
                if self.sequences:
                    hf.attrs[_SEQUENCES] = 1
            except OSError as e:  # HDF5's own, in memory: not the disk's, whose OSError comes after
                raise BufferException(f"Unable to save the replay buffer to {path!r}: {e}") from e

    @classmethod
    def load(cls, path: str, capacity: Optional[int] = None) -> "ReplayBuffer":
        """The buffer saved at ``path``; ``capacity`` (default: the saved one) keeps the newest rows.
        A buffer saved empty loads empty, its fields fixed by the first rows added, as a new one's."""
        buffer = AgentBuffer()
        buffer.load_from_file(path)
        try:
            with h5py.File(path, "r") as hf:
                saved = int(hf.attrs.get(_CAPACITY, 0))
                next_of = json.loads(hf.attrs.get(_NEXT_OF, "{}"))
                sequences = bool(hf.attrs.get(_SEQUENCES, 0))
        except OSError as e:
            raise BufferException(f"Unable to load a replay buffer from {path!r}: {e}") from e
        replay = cls(capacity or saved or max((len(buffer[k]) for k in buffer), default=0) or 1, next_of, sequences)
        columns = {k: field.array for k, field in buffer.items()}
        if not columns:  # saved before any rows came (a checkpoint right at the start): empty, fields not fixed yet
            return replay
        if sequences:
            missing = [k for k in (LINK_PREV, LINK_NEXT) if k not in columns]
            if missing:
                raise BufferException(f"Replay file {path!r} lacks its {missing[0]} column.")
            if VALID in columns:
                columns[VALID] = columns[VALID].astype(bool)
            replay._write(columns)
        elif next_of:
            if VALID not in columns:
                raise BufferException(f"Replay file {path!r} lacks its {VALID} column.")
            columns[VALID] = columns[VALID].astype(bool)
            replay._write(columns)
        else:
            replay.add(columns)
        return replay
