"""Soft Actor-Critic's Keras models: the actor, twin Q networks, their targets, the entropy coefficients.
Continuous actions: a tanh-squashed Gaussian (``μ`` and ``log σ`` heads, ``log σ`` clipped to
[-20, 2]); the critics take the observation and the action and give one Q value per reward
signal. Discrete actions (one categorical per branch, masked actions given probability 0): the
critics take the observation and give a Q value per reward signal, branch and action. One
trainable log entropy coefficient per action branch (one for continuous actions).

Cameras (PPO's ``vis_encode_type`` encoders) are encoded by each network's own encoders: the
actor concatenates their features with its hidden layers' output on the vector observations; a
critic concatenates them with the vector observations (and the action) before its hidden layers.
One running normalizer (``normalize: true``), shared by the actor and the critics.

Recurrent (``use_recurrent``): the actor and every critic encode the observations with PPO's
stream (``models.actor_critic.Stream``: cameras and hidden layers, then an LSTM of
``memory_size / 2`` units); the actor's heads follow the LSTM, a continuous critic takes the
action after it (one hidden layer on the LSTM's output and the action), a discrete critic's
head follows it. The actor's memory (``[c, h]``, ``memory_size`` wide) is stored at every step
and starts each training sequence; the critics' start from zeros a burn-in of
``sequence_length`` steps earlier (``Sequences``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import keras
import numpy as np
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.actor_critic import Stream
from kerasrl.models.distributions import MaskedMultiCategorical
from kerasrl.models.encoders import VectorEncoder, VisualEncoder, kernel_initializer
from kerasrl.models.normalizer import Normalizer
from kerasrl.sac.replay import BURN_IN, BURN_IN_MASKS
from kerasrl.settings import NetworkSettings, SACSettings
from kerasrl.spec import BehaviorSpec

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
#: The longest ``sequence_length`` whose LSTMs are unrolled in an update without XLA: a loop's
#: per-step cost dominates short sequences, longer ones make the graph slow to trace; with XLA
#: (as fast, compiling several times faster) the LSTMs loop.
UNROLL_SEQUENCE_LENGTH = 16
#: Added inside the log of the tanh correction, as Stable-Baselines3 and ML-Agents do.
TANH_EPSILON = 1e-6
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

#: What the networks take: the (normalised) vector observations alone, or with cameras a dict of
#: ``vector_obs`` (when the behavior has some) and ``visual_obs{j}``.
Observation = Union[tf.Tensor, Mapping[str, tf.Tensor]]


@dataclass(frozen=True)
class Sequences:
    """A mini-batch of ``N`` sequences of ``length`` steps as the recurrent networks take them
    (``Observation`` s flat, ``[N·steps, ...]``): the steps' observations, their next
    observations, the ``burn_in`` steps before each sequence, which steps are real (``masks``
    ``[N, length]``, ``burn_in_masks`` ``[N, burn_in]``; padding after an episode's end or
    before its start is not), and the actor's stored memory at each sequence's first step.
    ``nxt`` selects the next states: the networks then give one row per step for ``s′``."""

    steps: Observation
    next_steps: Observation
    burn_in: Optional[Observation]
    masks: tf.Tensor
    burn_in_masks: Optional[tf.Tensor]
    memory: tf.Tensor
    length: int
    nxt: bool = False

    def actor_timeline(self) -> tuple[Observation, tf.Tensor]:
        """The first step then every step's next observation (``length + 1`` per sequence: within
        an episode step ``t + 1``'s observation is step ``t``'s next one) and their step mask."""
        first = _map(lambda x: _sequences(x, self.length)[:, :1], self.steps)
        rest = _map(lambda x: _sequences(x, self.length), self.next_steps)
        ones = tf.ones_like(self.masks[:, :1])
        return _flat_join([first, rest]), tf.concat([ones, self.masks], axis=1) > 0

    def critic_timeline(self) -> tuple[Observation, tf.Tensor]:
        """``actor_timeline`` behind the burn-in steps."""
        obs, mask = self.actor_timeline()
        if self.burn_in is None or self.burn_in_masks is None:
            return obs, mask
        steps, before = self.length + 1, int(self.burn_in_masks.shape[1])
        burn_in = _map(lambda x: _sequences(x, before), self.burn_in)
        return (_flat_join([burn_in, _map(lambda x: _sequences(x, steps), obs)]),
                tf.concat([self.burn_in_masks > 0, mask], axis=1))

    def pick(self, rows: tf.Tensor, steps: int) -> tf.Tensor:
        """Of a timeline's rows (``steps`` per sequence, ending with ``actor_timeline``'s), those of
        the sequences' steps (``nxt``: of their next states), flat ``[N·length, ...]``."""
        seq = _sequences(rows, steps)
        start = steps - self.length - (0 if self.nxt else 1)
        return tf.reshape(seq[:, start : start + self.length], [-1, *rows.shape[1:]])


def _map(fn: Callable[[tf.Tensor], tf.Tensor], obs: Observation) -> Observation:
    return {k: fn(v) for k, v in obs.items()} if isinstance(obs, Mapping) else fn(obs)


def _sequences(x: tf.Tensor, length: int) -> tf.Tensor:
    """Flat rows ``[N·length, ...]`` as ``[N, length, ...]``."""
    return tf.reshape(x, [-1, length, *x.shape[1:]])


def _flat_join(parts: Sequence[Observation]) -> Observation:
    """``[N, t_i, ...]`` observations joined along the steps, flat ``[N·Σ t_i, ...]``."""
    def join(xs: Sequence[tf.Tensor]) -> tf.Tensor:
        x = tf.concat(list(xs), axis=1)
        return tf.reshape(x, [-1, *x.shape[2:]])

    if isinstance(parts[0], Mapping):
        return {k: join([p[k] for p in parts]) for k in parts[0]}
    return join(parts)


def stream_inputs(obs: Observation) -> tuple[Optional[tf.Tensor], list[tf.Tensor]]:
    """The vector observations (``None`` without) and the cameras of ``obs``, as ``Stream`` takes them."""
    if not isinstance(obs, Mapping):
        return obs, []
    cameras = sorted((k for k in obs if k != Field.VECTOR_OBS), key=lambda k: int(k[len(Field.visual_obs("")):]))
    return obs.get(Field.VECTOR_OBS), [obs[k] for k in cameras]


class SACConfigError(ValueError):
    """A behavior or network the SAC models cannot be built for; the message names it."""


def squashed_gaussian(mu: tf.Tensor, log_std: tf.Tensor, noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``tanh(μ + σ·noise)`` and its log-probability (summed over dimensions, tanh-corrected)."""
    pre = mu + tf.exp(log_std) * noise
    action = tf.tanh(pre)
    gaussian = tf.reduce_sum(-0.5 * tf.square(noise) - log_std - _HALF_LOG_2PI, axis=-1)
    correction = tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + TANH_EPSILON), axis=-1)
    return action, gaussian - correction


def camera_encoders(spec: BehaviorSpec, network: NetworkSettings, seed: Optional[int],
                    dtype: Any = None) -> list[VisualEncoder]:
    """One ``vis_encode_type`` encoder per camera of ``spec`` (PPO's), computing in ``dtype``."""
    return [VisualEncoder(network.vis_encode_type, network.hidden_units, network.num_layers,
                          seed=None if seed is None else seed + 7919 * (j + 1), activation=network.activation,
                          initializer=network.initializer, conv_style=network.conv_style, name=f"encoder{j}",
                          dtype=dtype)
            for j in range(len(spec.visual_observation_shapes))]


def concat(parts: Sequence[tf.Tensor], dtype: Any) -> tf.Tensor:
    """``parts`` (camera features, observations, the action) in ``dtype``, joined along the last axis."""
    parts = [tf.cast(p, dtype) for p in parts]
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)


def observation_parts(visual: Sequence[VisualEncoder], obs: Observation) -> tuple[list[tf.Tensor], Optional[tf.Tensor]]:
    """The cameras' features and the vector observations (``None`` without) of ``obs``."""
    if not isinstance(obs, Mapping):
        return [], obs
    features = [enc(obs[Field.visual_obs(j)]) for j, enc in enumerate(visual)]
    return features, obs.get(Field.VECTOR_OBS)


class QNetwork(keras.layers.Layer):
    """Camera encoders, then hidden layers on their features, the vector observations and (continuous)
    the action; one output per reward signal (× every action of every branch, discrete). The
    encoders and hidden layers compute in the network's ``dtype`` policy, the head in float32."""

    def __init__(self, spec: BehaviorSpec, network: NetworkSettings, outputs: int, seed: Optional[int],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.visual = camera_encoders(spec, network, seed, self.dtype_policy)
        self.body = VectorEncoder(network.hidden_units, network.num_layers, seed=seed, activation=network.activation,
                                  initializer=network.initializer, name="body", dtype=self.dtype_policy)
        self.head = keras.layers.Dense(outputs, kernel_initializer=kernel_initializer(network.initializer, "value", seed),
                                       name="q", dtype="float32")

    def call(self, obs: Observation, action: Optional[tf.Tensor] = None) -> tf.Tensor:
        features, vector = observation_parts(self.visual, obs)
        parts = features + [p for p in (vector, action) if p is not None]
        return self.head(self.body(concat(parts, self.compute_dtype)))


class SACActor(keras.layers.Layer):
    """Camera encoders and hidden layers on the vector observations, their outputs concatenated,
    then ``μ`` and clipped ``log σ`` (continuous) or logits (discrete). The encoders and hidden
    layers compute in the actor's ``dtype`` policy, the heads in float32."""

    def __init__(self, spec: BehaviorSpec, network: NetworkSettings, logits: int, seed: Optional[int],
                 memory_units: int = 0, unroll: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: Recurrent: PPO's stream (encoders, hidden layers, LSTM of ``memory_units``) before the heads.
        self.stream = recurrent_stream(spec, network, memory_units, seed, unroll) if memory_units else None
        self.visual = [] if memory_units else camera_encoders(spec, network, seed, self.dtype_policy)
        self.body = (VectorEncoder(network.hidden_units, network.num_layers, seed=seed, activation=network.activation,
                                   initializer=network.initializer, name="body", dtype=self.dtype_policy)
                     if spec.vector_observation_size and not memory_units else None)
        init = kernel_initializer(network.initializer, "action", seed)
        self.is_discrete = logits > 0
        if self.is_discrete:
            self.logits = keras.layers.Dense(logits, kernel_initializer=init, name="logits", dtype="float32")
        else:
            self.mu = keras.layers.Dense(spec.action_size, kernel_initializer=init, name="mu", dtype="float32")
            self.log_std = keras.layers.Dense(spec.action_size, kernel_initializer=init, name="log_std", dtype="float32")

    def call(self, obs: Observation, memory: Optional[tf.Tensor] = None, sequence_length: int = 1,
             step_mask: Optional[tf.Tensor] = None) -> tuple[tf.Tensor, ...]:
        """The heads' outputs; recurrent, the LSTM runs over sequences of ``sequence_length`` rows
        from ``memory`` and the memory after each sequence comes last."""
        if self.stream is not None:
            vector, visual = stream_inputs(obs)
            hidden, memory_out = self.stream(vector=vector, visual=visual, memory=memory,
                                             sequence_length=sequence_length, step_mask=step_mask)
            return (*self.heads(hidden), memory_out)
        features, vector = observation_parts(self.visual, obs)
        if self.body is not None and vector is not None:
            features.append(self.body(vector))
        return self.heads(concat(features, self.compute_dtype))

    def heads(self, hidden: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """``(logits,)`` or ``(μ, clipped log σ)``."""
        if self.is_discrete:
            return (self.logits(hidden),)
        return self.mu(hidden), tf.clip_by_value(self.log_std(hidden), LOG_STD_MIN, LOG_STD_MAX)


def update_uses_xla(hyperparameters: SACSettings, recurrent: bool, replicas: int) -> bool:
    """Whether the update is XLA-compiled: ``jit_compile`` (by default with memory only), on one
    device (under a strategy the update runs without it, as PPO's)."""
    return replicas == 1 and bool(recurrent if hyperparameters.jit_compile is None else hyperparameters.jit_compile)


def recurrent_stream(spec: BehaviorSpec, network: NetworkSettings, memory_units: int, seed: Optional[int],
                     unroll: bool) -> Stream:
    """PPO's stream (cameras, hidden layers, then an LSTM of ``memory_units``)."""
    return Stream(spec, network.hidden_units, network.num_layers, network.vis_encode_type, memory_units, seed,
                  network.activation, network.initializer, network.conv_style, unroll=unroll, name="stream")


class RecurrentQNetwork(keras.layers.Layer):
    """PPO's stream with an LSTM, then (continuous) one hidden layer on its output and the action,
    then one output per reward signal (× every action of every branch, discrete). ``features``
    runs the stream, ``q`` the rest, so that one pass serves several actions."""

    def __init__(self, spec: BehaviorSpec, network: NetworkSettings, outputs: int, seed: Optional[int],
                 memory_units: int, unroll: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.memory_units = memory_units
        self.stream = recurrent_stream(spec, network, memory_units, seed, unroll)
        self.post = (None if spec.is_discrete else
                     VectorEncoder(network.hidden_units, 1, seed=seed, activation=network.activation,
                                   initializer=network.initializer, name="post"))
        self.head = keras.layers.Dense(outputs, kernel_initializer=kernel_initializer(network.initializer, "value", seed),
                                       name="q")

    def features(self, obs: Observation, sequence_length: int, step_mask: Optional[tf.Tensor] = None) -> tf.Tensor:
        """The LSTM's output at every row of ``obs`` (sequences of ``sequence_length`` rows, from zeros)."""
        vector, visual = stream_inputs(obs)
        rows = tf.shape(vector if vector is not None else visual[0])[0]
        memory = tf.zeros([rows // sequence_length, 2 * self.memory_units])
        hidden, _ = self.stream(vector=vector, visual=visual, memory=memory, sequence_length=sequence_length,
                                step_mask=step_mask)
        return hidden

    def q(self, features: tf.Tensor, action: Optional[tf.Tensor] = None) -> tf.Tensor:
        if self.post is None:
            return self.head(features)
        return self.head(self.post(tf.concat([features, action], axis=-1)))

    def call(self, obs: Observation, action: Optional[tf.Tensor] = None) -> tf.Tensor:
        return self.q(self.features(obs, 1), action)


def check_network(spec: BehaviorSpec, network: NetworkSettings, dtype_policy: str = "float32") -> None:
    """A behavior or network SAC cannot build is a one-line ``SACConfigError``."""
    if network.use_recurrent and dtype_policy != "float32":
        raise SACConfigError(f"dtype_policy {dtype_policy} is not available with use_recurrent (the LSTM networks "
                             "compute in float32): set dtype_policy: float32.")
    if network.use_recurrent and network.recurrent_style != "mlagents":
        raise SACConfigError(f"recurrent_style {network.recurrent_style} is not available with the sac trainer "
                             "(its LSTM follows the hidden layers): set recurrent_style: mlagents.")
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
        check_network(spec, network, hp.dtype_policy)
        self.spec = spec
        self.network_settings = network
        self.hyperparameters = hp
        self.stream_names = list(stream_names)
        self.is_discrete = spec.is_discrete
        self.branches = list(spec.discrete_branches)
        self.vector_size = spec.vector_observation_size
        self.action_size = spec.action_size
        self.activation = network.activation
        self.normalizer = Normalizer(self.vector_size, name="normalizer") if network.normalize else None
        width = sum(self.branches) if self.is_discrete else 1
        self.num_visual = len(spec.visual_observation_shapes)
        self.recurrent = network.use_recurrent
        #: The actor's memory (``[c, h]`` of its LSTM; 0 without), stored at every step.
        self.memory_size = network.memory_size if self.recurrent else 0
        #: Steps per training sequence, and the critics' burn-in steps before each (1 and 0 without memory).
        self.sequence_length = network.sequence_length if self.recurrent else 1
        self.burn_in = network.sequence_length if self.recurrent else 0
        units = self.memory_size // 2
        #: The LSTMs' steps are unrolled in the update's graph (short sequences, without XLA).
        replicas = int(tf.distribute.get_strategy().num_replicas_in_sync)
        self.unroll = (self.recurrent and not update_uses_xla(hp, self.recurrent, replicas)
                       and self.sequence_length <= UNROLL_SEQUENCE_LENGTH)
        self.actor = SACActor(spec, network, width if self.is_discrete else 0, seed, memory_units=units,
                              unroll=self.unroll, name="actor", dtype=hp.dtype_policy)
        self.critics = [self._q_network("q1", 101, width, seed), self._q_network("q2", 202, width, seed)]
        self.targets = [self._q_network("target_q1", 101, width, seed), self._q_network("target_q2", 202, width, seed)]
        self._add_entropy_coefficients(hp)
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

    def _q_network(self, name: str, offset: int, width: int, seed: Optional[int]) -> Union[QNetwork, RecurrentQNetwork]:
        """One Q network (a critic or its target: the same seed, so both start equal)."""
        net_seed = None if seed is None else seed + offset
        outputs = len(self.stream_names) * width
        if self.recurrent:
            return RecurrentQNetwork(self.spec, self.network_settings, outputs, net_seed, self.memory_size // 2,
                                     self.unroll, name=name)
        return QNetwork(self.spec, self.network_settings, outputs, net_seed, name=name,
                        dtype=self.hyperparameters.dtype_policy)

    def _add_entropy_coefficients(self, hp: SACSettings) -> None:
        """``log_ent_coef`` (one per branch; continuous actions: one) and the entropy each is tuned towards."""
        n_coefs = len(self.branches) if self.is_discrete else 1
        self.log_ent_coef = self.add_weight(name="log_ent_coef", shape=(n_coefs,),
                                            initializer=keras.initializers.Constant(math.log(hp.init_entcoef)))
        if self.is_discrete:
            entropy = [hp.discrete_target_entropy_scale * math.log(b) for b in self.branches]
        else:
            entropy = [-hp.target_entropy_scale * self.action_size]
        #: The entropy the coefficients are tuned towards, per branch.
        self.target_entropy = np.asarray(entropy, np.float32)

    def _build_all(self) -> None:
        zeros = {k: tf.zeros([1, *spec.shape[1:]]) for k, spec in self.input_signature().items()}
        obs = self.observations(zeros)
        self.actor(obs, zeros.get(Field.MEMORY))
        action = None if self.is_discrete else tf.zeros([1, self.action_size])
        for net in (*self.critics, *self.targets):
            net(obs, action)

    def float32_copy(self) -> "SACNetworks":
        """These networks computing in float32 throughout (``self`` when they already do), with
        the same weights: what an exported policy runs, whatever precision trained it."""
        if self.hyperparameters.dtype_policy == "float32":
            return self
        hp = dataclasses.replace(self.hyperparameters, dtype_policy="float32")
        copy = SACNetworks(self.spec, self.stream_names, self.network_settings, hp, name=self.name)
        for target, source in zip(copy.weights, self.weights):
            target.assign(source)
        return copy

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

    def sequences(self, batch: Mapping[str, tf.Tensor]) -> tuple[Sequences, Sequences]:
        """A learning batch of sequences (fields ``[N, L, ...]``; see ``kerasrl.sac.replay``) as the
        networks take its steps and its next states."""
        def flat(b: Mapping[str, tf.Tensor], nxt: bool = False) -> Observation:
            return self.observations({k: tf.reshape(v, [-1, *v.shape[2:]]) for k, v in b.items()}, nxt)

        burn = {k[len(BURN_IN):]: v for k, v in batch.items() if k.startswith(BURN_IN) and k != BURN_IN_MASKS}
        has_burn_in = self.burn_in > 0 and BURN_IN_MASKS in batch
        steps = Sequences(flat(batch), flat(batch, nxt=True), flat(burn) if has_burn_in else None,
                          tf.cast(batch[Field.MASKS], tf.float32),
                          tf.cast(batch[BURN_IN_MASKS], tf.float32) if has_burn_in else None,
                          tf.cast(batch[Field.MEMORY], tf.float32), self.sequence_length)
        return steps, dataclasses.replace(steps, nxt=True)

    def actor_outputs(self, obs: Union[Observation, Sequences]) -> tuple[tf.Tensor, ...]:
        """The actor's heads at ``obs`` (recurrent: at every step of the sequences, from their memory)."""
        if not isinstance(obs, Sequences):
            return self.actor(obs)
        timeline, mask = obs.actor_timeline()
        out = self.actor(timeline, obs.memory, sequence_length=obs.length + 1, step_mask=mask)[:-1]
        return tuple(obs.pick(o, obs.length + 1) for o in out)

    def _q(self, net: Union[QNetwork, RecurrentQNetwork], obs: Union[Observation, Sequences],
           action: Optional[tf.Tensor]) -> tf.Tensor:
        if not isinstance(obs, Sequences):
            return net(obs, action)
        assert isinstance(net, RecurrentQNetwork)
        timeline, mask = obs.critic_timeline()
        steps = int(mask.shape[1])
        return net.q(obs.pick(net.features(timeline, steps, mask), steps), action)

    def q_values(self, nets: Sequence[Union[QNetwork, RecurrentQNetwork]], obs: Union[Observation, Sequences],
                 actions: Optional[tf.Tensor] = None) -> list[tf.Tensor]:
        """Each network's Q values: ``[B, streams]`` (continuous, at ``actions``) or
        ``[B, streams, Σ branches]`` (discrete, every action)."""
        action = None if self.is_discrete else tf.cast(actions, tf.float32)
        outs = [self._q(net, obs, action) for net in nets]
        if self.is_discrete:
            return [tf.reshape(o, [-1, len(self.stream_names), sum(self.branches)]) for o in outs]
        return outs

    def distribution(self, obs: Union[Observation, Sequences, None], action_mask: tf.Tensor,
                     logits: Optional[tf.Tensor] = None) -> MaskedMultiCategorical:
        """The masked categorical of every branch (discrete; ``logits``: the actor's at ``obs``,
        already computed). A masked action's logit gets no gradient: its only one would be
        rounding-sized (through the probabilities' epsilon), which Adam would blow up into full steps."""
        if logits is None:
            (logits,) = self.actor_outputs(obs)
        mask = tf.cast(action_mask, logits.dtype)
        logits = mask * logits + (1.0 - mask) * tf.stop_gradient(logits)
        return MaskedMultiCategorical(logits, action_mask, self.branches)

    def sample(self, obs: Union[Observation, Sequences], noise: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """A squashed-Gaussian action for every row and its log-probability (continuous)."""
        mu, log_std = self.actor_outputs(obs)
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
        if self.recurrent:
            sig[Field.MEMORY] = tf.TensorSpec([None, self.memory_size], tf.float32, name=Field.MEMORY)
        return sig

    def act(self, inputs: Mapping[str, tf.Tensor], noise: Optional[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """The action (sampled with ``noise``: standard normal, or uniform in (0, 1) for discrete;
        the mode without) and the action probabilities (discrete) or ``tanh(μ)`` (continuous)."""
        return self.act_with_memory(inputs, noise)[:2]

    def act_with_memory(self, inputs: Mapping[str, tf.Tensor],
                        noise: Optional[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]]:
        """``act``'s outputs and the memory after the step (recurrent: inputs hold ``memory``; else ``None``)."""
        out = self.actor(self.observations(inputs), inputs.get(Field.MEMORY))
        memory_out = out[-1] if self.recurrent else None
        if self.is_discrete:
            dist = self.distribution(None, inputs[Field.ACTION_MASK], logits=out[0])
            return (dist.mode() if noise is None else dist.sample(noise)), dist.probs, memory_out
        mu, log_std = out[0], out[1]
        if noise is None:
            return tf.tanh(mu), tf.tanh(mu), memory_out
        return squashed_gaussian(mu, log_std, noise)[0], tf.tanh(mu), memory_out

    def call(self, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return self.act(inputs, None)[0]
