"""Groupmate status (ML-Agents' ``GroupmateStatus``): what each stored transition of an agent in a
group knows of its groupmates, for a trainer of groups (MA-POCA's centralised critic).

The groupmates of an agent's transition from step ``t`` to ``t + 1`` are the other agents of its
group that acted at ``t`` too (ML-Agents' group status: an agent that left the group, or is done at
``t``, has no action there and is not one). Each transition stores their observations and actions
at ``t`` padded to ``width`` groupmates (the largest group seen, less one) with a mask, so that a
learner reads fixed-shape arrays ``[rows, width, ...]``; and ``Field.GROUP_DONE``: the agent and
every groupmate terminated at ``t + 1``. At a trajectory's end the groupmates' observations at
``t + 1`` come with it (its bootstrap: the group's value, not the agent's alone).

Everything is a few array operations per step (gathers; the groupmates' rows are worked out again
only when the group ids of the step's rows change, which is rare); nothing here runs for an
environment that reports no groups.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from kerasrl.buffer import AgentBuffer, Buffer
from kerasrl.fields import Field
from kerasrl.spec import BehaviorSpec, StepResult


def groupmate_index(group_ids: np.ndarray, width: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """For rows with ``group_ids`` (0: in no group), ``(index, mask)`` ``[n, W]``: the rows of each
    row's groupmates in row order (padding points at the row itself) and which are real, where
    ``W = max(width, largest group − 1)``."""
    g = np.asarray(group_ids)
    n = len(g)
    order = np.argsort(g, kind="stable")
    sorted_ids = g[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]) if n else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, n])
    grouped = sorted_ids[starts] != 0
    largest = int(sizes[grouped].max()) if grouped.any() else 1
    w = max(int(width), largest - 1)
    member = np.repeat(np.arange(len(starts)), sizes)  # each sorted row's run of equal ids
    start, size = starts[member], sizes[member]
    rank = np.arange(n) - start
    k = np.arange(w)[None, :]
    k = k + (k >= rank[:, None])  # skip the row itself
    mask = (k < size[:, None]) & grouped[member][:, None]
    positions = np.where(mask, start[:, None] + k, np.arange(n)[:, None])
    index = np.empty((n, w), np.int64)
    index[order] = order[positions]
    out_mask = np.empty((n, w), bool)
    out_mask[order] = mask
    return index, out_mask


def _gather(values: np.ndarray, index: np.ndarray, mask: np.ndarray, full: bool = False) -> np.ndarray:
    """``values[index]`` with the padding rows zero (``full``: ``mask`` is all ones, nothing to zero)."""
    out = np.asarray(values)[index]
    if full:
        return out
    return np.where(mask.reshape(mask.shape + (1,) * (out.ndim - 2)), out, np.zeros((), out.dtype))


def groupmate_keys(spec: BehaviorSpec) -> list[str]:
    """The stored fields with a groupmate axis (the mask last)."""
    keys = [Field.GROUPMATE_VECTOR_OBS] if spec.vector_observation_size else []
    keys += [Field.groupmate_visual_obs(j) for j in range(len(spec.visual_observation_indices))]
    return [*keys, Field.GROUPMATE_ACTIONS, Field.GROUPMATE_MASK]


def widen_groupmates(steps: AgentBuffer, keys: list[str], width: int) -> None:
    """Pad the groupmate fields of ``steps`` to ``width`` groupmates (masked), when narrower."""
    if Field.GROUPMATE_MASK not in steps or not len(steps[Field.GROUPMATE_MASK]):
        return
    for key in keys:
        if key not in steps:
            continue
        rows = np.asarray(steps[key].get_batch())
        if rows.shape[1] < width:
            pad = np.zeros((rows.shape[0], width - rows.shape[1], *rows.shape[2:]), rows.dtype)
            steps[key].set(np.concatenate([rows, pad], axis=1))


class GroupmateStatus:
    """The agent processor's part for groups: the groupmate fields of each step's transitions,
    and the groupmates' next observations of the trajectories that close at that step."""

    def __init__(self, spec: BehaviorSpec) -> None:
        self.spec = spec
        self.keys = groupmate_keys(spec)
        #: Groupmates per stored transition (the largest group seen, less one).
        self.width = 0
        #: The latest next step, and for each of its rows the rows of its groupmates there (−1: none).
        self._next: Optional[StepResult] = None
        self._next_rows = np.zeros((0, 0), np.int64)
        #: The latest ``groupmate_index`` (its group ids' bytes and width, its result): steps of the
        #: same groups reuse it.
        self._index_key: Optional[tuple[bytes, int]] = None
        self._index: tuple[np.ndarray, np.ndarray] = (np.zeros((0, 0), np.int64), np.zeros((0, 0), bool))

    def _groupmate_index(self, group_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``groupmate_index(group_ids, self.width)``, reused while the group ids stay the same."""
        ids = np.ascontiguousarray(group_ids)
        key = (ids.dtype.str.encode() + ids.tobytes(), self.width)
        if key != self._index_key:
            self._index_key, self._index = key, groupmate_index(ids, self.width)
        return self._index

    def add(self, fields: dict[str, np.ndarray], nxt: StepResult, next_rows: Any, buffer: Buffer) -> None:
        """Add the groupmate fields to ``fields``, the transitions into ``next_rows`` of ``nxt``
        (one matched set of agents that acted at the same step), widening ``buffer``'s unfinished
        trajectories first when a larger group appears."""
        assert nxt.group_id is not None
        index, mask = self._groupmate_index(nxt.group_id[next_rows])
        if index.shape[1] > self.width:
            self._widen(buffer, index.shape[1])
        full = bool(mask.all())
        if Field.VECTOR_OBS in fields:
            fields[Field.GROUPMATE_VECTOR_OBS] = _gather(fields[Field.VECTOR_OBS], index, mask, full).astype(np.float32)
        for j in range(len(self.spec.visual_observation_indices)):
            fields[Field.groupmate_visual_obs(j)] = _gather(fields[Field.visual_obs(j)], index, mask, full)
        if Field.ACTIONS in fields:
            fields[Field.GROUPMATE_ACTIONS] = _gather(fields[Field.ACTIONS], index, mask, full)
        fields[Field.GROUPMATE_MASK] = mask.astype(np.float32)
        terminated = nxt.terminated[next_rows]
        fields[Field.GROUP_DONE] = (terminated & np.all(terminated[index] | ~mask, axis=1)).astype(np.float32)
        self._remember(nxt, next_rows, index, mask)

    def _remember(self, nxt: StepResult, next_rows: Any, index: np.ndarray, mask: np.ndarray) -> None:
        if self._next is not nxt:
            self._next = nxt
            self._next_rows = np.full((len(nxt), self.width), -1, np.int64)
        rows = np.arange(len(nxt))[next_rows]
        self._next_rows[rows] = np.where(mask, rows[index], -1)

    def _widen(self, buffer: Buffer, width: int) -> None:
        for steps in buffer.values():
            widen_groupmates(steps, self.keys, width)
        if self._next_rows.shape[1] < width:
            pad = np.full((len(self._next_rows), width - self._next_rows.shape[1]), -1, np.int64)
            self._next_rows = np.concatenate([self._next_rows, pad], axis=1)
        self.width = width

    def next_observations(self, nxt: StepResult, rows: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The groupmates' observations at ``rows`` of ``nxt`` (one array ``[k, width, ...]`` per
        observation of the spec) and their mask ``[k, width]``: the groupmates whose transitions
        ended at ``nxt`` with theirs (none for a row that closes without a transition into it)."""
        table = self._next_rows[rows] if self._next is nxt else np.full((len(rows), self.width), -1, np.int64)
        mask = table >= 0
        index = np.where(mask, table, 0)
        return [_gather(obs, index, mask) for obs in nxt.observations], mask.astype(np.float32)
