"""Behavioral cloning's learning step, shared by the BC module inside PPO and the BC trainers.

``imitation_batch`` turns demonstration rows (the ``kerasrl.demos`` contract) into the model's
inputs and targets, cutting whole episodes into sequences for recurrent models (padded at the
end with masked rows, so every sequence's memory starts from zeros at an episode's start or
mid-episode, as ML-Agents' BC does). ``BCLearner.update`` runs every mini-batch of an update in
one compiled call (a ``tf.while_loop`` over the mini-batch plan), with its own Adam.

Loss: discrete, the negative log-likelihood of the expert's action in every branch (masked
branches, summed over branches); continuous, the squared error between the policy's action
(``ClippedGaussian.squash`` of μ, plus σ·ε when ``sample_noise``, ε drawn per mini-batch with
shape ``[1, action_size]`` as ML-Agents 0.9 does) and the expert's action clipped to [−1, 1];
hybrid, the sum of both (the continuous columns' squared error, the branches' negative
log-likelihood). All are averaged over the real (unmasked) rows.

Under the learner's ``tf.distribute`` strategy (``kerasrl.distribute.learner_strategy``, taken at
construction; the model must have been built in its scope too) the optimizer is built in its
scope and an update is one compiled call in which every mini-batch (gathered on the host) is one
``strategy.run`` over the replicas' whole sequences, the loss a local sum over the global count
of real rows: the update equals the one-device update.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional

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
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import ClippedGaussian, MaskedMultiCategorical
from kerasrl.spec import BehaviorSpec

LOSS_KEY = "loss"


def imitation_batch(spec: BehaviorSpec, demo: AgentBuffer, model: ActorCritic) -> dict[str, np.ndarray]:
    """The model inputs, expert actions (``Field.ACTIONS``) and row masks (``Field.MASKS``) of
    ``demo``, laid out in whole sequences of ``model.sequence_length`` rows."""
    n = len(demo[Field.ACTIONS])
    if n == 0:
        raise ValueError("The demonstration holds no rows.")
    episodes = demo[Field.EPISODE_ID].array if Field.EPISODE_ID in demo else np.zeros(n, np.int64)
    source, first = episode_layout(np.asarray(episodes), model.sequence_length)
    actions = np.asarray(demo[Field.ACTIONS].array)
    arrays: dict[str, tuple[np.ndarray, float]] = {}
    if spec.vector_observation_size:
        arrays[Field.VECTOR_OBS] = (demo[Field.VECTOR_OBS].array.astype(np.float32), 0.0)
    for j in range(len(spec.visual_observation_shapes)):
        arrays[Field.visual_obs(j)] = (demo[Field.visual_obs(j)].array.astype(np.float32), 0.0)
    if spec.has_action_mask:
        mask = demo[Field.ACTION_MASK].array if Field.ACTION_MASK in demo else np.ones((n, spec.action_mask_size))
        arrays[Field.ACTION_MASK] = (np.asarray(mask, np.float32), 1.0)
    if spec.is_hybrid:  # the continuous columns clipped, the branch indices as they are
        size = spec.continuous_size
        arrays[Field.ACTIONS] = (np.concatenate([np.clip(actions[:, :size].astype(np.float32), -1.0, 1.0),
                                                 actions[:, size:].astype(np.float32)], axis=1), 0.0)
    elif spec.is_discrete:
        arrays[Field.ACTIONS] = (actions.astype(np.int32), 0.0)
        if model.uses_prev_action:
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


class BCLearner:
    """Trains ``model``'s policy to imitate expert actions with its own Adam.

    ``build()`` makes the optimizer (in the strategy's scope) and the compiled update;
    ``trace_seconds`` is the time its first call took (tracing included), which a run's
    steps/s leaves out, as it does PPOLearner's.
    """

    def __init__(self, model: ActorCritic, learning_rate: float, sample_noise: bool, name: str = "bc") -> None:
        self.model = model
        self.spec = model.spec
        self.sequence_length = model.sequence_length
        self.initial_learning_rate = float(learning_rate)
        self.sample_noise = sample_noise and not model.is_discrete
        self.name = name
        self.strategy = distribute.learner_strategy()
        self.replicas = distribute.replicas(self.strategy)
        self.optimizer: keras.optimizers.Optimizer
        self._update_fn: Any = None
        self.trace_seconds = 0.0
        self._traced = False
        self.build()

    def build(self) -> None:
        """The optimizer (built on the model's weights) and the compiled update."""
        with self.strategy.scope():
            self.optimizer = keras.optimizers.Adam(learning_rate=self.initial_learning_rate, name=f"{self.name}_adam")
            self.optimizer.build(self.model.trainable_variables)
        self._update_fn = tf.function(self._update, autograph=False, reduce_retracing=True)

    def check_batch_size(self, rows: int, where: str) -> None:
        """Refuse (one line) mini-batches of ``rows`` rows that the replicas cannot share in whole sequences."""
        distribute.check_batch_size(rows, self.sequence_length, self.replicas, where=where)

    # -- the loss ------------------------------------------------------------------------
    def loss(self, batch: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor],
             count: Optional[tf.Tensor] = None) -> tf.Tensor:
        """Mean imitation loss over the real rows of ``batch`` (one mini-batch of whole sequences);
        with ``count`` (all replicas' real rows) this replica's share of the global mean."""
        model = self.model
        inputs = {k: v for k, v in batch.items() if k not in (Field.ACTIONS, Field.MASKS)}
        if model.use_recurrent:
            n_seq = tf.shape(batch[Field.MASKS])[0] // self.sequence_length
            inputs[Field.MEMORY] = tf.zeros([n_seq, model.memory_size])
        out = model(inputs, sequence_length=self.sequence_length)
        masks = batch[Field.MASKS]
        actions, size = batch[Field.ACTIONS], model.continuous_size
        per_row = tf.zeros_like(masks)
        if model.branches:
            dist = MaskedMultiCategorical(out["logits"], inputs[Field.ACTION_MASK], model.branches)
            per_row += -dist.log_prob(tf.cast(actions[:, size:], tf.int32))
        if size:
            pre = out["mu"]
            if noise is not None:
                pre = pre + tf.exp(0.5 * out["log_sigma_sq"]) * noise
            squashed = ClippedGaussian.squash(pre, model.action_scale)
            per_row += tf.reduce_mean(tf.square(squashed - tf.cast(actions[:, :size], tf.float32)), axis=-1)
        if count is None:
            count = tf.maximum(tf.reduce_sum(masks), 1.0)
        return tf.reduce_sum(per_row * masks) / count

    def _step(self, batch: Mapping[str, tf.Tensor], i: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        """One gradient step on a mini-batch (a replica's slice of it under a strategy); its loss."""
        variables = self.model.trainable_variables
        noise = (tf.random.stateless_normal([1, self.spec.continuous_size], seed=tf.stack([seed, i]))
                 if self.sample_noise else None)
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
