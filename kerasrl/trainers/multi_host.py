"""Training on several hosts for any trainer that implements the hooks of :class:`MultiHostTrainer`.

Every host runs the same ``kerasrl-learn`` command (``--worker-hosts``, its own ``--task-index``)
under one ``MultiWorkerMirroredStrategy``. The hosts step in lockstep by construction: each has
the same number of agents, so each reaches the end of a rollout at the same controller step.
There every host all-gathers the others' update data (``kerasrl.distribute.Cluster``: TensorFlow
collectives) and holds the same global batch, in worker order; the learner's data-parallel
update then runs unchanged (with the same shuffle seed everywhere), so the hosts' weights stay
identical. No host can enter a collective that another skips: an update comes at the end of
every rollout (the trainer's ``processor.rollout``), whatever the local buffer holds.

Counts are cluster-wide, as if one host stepped every copy: a trainer's step (``max_steps``,
``--steps``, ``summary_freq``, ``save_freq``, the schedules) counts the agent steps of every host,
and a rollout counts them too. Only the chief writes (checkpoints, exports, summaries); the
chief's summaries show the returns of its own copies and the global update's losses.

:class:`MultiHostUpdates` is the part every multi-host trainer shares (as
:class:`~kerasrl.trainers.threaded.ThreadedUpdates` is for ``threaded: true``): the cadence,
the gather, the cluster-wide counts, the chief-only writing, the lost-worker error, the state
taken from the chief on ``--resume`` and the summary line. ``RLTrainer.multi_host`` holds it; the
trainer delegates to it. A trainer type takes part by implementing the hooks (its class's
``multi_host_settings`` is what :func:`takes_part` looks for); the factory refuses the others.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
from typing import Any, Iterator, NoReturn, Protocol

import numpy as np
import tensorflow as tf

from kerasrl.distribute import Cluster
from kerasrl.exception import TrainerConfigError, TrainerError, describe
from kerasrl.settings import RunContext, TrainerSettings, trainer_types
from kerasrl.spec import BehaviorSpec

logger = logging.getLogger("kerasrl.trainers")

#: One table of an update's data (field -> rows), and its layout (field -> dtype and row shape).
Table = dict[str, np.ndarray]
Layout = dict[str, tuple[np.dtype, tuple[int, ...]]]


class MultiHostTrainer(Protocol):
    """What :class:`MultiHostUpdates` needs of a trainer: its state and its multi-host hooks (its
    class also has ``multi_host_settings(behavior, settings) -> TrainerSettings``: the settings
    checked for what several hosts cannot share, with what lockstep needs, e.g. PPO's forced
    ``flush_on_update``, which gives the trainer its ``processor.rollout``)."""

    behavior_name: str
    step: int
    update_count: int
    processor: Any

    @property
    def trained_model(self) -> Any:
        """The model whose weights every host must agree on (the summary line's digest)."""

    def save_model(self) -> str:
        """Write a checkpoint (only the chief's saver writes); its path prefix, or ''."""

    def joined_cluster(self, cluster: Cluster) -> None:
        """Set up what this host does differently from the others (its own action noise, ...)."""

    def host_tables(self) -> tuple[list[Table], list[Layout]]:
        """This host's data of the update due (the first table's rows are the update's rows,
        possibly none) and the layout of each table, equal on every host."""

    def take_gathered(self, tables: list[Table]) -> Table:
        """Every host's tables, gathered in worker order: forget this host's, take what is shared
        (a normalizer's observations, ...) and return the update's batch."""

    def state_variables(self) -> list[Any]:
        """The variables of the learner's state (weights, normalizer, optimizer), each once."""

    def took_chief_state(self) -> None:
        """The state variables, step and update count are the chief's: act and schedule from them."""


def takes_part(trainer_cls: type) -> bool:
    """Whether a trainer class implements the multi-host hooks."""
    return callable(getattr(trainer_cls, "multi_host_settings", None))


def create_on_hosts(trainer_cls: type, behavior: str, spec: BehaviorSpec, settings: TrainerSettings,
                    context: RunContext, reward_buff_cap: int = 1, *, cluster: Cluster) -> Any:
    """A trainer of ``trainer_cls`` that trains on every host of ``cluster``; a type without the
    hooks, or settings they cannot share, are one-line ``TrainerConfigError``\\s."""
    if not takes_part(trainer_cls):
        able = [n for n, t in trainer_types().items() if takes_part(t.trainer_cls)]
        raise TrainerConfigError(f"Behavior {behavior}: trainer: {settings.trainer} cannot train on several hosts "
                                 f"(--worker-hosts); only {', '.join(able) or 'none'} can.")
    settings = trainer_cls.multi_host_settings(behavior, settings)  # type: ignore[attr-defined]
    if settings.threaded is True and context.train_model:  # an update is a collective step of every host
        raise TrainerConfigError(f"Behavior {behavior}: threaded: true is not available when training on several "
                                 "hosts; set threaded: false.")
    if settings.threaded == "auto":  # several hosts update in lockstep, in the acting thread
        settings = dataclasses.replace(settings, threaded=False)
    trainer = trainer_cls(behavior, spec, settings, context, reward_buff_cap)
    trainer.multi_host = MultiHostUpdates(trainer, cluster)
    return trainer


def forced(settings: TrainerSettings, **hyperparameters: Any) -> TrainerSettings:
    """``settings`` with some hyper-parameters set (what lockstep needs)."""
    return dataclasses.replace(settings, hyperparameters=dataclasses.replace(settings.hyperparameters,
                                                                             **hyperparameters))


def weights_digest(model: Any) -> str:
    """A short hash of every weight of ``model`` (the normalizer's included): equal on hosts that agree."""
    h = hashlib.sha256()
    for w in model.weights:
        h.update(np.ascontiguousarray(w.numpy()).tobytes())
    return h.hexdigest()[:16]


class MultiHostUpdates:
    """One trainer's part in a multi-host run: its updates train on the data of every host of ``cluster``."""

    def __init__(self, trainer: MultiHostTrainer, cluster: Cluster) -> None:
        self.trainer = trainer
        self.cluster = cluster
        #: Rows of every update so far: all hosts', and this host's.
        self.rows_trained = 0
        self.local_rows_trained = 0
        if trainer.processor.rollout is None:
            raise TrainerError(f"Behavior {trainer.behavior_name}: a trainer on several hosts needs a rollout (its "
                               "multi_host_settings forces one), so that the hosts update together.")
        trainer.processor.rollout.scale = cluster.hosts  # a rollout counts the agent steps of every host
        trainer.joined_cluster(cluster)

    def steps(self, n_steps: int) -> int:
        """Every host took as many agent steps as this one: the step counts them all."""
        return int(n_steps) * self.cluster.hosts

    def ready(self) -> bool:
        """At the end of every rollout, even with nothing collected here: every host updates together."""
        return bool(self.trainer.processor.rollout.done)

    @property
    def writes_results(self) -> bool:
        """Only the chief writes (and exports)."""
        return bool(self.cluster.chief)

    def learning_batch(self) -> Table:
        """Every host's update data in worker order (the trainer's ``take_gathered``); the
        chief saves first where a worker is lost, and an update without any row is an error."""
        trainer = self.trainer
        local, layouts = trainer.host_tables()
        try:
            tables, counts = self.cluster.gather_tables(local, layouts)
        except tf.errors.OpError as e:
            self.lost_workers(e, saved=trainer.save_model())
        batch = trainer.take_gathered(tables)
        rows = int(counts[:, 0].sum())
        if rows == 0:
            raise TrainerError(f"Behavior {trainer.behavior_name}: no host collected any experience in a rollout.")
        self.rows_trained += rows
        self.local_rows_trained += len(next(iter(local[0].values()), ()))
        logger.info("%s: update %d on %d rows (per worker: %s)", self.cluster, trainer.update_count + 1, rows,
                    counts[:, 0].tolist())
        return batch

    @contextlib.contextmanager
    def collectives(self) -> Iterator[None]:
        """Around the global update: a worker lost during the learner's collectives is a one-line
        error (the checkpoints written so far stand: the weights may hold part of this update)."""
        try:
            yield
        except tf.errors.OpError as e:
            self.lost_workers(e, saved="")

    def lost_workers(self, error: tf.errors.OpError, saved: str) -> NoReturn:
        """The one-line error of a collective that failed (``saved``: the checkpoint just written)."""
        where = (f"the model was saved at step {self.trainer.step}" if saved
                 else "the newest checkpoint holds the last good state")
        raise TrainerError(f"Behavior {self.trainer.behavior_name}: {self.cluster} lost the other workers during an "
                           f"update (a collective failed with {_cause(error)}: a worker stopped, or the network "
                           f"failed); {where}.") from error

    def sync_from_chief(self) -> None:
        """Take the chief's state (what ``--resume`` restored there: the state variables, step and
        update count) on every host; one all-gather, called by every host."""
        trainer = self.trainer
        variables = trainer.state_variables()
        parts = [np.array([trainer.step, trainer.update_count], np.int64).view(np.uint8)]
        parts += [np.ascontiguousarray(v.numpy()).reshape(-1).view(np.uint8) for v in variables]
        raw = np.concatenate(parts)
        raw = np.concatenate([raw, np.zeros(-len(raw) % 4, np.uint8)])
        chief = int(np.argmax(self.cluster.all_gather(np.array([int(self.cluster.chief)]))[:, 0]))
        got = self.cluster.all_gather(raw.view(np.int32))[chief].view(np.uint8)
        trainer.step, trainer.update_count = (int(x) for x in got[:16].view(np.int64))
        offset = 16
        for v, part in zip(variables, parts[1:]):
            v.assign(got[offset:offset + part.size].view(np.dtype(v.dtype)).reshape(tuple(v.shape)))
            offset += part.size
        trainer.took_chief_state()

    def summary_line(self) -> str:
        """What this host trained, and a digest of its weights (equal on every host)."""
        trainer = self.trainer
        return (f"{self.cluster}: {trainer.behavior_name}: {trainer.update_count} updates on {self.rows_trained} rows "
                f"({self.local_rows_trained} from this host), step {trainer.step}, "
                f"weights {weights_digest(trainer.trained_model)}")


def _cause(error: tf.errors.OpError) -> str:
    """The error's type and TensorFlow's reason (the line that says why the collective stopped)."""
    lines = [line.strip() for line in str(error.message).splitlines() if line.strip()]
    reason = next((line for line in lines if "abort" in line.lower() or "is down" in line), lines[0] if lines else "")
    return describe(type(error)(None, None, reason), 200) if reason else type(error).__name__
