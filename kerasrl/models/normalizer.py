"""Running observation normalizer kept inside the Keras model, so saved models are self-contained."""
from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf


class Normalizer(keras.layers.Layer):
    """Normalizes vector observations with running statistics: ``clip((x − μ) / σ, ±clip)``.

    Statistics are non-trainable weights (saved and checkpointed with the model). They are
    updated from collected batches with ``update`` (a parallel Welford / Chan merge), never
    by calling the layer — inference must not move the statistics (a bug of ML-Agents 0.9, fixed).
    """

    def __init__(self, size: int, clip: float = 5.0, epsilon: float = 1e-8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.size = int(size)
        self.clip = float(clip)
        self.epsilon = float(epsilon)
        self.running_mean = self.add_weight(
            name="running_mean", shape=(self.size,), initializer="zeros", trainable=False, dtype="float64"
        )
        self.running_m2 = self.add_weight(
            name="running_m2", shape=(self.size,), initializer="zeros", trainable=False, dtype="float64"
        )
        self.count = self.add_weight(name="count", shape=(), initializer="zeros", trainable=False, dtype="float64")

    @property
    def variance(self) -> np.ndarray:
        c = float(self.count.numpy())
        if c < 2:
            return np.ones(self.size)
        return self.running_m2.numpy() / c

    def numpy_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, 1/std)`` as float32, for numpy-side inference."""
        mean = self.running_mean.numpy().astype(np.float32)
        inv_std = (1.0 / np.sqrt(self.variance + self.epsilon)).astype(np.float32)
        return mean, inv_std

    def call(self, x: tf.Tensor) -> tf.Tensor:
        count = tf.cast(self.count, tf.float32)
        mean = tf.cast(self.running_mean, tf.float32)
        var = tf.where(count >= 2.0, tf.cast(self.running_m2, tf.float32) / tf.maximum(count, 1.0), 1.0)
        out = (tf.cast(x, tf.float32) - mean) * tf.math.rsqrt(var + self.epsilon)
        return tf.clip_by_value(out, -self.clip, self.clip)

    def update(self, batch: np.ndarray) -> None:
        """Merge the statistics of ``batch`` ``[n, size]`` into the running ones (Chan et al.)."""
        x = np.asarray(batch, dtype=np.float64).reshape(-1, self.size)
        n_b = x.shape[0]
        if n_b == 0:
            return
        if not np.isfinite(x).all():
            raise ValueError("Normalizer.update received NaN or inf observations.")
        mean_b = x.mean(axis=0)
        m2_b = ((x - mean_b) ** 2).sum(axis=0)
        n_a = float(self.count.numpy())
        mean_a = self.running_mean.numpy()
        m2_a = self.running_m2.numpy()
        n = n_a + n_b
        delta = mean_b - mean_a
        self.running_mean.assign(mean_a + delta * (n_b / n))
        self.running_m2.assign(m2_a + m2_b + delta**2 * (n_a * n_b / n))
        self.count.assign(n)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "size": self.size, "clip": self.clip, "epsilon": self.epsilon}
