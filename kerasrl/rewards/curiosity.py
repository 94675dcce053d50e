"""Curiosity (ICM) reward signal, as ML-Agents 0.9's ``curiosity``."""
from __future__ import annotations

from typing import Mapping

import keras
import numpy as np
import tensorflow as tf

from kerasrl.common.reductions import global_count, masked_partial_mean
from kerasrl.fields import Field
from kerasrl.models.curiosity import CuriosityModel
from kerasrl.rewards.model_signal import ModelRewardSignal, action_features, field_shapes, observation_fields
from kerasrl.settings import CuriositySettings


class CuriosityRewardSignal(ModelRewardSignal):
    """Reward = the forward model's error × ``strength``, clipped to [0, 1]; 0 before the first update.

    Loss = ``10·(0.2·forward + 0.8·inverse)`` (masked means over the global mini-batch).
    """

    short_name = "Curiosity"
    needs_next_observations = True
    loss_names = ("Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss")
    settings: CuriositySettings

    def build_model(self) -> keras.Model:
        model = CuriosityModel(self.spec, self.settings.encoding_size, self.network.vis_encode_type, seed=self.seed,
                               name="curiosity")
        shapes = field_shapes(self.spec)
        dummy = {k: tf.zeros([1, *shapes[k]]) for k in self.observation_fields}
        model(dummy, action_features(tf.zeros([1, self.spec.action_size]), self.spec))
        return model

    @property
    def observation_fields(self) -> list[str]:
        return observation_fields(self.spec) + observation_fields(self.spec, nxt=True)

    @property
    def batch_fields(self) -> list[str]:
        return [*self.observation_fields, Field.ACTIONS]

    def rewards(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        forward, _ = self.model(batch, action_features(batch[Field.ACTIONS], self.spec))
        return forward

    def scale(self, unscaled: np.ndarray) -> np.ndarray:
        return np.clip(unscaled * np.float32(self.strength), 0.0, 1.0)

    def train_step(self, batch: Mapping[str, tf.Tensor], seed: tf.Tensor) -> tf.Tensor:
        mask = batch[Field.MASKS]
        count = global_count(mask)  # all replicas' rows: the replicas' losses sum to the global mean
        with tf.GradientTape() as tape:
            forward, inverse = self.model(batch, action_features(batch[Field.ACTIONS], self.spec))
            forward_loss = masked_partial_mean(forward, mask, count)
            inverse_loss = masked_partial_mean(inverse, mask, count)
            loss = 10.0 * (0.2 * forward_loss + 0.8 * inverse_loss)
        self.apply(tape, loss)
        return tf.stack([forward_loss, inverse_loss])

