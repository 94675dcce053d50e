"""Every MA-POCA loss detail in one readable place (ML-Agents' ``poca/optimizer_torch.py``).

``loss = policy_loss + 0.5 · (value_loss + 0.5 · baseline_loss) − β · mean(entropy)`` where, over the
rows whose ``masks`` is 1:

* ``A`` (``Field.ADVANTAGES``) is the counterfactual advantage ``G^λ − B_i(s_i, (s_j, a_j)_{j≠i})``
  (averaged over reward signals, normalised over the update buffer by the trainer);
* ratio ``r = exp(log π(a|s) − log π_old(a|s))``; ``policy_loss = −mean(min(r·A, clip(r, 1−ε, 1+ε)·A))``;
* per value head, PPO's clipped value loss toward the λ-returns ``G^λ``:
  ``mean(max((G − v)², (G − v_old − clip(v − v_old, −ε, ε))²))``, once for the group value
  ``V(s_1..s_n)`` (``value_loss``) and once for the baseline (``baseline_loss``, its old estimates
  ``Field.baseline_estimates``); each is the mean over heads;
* the entropy bonus uses the current policy's entropy.

The policy is the per-agent actor (``ActorCritic``, whose own value heads are not trained here);
the two estimates come from the centralised critic (:class:`kerasrl.poca.networks.POCACritic`).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.poca.networks import POCACritic

#: The metrics ``poca_loss`` returns, in this order where a learner stacks them.
METRIC_NAMES = ("loss", "policy_loss", "value_loss", "baseline_loss", "entropy", "approx_kl", "clip_fraction")


def clipped_value_loss(estimates: Mapping[str, tf.Tensor], batch: Mapping[str, tf.Tensor], old_key: Callable[[str], str],
                       stream_names: Sequence[str], epsilon: tf.Tensor, mean: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """The mean over heads of each head's clipped squared error against its λ-returns, the old
    estimates read from ``batch[old_key(name)]`` (ML-Agents' ``trust_region_value_loss``)."""
    losses = []
    for name in stream_names:
        v, v_old, ret = estimates[name], batch[old_key(name)], batch[Field.returns(name)]
        v_clipped = v_old + tf.clip_by_value(v - v_old, -epsilon, epsilon)
        losses.append(mean(tf.maximum(tf.square(ret - v), tf.square(ret - v_clipped))))
    return tf.add_n(losses) / float(len(losses))


def poca_loss(actor: ActorCritic, critic: POCACritic, batch: Mapping[str, tf.Tensor], epsilon: tf.Tensor,
              beta: tf.Tensor, stream_names: Sequence[str]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """MA-POCA's loss on one mini-batch; returns ``(loss, metrics)`` (``METRIC_NAMES`` but ``loss``).

    ``batch`` holds the actor's inputs, ``actions`` (discrete) or ``actions_pre`` (continuous),
    ``action_log_probs``, ``advantages``, ``masks``, the groupmate status (``groupmate_vector_obs``,
    ``groupmate_actions``, ``groupmate_mask``) and per stream ``{name}_returns``,
    ``{name}_value_estimates`` and ``{name}_baseline_estimates``.
    """
    mask = tf.cast(batch[Field.MASKS], tf.float32)
    n = tf.maximum(tf.reduce_sum(mask), 1.0)

    def mean(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(x * mask) / n

    actions = batch[Field.ACTIONS] if actor.is_discrete else batch[Field.ACTIONS_PRE]
    log_prob, entropy, _ = actor.evaluate_actions(batch, actions)
    estimates = critic(batch)
    value_loss = clipped_value_loss(estimates["values"], batch, Field.value_estimates, stream_names, epsilon, mean)
    baseline_loss = clipped_value_loss(estimates["baselines"], batch, Field.baseline_estimates, stream_names, epsilon,
                                       mean)
    advantages = batch[Field.ADVANTAGES]
    old_log_prob = tf.reduce_sum(batch[Field.ACTION_LOG_PROBS], axis=-1)
    ratio = tf.exp(log_prob - old_log_prob)
    surrogate = tf.minimum(ratio * advantages, tf.clip_by_value(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages)
    policy_loss = -mean(surrogate)
    mean_entropy = mean(entropy)
    loss = policy_loss + 0.5 * (value_loss + 0.5 * baseline_loss) - beta * mean_entropy
    log_ratio = tf.stop_gradient(log_prob - old_log_prob)
    approx_kl = mean(tf.exp(log_ratio) - 1.0 - log_ratio)
    clipped = tf.cast(tf.abs(tf.exp(log_ratio) - 1.0) > epsilon, tf.float32)
    return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "baseline_loss": baseline_loss,
                  "entropy": mean_entropy, "approx_kl": approx_kl, "clip_fraction": mean(clipped)}
