"""Every PPO loss detail in one readable place.

``loss = policy_loss + c_v · value_loss − β · mean(entropy)`` (``c_v``: ``vf_coef``, 0.5 as in
ML-Agents unless set) where, over the rows whose
``masks`` is 1 (padding rows of recurrent sequences have 0):

* ratio ``r = exp(log π(a|s) − log π_old(a|s))``; ``policy_loss = −mean(min(r·A, clip(r, 1−ε, 1+ε)·A))``;
* per value head ``v``: ``v_clip = v_old + clip(v − v_old, −ε, ε)``,
  ``L = mean(max((R − v)², (R − v_clip)²))`` (``clip_value_loss=False``: ``mean((R − v)²)``,
  as Stable-Baselines3 by default); ``value_loss`` = mean over heads;
* the entropy bonus uses the current policy's entropy;
* reported, not optimised: ``approx_kl = mean((r − 1) − log r)`` (Schulman's low-variance
  estimator, as Stable-Baselines3 logs it) and ``clip_fraction = mean(|r − 1| > ε)``.
* ``minibatch_advantages``: advantages are normalised again over each mini-batch's rows
  (mean 0, unbiased std 1, + 1e-8), as Stable-Baselines3 does (per replica under a strategy).

Means are "sum over the local rows / global row count", so that under a ``tf.distribute``
strategy (whose Keras optimizer sums gradients across replicas) the update equals the
single-device update on the whole batch.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import tensorflow as tf

from kerasrl.common.reductions import global_count
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic


def ppo_loss(
    model: ActorCritic,
    batch: Mapping[str, tf.Tensor],
    epsilon: tf.Tensor,
    beta: tf.Tensor,
    stream_names: Sequence[str],
    sequence_length: int = 1,
    clip_value_loss: bool = True,
    row_count: tf.Tensor | None = None,
    minibatch_advantages: bool = False,
    value_coef: float = 0.5,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """PPO loss on one mini-batch; returns ``(loss, metrics)`` (``policy_loss``, ``value_loss``,
    ``entropy``, ``approx_kl``, ``clip_fraction``).

    ``batch`` holds the model inputs plus (named as ``Field``) ``actions`` (discrete, int
    ``[B, branches]``) or ``actions_pre`` (continuous ``[B, act]``), ``action_log_probs`` of the
    acting policy ``[B, branches or act]``, ``advantages`` ``[B]``, ``masks`` ``[B]`` and, per
    stream, ``{name}_returns`` and ``{name}_value_estimates``.
    ``row_count``: the number of valid rows across replicas, when the caller has it (compute
    it outside any gradient tape: a collective recorded on the tape can desynchronise replicas).
    ``value_coef``: the value loss's weight (``vf_coef``).
    """
    mask = tf.cast(batch[Field.MASKS], tf.float32)
    n = global_count(mask) if row_count is None else row_count

    def mean(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(x * mask) / n

    actions = batch[Field.ACTIONS] if model.is_discrete else batch[Field.ACTIONS_PRE]
    log_prob, entropy, values = model.evaluate_actions(batch, actions, sequence_length=sequence_length)
    value_loss = _value_loss(values, batch, stream_names, epsilon, clip_value_loss, mean)
    advantages = batch[Field.ADVANTAGES]
    if minibatch_advantages:
        advantages = _normalized(advantages, mask)
    old_log_prob = tf.reduce_sum(batch[Field.ACTION_LOG_PROBS], axis=-1)
    ratio = tf.exp(log_prob - old_log_prob)
    surrogate = tf.minimum(ratio * advantages, tf.clip_by_value(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages)
    policy_loss = -mean(surrogate)
    mean_entropy = mean(entropy)

    loss = policy_loss + value_coef * value_loss - beta * mean_entropy
    log_ratio = tf.stop_gradient(log_prob - old_log_prob)
    approx_kl = mean(tf.exp(log_ratio) - 1.0 - log_ratio)
    clipped = tf.cast(tf.abs(tf.exp(log_ratio) - 1.0) > epsilon, tf.float32)
    return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": mean_entropy,
                  "approx_kl": approx_kl, "clip_fraction": mean(clipped)}


def _value_loss(values: Mapping[str, tf.Tensor], batch: Mapping[str, tf.Tensor], stream_names: Sequence[str],
                epsilon: tf.Tensor, clip: bool, mean: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """The mean over value heads of each head's (clipped) squared error against its returns."""
    value_losses = []
    for name in stream_names:
        v = values[name]
        v_old = batch[Field.value_estimates(name)]
        ret = batch[Field.returns(name)]
        if clip:
            v_clipped = v_old + tf.clip_by_value(v - v_old, -epsilon, epsilon)
            value_losses.append(mean(tf.maximum(tf.square(ret - v), tf.square(ret - v_clipped))))
        else:
            value_losses.append(mean(tf.square(ret - v)))
    return tf.add_n(value_losses) / float(len(value_losses))


def _normalized(advantages: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Advantages normalised over this replica's real rows (mean 0, unbiased std 1, + 1e-8)."""
    local = tf.maximum(tf.reduce_sum(mask), 2.0)
    adv_mean = tf.reduce_sum(advantages * mask) / local
    adv_std = tf.sqrt(tf.reduce_sum(tf.square(advantages - adv_mean) * mask) / (local - 1.0))
    return (advantages - adv_mean) / (adv_std + 1e-8)
