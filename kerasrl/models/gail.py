"""GAIL's discriminator (as ML-Agents 0.9's), optionally with VAIL's variational bottleneck.

Input: the vector observations and each camera's encoding (a visual encoder with one dense
layer of ``encoding_size``), with ``use_actions`` also the actions (one-hot per branch when
discrete) and the done flag. Two swish layers of 128 units (fixed, as ML-Agents), then with
VAIL a stochastic code ``z = μ + σ·ε`` of 128 units, and a sigmoid: D = P(expert).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import keras
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.encoders import VisualEncoder, hidden_initializer, swish
from kerasrl.spec import BehaviorSpec

HIDDEN_UNITS = 128
Z_SIZE = 128


class Discriminator(keras.Model):
    """``features`` builds the input vector; ``head`` maps it to (D, μ)."""

    def __init__(self, spec: BehaviorSpec, encoding_size: int, use_actions: bool, use_vail: bool,
                 vis_encode_type: str = "simple", seed: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.use_actions = bool(use_actions)
        self.use_vail = bool(use_vail)
        self.visual_encoders = [VisualEncoder(vis_encode_type, encoding_size, 1, seed=seed + 10 + j,
                                              name=f"gail_stream_{j}_visual_obs_encoder")
                                for j in range(len(spec.visual_observation_shapes))]
        self.hidden = [keras.layers.Dense(HIDDEN_UNITS, activation=swish, kernel_initializer=hidden_initializer(seed + k),
                                          name=f"gail_hidden_{k}") for k in range(2)]
        if self.use_vail:
            self.z_mean = keras.layers.Dense(Z_SIZE, kernel_initializer=hidden_initializer(seed + 3, 0.01), name="z_mean")
            self.z_sigma = self.add_weight(name="z_sigma", shape=(Z_SIZE,), initializer="ones", trainable=True)
            #: VAIL's adaptive weight of the information bottleneck, updated after every mini-batch
            #: (to the same value on every replica: assigned in replica context from the first).
            self.beta = self.add_weight(name="beta", shape=(), initializer="ones", trainable=False,
                                        aggregation="only_first_replica")
        self.out = keras.layers.Dense(1, activation="sigmoid", kernel_initializer=hidden_initializer(seed + 4),
                                      name="gail_d_estimate")

    def features(self, inputs: Mapping[str, tf.Tensor], actions: Optional[tf.Tensor] = None,
                 done: Optional[tf.Tensor] = None) -> tf.Tensor:
        """The discriminator's input: observations (cameras encoded), and with ``use_actions``
        the action features and the done flag."""
        parts = []
        if self.spec.vector_observation_size:
            parts.append(tf.cast(inputs[Field.VECTOR_OBS], tf.float32))
        parts += [enc(inputs[Field.visual_obs(j)]) for j, enc in enumerate(self.visual_encoders)]
        if self.use_actions:
            parts += [actions, tf.reshape(tf.cast(done, tf.float32), [-1, 1])]
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)

    def head(self, x: tf.Tensor, noise: Optional[tf.Tensor] = None) -> tuple[tf.Tensor, Optional[tf.Tensor]]:
        """(D per row, VAIL's μ or None); ``noise`` (ε, ``[n, Z_SIZE]``) samples the VAIL code."""
        for layer in self.hidden:
            x = layer(x)
        mu = None
        if self.use_vail:
            mu = self.z_mean(x)
            x = mu if noise is None else mu + self.z_sigma * noise
        return tf.squeeze(self.out(x), axis=-1), mu

    def call(self, inputs: Mapping[str, tf.Tensor], actions: Optional[tf.Tensor] = None,
             done: Optional[tf.Tensor] = None) -> tf.Tensor:
        return self.head(self.features(inputs, actions, done))[0]
