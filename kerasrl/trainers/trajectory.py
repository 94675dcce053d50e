"""Trajectories: one agent's closed run of steps, handed from the agent processor to its trainer
through a queue (the seam between acting and learning)."""
from __future__ import annotations

import queue
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from kerasrl.buffer import AgentBuffer, Buffer
from kerasrl.fields import Field


@dataclass
class Trajectory:
    """The steps one agent took since its last trajectory closed, owned by whoever takes it.

    ``bootstrap``: each reward signal's value estimate of the observation after the last step
    (empty when the processor was given no value function); ``terminated``: the episode ended
    in a terminal state (no bootstrap for signals that use terminal states); ``episode_ended``:
    terminated or truncated, so the agent's next step starts a new episode; ``policy_version``:
    the update count of the weights that acted its first step (counted by threaded trainers);
    ``next_observations``: the observations ``bootstrap`` was estimated from (one array per
    observation of the spec; None when cut short without one), so that a trainer whose critic
    moved on since can estimate it again.

    When the environment reports groups, ``steps`` also holds each step's ``Field.GROUP_ID``
    (0 = in no group) and ``Field.GROUP_REWARD`` (:attr:`has_groups`), and the groupmate status
    (``Field.GROUPMATE_*``, ``Field.GROUP_DONE``: :mod:`kerasrl.trainers.groupmates`);
    ``next_groupmate_observations`` (one array ``[width, ...]`` per observation of the spec) and
    ``next_groupmate_mask`` ``[width]`` are the groupmates' observations beside
    ``next_observations``. Trainers that do not train on groups (PPO, SAC) leave them unread.
    """

    agent_id: int
    steps: AgentBuffer
    terminated: bool = False
    episode_ended: bool = False
    bootstrap: dict[str, float] = field(default_factory=dict)
    policy_version: int = 0
    next_observations: Optional[list[np.ndarray]] = None
    next_groupmate_observations: Optional[list[np.ndarray]] = None
    next_groupmate_mask: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return max((len(f) for f in self.steps.values()), default=0)

    @property
    def has_groups(self) -> bool:
        """Whether the steps carry group ids and group rewards (the environment reported groups)."""
        return Field.GROUP_ID in self.steps

    @property
    def group_done(self) -> bool:
        """Whether the trajectory ends with its whole group terminated (its last step's
        ``Field.GROUP_DONE``; without groups, whether it terminated)."""
        if Field.GROUP_DONE not in self.steps or not len(self.steps[Field.GROUP_DONE]):
            return self.terminated
        return bool(self.steps[Field.GROUP_DONE][-1] > 0)


class TrajectoryQueue:
    """One behavior's trajectories in the order they closed; safe to put from one thread and
    take from another."""

    def __init__(self, behavior: str = "") -> None:
        self.behavior = behavior
        self._queue: queue.SimpleQueue[Trajectory] = queue.SimpleQueue()

    def put(self, trajectory: Trajectory) -> None:
        self._queue.put(trajectory)

    def take_all(self) -> list[Trajectory]:
        """Every trajectory queued so far, oldest first (none: an empty list)."""
        out = []
        while not self._queue.empty():  # checked first: most steps close no trajectory
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:  # another thread took it first
                break
        return out

    def __len__(self) -> int:
        return self._queue.qsize()


def append_episode(buffer: Buffer, trajectory: Trajectory, number: int) -> bool:
    """Append ``trajectory``'s steps to ``buffer``'s update buffer as one numbered run
    (``Field.EPISODE_ID`` = ``number``, which recurrent BC cuts its sequences at); False, and
    nothing appended, when it holds no step."""
    steps = trajectory.steps
    n = len(steps[Field.ACTIONS]) if Field.ACTIONS in steps else 0
    if not n:
        return False
    steps[Field.EPISODE_ID].set(np.full(n, number, np.int64))
    buffer.append_agent_buffer(steps, training_length=1, agent_id=trajectory.agent_id)
    return True
