"""The PPO learner: a ``keras.Model`` whose ``train_step`` is one PPO gradient step.

Two drivers share the same loss (``kerasrl.ppo.loss.ppo_loss``) and the same gradient code:

* ``train_step`` / ``train_minibatch`` — one mini-batch per compiled call (for ``fit`` and
  ``tf.distribute`` strategies);
* ``fused_update`` — every epoch and mini-batch of an update, shuffling included, in one
  compiled call (optionally XLA-compiled), which removes the per-call overhead.

With the same permutations (``epoch_permutation``) both give the same weights.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.loss import ppo_loss
from kerasrl.ppo.schedules import ppo_schedules

METRIC_NAMES = ("loss", "policy_loss", "value_loss", "entropy")


def padded_sequences(num_sequences: int, sequences_per_batch: int) -> int:
    """Sequence slots the fused driver compiles for: ``spb · 2^k ≥ num_sequences``.

    Padding the update buffer to a few bucket sizes keeps XLA from recompiling for every
    buffer length (trajectories end at varying times, so the length varies from update to update).
    """
    batches = max(-(-num_sequences // max(sequences_per_batch, 1)), 1)
    return max(sequences_per_batch, 1) * (1 << (batches - 1).bit_length())


def _permutation(n_valid: tf.Tensor, n_slots: Any, seed: tf.Tensor, epoch: tf.Tensor) -> tf.Tensor:
    keys = tf.random.stateless_uniform([n_slots], seed=tf.stack([seed, epoch]))
    keys = tf.where(tf.range(n_slots) < n_valid, keys, 2.0)
    return tf.argsort(keys)


def epoch_permutation(num_sequences: int, seed: int, epoch: int, sequences_per_batch: int = 1) -> np.ndarray:
    """The sequence permutation the fused driver uses for ``epoch`` (for the other driver, tests, replay)."""
    slots = padded_sequences(num_sequences, sequences_per_batch)
    perm = _permutation(tf.constant(num_sequences), slots, tf.constant(seed), tf.constant(epoch)).numpy()
    return perm[:num_sequences]


class PPOLearner(keras.Model):
    """Owns the actor-critic being trained, its Adam optimizer and the PPO schedules."""

    def __init__(
        self,
        actor_critic: ActorCritic,
        learning_rate: float = 3e-4,
        epsilon: float = 0.2,
        beta: float = 5e-3,
        max_steps: float = 5e4,
        sequence_length: int = 1,
        jit_compile: bool = False,
        clip_value_loss: bool = True,
        max_grad_norm: Optional[float] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.clip_value_loss = bool(clip_value_loss)
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.actor_critic = actor_critic
        self.stream_names = list(actor_critic.stream_names)
        self.initial = {"learning_rate": float(learning_rate), "epsilon": float(epsilon), "beta": float(beta)}
        self.max_steps = float(max_steps)
        self.sequence_length = int(sequence_length) if actor_critic.use_recurrent else 1
        self.use_xla = bool(jit_compile)
        self.clip_epsilon = self.add_weight(name="epsilon", shape=(), initializer=keras.initializers.Constant(epsilon), trainable=False)
        self.beta = self.add_weight(name="beta", shape=(), initializer=keras.initializers.Constant(beta), trainable=False)
        self.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), jit_compile=self.use_xla)
        self.optimizer.build(self.actor_critic.trainable_variables)
        self._fused: Optional[tf.types.experimental.GenericFunction] = None
        self.trace_seconds = 0.0
        self._minibatch_fn: Optional[tf.types.experimental.GenericFunction] = None

    def batch_signature(self) -> dict[str, tf.TensorSpec]:
        """Signature of a learning batch: model inputs plus what the loss needs, batch dim free."""
        sig = dict(self.actor_critic.input_signature())
        ac = self.actor_critic
        if ac.is_discrete:
            sig["actions"] = tf.TensorSpec([None, len(ac.branches)], tf.int32, name="actions")
        else:
            sig["pre_actions"] = tf.TensorSpec([None, ac.spec.action_size], tf.float32, name="pre_actions")
        for key in ("old_log_probs", "advantages", "masks"):
            sig[key] = tf.TensorSpec([None], tf.float32, name=key)
        for name in self.stream_names:
            sig[f"{name}_returns"] = tf.TensorSpec([None], tf.float32, name=f"{name}_returns")
            sig[f"{name}_value_estimates"] = tf.TensorSpec([None], tf.float32, name=f"{name}_value_estimates")
        return sig

    def set_schedules(self, step: float) -> dict[str, float]:
        """Set learning rate, epsilon and beta for the policy's current ``step``."""
        values = ppo_schedules(self.initial["learning_rate"], self.initial["epsilon"], self.initial["beta"], step, self.max_steps)
        self.optimizer.learning_rate.assign(values["learning_rate"])
        self.clip_epsilon.assign(values["epsilon"])
        self.beta.assign(values["beta"])
        return values

    def call(self, inputs: Mapping[str, tf.Tensor], training: bool = False) -> dict[str, Any]:
        return self.actor_critic(inputs)

    def _gradient_step(self, batch: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        variables = self.actor_critic.trainable_variables
        with tf.GradientTape() as tape:
            loss, metrics = ppo_loss(
                self.actor_critic, batch, self.clip_epsilon, self.beta, self.stream_names, self.sequence_length,
                self.clip_value_loss,
            )
        grads = tape.gradient(loss, variables)
        if self.max_grad_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, self.max_grad_norm)
        self.optimizer.apply_gradients(zip(grads, variables))
        return {"loss": loss, **metrics}

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        """One PPO gradient step on a mini-batch (a dict as ``batch_signature`` describes)."""
        if isinstance(data, tuple):
            data = data[0]
        return self._gradient_step(data)

    def train_minibatch(self, batch: Mapping[str, np.ndarray]) -> dict[str, float]:
        """Compiled per-mini-batch driver (fixed signature: no retracing across batch sizes)."""
        if self._minibatch_fn is None:
            self._minibatch_fn = tf.function(self.train_step, input_signature=[self.batch_signature()],
                                             jit_compile=self.use_xla, reduce_retracing=True)
        out = self._minibatch_fn(self._to_tensors(batch))
        return {k: float(v) for k, v in out.items()}

    def _to_tensors(self, batch: Mapping[str, np.ndarray]) -> dict[str, tf.Tensor]:
        sig = self.batch_signature()
        missing = [k for k in sig if k not in batch]
        if missing:
            raise KeyError(f"Learning batch lacks fields {missing}.")
        return {k: tf.convert_to_tensor(np.asarray(batch[k]), dtype=spec.dtype) for k, spec in sig.items()}

    def _build_fused(self) -> tf.types.experimental.GenericFunction:
        seq_len = self.sequence_length
        names = list(self.batch_signature())
        recurrent = self.actor_critic.use_recurrent

        def fused(buffer: dict[str, tf.Tensor], num_epoch: tf.Tensor, sequences_per_batch: tf.Tensor,
                  seed: tf.Tensor, n_valid_seq: tf.Tensor) -> dict[str, tf.Tensor]:
            n_slots = tf.shape(buffer["advantages"])[0] // seq_len
            spb = sequences_per_batch
            n_batches = tf.maximum(n_valid_seq // spb, 1)
            offsets = tf.range(seq_len)
            totals = {k: tf.constant(0.0) for k in METRIC_NAMES}
            # ``while`` rather than ``for … in tf.range``: autograph gives the latter a
            # ``maximum_iterations``, which XLA must know at compile time (one compile per length).
            epoch = tf.constant(0)
            while epoch < num_epoch:
                perm = _permutation(n_valid_seq, n_slots, seed, epoch)
                epoch += 1
                b = tf.constant(0)
                while b < n_batches:
                    seq_idx = perm[b * spb : (b + 1) * spb]
                    b += 1
                    starts = seq_idx * seq_len
                    rows = tf.reshape(starts[:, None] + offsets[None, :], [-1])
                    batch = {k: tf.gather(buffer[k], rows) for k in names if k != "memory"}
                    if recurrent:
                        batch["memory"] = tf.gather(buffer["memory"], starts)
                    metrics = self._gradient_step(batch)
                    totals = {k: totals[k] + metrics[k] for k in METRIC_NAMES}
            count = tf.cast(num_epoch * n_batches, tf.float32)
            return {k: v / count for k, v in totals.items()}

        signature = [self.batch_signature()] + [tf.TensorSpec([], tf.int32)] * 4
        if recurrent:
            mem = signature[0]["memory"]
            signature[0]["memory"] = tf.TensorSpec([None, mem.shape[-1]], tf.float32, name="memory")
        return tf.function(fused, input_signature=signature, jit_compile=self.use_xla)

    def fused_update(self, buffer: Mapping[str, np.ndarray], num_epoch: int, batch_size: int, seed: int) -> dict[str, float]:
        """All ``num_epoch`` epochs of mini-batches of ``batch_size`` rows in one compiled call.

        ``buffer['memory']`` holds every row's memory (the start of each sequence is used).
        Each epoch permutes whole sequences; the trailing partial mini-batch is dropped.
        """
        first = self._fused is None
        if first:
            self._fused = self._build_fused()
        seq_len = self.sequence_length
        spb = max(int(batch_size) // seq_len, 1)
        tensors = self._to_tensors(buffer)
        n_seq = int(tensors["advantages"].shape[0]) // seq_len
        spb = min(spb, max(n_seq, 1))
        slots = padded_sequences(n_seq, spb)
        if slots > n_seq:
            pad = (slots - n_seq) * seq_len
            tensors = {k: tf.concat([v[: n_seq * seq_len], tf.zeros([pad, *v.shape[1:]], v.dtype)], axis=0)
                       for k, v in tensors.items()}
        start = time.perf_counter()
        out = self._fused(tensors, tf.constant(int(num_epoch), tf.int32), tf.constant(spb, tf.int32),
                          tf.constant(int(seed) % (2**31 - 1), tf.int32), tf.constant(n_seq, tf.int32))
        result = {k: float(v) for k, v in out.items()}
        if first:
            self.trace_seconds += time.perf_counter() - start
        return result

    def minibatch_update(self, buffer: Mapping[str, np.ndarray], num_epoch: int, batch_size: int, seed: int) -> dict[str, float]:
        """The same update as ``fused_update``, one compiled call per mini-batch."""
        arrays = {k: np.asarray(v) for k, v in buffer.items()}
        seq_len = self.sequence_length
        n_seq = arrays["advantages"].shape[0] // seq_len
        spb = min(max(int(batch_size) // seq_len, 1), n_seq)
        n_batches = max(n_seq // spb, 1)
        totals = {k: 0.0 for k in METRIC_NAMES}
        for epoch in range(int(num_epoch)):
            perm = epoch_permutation(n_seq, int(seed) % (2**31 - 1), epoch, spb)
            for b in range(n_batches):
                starts = perm[b * spb : (b + 1) * spb] * seq_len
                rows = (starts[:, None] + np.arange(seq_len)[None, :]).reshape(-1)
                batch = {k: v[rows] for k, v in arrays.items() if k != "memory"}
                if "memory" in arrays:
                    batch["memory"] = arrays["memory"][starts]
                metrics = self.train_minibatch(batch)
                for k in METRIC_NAMES:
                    totals[k] += metrics[k]
        return {k: v / (num_epoch * n_batches) for k, v in totals.items()}
