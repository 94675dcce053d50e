"""PPO's trajectories taken together: the trajectories that close in the same step (many agents
of one scene often end theirs together) get the GAE of every ``per_step`` reward signal in one
segmented Cython call over their concatenated steps, instead of one call per trajectory; the
results are the same, row for row, as each trajectory's own ``gae_and_returns``.

Also the threaded update's data (:class:`ThreadedData`, :class:`StagedSegment`) and the
normalisation of the advantages, which the trainer's module has no room left for.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from kerasrl.buffer import Buffer
from kerasrl.common.gae import segmented_gae_and_returns
from kerasrl.fields import Field
from kerasrl.rewards import RewardSignal
from kerasrl.trainers.rl_trainer import concatenated, set_split, trajectory_ends
from kerasrl.trainers.trajectory import Trajectory


class StagedSegment(NamedTuple):
    """A trajectory staged for a threaded update: its rows ``[start, end)`` of the update buffer,
    the acting policy's bootstrap values, whether it terminated, and the observations those
    values were estimated from (None: cut short without them)."""

    start: int
    end: int
    bootstrap: dict[str, float]
    terminated: bool
    next_observations: Optional[list[np.ndarray]]


@dataclass
class ThreadedData:
    """A threaded update's data, gathered in the acting thread until its hand-over: the
    trajectories (the update thread processes them) or, ``staged`` (without deferred reward
    signals), the update buffer built from them, their vector observations (for the normalizer,
    which only the update thread changes) and segments; each one's policy version, and the rows."""

    staged: Optional[Buffer] = None
    trajectories: list[Trajectory] = field(default_factory=list)
    observations: list[np.ndarray] = field(default_factory=list)
    segments: list[StagedSegment] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    rows: int = 0


def normalized_advantages(advantages: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Advantages shifted and scaled to mean 0, std 1 over the real rows (``masks`` 1); the
    padding rows of recurrent sequences stay 0 and are left out of the statistics, so that the
    real rows' advantages are centred whatever share of the batch the padding is (counting its
    zeros gave the real rows a mean of up to 1 and a std of ~1.3 on the ``lstm`` bench task)."""
    adv = np.asarray(advantages, np.float32)
    real = np.asarray(masks) > 0
    if real.all():
        return (adv - adv.mean()) / (adv.std() + 1e-10)
    if not real.any():
        return np.zeros_like(adv)
    kept = adv[real]
    return np.where(real, (adv - kept.mean()) / (kept.std() + 1e-10), 0.0).astype(np.float32)


def set_batch_advantages(trajectories: list[Trajectory], signals: Mapping[str, RewardSignal], deferred: Any,
                         lambd: float) -> None:
    """Every trajectory's advantages and returns of the ``per_step`` signals (one segmented GAE
    call per signal over all of them) and their means over the signals; with deferred signals
    (``deferred.signals``, evaluated at the update) zero placeholders for the means instead."""
    ends = trajectory_ends(trajectories)
    advantages, returns = [], []
    for name, signal in signals.items():
        if name in deferred.signals:
            continue
        adv, ret = _signal_gae(trajectories, name, signal, ends, lambd)
        set_split(trajectories, Field.advantage(name), adv, ends)
        set_split(trajectories, Field.returns(name), ret, ends)
        advantages.append(adv)
        returns.append(ret)
    if deferred:
        for trajectory in trajectories:
            deferred.placeholders(trajectory.steps)
        return
    several = len(advantages) > 1
    set_split(trajectories, Field.ADVANTAGES,
              np.mean(advantages, axis=0).astype(np.float32) if several else advantages[0], ends)
    set_split(trajectories, Field.DISCOUNTED_RETURNS,
              np.mean(returns, axis=0).astype(np.float32) if several else returns[0], ends)


def _signal_gae(trajectories: list[Trajectory], name: str, signal: RewardSignal, ends: list[int],
                lambd: float) -> tuple[np.ndarray, np.ndarray]:
    """One signal's GAE of the trajectories, each bootstrapped from its own value (0 once terminated)."""
    values_next = [0.0 if (t.terminated and signal.use_terminal_states) else t.bootstrap[name] for t in trajectories]
    return segmented_gae_and_returns(concatenated(trajectories, Field.rewards(name)),
                                     concatenated(trajectories, Field.value_estimates(name)), ends, values_next,
                                     signal.gamma, lambd)


def append_trajectories(buffer: Buffer, trajectories: list[Trajectory], sequence_length: int) -> list[tuple[int, int]]:
    """Each trajectory's steps appended to ``buffer``'s update buffer, in order; their rows
    ``[start, end)`` there (sequence padding included). Sequences are padded at their end (as
    later ML-Agents; 0.9 prepended the padding): each then starts at a real row, whose stored
    memory is the state the policy acted from."""
    update, spans = buffer.update_buffer, []
    start = len(update[Field.MASKS]) if Field.MASKS in update else 0
    for trajectory in trajectories:
        buffer.append_agent_buffer(trajectory.steps, training_length=sequence_length, pad_end=True,
                                   agent_id=trajectory.agent_id)
        end = len(update[Field.MASKS])
        spans.append((start, end))
        start = end
    return spans


def vector_observations(trajectories: list[Trajectory]) -> list[np.ndarray]:
    """Each trajectory's vector observations (for the normalizer), where its steps hold them."""
    return [t.steps[Field.VECTOR_OBS].get_batch() for t in trajectories if Field.VECTOR_OBS in t.steps]
