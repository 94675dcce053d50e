"""Layers over a variable number of entities (ML-Agents' ``attention.py``): each entity (a group
member, say) is embedded, the embeddings attend to each other, and a masked mean pools them into
one vector, so that a network takes any number of entities up to a padded width.

Inputs are ``[B, E, features]`` with a mask ``[B, E]`` (1 = a real entity, 0 = padding): padding
entities are never attended to and are left out of the pooled mean.

The attention holds its weights in a Keras ``MultiHeadAttention`` layer (checkpoints as such) but
computes with them directly: for the few entities of a group (up to ``BROADCAST_ENTITIES``) the
scores and the weighted sums are broadcast products summed over an axis, which XLA fuses, where the
layer's batched matrix products of ``3 × 16`` blocks made MA-POCA's update about twice as slow on
CPU (``docs/benchmarks/multi-agent.md``); the same arithmetic to float32 round-off.
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


#: Entities (a static count) up to which attention is computed with broadcast products, above it
#: with ``einsum`` (whose memory grows less with the count).
BROADCAST_ENTITIES = 16


def _masked_softmax(scores: tf.Tensor, keys: tf.Tensor, axis: int) -> tf.Tensor:
    """Softmax over the keys' ``axis`` of ``scores``, the masked keys left out (``keys`` broadcast alike)."""
    return tf.nn.softmax(tf.where(keys, scores, tf.constant(-1e9, scores.dtype)), axis=axis)


def multi_head_attention(layer: keras.layers.MultiHeadAttention, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``layer(x, x, x, attention_mask=...)`` with only the real entities of ``mask`` as keys,
    computed from the layer's weights: ``[B, E, units] → [B, E, output]``."""
    heads, size = layer.num_heads, layer.key_dim
    rows, entities = tf.shape(x)[0], tf.shape(x)[1]

    # the three projections as one product (one wider matrix multiply instead of three)
    dense = (layer._query_dense, layer._key_dense, layer._value_dense)
    kernel = tf.concat([tf.reshape(d.kernel, [-1, heads * size]) for d in dense], axis=1)
    bias = tf.concat([tf.reshape(d.bias, [-1]) for d in dense], axis=0)
    projected = tf.reshape(tf.tensordot(x, kernel, 1) + bias, [rows, entities, 3, heads, size])
    query = projected[:, :, 0] * tf.constant(1.0 / float(size) ** 0.5, x.dtype)
    key, value = projected[:, :, 1], projected[:, :, 2]
    keys = tf.cast(mask, tf.bool)
    if x.shape[1] is not None and x.shape[1] <= BROADCAST_ENTITIES:
        scores = tf.reduce_sum(query[:, :, None] * key[:, None], -1)  # [B, Q, K, heads]
        weights = _masked_softmax(scores, keys[:, None, :, None], axis=2)
        attended = tf.reduce_sum(weights[..., None] * value[:, None], 2)  # [B, Q, heads, size]
    else:
        weights = _masked_softmax(tf.einsum("bqhd,bkhd->bhqk", query, key), keys[:, None, None, :], axis=-1)
        attended = tf.einsum("bhqk,bkhd->bqhd", weights, value)
    out = layer._output_dense
    return tf.tensordot(tf.reshape(attended, [rows, entities, heads * size]),
                        tf.reshape(out.kernel, [heads * size, -1]), 1) + out.bias


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
        if not self.attention.built:
            self.attention.build(x.shape, x.shape)
        out = self.residual_norm(multi_head_attention(self.attention, x, mask) + x)
        total = tf.reduce_sum(out * mask[:, :, None], axis=1)
        return total / (tf.reduce_sum(mask, axis=1, keepdims=True) + self.EPSILON)


def masked_count_feature(mask: tf.Tensor, max_entities: tf.Tensor) -> tf.Tensor:
    """The number of real entities scaled to ``[-1, 1]`` by the most entities seen, ``[B, 1]``
    (ML-Agents' agent-count input beside the pooled encoding; it does not depend on the padding)."""
    mask = tf.cast(mask, tf.float32)
    return tf.reduce_sum(mask, axis=1, keepdims=True) * 2.0 / tf.maximum(max_entities, 1.0) - 1.0
