"""Random network distillation (RND) reward signal, as ML-Agents' ``rnd``."""
from __future__ import annotations

from typing import Mapping, Optional

import keras
import tensorflow as tf

from kerasrl.common.reductions import global_count, masked_partial_mean
from kerasrl.fields import Field
from kerasrl.models.rnd import RNDModel
from kerasrl.rewards.model_signal import ModelRewardSignal, field_shapes, observation_fields
from kerasrl.settings.reward_signals import RNDSettings

#: Dense layers of each network after the observations (ML-Agents' default ``num_layers``).
RND_LAYERS = 2


class RNDRewardSignal(ModelRewardSignal):
    """Reward of a step = ``strength · Σ_k (predictor(s)_k − target(s)_k)²`` for its observation ``s``;
    0 before the first update.

    The target network is fixed at its random initialisation; the predictor (same shape, its own
    Adam with ``learning_rate``) is trained on the policy's experiences to minimise the mean over
    rows of the same squared error (``Losses/RND Loss``), ``num_epoch`` passes per update. Rows seen
    often get a small error, new observations a large one.

    Scaling is ML-Agents': the error times ``strength``, with no normalisation of the reward and no
    clipping (ML-Agents removed the running normalisation of the first version), and no
    normalisation of the observations (ML-Agents' default ``normalize: false`` for the signal's
    network). Only current observations are read: no next observations, no actions. A terminated
    episode keeps the signal's value estimate, as for every intrinsic signal.
    """

    short_name = "RND"
    loss_names = ("Losses/RND Loss",)
    settings: RNDSettings

    def build_model(self) -> keras.Model:
        model = RNDModel(self.spec, self.settings.encoding_size, RND_LAYERS, self.network.vis_encode_type,
                         seed=self.seed, name="rnd")
        shapes = field_shapes(self.spec)
        model({k: tf.zeros([1, *shapes[k]]) for k in self.batch_fields})
        return model

    def checkpoint_state(self) -> Optional[tf.train.Checkpoint]:
        """The predictor, its optimizer, the update count and the target: the target's weights are
        saved explicitly (no optimizer holds them), so a resume reads the same target whatever its seed."""
        return tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, updates=self._updates,
                                   predictor=list(self.model.predictor.weights), target=list(self.model.target.weights))

    @property
    def batch_fields(self) -> list[str]:
        return observation_fields(self.spec)

    def rewards(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return self.model(batch)

    def train_step(self, batch: Mapping[str, tf.Tensor], seed: tf.Tensor) -> tf.Tensor:
        mask = batch[Field.MASKS]
        count = global_count(mask)  # all replicas' rows: the replicas' losses sum to the global mean
        with tf.GradientTape() as tape:
            loss = masked_partial_mean(self.model(batch), mask, count)
        self.apply(tape, loss)
        return tf.stack([loss])

