"""Layers over a variable number of entities (ML-Agents' ``attention.py``): each entity (a group
member, say) is embedded, the embeddings attend to each other, and a masked mean pools them into
one vector, so that a network takes any number of entities up to a padded width.

Inputs are ``[B, E, features]`` with a mask ``[B, E]`` (1 = a real entity, 0 = padding): padding
entities are never attended to and are left out of the pooled mean.
"""
from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from kerasrl.models.encoders import get_activation, kernel_initializer


class EntityEmbedding(keras.layers.Layer):
    """One dense layer applied to every entity: ``[B, E, features] → [B, E, units]``."""

    def __init__(self, units: int, seed: int | None = None, activation: str = "swish",
                 initializer: str = "variance_scaling", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = int(units)
        self.dense = keras.layers.Dense(self.units, activation=get_activation(activation),
                                        kernel_initializer=kernel_initializer(initializer, "hidden", seed), name="dense")

    def call(self, entities: tf.Tensor) -> tf.Tensor:
        return self.dense(entities)


class ResidualSelfAttention(keras.layers.Layer):
    """Layer-normalised multi-head self-attention over the entities, added back to its input,
    normalised again, then the masked mean over the entities: ``[B, E, units] → [B, units]``."""

    EPSILON = 1e-7

    def __init__(self, units: int, num_heads: int = 4, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        heads = max(1, min(int(num_heads), int(units)))
        self.embedding_norm = keras.layers.LayerNormalization(name="embedding_norm")
        self.attention = keras.layers.MultiHeadAttention(
            heads, max(int(units) // heads, 1), output_shape=int(units), name="attention",
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed))
        self.residual_norm = keras.layers.LayerNormalization(name="residual_norm")

    def call(self, entities: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        mask = tf.cast(mask, entities.dtype)
        x = self.embedding_norm(entities)
        pairs = tf.cast(mask[:, None, :], tf.bool) & tf.ones_like(mask[:, :, None], tf.bool)
        attended = self.attention(x, x, x, attention_mask=pairs)
        out = self.residual_norm(attended + x)
        total = tf.reduce_sum(out * mask[:, :, None], axis=1)
        return total / (tf.reduce_sum(mask, axis=1, keepdims=True) + self.EPSILON)


def masked_count_feature(mask: tf.Tensor, max_entities: tf.Tensor) -> tf.Tensor:
    """The number of real entities scaled to ``[-1, 1]`` by the most entities seen, ``[B, 1]``
    (ML-Agents' agent-count input beside the pooled encoding; it does not depend on the padding)."""
    mask = tf.cast(mask, tf.float32)
    return tf.reduce_sum(mask, axis=1, keepdims=True) * 2.0 / tf.maximum(max_entities, 1.0) - 1.0
