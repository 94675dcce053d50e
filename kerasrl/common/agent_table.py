"""Per-agent rows of state (recurrent memories, previous actions) kept by the policies that act
for a whole batch of agents at once."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np


class AgentTable:
    """One row of state per agent id (recurrent memories, previous actions), looked up and
    stored for a whole batch of agents at once (ids kept sorted; no per-agent Python)."""

    def __init__(self, width: int, dtype: Any) -> None:
        self.ids = np.empty(0, np.int64)
        self.rows = np.zeros((0, width), dtype)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, agent_id: int) -> np.ndarray:
        pos = int(np.searchsorted(self.ids, agent_id))
        if pos == len(self.ids) or self.ids[pos] != agent_id:
            raise KeyError(agent_id)
        return self.rows[pos]

    def _find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.minimum(np.searchsorted(self.ids, ids), max(len(self.ids) - 1, 0))
        found = self.ids[pos] == ids if len(self.ids) else np.zeros(len(ids), bool)
        return pos, found

    def get(self, ids: np.ndarray, reset: Optional[np.ndarray] = None) -> np.ndarray:
        """The rows of ``ids`` (zeros for unknown agents); ``reset`` rows are zeroed, stored too."""
        pos, found = self._find(ids)
        reset = None if reset is None else np.asarray(reset, bool)
        if reset is not None and reset.any():
            self.rows[pos[found & reset]] = 0
            found = found & ~reset
        out = np.zeros((len(ids), self.rows.shape[1]), self.rows.dtype)
        out[found] = self.rows[pos[found]]
        return out

    def set(self, ids: np.ndarray, values: np.ndarray) -> None:
        """Store ``values`` as the rows of ``ids`` (new agents are added)."""
        pos, found = self._find(ids)
        if not found.all():
            new = np.unique(ids[~found])
            self.ids = np.concatenate([self.ids, new])
            self.rows = np.concatenate([self.rows, np.zeros((len(new), self.rows.shape[1]), self.rows.dtype)])
            order = np.argsort(self.ids, kind="stable")
            self.ids, self.rows = self.ids[order], self.rows[order]
            pos, _ = self._find(ids)
        self.rows[pos] = values

    def clear(self) -> None:
        self.ids = self.ids[:0]
        self.rows = self.rows[:0]
