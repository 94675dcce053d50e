"""Behavioral cloning's learning step, the one BC behind every algorithm's ``pretraining`` and
the BC trainers.

``imitation_batch`` turns demonstration rows (the ``kerasrl.demos`` contract) into the policy's
inputs and targets, cutting whole episodes into sequences for recurrent policies (padded at the
end with masked rows, so every sequence's memory starts from zeros at an episode's start or
mid-episode, as ML-Agents' BC does). ``BCLearner.update`` runs every mini-batch of an update in
one compiled call (``kerasrl.common.update_loop`` over the mini-batch plan), with its own Adam.

What differs by algorithm is an ``Imitator``: how its policy turns a mini-batch of demonstration
rows into each row's loss, which noise it samples with and which variables train (PPO's
``kerasrl.bc.actor_critic.ActorCriticImitator``, SAC's ``kerasrl.sac.bc.SACImitator``). The
learner owns the rest: the noise ε (standard normal, drawn per mini-batch from the update's seed,
``[1, width]`` or one row per demonstration row), the loss as the mean over the real (unmasked)
rows, the gradient step, and the loop.

Under the learner's ``tf.distribute`` strategy (``kerasrl.distribute.learner_strategy``, taken at
construction; the policy must have been built in its scope too) the optimizer is built in its
scope and an update is one compiled call in which every mini-batch (gathered on the host) is one
``strategy.run`` over the replicas' whole sequences, the loss a local sum over the global count
of real rows, each replica's noise its rows' share of the whole mini-batch's: the update equals
the one-device update.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Protocol

import keras
import numpy as np
import tensorflow as tf

from kerasrl import distribute
from kerasrl.buffer import AgentBuffer
from kerasrl.common import update_loop
from kerasrl.common.minibatches import minibatch_plan
from kerasrl.common.reductions import global_count
from kerasrl.demos import episode_layout
from kerasrl.fields import Field
from kerasrl.optimizers import Adam
from kerasrl.spec import BehaviorSpec


class SequenceLayout(Protocol):
    """How a policy reads demonstration rows: in sequences of ``sequence_length`` steps (1
    without memory), with the previous step's discrete action as an input or not."""

    sequence_length: int
    uses_prev_action: bool


class Imitator(SequenceLayout, Protocol):
    """An algorithm's policy as behavioral cloning trains it."""

    #: Width of the sampling noise ε a mini-batch needs (0: none).
    noise_width: int
    #: ε with one row per demonstration row (else one row ``[1, width]`` for the whole mini-batch).
    noise_per_row: bool

    @property
    def variables(self) -> list[Any]:
        """The variables that imitation trains."""

    def row_losses(self, batch: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor]) -> tf.Tensor:
        """Each row's imitation loss ``[rows]`` on a mini-batch of ``imitation_batch``'s fields."""


def imitation_batch(spec: BehaviorSpec, demo: AgentBuffer, policy: SequenceLayout) -> dict[str, np.ndarray]:
    """The policy inputs, expert actions (``Field.ACTIONS``) and row masks (``Field.MASKS``) of
    ``demo``, laid out in whole sequences of ``policy.sequence_length`` rows."""
    n = len(demo[Field.ACTIONS])
    if n == 0:
        raise ValueError("The demonstration holds no rows.")
    episodes = demo[Field.EPISODE_ID].array if Field.EPISODE_ID in demo else np.zeros(n, np.int64)
    source, first = episode_layout(np.asarray(episodes), policy.sequence_length)
    actions = np.asarray(demo[Field.ACTIONS].array)
    arrays: dict[str, tuple[np.ndarray, float]] = {}
    if spec.vector_observation_size:
        arrays[Field.VECTOR_OBS] = (demo[Field.VECTOR_OBS].array.astype(np.float32), 0.0)
    for j in range(len(spec.visual_observation_shapes)):
        arrays[Field.visual_obs(j)] = (demo[Field.visual_obs(j)].array.astype(np.float32), 0.0)
    if spec.has_action_mask:  # padded with 1, so that a padded row's masked logits stay finite
        mask = demo[Field.ACTION_MASK].array if Field.ACTION_MASK in demo else np.ones((n, spec.action_mask_size))
        arrays[Field.ACTION_MASK] = (np.asarray(mask, np.float32), 1.0)
    if spec.is_hybrid:  # the continuous columns clipped, the branch indices as they are
        size = spec.continuous_size
        arrays[Field.ACTIONS] = (np.concatenate([np.clip(actions[:, :size].astype(np.float32), -1.0, 1.0),
                                                 actions[:, size:].astype(np.float32)], axis=1), 0.0)
    elif spec.is_discrete:
        arrays[Field.ACTIONS] = (actions.astype(np.int32), 0.0)
        if policy.uses_prev_action:
            prev = np.zeros_like(actions, dtype=np.int32)
            prev[1:] = actions[:-1]
            prev[first] = 0
            arrays[Field.PREV_ACTION] = (prev, 0.0)
    else:
        arrays[Field.ACTIONS] = (np.clip(actions.astype(np.float32), -1.0, 1.0), 0.0)
    arrays[Field.MASKS] = (np.ones(n, np.float32), 0.0)
    real = source >= 0
    out = {}
    for key, (arr, pad) in arrays.items():
        full = arr[np.where(real, source, 0)]
        full[~real] = pad
        out[key] = np.ascontiguousarray(full)
    return out


def replica_rows(full: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """This replica's ``rows`` of ``full`` (a whole mini-batch's, replica ``r`` holding its
    ``r``-th share of the rows, as ``update_loop.replica_inputs`` hands them out); all of it
    outside a strategy."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return full
    start = tf.cast(ctx.replica_id_in_sync_group, tf.int32) * rows
    return full[start: start + rows]


class BCLearner:
    """Trains ``imitator``'s policy to imitate expert actions with its own Adam (``{name}_adam``).

    ``build()`` makes the optimizer (in the strategy's scope) and the compiled update;
    ``trace_seconds`` is the time its first call took (tracing included), which a run's
    steps/s leaves out, as it does PPOLearner's.
    """

    def __init__(self, imitator: Imitator, learning_rate: float, name: str = "bc") -> None:
        self.imitator = imitator
        self.sequence_length = imitator.sequence_length
        self.initial_learning_rate = float(learning_rate)
        self.name = name
        self.strategy = distribute.learner_strategy()
        self.replicas = distribute.replicas(self.strategy)
        self.optimizer: keras.optimizers.Optimizer
        self._update_fn: Any = None
        self.trace_seconds = 0.0
        self._traced = False
        self.build()

    def build(self) -> None:
        """The optimizer (built on the imitator's variables) and the compiled update."""
        with self.strategy.scope():
            self.optimizer = Adam(learning_rate=self.initial_learning_rate, name=f"{self.name}_adam")
            self.optimizer.build(self.imitator.variables)
        self._update_fn = tf.function(self._update, autograph=False, reduce_retracing=True)

    def check_batch_size(self, rows: int, where: str) -> None:
        """Refuse (one line) mini-batches of ``rows`` rows that the replicas cannot share in whole sequences."""
        distribute.check_batch_size(rows, self.sequence_length, self.replicas, where=where)

    # -- the loss ------------------------------------------------------------------------
    def loss(self, batch: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor],
             count: Optional[tf.Tensor] = None) -> tf.Tensor:
        """Mean imitation loss over the real rows of ``batch`` (one mini-batch of whole sequences);
        with ``count`` (all replicas' real rows) this replica's share of the global mean."""
        masks = batch[Field.MASKS]
        per_row = tf.cast(self.imitator.row_losses(batch, noise), masks.dtype)
        if count is None:
            count = tf.maximum(tf.reduce_sum(masks), 1.0)
        return tf.reduce_sum(per_row * masks) / count

    def noise(self, batch: Mapping[str, tf.Tensor], i: tf.Tensor, seed: tf.Tensor) -> Optional[tf.Tensor]:
        """Mini-batch ``i``'s ε (``None`` when the imitator samples none): drawn from ``(seed, i)``,
        per row over the whole mini-batch (this replica's rows of it) or ``[1, width]``."""
        width = self.imitator.noise_width
        if not width:
            return None
        key = tf.stack([seed, i])
        if not self.imitator.noise_per_row:
            return tf.random.stateless_normal([1, width], seed=key)
        rows = tf.shape(batch[Field.MASKS])[0]
        ctx = tf.distribute.get_replica_context()
        replicas = ctx.num_replicas_in_sync if ctx is not None else 1
        return replica_rows(tf.random.stateless_normal([rows * replicas, width], seed=key), rows)

    def _step(self, batch: Mapping[str, tf.Tensor], i: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        """One gradient step on a mini-batch (a replica's slice of it under a strategy); its loss."""
        variables = self.imitator.variables
        noise = self.noise(batch, i, seed)
        count = global_count(batch[Field.MASKS])
        with tf.GradientTape() as tape:
            loss = self.loss(batch, noise, count)
        grads = tape.gradient(loss, variables)
        # Weights the policy's action does not depend on (value heads) get zero gradients:
        # Adam's moments stay 0 for them, so they never move.
        grads = [tf.zeros_like(v) if g is None else g for g, v in zip(grads, variables)]
        self.optimizer.apply_gradients(zip(grads, variables))
        return loss

    def _update(self, data: Any, rows: Optional[tf.Tensor], learning_rate: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        """Every mini-batch of the update; the summed loss. One device: ``data`` is the whole batch and
        each mini-batch is gathered from it by ``rows`` inside the loop; under a strategy (``rows``
        ``None``) ``data`` holds the replicas' slices of the mini-batches gathered on the host."""
        self.optimizer.learning_rate.assign(learning_rate)

        def step(i: tf.Tensor, batches: Mapping[str, tf.Tensor]) -> tf.Tensor:
            if rows is None:
                batch = {k: v[i] for k, v in batches.items()}
            else:
                batch = {k: tf.gather(v, rows[i]) for k, v in batches.items()}
            return tf.reshape(self._step(batch, i, seed), [1])

        count = None if rows is None else tf.shape(rows)[0]
        return update_loop.sum_minibatch_steps(self.strategy, step, data, 1, count)[0]

    # -- driving it ----------------------------------------------------------------------
    def plan(self, n_rows: int, batch_size: int, num_epoch: int, max_batches: Optional[int], seed: int) -> np.ndarray:
        """Row indices ``[mini-batches, rows]`` of an update: ``num_epoch`` shuffles of whole
        sequences, ``max(min(batch_size, n_rows) // L, 1)`` sequences per mini-batch, at most
        ``max_batches`` mini-batches per epoch."""
        seq_len = self.sequence_length
        n_seq_total = max(n_rows // seq_len, 1)
        per_batch = max(min(int(batch_size), n_rows) // seq_len, 1)
        plan = minibatch_plan(n_seq_total, per_batch, num_epoch, seed)
        if max_batches is not None:
            plan = plan[:, : max(int(max_batches), 1)]
        starts = plan.reshape(-1, plan.shape[-1]) * seq_len
        return (starts[:, :, None] + np.arange(seq_len)[None, None, :]).reshape(starts.shape[0], -1).astype(np.int32)

    def update(self, data: Mapping[str, Any], rows: np.ndarray, learning_rate: float, seed: int) -> float:
        """Every mini-batch of ``rows`` over ``data`` (``imitation_batch``'s arrays or tensors made
        from them) in one compiled call; the mean loss."""
        lr, seed_t = tf.constant(learning_rate, tf.float32), tf.constant(int(seed) & 0x7FFFFFFF, tf.int32)
        start = time.perf_counter()
        if self.replicas == 1:
            loss = self._update_fn(dict(data), tf.constant(rows), lr, seed_t)
        else:
            self.check_batch_size(rows.shape[1], f"{self.name}: ")
            stacked = {k: np.asarray(v)[rows] for k, v in data.items()}
            loss = self._update_fn(update_loop.replica_inputs(self.strategy, stacked), None, lr, seed_t)
        value = float(loss) / max(rows.shape[0], 1)
        if not self._traced:
            self._traced = True
            self.trace_seconds += time.perf_counter() - start
        if not np.isfinite(value):
            raise FloatingPointError(f"The behavioral cloning loss became {value}.")
        return value


def as_tensors(batch: Mapping[str, np.ndarray]) -> dict[str, tf.Tensor]:
    """``imitation_batch``'s arrays as tensors (made once for a fixed demonstration)."""
    return {k: tf.constant(v) for k, v in batch.items()}
