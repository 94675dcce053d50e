"""The Intrinsic Curiosity Module's networks (ML-Agents 0.9's architecture).

One encoder φ (shared by the current and the next observation: two swish layers of
``encoding_size`` for the vector observations, a visual encoder with one dense layer of
``encoding_size`` per camera), an inverse model (φ(s), φ(s')) → action and a forward model
(φ(s), action) → φ(s'). The forward model's error is the intrinsic reward.
"""
from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.encoders import VectorEncoder, VisualEncoder, hidden_initializer, swish
from kerasrl.spec import BehaviorSpec


class CuriosityModel(keras.Model):
    """φ, the inverse and the forward model; ``call`` gives each row's forward error and inverse loss."""

    def __init__(self, spec: BehaviorSpec, encoding_size: int, vis_encode_type: str = "simple", seed: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.encoding_size = int(encoding_size)
        self.vector_encoder = (VectorEncoder(encoding_size, 2, seed=seed, name="curiosity_vector_obs_encoder")
                               if spec.vector_observation_size else None)
        self.visual_encoders = [VisualEncoder(vis_encode_type, encoding_size, 1, seed=seed + 10 + j,
                                              name=f"curiosity_stream_{j}_visual_obs_encoder")
                                for j in range(len(spec.visual_observation_shapes))]
        streams = len(self.visual_encoders) + (1 if self.vector_encoder is not None else 0)
        self.inverse_hidden = keras.layers.Dense(256, activation=swish, kernel_initializer=hidden_initializer(seed + 1),
                                                 name="inverse_hidden")
        # the continuous actions' prediction first, then one output per branch (hybrid actions have both)
        outputs = ([spec.continuous_size] if spec.continuous_size else []) + list(spec.discrete_branches)
        self.inverse_out = [keras.layers.Dense(b, kernel_initializer=hidden_initializer(seed + 2 + k), name=f"inverse_{k}")
                            for k, b in enumerate(outputs)]
        self.forward_hidden = keras.layers.Dense(256, activation=swish, kernel_initializer=hidden_initializer(seed + 50),
                                                 name="forward_hidden")
        self.forward_out = keras.layers.Dense(self.encoding_size * streams, kernel_initializer=hidden_initializer(seed + 51),
                                              name="forward_out")

    def encode(self, inputs: Mapping[str, tf.Tensor], nxt: bool) -> tf.Tensor:
        """φ of the current (or, with ``nxt``, the next) observations: every stream's encoding concatenated."""
        parts = []
        if self.vector_encoder is not None:
            parts.append(self.vector_encoder(inputs[Field.NEXT_VECTOR_OBS if nxt else Field.VECTOR_OBS]))
        visual = Field.next_visual_obs if nxt else Field.visual_obs
        parts += [enc(inputs[visual(j)]) for j, enc in enumerate(self.visual_encoders)]
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)

    def forward_error(self, phi: tf.Tensor, phi_next: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        """Per row ``0.5·Σ(forward(φ(s), a) − φ(s'))²``: the unscaled intrinsic reward."""
        pred = self.forward_out(self.forward_hidden(tf.concat([phi, actions], axis=-1)))
        return 0.5 * tf.reduce_sum(tf.square(pred - phi_next), axis=-1)

    def inverse_loss(self, phi: tf.Tensor, phi_next: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        """Per row: Σ_dims squared error (continuous) plus Σ_branches cross-entropy (discrete)."""
        hidden = self.inverse_hidden(tf.concat([phi, phi_next], axis=-1))
        size, layers = self.spec.continuous_size, list(self.inverse_out)
        loss = tf.zeros_like(hidden[:, 0])
        if size:
            loss += tf.reduce_sum(tf.square(layers.pop(0)(hidden) - actions[:, :size]), axis=-1)
        if layers:
            probs = tf.concat([tf.nn.softmax(layer(hidden)) for layer in layers], axis=-1)
            loss += -tf.reduce_sum(tf.math.log(probs + 1e-10) * actions[:, size:], axis=-1)
        return loss

    def call(self, inputs: Mapping[str, tf.Tensor], actions: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(forward error, inverse loss) per row; ``actions`` as ``action_features`` encodes them."""
        phi, phi_next = self.encode(inputs, nxt=False), self.encode(inputs, nxt=True)
        return self.forward_error(phi, phi_next, actions), self.inverse_loss(phi, phi_next, actions)
