"""The ``ActorCritic`` policy (PPO's, POCA's and the BC trainers') as behavioral cloning trains it.

A row's loss: discrete, the negative log-likelihood of the expert's action in every branch
(masked branches, summed over branches); continuous, the squared error between the policy's
action (``ClippedGaussian.squash`` of μ, plus σ·ε when ``sample_noise``, ε one ``[1,
action_size]`` draw per mini-batch as ML-Agents 0.9 does) and the expert's action clipped to
[−1, 1], averaged over the dimensions; hybrid, the sum of both. Every trainable variable trains
(the value heads get zero gradients, so they stay as they are).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import ClippedGaussian, MaskedMultiCategorical


class ActorCriticImitator:
    """``model``'s policy for ``kerasrl.bc.learner.BCLearner``."""

    noise_per_row = False

    def __init__(self, model: ActorCritic, sample_noise: bool) -> None:
        self.model = model
        self.sequence_length: int = model.sequence_length
        self.uses_prev_action: bool = model.uses_prev_action
        self.noise_width = model.continuous_size if sample_noise else 0

    @property
    def variables(self) -> list[Any]:
        return list(self.model.trainable_variables)

    def row_losses(self, batch: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor]) -> tf.Tensor:
        """Each row's loss (its sequence run from zero memory, recurrent)."""
        model = self.model
        inputs = {k: v for k, v in batch.items() if k not in (Field.ACTIONS, Field.MASKS)}
        masks = batch[Field.MASKS]
        if model.use_recurrent:
            n_seq = tf.shape(masks)[0] // self.sequence_length
            inputs[Field.MEMORY] = tf.zeros([n_seq, model.memory_size])
        out = model(inputs, sequence_length=self.sequence_length)
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
        return per_row
