"""Soft Actor-Critic's Keras models: the actor, twin Q networks, their targets, the entropy coefficients.

Continuous actions: a tanh-squashed Gaussian (``μ`` and ``log σ`` heads, ``log σ`` clipped to
[-20, 2]); the critics take the observation and the action and give one Q value per reward
signal. Discrete actions (one categorical per branch, masked actions given probability 0): the
critics take the observation and give a Q value per reward signal, branch and action. One
trainable log entropy coefficient per action branch (one for continuous actions).

Cameras (``vis_encode_type``: ``simple``, ``nature_cnn`` or ``resnet``, PPO's encoders) are
encoded by each network's own convolutional encoders: the actor concatenates their features with
its hidden layers' output on the vector observations; a critic concatenates them with the vector
observations (and the action) before its hidden layers. Feed-forward only; vector observations
are normalised (``normalize: true``) once, by a running normalizer shared by the actor and the
critics.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence, Union

import keras
import numpy as np
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.distributions import MaskedMultiCategorical
from kerasrl.models.encoders import VectorEncoder, VisualEncoder, kernel_initializer
from kerasrl.models.normalizer import Normalizer
from kerasrl.settings import NetworkSettings, SACSettings
from kerasrl.spec import BehaviorSpec

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
#: Added inside the log of the tanh correction, as Stable-Baselines3 and ML-Agents do.
TANH_EPSILON = 1e-6
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

#: What the networks take: the (normalised) vector observations alone, or with cameras a dict of
#: ``vector_obs`` (when the behavior has some) and ``visual_obs{j}``.
Observation = Union[tf.Tensor, Mapping[str, tf.Tensor]]


class SACConfigError(ValueError):
    """A behavior or network the SAC models cannot be built for; the message names it."""


def squashed_gaussian(mu: tf.Tensor, log_std: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``tanh(μ + σ·noise)`` and its log-probability (summed over dimensions, tanh-corrected)."""
    pre = mu + tf.exp(log_std) * noise
    action = tf.tanh(pre)
    gaussian = tf.reduce_sum(-0.5 * tf.square(noise) - log_std - _HALF_LOG_2PI, axis=-1)
    correction = tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + TANH_EPSILON), axis=-1)
    return action, gaussian - correction


def camera_encoders(spec: BehaviorSpec, network: NetworkSettings, seed: Optional[int]) -> list[VisualEncoder]:
    """One ``vis_encode_type`` encoder per camera of ``spec`` (PPO's)."""
    return [VisualEncoder(network.vis_encode_type, network.hidden_units, network.num_layers,
                          seed=None if seed is None else seed + 7919 * (j + 1), activation=network.activation,
                          initializer=network.initializer, conv_style=network.conv_style, name=f"encoder{j}")
            for j in range(len(spec.visual_observation_shapes))]


def observation_parts(visual: Sequence[VisualEncoder], obs: Observation) -> tuple[list[tf.Tensor], Optional[tf.Tensor]]:
    """The cameras' features and the vector observations (``None`` without) of ``obs``."""
    if not isinstance(obs, Mapping):
        return [], obs
    features = [enc(obs[Field.visual_obs(j)]) for j, enc in enumerate(visual)]
    return features, obs.get(Field.VECTOR_OBS)


class QNetwork(keras.layers.Layer):
    """Camera encoders, then hidden layers on their features, the vector observations and (continuous)
    the action; one output per reward signal (× every action of every branch, discrete)."""

    def __init__(self, spec: BehaviorSpec, network: NetworkSettings, outputs: int, seed: Optional[int],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.visual = camera_encoders(spec, network, seed)
        self.body = VectorEncoder(network.hidden_units, network.num_layers, seed=seed, activation=network.activation,
                                  initializer=network.initializer, name="body")
        self.head = keras.layers.Dense(outputs, kernel_initializer=kernel_initializer(network.initializer, "value", seed),
                                       name="q")

    def call(self, obs: Observation, action: Optional[tf.Tensor] = None) -> tf.Tensor:
        features, vector = observation_parts(self.visual, obs)
        parts = features + [p for p in (vector, action) if p is not None]
        return self.head(self.body(parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)))


class SACActor(keras.layers.Layer):
    """Camera encoders and hidden layers on the vector observations, their outputs concatenated,
    then ``μ`` and clipped ``log σ`` (continuous) or logits (discrete)."""

    def __init__(self, spec: BehaviorSpec, network: NetworkSettings, logits: int, seed: Optional[int],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.visual = camera_encoders(spec, network, seed)
        self.body = (VectorEncoder(network.hidden_units, network.num_layers, seed=seed, activation=network.activation,
                                   initializer=network.initializer, name="body")
                     if spec.vector_observation_size else None)
        init = kernel_initializer(network.initializer, "action", seed)
        self.is_discrete = logits > 0
        if self.is_discrete:
            self.logits = keras.layers.Dense(logits, kernel_initializer=init, name="logits")
        else:
            self.mu = keras.layers.Dense(spec.action_size, kernel_initializer=init, name="mu")
            self.log_std = keras.layers.Dense(spec.action_size, kernel_initializer=init, name="log_std")

    def call(self, obs: Observation) -> tuple[tf.Tensor, ...]:
        features, vector = observation_parts(self.visual, obs)
        if self.body is not None and vector is not None:
            features.append(self.body(vector))
        hidden = features[0] if len(features) == 1 else tf.concat(features, axis=-1)
        if self.is_discrete:
            return (self.logits(hidden),)
        return self.mu(hidden), tf.clip_by_value(self.log_std(hidden), LOG_STD_MIN, LOG_STD_MAX)


def check_network(spec: BehaviorSpec, network: NetworkSettings) -> None:
    """A behavior or network SAC cannot build is a one-line ``SACConfigError``."""
    if network.use_recurrent:
        raise SACConfigError("use_recurrent is not available with the sac trainer: set use_recurrent: false.")
    if not spec.vector_observation_size and not spec.visual_observation_shapes:
        raise SACConfigError("the sac trainer needs vector or visual observations (this behavior has none).")
    need = VisualEncoder.MIN_SIZE[network.vis_encode_type]
    for shape in spec.visual_observation_shapes:
        if shape[0] < need or shape[1] < need:
            raise SACConfigError(f"visual observation {tuple(shape)} is too small for vis_encode_type "
                                 f"'{network.vis_encode_type}' (needs at least {need}×{need}).")


class SACNetworks(keras.Model):
    """Everything SAC trains for one behavior: ``actor``, ``critics`` (two Q networks),
    ``targets`` (their slowly following copies) and ``log_ent_coef`` (per branch)."""

    def __init__(self, spec: BehaviorSpec, stream_names: Sequence[str], network: Optional[NetworkSettings] = None,
                 hyperparameters: Optional[SACSettings] = None, seed: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        network = NetworkSettings() if network is None else network
        hp = SACSettings() if hyperparameters is None else hyperparameters
        check_network(spec, network)
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
        self.num_visual = len(spec.visual_observation_shapes)
        self.actor = SACActor(spec, network, width if self.is_discrete else 0, seed, name="actor")
        q_outputs = len(self.stream_names) * width

        def q(name: str, offset: int) -> QNetwork:
            return QNetwork(spec, network, q_outputs, None if seed is None else seed + offset, name=name)

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
        zeros = {k: tf.zeros([1, *spec.shape[1:]]) for k, spec in self.input_signature().items()}
        obs = self.observations(zeros)
        self.actor(obs)
        action = None if self.is_discrete else tf.zeros([1, self.action_size])
        for net in (*self.critics, *self.targets):
            net(obs, action)

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

    def observations(self, batch: Mapping[str, tf.Tensor], nxt: bool = False) -> Observation:
        """A batch's observations (``nxt``: its next observations) as the networks take them."""
        vector = batch[Field.NEXT_VECTOR_OBS if nxt else Field.VECTOR_OBS] if self.vector_size else None
        if not self.num_visual:
            return self.observe(vector)
        camera = Field.next_visual_obs if nxt else Field.visual_obs
        obs = {Field.visual_obs(j): tf.cast(batch[camera(j)], tf.float32) for j in range(self.num_visual)}
        if vector is not None:
            obs[Field.VECTOR_OBS] = self.observe(vector)
        return obs

    def q_values(self, nets: Sequence[QNetwork], obs: Observation, actions: Optional[tf.Tensor] = None) -> list[tf.Tensor]:
        """Each network's Q values: ``[B, streams]`` (continuous, at ``actions``) or
        ``[B, streams, Σ branches]`` (discrete, every action)."""
        action = None if self.is_discrete else tf.cast(actions, tf.float32)
        outs = [net(obs, action) for net in nets]
        if self.is_discrete:
            return [tf.reshape(o, [-1, len(self.stream_names), sum(self.branches)]) for o in outs]
        return outs

    def distribution(self, obs: Observation, action_mask: tf.Tensor) -> MaskedMultiCategorical:
        """The masked categorical of every branch (discrete). A masked action's logit gets no
        gradient: its only one would be rounding-sized (through the probabilities' epsilon),
        which Adam would blow up into full steps."""
        (logits,) = self.actor(obs)
        mask = tf.cast(action_mask, logits.dtype)
        logits = mask * logits + (1.0 - mask) * tf.stop_gradient(logits)
        return MaskedMultiCategorical(logits, action_mask, self.branches)

    def sample(self, obs: Observation, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """A squashed-Gaussian action for every row and its log-probability (continuous)."""
        mu, log_std = self.actor(obs)
        return squashed_gaussian(mu, log_std, noise)

    # -- acting (exported policies call these) --------------------------------------------
    def input_signature(self) -> dict[str, tf.TensorSpec]:
        sig = {}
        if self.vector_size:
            sig[Field.VECTOR_OBS] = tf.TensorSpec([None, self.vector_size], tf.float32, name=Field.VECTOR_OBS)
        for j, shape in enumerate(self.spec.visual_observation_shapes):
            sig[Field.visual_obs(j)] = tf.TensorSpec([None, *shape], tf.float32, name=Field.visual_obs(j))
        if self.is_discrete:
            sig[Field.ACTION_MASK] = tf.TensorSpec([None, sum(self.branches)], tf.float32, name=Field.ACTION_MASK)
        return sig

    def act(self, inputs: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """The action (sampled with ``noise``: standard normal, or uniform in (0, 1) for discrete;
        the mode without) and the action probabilities (discrete) or ``tanh(μ)`` (continuous)."""
        obs = self.observations(inputs)
        if self.is_discrete:
            dist = self.distribution(obs, inputs[Field.ACTION_MASK])
            return (dist.mode() if noise is None else dist.sample(noise)), dist.probs
        mu, log_std = self.actor(obs)
        if noise is None:
            return tf.tanh(mu), tf.tanh(mu)
        return squashed_gaussian(mu, log_std, noise)[0], tf.tanh(mu)

    def call(self, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return self.act(inputs, None)[0]
