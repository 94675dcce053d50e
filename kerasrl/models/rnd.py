"""Random network distillation's two networks (the architecture of ML-Agents' ``rnd`` signal).

Both networks have one shape: each camera goes through a visual encoder (one dense layer of
``encoding_size`` after the convolutions), the vector observation is taken as it is, and the
concatenation goes through ``num_layers`` swish layers of ``encoding_size`` units; the last
layer's output is the encoding. The *target* is initialised once, from its own seed, and never
trained (its weights are not trainable); the *predictor* is trained to output the target's
encoding. The squared distance between the two encodings is the intrinsic reward.
"""
from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.encoders import VectorEncoder, VisualEncoder
from kerasrl.spec import BehaviorSpec

#: Seed offset of the target network from the predictor's (so that the two start apart).
TARGET_SEED_OFFSET = 7919


class RNDNetwork(keras.layers.Layer):
    """Observations → an encoding of ``encoding_size`` (one of RND's two networks)."""

    def __init__(self, spec: BehaviorSpec, encoding_size: int, num_layers: int = 2, vis_encode_type: str = "simple",
                 seed: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.has_vector = bool(spec.vector_observation_size)
        self.visual_encoders = [VisualEncoder(vis_encode_type, encoding_size, 1, seed=seed + 10 + j,
                                              name=f"stream_{j}_visual_obs_encoder")
                                for j in range(len(spec.visual_observation_shapes))]
        self.body = VectorEncoder(encoding_size, num_layers, seed=seed, name="body")

    def call(self, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        parts = [tf.cast(inputs[Field.VECTOR_OBS], tf.float32)] if self.has_vector else []
        parts += [enc(inputs[Field.visual_obs(j)]) for j, enc in enumerate(self.visual_encoders)]
        return self.body(parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1))


class RNDModel(keras.Model):
    """The fixed target and the trained predictor; ``call`` gives each row's ``Σ(predictor − target)²``.

    Only the predictor's weights are trainable; the target's are still the model's (non-trainable)
    weights, so a checkpoint of the model holds both.
    """

    def __init__(self, spec: BehaviorSpec, encoding_size: int, num_layers: int = 2, vis_encode_type: str = "simple",
                 seed: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.encoding_size = int(encoding_size)
        self.predictor = RNDNetwork(spec, encoding_size, num_layers, vis_encode_type, seed=seed, name="predictor")
        self.target = RNDNetwork(spec, encoding_size, num_layers, vis_encode_type, seed=seed + TARGET_SEED_OFFSET,
                                 name="target")
        self.target.trainable = False

    def call(self, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """Per row ``Σ_k (predictor(s)_k − target(s)_k)²`` (no gradient reaches the target)."""
        target = tf.stop_gradient(self.target(inputs))
        return tf.reduce_sum(tf.square(self.predictor(inputs) - target), axis=-1)
