"""Small action distributions written with TensorFlow ops (no tensorflow-probability).

Noise is supplied by the caller (numpy ``Generator``), so sampling is reproducible under a
seed and the same draw gives the same action in the compiled TF path and the numpy path.
"""
from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

EPSILON = 1e-7
_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2PIE = math.log(2.0 * math.pi * math.e)


class MaskedMultiCategorical:
    """One categorical per action branch, with masked actions given probability exactly 0.

    Per branch (ML-Agents 0.9's arithmetic): ``p = softmax(logits)``, ``raw = (p + EPSILON) · mask``,
    ``probs = raw / Σ raw``; log-probs are ``log(probs + EPSILON)``, so a masked action has
    log-prob ``log(1e-7)``. Entropy is that of the masked, renormalised distribution (ML-Agents
    0.9 used the unmasked softmax, which rewards spreading mass over forbidden actions).
    """

    def __init__(self, logits: tf.Tensor, masks: tf.Tensor, branches: Sequence[int]) -> None:
        self.branches = [int(b) for b in branches]
        splits_logits = tf.split(logits, self.branches, axis=-1)
        splits_masks = tf.split(tf.cast(masks, logits.dtype), self.branches, axis=-1)
        self.branch_probs: list[tf.Tensor] = []
        for lg, mk in zip(splits_logits, splits_masks):
            raw = (tf.nn.softmax(lg, axis=-1) + EPSILON) * mk
            self.branch_probs.append(raw / tf.reduce_sum(raw, axis=-1, keepdims=True))
        self.branch_log_probs = [tf.math.log(p + EPSILON) for p in self.branch_probs]

    @property
    def probs(self) -> tf.Tensor:
        return tf.concat(self.branch_probs, axis=-1)

    def sample(self, uniform: tf.Tensor) -> tf.Tensor:
        """Inverse-CDF sampling from ``uniform`` noise in (0, 1), shape ``[batch, n_branches]``."""
        actions = []
        for k, p in enumerate(self.branch_probs):
            cdf = tf.cumsum(p, axis=-1)
            threshold = uniform[:, k : k + 1] * cdf[:, -1:]
            idx = tf.reduce_sum(tf.cast(cdf < threshold, tf.int32), axis=-1)
            actions.append(tf.minimum(idx, self.branches[k] - 1))
        return tf.stack(actions, axis=-1)

    def mode(self) -> tf.Tensor:
        """The most probable allowed action of every branch: ``[batch, n_branches]``."""
        return tf.stack([tf.argmax(p, axis=-1, output_type=tf.int32) for p in self.branch_probs], axis=-1)

    def branch_log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-prob of ``actions`` ``[batch, n_branches]`` per branch: ``[batch, n_branches]``."""
        actions = tf.cast(actions, tf.int32)
        out = [
            tf.gather(lp, actions[:, k], axis=-1, batch_dims=1) for k, lp in enumerate(self.branch_log_probs)
        ]
        return tf.stack(out, axis=-1)

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(self.branch_log_prob(actions), axis=-1)

    def entropy(self) -> tf.Tensor:
        ent = [-tf.reduce_sum(p * lp, axis=-1) for p, lp in zip(self.branch_probs, self.branch_log_probs)]
        return tf.add_n(ent)


#: ML-Agents 0.9 clips the Gaussian sample at ±3 and divides by 3.
MLAGENTS_ACTION_SCALE = 3.0


class ClippedGaussian:
    """Diagonal Gaussian with a state-independent ``log σ²``; actions are ``clip(μ + σε, −s, s) / s``.

    ``s`` (``action_scale``) is 3 in ML-Agents 0.9. With ``s`` the half-range of a symmetric
    Box, ``μ`` and ``σ`` are in the environment's units and the action the env receives is
    Stable-Baselines3's (its Gaussian sample clipped at the bounds). Log-probs are evaluated at
    the *pre-clip* action, as both libraries do, which the trainer stores
    so the update recomputes them at exactly the sampled point. Entropy is averaged over the
    dimensions (ML-Agents) or summed (``sum_entropy``, SB3).
    """

    def __init__(self, mu: tf.Tensor, log_sigma_sq: tf.Tensor, action_scale: float = MLAGENTS_ACTION_SCALE,
                 sum_entropy: bool = False) -> None:
        self.mu = mu
        self.log_sigma_sq = tf.broadcast_to(log_sigma_sq, tf.shape(mu))
        self.action_scale = float(action_scale)
        self.sum_entropy = sum_entropy

    def sample_pre(self, normal: tf.Tensor) -> tf.Tensor:
        return self.mu + tf.exp(0.5 * self.log_sigma_sq) * normal

    @staticmethod
    def squash(pre_action: tf.Tensor, action_scale: float = MLAGENTS_ACTION_SCALE) -> tf.Tensor:
        """The action in [−1, 1] that the environment receives."""
        return tf.clip_by_value(pre_action, -action_scale, action_scale) / action_scale

    def dim_log_prob(self, pre_action: tf.Tensor) -> tf.Tensor:
        """Per-dimension log-density at ``pre_action``: ``[batch, act_size]``."""
        var = tf.exp(self.log_sigma_sq)
        return -0.5 * tf.square(pre_action - self.mu) / var - 0.5 * _LOG_2PI - 0.5 * self.log_sigma_sq

    def log_prob(self, pre_action: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(self.dim_log_prob(pre_action), axis=-1)

    def entropy(self) -> tf.Tensor:
        """Entropy per sample, averaged (ML-Agents) or summed (SB3) over dimensions: ``[batch]``."""
        reduce = tf.reduce_sum if self.sum_entropy else tf.reduce_mean
        return 0.5 * reduce(_LOG_2PIE + self.log_sigma_sq, axis=-1)


class HybridDistribution:
    """Continuous and discrete actions at once (hybrid actions): a :class:`ClippedGaussian` over
    the continuous dimensions and a :class:`MaskedMultiCategorical` over the branches, independent
    given the state, so that log-probabilities and entropies add up.

    Actions are ``[batch, size + branches]``: the pre-clip continuous actions, then the branch
    indices (as floats).
    """

    def __init__(self, gaussian: ClippedGaussian, categorical: MaskedMultiCategorical) -> None:
        self.gaussian = gaussian
        self.categorical = categorical
        self.size = int(gaussian.mu.shape[-1])

    def split(self, actions: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The continuous (float) and discrete (int32) parts of ``actions``."""
        return actions[:, : self.size], tf.cast(actions[:, self.size:], tf.int32)

    def column_log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        """Log-prob per continuous dimension, then per branch: ``[batch, size + branches]``."""
        pre, branches = self.split(actions)
        return tf.concat([self.gaussian.dim_log_prob(pre), self.categorical.branch_log_prob(branches)], axis=-1)

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(self.column_log_prob(actions), axis=-1)

    def entropy(self) -> tf.Tensor:
        """The Gaussian's entropy (averaged or summed over dimensions) plus every branch's."""
        return self.gaussian.entropy() + self.categorical.entropy()
