"""Behavioral cloning inside SAC: the ``pretraining`` section with ``trainer: sac``.

``kerasrl.bc``'s one BC (``kerasrl.bc.module.Pretraining``) with SAC's actor: after every SAC
update the actor imitates a demonstration with its own Adam (``sac_bc_adam``) whose step size is
SAC's ``learning_rate`` × ``strength``, decaying linearly to 0 over ``steps`` trainer steps;
``batch_size`` defaults to SAC's and ``num_epoch`` to 1 (ML-Agents' SAC default). What is SAC's
here is the loss of a row: discrete, ``−Σ_branches log π(expert action)`` under the actor's
masked categorical; continuous, the mean squared error between the actor's sampled action
``tanh(μ + σ·ε)`` (ε one standard normal row per demonstration row) and the expert's clipped
to [−1, 1]. Recurrent, the actor runs over each whole sequence from zero memory.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import tensorflow as tf

from kerasrl.bc.module import LOSS_STAT, Pretraining
from kerasrl.fields import Field
from kerasrl.sac.networks import Observation, SACNetworks, Sequences
from kerasrl.settings import BehavioralCloningSettings

__all__ = ["LOSS_STAT", "SACImitator", "sac_pretraining"]


class SACImitator:
    """SAC's actor for ``kerasrl.bc.learner.BCLearner``: only the actor's variables train."""

    uses_prev_action = False
    noise_per_row = True

    def __init__(self, networks: SACNetworks) -> None:
        self.networks = networks
        #: Steps per sequence (1 without memory).
        self.sequence_length: int = networks.sequence_length if networks.recurrent else 1
        self.noise_width = 0 if networks.is_discrete else networks.action_size

    @property
    def variables(self) -> list[Any]:
        return list(self.networks.actor_variables)

    def row_losses(self, batch: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor]) -> tf.Tensor:
        """Each row's loss; continuous, the action is sampled with ``noise`` ``[rows, action_size]``."""
        nets = self.networks
        obs = self.observations(batch)
        if nets.is_discrete:
            return -nets.distribution(obs, batch[Field.ACTION_MASK]).log_prob(batch[Field.ACTIONS])
        if noise is None:  # ε = 0: the actor's mean action tanh(μ)
            noise = tf.zeros([tf.shape(batch[Field.MASKS])[0], nets.action_size])
        action, _ = nets.sample(obs, noise)
        return tf.reduce_mean(tf.square(action - batch[Field.ACTIONS]), axis=-1)

    def observations(self, batch: Mapping[str, tf.Tensor]) -> Observation | Sequences:
        """The mini-batch's observations (recurrent: its flat steps as whole sequences the actor
        runs over from zero memory; a step's next observation is the following step's)."""
        nets, length = self.networks, self.sequence_length
        obs = nets.observations(batch)
        if not nets.recurrent:
            return obs

        def shifted(x: tf.Tensor) -> tf.Tensor:
            seq = tf.reshape(x, [-1, length, *x.shape[1:]])
            return tf.reshape(tf.concat([seq[:, 1:], seq[:, -1:]], axis=1), tf.shape(x))

        masks = tf.reshape(batch[Field.MASKS], [-1, length])
        memory = tf.zeros([tf.shape(masks)[0], nets.memory_size])
        next_obs = {k: shifted(v) for k, v in obs.items()} if isinstance(obs, Mapping) else shifted(obs)
        return Sequences(obs, next_obs, None, masks, None, memory, length)


def sac_pretraining(networks: SACNetworks, settings: BehavioralCloningSettings, learning_rate: float,
                    default_batch_size: int, seed: int = 0, behavior: str = "") -> Pretraining:
    """Behavioral cloning of ``settings.demo_path`` on the actor of ``networks`` (built in the
    learner's strategy scope, which the BC takes too)."""
    return Pretraining(SACImitator(networks), networks.spec, settings, learning_rate, default_batch_size, 1, seed,
                       behavior, name="sac_bc")
