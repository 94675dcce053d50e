"""Means over masked rows that stay exact under a ``tf.distribute`` strategy: each replica sums
its own rows and divides by the row count of the whole (global) mini-batch."""
from __future__ import annotations

import tensorflow as tf


def global_count(mask: tf.Tensor) -> tf.Tensor:
    """Number of valid rows across all replicas (just ``Σ mask`` outside a strategy)."""
    count = tf.reduce_sum(mask)
    ctx = tf.distribute.get_replica_context()
    if ctx is not None and ctx.num_replicas_in_sync > 1:
        count = ctx.all_reduce(tf.distribute.ReduceOp.SUM, count)
    return tf.maximum(count, 1.0)


def masked_partial_mean(values: tf.Tensor, mask: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
    """This replica's share of the masked mean over the global mini-batch: ``Σ_local(values·mask) / count``
    with ``count = global_count(mask)`` (the shares sum to the mean; on one device it is the mean)."""
    return tf.reduce_sum(values * mask) / count
