"""``threaded: true`` for any trainer: its updates run in an update thread while acting goes on.

:class:`ThreadedUpdates` is the part every threaded trainer shares: it keeps the update thread
(:class:`~kerasrl.trainers.update_thread.UpdateThread`), hands each update over where an
unthreaded trainer would update, swaps the acting policy to the weights of the update before
(waiting for it if it still runs: the data of an update is one update old), moves the statistics
the update thread recorded into the trainer's, and stops the thread at the end of training.

A trainer takes part through the hooks of :class:`ThreadedTrainer` (``RLTrainer`` declares
them; PPO and SAC implement them): what to keep of each closed trajectory until the next
hand-over, when an update is due, what data an update takes, how to run it (in the update
thread, under ``learner_lock``) and how acting takes its result. The trainer delegates to this
part (``RLTrainer.threaded_updates``) rather than being wrapped by it, as ML-Agents' GhostTrainer
wraps a trainer: the controller, ``kerasrl.PPO.fit`` and the checkpoints keep talking to the
trainer itself (its learner, policy, statistics and settings), so nothing needs forwarding.
"""
from __future__ import annotations

import logging
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Sequence

import numpy as np

from kerasrl.buffer import AgentBuffer
from kerasrl.exception import TrainerConfigError, one_line
from kerasrl.fields import Field
from kerasrl.timers import get_timer_root, get_timer_stack, merge_worker_tree, set_gauge
from kerasrl.trainers.trajectory import Trajectory
from kerasrl.trainers.update_thread import UpdateResult, UpdateThread, UpdateWork

logger = logging.getLogger("kerasrl")


class ThreadedTrainer(Protocol):
    """What :class:`ThreadedUpdates` needs of a trainer: its state and its threaded hooks."""

    behavior_name: str
    step: int
    update_count: int
    learner_lock: threading.RLock
    stats: defaultdict[str, list[float]]
    last_update_metrics: dict[str, float]
    processor: Any

    def prepare_threaded(self) -> None:
        """Raise ``TrainerConfigError`` where this trainer cannot update in a thread, else set up
        what acting keeps between two hand-overs."""

    def take_for_update(self, trajectory: Trajectory) -> None:
        """Acting thread: keep a closed trajectory for the next hand-over."""

    def take_for_update_batch(self, trajectories: list[Trajectory]) -> None:
        """Acting thread: keep the trajectories that closed together (``RLTrainer``'s: each into ``take_for_update``)."""

    def threaded_update_due(self) -> bool:
        """Acting thread: an unthreaded trainer's update condition, on what was taken since the last hand-over."""

    def cut_update(self) -> tuple[Any, list[int]]:
        """Acting thread: the data of the update due (forgetting it) and the policy version of each of its trajectories."""

    def run_update(self, data: Any, step: int, stats: defaultdict[str, list[float]]) -> tuple[Any, dict[str, float]]:
        """Update thread, under ``learner_lock``: the update on ``data`` at trainer step ``step``,
        its statistics into ``stats``; returns what acting swaps to (an immutable snapshot of
        the new weights) and the update's metrics."""

    def apply_update(self, snapshot: Any) -> None:
        """Acting thread: act with ``snapshot`` (from ``run_update``) from the next step on."""

    def updates_stopped(self) -> None:
        """Acting thread, the update thread stopped (under ``learner_lock``): act with the learner's weights."""


def acting_snapshot(model: Any, weights: Optional[Sequence[np.ndarray]] = None) -> tuple[Any, Any]:
    """What acting swaps to after a threaded update (``apply_update``): the model's trainable
    weights as numpy (``weights`` where the learner has them already) and its normalizer's
    ``(mean, inv_std, clip)``, or None without one."""
    weights = [v.numpy() for v in model.trainable_variables] if weights is None else weights
    normalizer = model.normalizer
    return weights, None if normalizer is None else (*normalizer.numpy_stats(), normalizer.clip)


def rebase_log_probs(update: AgentBuffer, log_prob: np.ndarray) -> None:
    """Threaded: the update buffer's PPO reference log-probabilities set to ``log_prob`` ``[B]``,
    the learner's at the update's start (the loss sums the field's last axis: one column holds it)."""
    field_ = update[Field.ACTION_LOG_PROBS]
    reference = np.zeros(np.shape(field_.get_batch()), np.float32)
    reference[:, 0] = log_prob
    field_.set(reference)


@dataclass
class TakenTrajectories:
    """A threaded update's data where the update thread processes the trajectories themselves
    (gathered in the acting thread until the hand-over): the closed trajectories in order, with
    ``None`` where the environment was reset between two of them (what the trainer drops at a
    reset, such as unfinished episodes' statistics, is dropped there), each one's policy version,
    and the update-buffer rows they make."""

    trajectories: list[Optional[Trajectory]] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    rows: int = 0

    def take(self, trajectory: Trajectory) -> None:
        self.trajectories.append(trajectory)
        self.versions.append(trajectory.policy_version)
        self.rows += len(trajectory)

    def mark_reset(self) -> None:
        self.trajectories.append(None)

    def between_resets(self) -> list[list[Trajectory]]:
        """The trajectories in runs cut at each reset (the first run is those before the first reset)."""
        runs: list[list[Trajectory]] = [[]]
        for trajectory in self.trajectories:
            if trajectory is None:
                runs.append([])
            else:
                runs[-1].append(trajectory)
        return runs


class ThreadedUpdates:
    """The update thread of one trainer (``threaded``) and the update counts of its hand-overs."""

    def __init__(self, trainer: ThreadedTrainer) -> None:
        self.trainer = trainer
        #: Whether the trainer updates in a thread (``start``).
        self.active = False
        self.thread: Optional[UpdateThread] = None
        #: The update count whose weights the policy acts with, and the last one handed over.
        self.applied = self.handed = trainer.update_count
        #: The statistics the update thread records, moved into each result.
        self.stats: defaultdict[str, list[float]] = defaultdict(list)
        #: Seconds acting waited for the first update of this session, None before it.
        self.first_wait_seconds: Optional[float] = None

    def start(self) -> None:
        """Update in a thread from now on (the thread itself starts at the first hand-over);
        the trainer's ``prepare_threaded`` raises first where it cannot."""
        self.active = True
        self.trainer.prepare_threaded()
        self.trainer.processor.policy_version = self.trainer.update_count

    def start_auto(self, environment_in_other_processes: bool) -> bool:
        """``threaded: auto``: ``start`` where the environment steps in other processes (the acting
        thread then mostly waits for them, which leaves the update room) and the trainer can update
        in a thread; else stay unthreaded. Logs the choice; returns whether it started."""
        name = self.trainer.behavior_name
        if not environment_in_other_processes:
            logger.info("Behavior %s: threaded: auto updates in the acting thread (the environment steps in this "
                        "process, where an update thread gains nothing).", name)
            return False
        try:
            self.start()
        except TrainerConfigError as e:
            self.active = False
            logger.info("Behavior %s: threaded: auto updates in the acting thread (%s)", name, one_line(e))
            return False
        logger.info("Behavior %s: threaded: auto updates in a thread of its own (the environment steps in other "
                    "processes).", name)
        return True

    @property
    def updates_applied(self) -> int:
        """Updates whose weights the policy acts with (behind ``update_count`` while one runs)."""
        return self.applied if self.active else self.trainer.update_count

    def sync(self) -> None:
        """After a restore or the end of the thread: the update count is the policy's version."""
        self.applied = self.handed = self.trainer.update_count
        if self.active:
            self.trainer.processor.policy_version = self.trainer.update_count

    def ready(self) -> bool:
        """Whether an update is due (an update thread that failed raises its error here)."""
        if self.thread is not None:
            self.thread.check()
        return self.trainer.threaded_update_due()

    def hand_over(self) -> None:
        """Give the update due to the update thread, then act with the weights of the update
        before (waiting for it if it is still running)."""
        trainer = self.trainer
        if self.thread is None:  # (a thread that failed raises its error at submit)
            self.thread = UpdateThread(f"Behavior {trainer.behavior_name}", self._update)
        data, versions = trainer.cut_update()
        self.thread.submit(UpdateWork(data, trainer.step, self.handed + 1, versions))
        self.handed += 1
        if self.handed - 1 > self.applied:
            waited = self.thread.waited_seconds
            self._apply(self.thread.wait_for(self.handed - 1))
            if self.first_wait_seconds is None:  # the first update's: it includes any compile left
                self.first_wait_seconds = self.thread.waited_seconds - waited

    def _update(self, work: UpdateWork) -> UpdateResult:
        """In the update thread: one update of ``work``'s data, and its staleness (how many
        updates older than the learner's weights its oldest trajectory's are)."""
        trainer, stats = self.trainer, self.stats
        with trainer.learner_lock:
            oldest = min(work.versions, default=trainer.update_count)
            stats["Policy/Staleness"].append(float(trainer.update_count - oldest))
            snapshot, metrics = trainer.run_update(work.data, work.step, stats)
        # (the hand-over's count, which the acting thread waits for, even if a callback reloaded the learner)
        result = UpdateResult(work.version, snapshot, {k: list(v) for k, v in stats.items()}, metrics)
        stats.clear()
        return result

    def _apply(self, result: UpdateResult) -> None:
        """In the acting thread: act with ``result``'s weights from the next step on."""
        trainer = self.trainer
        trainer.apply_update(result.weights)
        for key, values in result.stats.items():
            trainer.stats[key].extend(values)
        trainer.last_update_metrics = result.metrics
        self.applied = result.version
        trainer.processor.policy_version = result.version

    def finish(self, drain: bool) -> None:
        """Stop the update thread: after every handed-over update (``drain``, the end of
        training), else after the one in progress; the policy then acts with the learner's
        weights, and the thread's timers join the run's (``update_thread:{behavior}``)."""
        thread, trainer = self.thread, self.trainer
        if thread is None:
            return
        thread.stop(drain and thread.error is None)
        self.thread = None
        for result in thread.finished():
            self._apply(result)
        with trainer.learner_lock:
            trainer.updates_stopped()
            self.sync()
        name = trainer.behavior_name
        merge_worker_tree(thread.timers, root_name=f"update_thread:{name}", into=get_timer_root())
        overlap = max(thread.busy_seconds - thread.waited_seconds, 0.0)
        for gauge, value in (("update_seconds", thread.busy_seconds), ("acting_waited_seconds", thread.waited_seconds),
                             ("overlap_seconds", overlap)):
            set_gauge(f"{name}.threaded.{gauge}", value, get_timer_stack())
        if drain:
            thread.check()
