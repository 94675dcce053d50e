"""Soft Actor-Critic's losses: the critics', the actor's and the entropy coefficients'.

Notation: ``α = exp(log_ent_coef)`` per action branch (one for continuous actions), ``γ`` and
``r`` per reward signal, ``d`` the terminal flag (a time-limit cut is not terminal), ``Q̄`` the
target critics. Continuous actions (as Stable-Baselines3's ``SAC``)::

    y      = r + γ (1 − d) (min(Q̄₁, Q̄₂)(s′, a′) − α log π(a′|s′)),  a′ ~ π(·|s′)
    critic = ½ Σᵢ mean (Qᵢ(s, a) − y)²
    actor  = mean (α log π(ã|s) − min(Q₁, Q₂)(s, ã)),                ã ~ π(·|s)
    α loss = −mean (log α · (log π(ã|s) + H̄))                        (H̄ the target entropy)

Discrete actions (ML-Agents' discrete SAC): the expectations over each branch's actions are
exact sums weighted by the masked policy's probabilities, ``log π(ã|s)`` becomes the branch's
``Σₐ π log π`` (minus its entropy), and the branches' soft values and actor losses are averaged.
Several reward signals: the critics have one output per signal, each with its own ``r`` and
``γ``; the actor maximises the mean over signals of ``min(Q₁, Q₂)``. Recurrent SAC's means are
over the real steps of its sequences only (``weights``: ``step_weights``, 0 for padding).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf


def step_weights(masks: np.ndarray) -> np.ndarray:
    """Each step's weight in a mini-batch's means (``masks`` ``[K, ...]``: 1 real, 0 padding):
    its mask times the mini-batch's steps over its real ones, so that the plain mean of the
    weighted values is the mean over the real steps. Being a per-row factor, it holds when a
    replica takes a slice of the rows (its mean over its ``1/N`` then sums to the global one)."""
    masks = np.asarray(masks, np.float32)
    axes = tuple(range(1, masks.ndim))
    real = np.maximum(masks.sum(axis=axes, keepdims=True), 1.0)
    return masks * (np.prod(masks.shape[1:]) / real).astype(np.float32)


def masked_mean(x: tf.Tensor, weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """The mean of ``x`` over every element, rows weighted by ``weights`` ``[B]`` (``step_weights``:
    recurrent SAC's sequences, padding 0); the plain mean without."""
    if weights is None:
        return tf.reduce_mean(x)
    return tf.reduce_mean(row_mean(x, weights))


def row_mean(x: tf.Tensor, weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """The mean of ``x`` over its rows (axis 0), weighted by ``weights`` ``[B]`` when given."""
    if weights is None:
        return tf.reduce_mean(x, axis=0)
    return tf.reduce_mean(x * tf.reshape(weights, [-1] + [1] * (len(x.shape) - 1)), axis=0)


def soft_target(rewards: tf.Tensor, terminated: tf.Tensor, gammas: tf.Tensor, next_value: tf.Tensor) -> tf.Tensor:
    """``y = r + γ (1 − d) V(s′)`` per row and reward signal ``[B, S]`` (no gradient)."""
    not_done = 1.0 - tf.cast(terminated, tf.float32)[:, None]
    return tf.stop_gradient(rewards + gammas[None, :] * not_done * next_value)


def critic_loss(q_values: Sequence[tf.Tensor], target: tf.Tensor, weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """``½ Σᵢ mean (Qᵢ − y)²`` over the twin critics (``Qᵢ`` and ``y`` of one shape)."""
    return tf.add_n([0.5 * masked_mean(tf.square(q - target), weights) for q in q_values])


def entropy_coef_loss(log_ent_coef: tf.Tensor, log_probs: tf.Tensor, target_entropy: tf.Tensor,
                      weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """``−Σ_branches mean (log α · (log π + H̄))``; ``log_probs`` ``[B, branches]`` (no gradient)."""
    gap = tf.stop_gradient(log_probs + target_entropy[None, :])
    return -tf.reduce_sum(row_mean(log_ent_coef[None, :] * gap, weights))


# -- continuous actions -------------------------------------------------------------------
def continuous_next_value(next_q: Sequence[tf.Tensor], next_log_probs: tf.Tensor, ent_coef: tf.Tensor) -> tf.Tensor:
    """``min(Q̄₁, Q̄₂)(s′, a′) − α log π(a′|s′)`` per signal ``[B, S]``."""
    return tf.minimum(next_q[0], next_q[1]) - ent_coef[0] * next_log_probs[:, None]


def continuous_actor_loss(q_pi: Sequence[tf.Tensor], log_probs: tf.Tensor, ent_coef: tf.Tensor,
                          weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """``mean (α log π(ã|s) − mean_signals min(Q₁, Q₂)(s, ã))``."""
    q = tf.reduce_mean(tf.minimum(q_pi[0], q_pi[1]), axis=-1)
    return masked_mean(ent_coef[0] * log_probs - q, weights)


# -- discrete actions ---------------------------------------------------------------------
def _per_branch(x: tf.Tensor, branches: Sequence[int]) -> list[tf.Tensor]:
    return tf.split(x, list(branches), axis=-1)


def branch_neg_entropy(probs: tf.Tensor, log_probs: tf.Tensor, branches: Sequence[int]) -> tf.Tensor:
    """``Σₐ π log π`` per branch ``[B, branches]``."""
    return tf.stack([tf.reduce_sum(p * lp, axis=-1)
                     for p, lp in zip(_per_branch(probs, branches), _per_branch(log_probs, branches))], axis=-1)


def discrete_soft_value(q: tf.Tensor, probs: tf.Tensor, log_probs: tf.Tensor, ent_coef: tf.Tensor,
                        branches: Sequence[int]) -> tf.Tensor:
    """``mean_b Σₐ π_b (Q_b − α_b log π_b)`` per signal ``[B, S]``; ``q`` ``[B, S, Σ branches]``."""
    values = []
    for b, (qb, pb, lpb) in enumerate(zip(_per_branch(q, branches), _per_branch(probs, branches),
                                          _per_branch(log_probs, branches))):
        values.append(tf.reduce_sum(pb[:, None, :] * (qb - ent_coef[b] * lpb[:, None, :]), axis=-1))
    return tf.add_n(values) / float(len(branches))


def discrete_taken_q(q: tf.Tensor, actions: tf.Tensor, branches: Sequence[int]) -> tf.Tensor:
    """The Q value of each branch's taken action ``[B, S, branches]``."""
    actions = tf.cast(actions, tf.int32)
    taken = [tf.reduce_sum(qb * tf.one_hot(actions[:, k], n)[:, None, :], axis=-1)
             for k, (qb, n) in enumerate(zip(_per_branch(q, branches), branches))]
    return tf.stack(taken, axis=-1)


def discrete_actor_loss(q_pi: Sequence[tf.Tensor], probs: tf.Tensor, log_probs: tf.Tensor, ent_coef: tf.Tensor,
                        branches: Sequence[int], weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """``mean_rows mean_b Σₐ π_b (α_b log π_b − mean_signals min(Q₁, Q₂)_b)``."""
    q = tf.reduce_mean(tf.minimum(q_pi[0], q_pi[1]), axis=1)  # [B, Σ branches]
    losses = [tf.reduce_sum(pb * (ent_coef[b] * lpb - qb), axis=-1)
              for b, (qb, pb, lpb) in enumerate(zip(_per_branch(q, branches), _per_branch(probs, branches),
                                                    _per_branch(log_probs, branches)))]
    return masked_mean(tf.add_n(losses) / float(len(branches)), weights)
