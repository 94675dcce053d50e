"""PPO on several hosts: each steps its own environment copies, every update trains on all of them.

Every host runs the same ``kerasrl-learn`` command (``--worker-hosts``, its own ``--task-index``)
under one ``MultiWorkerMirroredStrategy``. The hosts step in lockstep by construction: each has
the same number of agents, so each reaches the end of a rollout at the same controller step.
There every host all-gathers the others' rollouts (``kerasrl.distribute.Cluster``: TensorFlow
collectives) and holds the same global batch, in worker order; the observation normalizer is
updated from every host's observations, advantages are normalised over the global batch, and the
learner's data-parallel update runs unchanged (with the same shuffle seed everywhere), so the
hosts' weights stay identical. No host can enter a collective that another skips: rollouts are
cut at a fixed cadence (``flush_on_update``, forced), whatever the local buffer holds.

Counts are cluster-wide, as if one host stepped every copy: a trainer's step (``max_steps``,
``--steps``, ``summary_freq``, ``save_freq``, the schedules) counts the agent steps of every host,
and ``buffer_size`` is the global rollout (each host collects ``buffer_size / hosts`` of it).
Only the chief writes (checkpoints, exports, summaries); the chief's summaries show the returns
of its own copies and the global update's losses.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any

import numpy as np
import tensorflow as tf

from kerasrl.distribute import Cluster
from kerasrl.exception import TrainerConfigError, TrainerError, describe
from kerasrl.fields import Field
from kerasrl.ppo.trainer import PPOTrainer, normalized_advantages
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec

logger = logging.getLogger("kerasrl.trainers")


def check_settings(behavior_name: str, settings: TrainerSettings) -> None:
    """What a multi-host run cannot do yet, as one-line errors naming the key: reward signals
    other than ``extrinsic`` (their models train on per-host data) and ``pretraining`` (BC)."""
    others = sorted(set(settings.reward_signals) - {"extrinsic"})
    if others:
        raise TrainerConfigError(f"Behavior {behavior_name}: reward_signals: {others[0]} is not supported on several hosts "
                                 "(--worker-hosts); train with the extrinsic reward only, or on one host.")
    if settings.pretraining is not None:
        raise TrainerConfigError(f"Behavior {behavior_name}: pretraining (behavioral cloning) is not supported on several "
                                 "hosts (--worker-hosts); train on one host.")


def weights_digest(model: Any) -> str:
    """A short hash of every weight of ``model`` (the normalizer's included): equal on hosts that agree."""
    h = hashlib.sha256()
    for w in model.weights:
        h.update(np.ascontiguousarray(w.numpy()).tobytes())
    return h.hexdigest()[:16]


class MultiHostPPOTrainer(PPOTrainer):
    """A :class:`PPOTrainer` whose updates train on the rollouts of every host of ``cluster``."""

    supports_threaded = False  # an update is a collective step of every host

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1, *, cluster: Cluster) -> None:
        check_settings(behavior_name, settings)
        self.cluster = cluster
        self._pending_obs: list[np.ndarray] = []
        #: Rows of every update so far: all hosts', and this host's.
        self.rows_trained = 0
        self.local_rows_trained = 0
        hp = dataclasses.replace(settings.hyperparameters, flush_on_update=True)
        super().__init__(behavior_name, spec, dataclasses.replace(settings, hyperparameters=hp), context, reward_buff_cap)
        self._policy.rng = np.random.default_rng([self.seed, cluster.task_index])  # each host its own action noise
        if self.processor.rollout is not None:  # a rollout counts the agent steps of every host
            self.processor.rollout.scale = cluster.hosts

    def increment_step(self, n_steps: int) -> None:
        """Every host took as many agent steps as this one: the step counts them all."""
        super().increment_step(int(n_steps) * self.cluster.hosts)

    def is_ready_update(self) -> bool:
        """At the end of every rollout, even with nothing collected here: every host updates together."""
        rollout = self.processor.rollout
        return rollout is not None and rollout.done

    def _update_normalizer(self, vector_obs: np.ndarray) -> None:
        self._pending_obs.append(np.asarray(vector_obs, np.float32))

    def _layouts(self) -> list[dict[str, tuple[np.dtype, tuple[int, ...]]]]:
        sig = self.learner.batch_signature()
        batch = {k: (np.dtype(s.dtype.as_numpy_dtype), tuple(s.shape[1:])) for k, s in sig.items()}
        if self.learner.actor_critic.normalizer is None:
            return [batch]
        return [batch, {Field.VECTOR_OBS: (np.dtype(np.float32), (self.learner.actor_critic.normalizer.size,))}]

    def _local_tables(self, layouts: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
        ub = self.training_buffer.update_buffer
        empty = self._update_buffer_length() == 0
        batch = {k: np.zeros((0, *s), d) if empty else ub[k].get_batch() for k, (d, s) in layouts[0].items()}
        if len(layouts) == 1:
            return [batch]
        size = layouts[1][Field.VECTOR_OBS][1]
        obs = np.concatenate(self._pending_obs) if self._pending_obs else np.zeros((0, *size), np.float32)
        return [batch, {Field.VECTOR_OBS: obs}]

    def learning_batch(self) -> dict[str, np.ndarray]:
        """Every host's update buffer in worker order, advantages normalised over all of it; the
        normalizer first takes every host's observations of the trajectories closed since the last update."""
        layouts = self._layouts()
        local = self._local_tables(layouts)
        try:
            tables, counts = self.cluster.gather_tables(local, layouts)
        except tf.errors.OpError as e:
            self._lost_workers(e, saved=self.save_model())
        self._pending_obs.clear()
        batch = tables[0]
        if len(tables) > 1:
            self.learner.update_normalization(tables[1][Field.VECTOR_OBS])
            self._policy.refresh_normalizer()
        rows = int(counts[:, 0].sum())
        if rows == 0:
            raise TrainerError(f"Behavior {self.behavior_name}: no host collected any experience in a rollout.")
        self.rows_trained += rows
        self.local_rows_trained += len(local[0][Field.ADVANTAGES])
        logger.info("%s: update %d on %d rows (per worker: %s)", self.cluster, self.update_count + 1, rows,
                    counts[:, 0].tolist())
        batch[Field.ADVANTAGES] = normalized_advantages(batch[Field.ADVANTAGES], batch[Field.MASKS])
        return batch

    def update_policy(self) -> None:
        """The global update; a worker lost during the learner's collectives is a one-line error
        (the checkpoints written so far stand: the weights may hold part of this update)."""
        try:
            super().update_policy()
        except tf.errors.OpError as e:
            self._lost_workers(e, saved="")

    def _lost_workers(self, error: tf.errors.OpError, saved: str) -> None:
        where = (f"the model was saved at step {self.step}" if saved
                 else "the newest checkpoint holds the last good state")
        raise TrainerError(f"Behavior {self.behavior_name}: {self.cluster} lost the other workers during an update (a "
                           f"collective failed with {_cause(error)}: a worker stopped, or the network failed); "
                           f"{where}.") from error

    def _state_variables(self) -> list[Any]:
        """The learner's variables (weights, normalizer, schedule values) and its optimizer's."""
        seen: set[int] = set()
        out = []
        for v in [*self.learner.weights, *self.learner.optimizer.variables]:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return out

    def sync_from_chief(self) -> None:
        """Take the chief's state (what ``--resume`` restored there: weights, normalizer,
        optimizer, step and update count) on every host; one all-gather, called by every host."""
        variables = self._state_variables()
        parts = [np.array([self.step, self.update_count], np.int64).view(np.uint8)]
        parts += [np.ascontiguousarray(v.numpy()).reshape(-1).view(np.uint8) for v in variables]
        raw = np.concatenate(parts)
        raw = np.concatenate([raw, np.zeros(-len(raw) % 4, np.uint8)])
        chief = int(np.argmax(self.cluster.all_gather(np.array([int(self.cluster.chief)]))[:, 0]))
        got = self.cluster.all_gather(raw.view(np.int32))[chief].view(np.uint8)
        self.step, self.update_count = (int(x) for x in got[:16].view(np.int64))
        offset = 16
        for v, part in zip(variables, parts[1:]):
            v.assign(got[offset:offset + part.size].view(np.dtype(v.dtype)).reshape(tuple(v.shape)))
            offset += part.size
        self.learner.set_schedules(self.step)
        self._policy.refresh()

    @property
    def writes_results(self) -> bool:
        """Only the chief writes (and exports)."""
        return bool(self.cluster.chief)

    def summary_line(self) -> str:
        """What this host trained, and a digest of its weights (equal on every host)."""
        return (f"{self.cluster}: {self.behavior_name}: {self.update_count} updates on {self.rows_trained} rows "
                f"({self.local_rows_trained} from this host), step {self.step}, "
                f"weights {weights_digest(self.learner.actor_critic)}")


def _cause(error: tf.errors.OpError) -> str:
    """The error's type and TensorFlow's reason (the line that says why the collective stopped)."""
    lines = [line.strip() for line in str(error.message).splitlines() if line.strip()]
    reason = next((line for line in lines if "abort" in line.lower() or "is down" in line), lines[0] if lines else "")
    return describe(type(error)(None, None, reason), 200) if reason else type(error).__name__
