"""Rewards of the model signals (curiosity, GAIL) computed once per update, over the update buffer.

A trajectory that closes goes to the update buffer with its extrinsic advantages and returns
already computed; for the signals that are not ``per_step`` only its bootstrap values are
remembered (a :class:`Segment`). When the update is due, ``finish`` evaluates every such
signal in one compiled call over all rows of the update buffer, runs GAE per trajectory,
and sets the mean advantages and returns over all signals. This is one reward call per
update instead of one per trajectory close (per step when short episodes end every step).
The signals' per-episode statistics (``Policy/{Short} Reward``) are reported when an
episode's last trajectory gets its rewards.
"""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping, NamedTuple

import numpy as np

from kerasrl.common.gae import gae_and_returns
from kerasrl.fields import Field
from kerasrl.rewards.base import RewardSignal


class Segment(NamedTuple):
    """One closed trajectory in the update buffer: rows ``[start, end)`` (sequence padding included)."""

    agent_id: int
    start: int
    end: int
    value_next: dict[str, float]
    terminated: bool
    ended: bool


class UpdateBatchRewards:
    """The update buffer's rewards, advantages and returns of the signals that are not ``per_step``.

    ``returns``: per agent id, the running episode return of each signal (the agent table's
    ``return_{name}`` columns, read and written through ``get``/``set``); ``stats`` the trainer's.
    """

    def __init__(self, signals: Mapping[str, RewardSignal], returns: Any, stats: MutableMapping[str, list]) -> None:
        self.all_signals = dict(signals)
        self.signals = {n: s for n, s in signals.items() if not s.per_step}
        self.returns = returns
        self.stats = stats
        self.segments: list[Segment] = []

    def __bool__(self) -> bool:
        return bool(self.signals)

    def add(self, agent_id: int, start: int, end: int, value_next: Mapping[str, float], terminated: bool,
            ended: bool) -> None:
        """A trajectory of ``agent_id`` now in rows ``[start, end)`` of the update buffer."""
        self.segments.append(Segment(int(agent_id), int(start), int(end),
                                     {n: float(value_next[n]) for n in self.signals}, bool(terminated), bool(ended)))

    def placeholders(self, agent: Any) -> None:
        """Zero rewards, advantages and returns in a closing trajectory (filled by ``finish``)."""
        n = len(agent[Field.MASKS])
        for name in self.signals:
            for field in (Field.rewards(name), Field.advantage(name), Field.returns(name)):
                agent[field].set(np.zeros(n, np.float32))
        agent[Field.ADVANTAGES].set(np.zeros(n, np.float32))
        agent[Field.DISCOUNTED_RETURNS].set(np.zeros(n, np.float32))

    def finish(self, update_buffer: Any, lambd: float) -> None:
        """Rewards (one ``evaluate_batch`` per signal), GAE per trajectory, mean advantages and returns."""
        if not self.signals or not self.segments:
            self.segments.clear()
            return
        real = np.asarray(update_buffer[Field.MASKS].get_batch()) > 0
        rows = np.flatnonzero(real)
        everything = len(rows) == len(real)
        for name, signal in self.signals.items():
            batch = {k: np.asarray(update_buffer[k].get_batch()) for k in signal.batch_fields}
            if not everything:
                batch = {k: v[rows] for k, v in batch.items()}
            rewards = np.zeros(len(real), np.float32)
            rewards[rows] = signal.evaluate_batch(batch).scaled_reward
            self._gae(update_buffer, name, signal, rewards, real, lambd)
        self._means(update_buffer)
        self.segments.clear()

    def _gae(self, update_buffer: Any, name: str, signal: RewardSignal, rewards: np.ndarray, real: np.ndarray,
             lambd: float) -> None:
        values = np.asarray(update_buffer[Field.value_estimates(name)].get_batch(), np.float32)
        advantages, returns = np.zeros_like(rewards), np.zeros_like(rewards)
        for seg in self.segments:
            idx = np.arange(seg.start, seg.end)[real[seg.start:seg.end]]
            v_next = 0.0 if (seg.terminated and signal.use_terminal_states) else seg.value_next[name]
            advantages[idx], returns[idx] = gae_and_returns(rewards[idx], values[idx], v_next, signal.gamma, lambd)
            total = self.returns.get(f"return_{name}", seg.agent_id) + float(rewards[idx].sum())
            if seg.ended:
                self.stats[signal.stat_name].append(total)
                total = 0.0
            self.returns.set(f"return_{name}", seg.agent_id, total)
        update_buffer[Field.rewards(name)].set(rewards)
        update_buffer[Field.advantage(name)].set(advantages)
        update_buffer[Field.returns(name)].set(returns)

    def _means(self, update_buffer: Any) -> None:
        names = list(self.all_signals)
        adv = [np.asarray(update_buffer[Field.advantage(n)].get_batch(), np.float32) for n in names]
        ret = [np.asarray(update_buffer[Field.returns(n)].get_batch(), np.float32) for n in names]
        update_buffer[Field.ADVANTAGES].set(np.mean(adv, axis=0).astype(np.float32))
        update_buffer[Field.DISCOUNTED_RETURNS].set(np.mean(ret, axis=0).astype(np.float32))
