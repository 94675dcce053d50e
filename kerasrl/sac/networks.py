"""Soft Actor-Critic's Keras models: the actor, twin Q networks, their targets, the entropy coefficients.

Continuous actions: a tanh-squashed Gaussian (``μ`` and ``log σ`` heads, ``log σ`` clipped to
[-20, 2]); the critics take the observation and the action and give one Q value per reward
signal. Discrete actions (one categorical per branch, masked actions given probability 0): the
critics take the observation and give a Q value per reward signal, branch and action. One
trainable log entropy coefficient per action branch (one for continuous actions).

Vector observations only, feed-forward only; observations are normalised (``normalize: true``)
once, by a running normalizer shared by the actor and the critics.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.distributions import MaskedMultiCategorical
from kerasrl.models.encoders import VectorEncoder, kernel_initializer
from kerasrl.models.normalizer import Normalizer
from kerasrl.settings import NetworkSettings, SACSettings
from kerasrl.spec import BehaviorSpec

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
#: Added inside the log of the tanh correction, as Stable-Baselines3 and ML-Agents do.
TANH_EPSILON = 1e-6
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class SACConfigError(ValueError):
    """A behavior or network the SAC models cannot be built for; the message names it."""


def squashed_gaussian(mu: tf.Tensor, log_std: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``tanh(μ + σ·noise)`` and its log-probability (summed over dimensions, tanh-corrected)."""
    pre = mu + tf.exp(log_std) * noise
    action = tf.tanh(pre)
    gaussian = tf.reduce_sum(-0.5 * tf.square(noise) - log_std - _HALF_LOG_2PI, axis=-1)
    correction = tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + TANH_EPSILON), axis=-1)
    return action, gaussian - correction


class QNetwork(keras.layers.Layer):
    """Hidden layers, then one output per reward signal (× every action of every branch, discrete)."""

    def __init__(self, network: NetworkSettings, outputs: int, seed: Optional[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body = VectorEncoder(network.hidden_units, network.num_layers, seed=seed, activation=network.activation,
                                  initializer=network.initializer, name="body")
        self.head = keras.layers.Dense(outputs, kernel_initializer=kernel_initializer(network.initializer, "value", seed),
                                       name="q")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return self.head(self.body(x))


class SACActor(keras.layers.Layer):
    """Hidden layers, then ``μ`` and clipped ``log σ`` (continuous) or logits (discrete)."""

    def __init__(self, network: NetworkSettings, action_size: int, logits: int, seed: Optional[int],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body = VectorEncoder(network.hidden_units, network.num_layers, seed=seed, activation=network.activation,
                                  initializer=network.initializer, name="body")
        init = kernel_initializer(network.initializer, "action", seed)
        self.is_discrete = logits > 0
        if self.is_discrete:
            self.logits = keras.layers.Dense(logits, kernel_initializer=init, name="logits")
        else:
            self.mu = keras.layers.Dense(action_size, kernel_initializer=init, name="mu")
            self.log_std = keras.layers.Dense(action_size, kernel_initializer=init, name="log_std")

    def call(self, x: tf.Tensor) -> tuple[tf.Tensor, ...]:
        hidden = self.body(x)
        if self.is_discrete:
            return (self.logits(hidden),)
        return self.mu(hidden), tf.clip_by_value(self.log_std(hidden), LOG_STD_MIN, LOG_STD_MAX)


class SACNetworks(keras.Model):
    """Everything SAC trains for one behavior: ``actor``, ``critics`` (two Q networks),
    ``targets`` (their slowly following copies) and ``log_ent_coef`` (per branch)."""

    def __init__(self, spec: BehaviorSpec, stream_names: Sequence[str], network: Optional[NetworkSettings] = None,
                 hyperparameters: Optional[SACSettings] = None, seed: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        network = NetworkSettings() if network is None else network
        hp = SACSettings() if hyperparameters is None else hyperparameters
        if spec.visual_observation_shapes or not spec.vector_observation_size:
            raise SACConfigError("the sac trainer takes vector observations only (this behavior has cameras).")
        if network.use_recurrent:
            raise SACConfigError("use_recurrent is not available with the sac trainer: set use_recurrent: false.")
        self.spec = spec
        self.network_settings = network
        self.stream_names = list(stream_names)
        self.is_discrete = spec.is_discrete
        self.branches = list(spec.discrete_branches)
        self.vector_size = spec.vector_observation_size
        self.action_size = spec.action_size
        self.activation = network.activation
        self.normalizer = Normalizer(self.vector_size, name="normalizer") if network.normalize else None
        width = sum(self.branches) if self.is_discrete else 1
        self.actor = SACActor(network, self.action_size, width if self.is_discrete else 0, seed, name="actor")
        q_outputs = len(self.stream_names) * width

        def q(name: str, offset: int) -> QNetwork:
            return QNetwork(network, q_outputs, None if seed is None else seed + offset, name=name)

        self.critics = [q("q1", 101), q("q2", 202)]
        self.targets = [q("target_q1", 101), q("target_q2", 202)]
        n_coefs = len(self.branches) if self.is_discrete else 1
        self.log_ent_coef = self.add_weight(name="log_ent_coef", shape=(n_coefs,),
                                            initializer=keras.initializers.Constant(math.log(hp.init_entcoef)))
        if self.is_discrete:
            entropy = [hp.discrete_target_entropy_scale * math.log(b) for b in self.branches]
        else:
            entropy = [-hp.target_entropy_scale * self.action_size]
        #: The entropy the coefficients are tuned towards, per branch.
        self.target_entropy = np.asarray(entropy, np.float32)
        self._build_all()
        for target, critic in zip(self.targets, self.critics):
            for t, c in zip(target.weights, critic.weights):
                t.assign(c)
        #: Every network's weights by name, for TensorFlow checkpoints: Keras keeps lists of
        #: layers (the critics, the targets, the hidden layers) out of a checkpoint's object graph.
        self.checkpointed = tf.Module(name="checkpointed")
        nets: list[keras.layers.Layer] = [self.actor, *self.critics, *self.targets]
        for net in nets:
            setattr(self.checkpointed, net.name, list(net.weights))
        self.built = True

    def _build_all(self) -> None:
        obs = tf.zeros([1, self.vector_size])
        self.actor(obs)
        q_in = obs if self.is_discrete else tf.zeros([1, self.vector_size + self.action_size])
        for net in (*self.critics, *self.targets):
            net(q_in)

    # -- pieces the loss and the learner use ---------------------------------------------
    @property
    def actor_variables(self) -> list[Any]:
        return list(self.actor.trainable_variables)

    @property
    def critic_variables(self) -> list[Any]:
        return [v for c in self.critics for v in c.trainable_variables]

    @property
    def target_variables(self) -> list[Any]:
        return [v for t in self.targets for v in t.trainable_variables]

    def observe(self, vector_obs: tf.Tensor) -> tf.Tensor:
        """Vector observations as the networks take them (normalised when ``normalize``)."""
        x = tf.cast(vector_obs, tf.float32)
        return self.normalizer(x) if self.normalizer is not None else x

    def q_values(self, nets: Sequence[QNetwork], obs: tf.Tensor, actions: Optional[tf.Tensor] = None) -> list[tf.Tensor]:
        """Each network's Q values: ``[B, streams]`` (continuous, at ``actions``) or
        ``[B, streams, Σ branches]`` (discrete, every action)."""
        x = obs if self.is_discrete else tf.concat([obs, tf.cast(actions, tf.float32)], axis=-1)
        outs = [net(x) for net in nets]
        if self.is_discrete:
            return [tf.reshape(o, [-1, len(self.stream_names), sum(self.branches)]) for o in outs]
        return outs

    def distribution(self, obs: tf.Tensor, action_mask: tf.Tensor) -> MaskedMultiCategorical:
        """The masked categorical of every branch (discrete). A masked action's logit gets no
        gradient: its only one would be rounding-sized (through the probabilities' epsilon),
        which Adam would blow up into full steps."""
        (logits,) = self.actor(obs)
        mask = tf.cast(action_mask, logits.dtype)
        logits = mask * logits + (1.0 - mask) * tf.stop_gradient(logits)
        return MaskedMultiCategorical(logits, action_mask, self.branches)

    def sample(self, obs: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """A squashed-Gaussian action for every row and its log-probability (continuous)."""
        mu, log_std = self.actor(obs)
        return squashed_gaussian(mu, log_std, noise)

    # -- acting (exported policies call these) --------------------------------------------
    def input_signature(self) -> dict[str, tf.TensorSpec]:
        sig = {Field.VECTOR_OBS: tf.TensorSpec([None, self.vector_size], tf.float32, name=Field.VECTOR_OBS)}
        if self.is_discrete:
            sig[Field.ACTION_MASK] = tf.TensorSpec([None, sum(self.branches)], tf.float32, name=Field.ACTION_MASK)
        return sig

    def act(self, inputs: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """The action (sampled with ``noise``: standard normal, or uniform in (0, 1) for discrete;
        the mode without) and the action probabilities (discrete) or ``tanh(μ)`` (continuous)."""
        obs = self.observe(inputs[Field.VECTOR_OBS])
        if self.is_discrete:
            dist = self.distribution(obs, inputs[Field.ACTION_MASK])
            return (dist.mode() if noise is None else dist.sample(noise)), dist.probs
        mu, log_std = self.actor(obs)
        if noise is None:
            return tf.tanh(mu), tf.tanh(mu)
        return squashed_gaussian(mu, log_std, noise)[0], tf.tanh(mu)

    def call(self, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return self.act(inputs, None)[0]
