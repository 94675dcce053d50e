"""Actor-critic Keras models: continuous (separate policy/value streams), multi-branch discrete,
and hybrid (both heads at once).

Inputs are a dict of tensors:
``vector_obs`` ``[B, V]`` (when the behavior has vector observations), ``visual_obs{i}``
``[B, h, w, c]`` per camera, ``action_mask`` ``[B, Σ branches]`` (discrete, hybrid), ``memory``
``[B / L, memory_size]`` (recurrent: the memory at the start of each sequence of length ``L``)
and ``prev_action`` ``[B, n_branches]`` (recurrent discrete, ``recurrent_style: mlagents``). One
value head per reward signal.

Acting is defined once, here: ``acting_inputs`` builds a step's inputs from observations,
``select_action`` turns the action distribution into the action (sampled with caller-supplied
noise, or deterministic) and ``act`` returns it with what training stores. The policy, the
fit-style ``predict`` and the exported SavedModel all call them; the numpy mirrors copy ``act``.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from kerasrl.arrays import shared_ones
from kerasrl.fields import Field
from kerasrl.models.distributions import (
    MLAGENTS_ACTION_SCALE,
    ClippedGaussian,
    HybridDistribution,
    MaskedMultiCategorical,
)
from kerasrl.models.encoders import VectorEncoder, VisualEncoder, kernel_initializer
from kerasrl.models.normalizer import Normalizer
from kerasrl.settings import NetworkSettings
from kerasrl.spec import BehaviorSpec, concat_vector_observations

#: The action distributions an actor-critic acts with.
ActionDistribution = MaskedMultiCategorical | ClippedGaussian | HybridDistribution


class ModelConfigError(ValueError):
    """A model hyper-parameter is invalid; the message names it."""


class Stream(keras.layers.Layer):
    """Encoders of every observation of one stream (visual first, then vector), concatenated,
    optionally followed by an LSTM over sequences; with ``lstm_first`` (vector observations
    only) the LSTM runs on the observations and the encoder's hidden layers on its outputs.
    ``unroll``: the LSTM's steps are unrolled in the graph rather than looped (short sequences
    of known length). ``projection_units``: a linear layer (no activation, torch's ``Linear``
    initialisation) maps the vector observations to that many units before the hidden layers,
    where sb3-contrib's memoryless critic has one in place of its LSTM."""

    def __init__(self, spec: BehaviorSpec, hidden_units: int, num_layers: int, vis_encode_type: str,
                 lstm_units: int, seed: int | None, activation: str, initializer: str,
                 conv_style: str = NetworkSettings.conv_style, lstm_first: bool = False, unroll: bool = False,
                 projection_units: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lstm_first = lstm_first and bool(lstm_units)
        projection_seed = None if seed is None else seed + 4099
        self.projection = _projection(projection_units, spec.vector_observation_size, projection_seed)
        self.visual = [
            VisualEncoder(vis_encode_type, hidden_units, num_layers,
                          seed=None if seed is None else seed + 7919 * (j + 1), activation=activation,
                          initializer=initializer, conv_style=conv_style, name=f"encoder{j}")
            for j, _ in enumerate(spec.visual_observation_shapes)
        ]
        self.vector = (
            VectorEncoder(hidden_units, num_layers, seed=seed, activation=activation, initializer=initializer,
                          name="vector")
            if spec.vector_observation_size else None
        )
        self.lstm_units = lstm_units
        self.lstm = (
            keras.layers.LSTM(
                lstm_units, return_sequences=True, return_state=True, name="lstm", unroll=unroll,
                kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
                recurrent_initializer=keras.initializers.Orthogonal(seed=None if seed is None else seed + 1),
            )
            if lstm_units else None
        )

    def call(self, vector: tf.Tensor | None = None, visual: Sequence[tf.Tensor] = (), extra: tf.Tensor | None = None,
             memory: tf.Tensor | None = None, sequence_length: int = 1,
             step_mask: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor | None]:
        """The stream's features, one row per row of the inputs, and (with an LSTM) the memory
        after each sequence; ``step_mask`` ``[sequences, sequence_length]`` (bool) marks the steps
        the LSTM takes (a masked step leaves its state unchanged)."""
        if self.lstm_first:
            assert self.vector is not None  # lstm_first: vector observations only
            out, mem_out = self._recur(vector, memory, sequence_length, step_mask)
            return self.vector(out), mem_out
        parts = [enc(v) for enc, v in zip(self.visual, visual)]
        if self.vector is not None and vector is not None:
            parts.append(self.vector(vector if self.projection is None else self.projection(vector)))
        if extra is not None:
            parts.append(extra)
        hidden = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)
        if self.lstm is None:
            return hidden, None
        return self._recur(hidden, memory, sequence_length, step_mask)

    def _recur(self, x: tf.Tensor, memory: tf.Tensor, sequence_length: int,
               mask: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """The LSTM over sequences of ``sequence_length`` rows of ``x`` from ``memory`` (``[c, h]``):
        its outputs, one row per row of ``x``, and the memory after each sequence."""
        assert self.lstm is not None  # called only with lstm_units
        seq = tf.reshape(x, [-1, sequence_length, x.shape[-1]])
        c0, h0 = memory[:, : self.lstm_units], memory[:, self.lstm_units:]
        if mask is None:
            out, h, c = self.lstm(seq, initial_state=[h0, c0])
        else:
            out, h, c = self.lstm(seq, initial_state=[h0, c0], mask=mask)
        return tf.reshape(out, [-1, self.lstm_units]), tf.concat([c, h], axis=-1)


def _projection(units: int, fan_in: int, seed: int | None) -> keras.layers.Dense | None:
    """A linear layer of ``units`` initialised as torch's ``Linear`` (kernel and bias uniform
    within ±1/√fan_in), or None for 0 units."""
    if not units:
        return None
    bound = 1.0 / max(fan_in, 1) ** 0.5
    return keras.layers.Dense(units, kernel_initializer=kernel_initializer("torch", "hidden", seed),
                              bias_initializer=keras.initializers.RandomUniform(-bound, bound, seed=seed),
                              name="projection")


def _check_network(spec: BehaviorSpec, stream_names: Sequence[str], network: NetworkSettings) -> None:
    """A network that cannot be built for ``spec`` is a ``ModelConfigError`` that says why."""
    if not stream_names:
        raise ModelConfigError("ActorCritic needs at least one reward signal (value head).")
    vis_encode_type = network.vis_encode_type
    for shape in spec.visual_observation_shapes:
        need = VisualEncoder.MIN_SIZE[vis_encode_type]
        if shape[0] < need or shape[1] < need:
            raise ModelConfigError(
                f"Visual observation {shape} is too small for vis_encode_type '{vis_encode_type}' "
                f"(needs at least {need}×{need})."
            )
    sb3_lstm = network.use_recurrent and network.recurrent_style == "sb3"
    if sb3_lstm and (spec.visual_observation_shapes or not spec.vector_observation_size):
        raise ModelConfigError("recurrent_style sb3 takes vector observations only; use recurrent_style mlagents "
                               "with visual observations.")


class ActorCritic(keras.Model):
    """PPO actor-critic for one behavior.

    Continuous: separate policy and value streams; ``μ`` from a dense layer (init scale 0.01),
    a trainable state-independent ``log σ²`` starting at ``2·log_std_init`` (``gaussian_style:
    sb3``: ``log σ``, as Stable-Baselines3, so that Adam moves it as SB3's does). Discrete: one
    shared stream, per-branch logits (no bias, init scale 0.01), masked. Hybrid: both heads on
    the policy stream (separate streams, as continuous), log-probabilities and entropies summed.
    Value heads ``{name}_value`` on the value stream.
    ``separate_value_network`` overrides the ML-Agents choice of streams (e.g. ``True`` for
    discrete actions, as Stable-Baselines3's default MLP policy).
    Recurrent: ``recurrent_style: mlagents`` puts the LSTM after the hidden layers (discrete
    actions: the previous action's one-hot beside the encoding, as ML-Agents 0.9); ``sb3`` runs
    it on the observations and the hidden layers on its outputs, without the previous action,
    as sb3-contrib's ``MlpLstmPolicy`` (``memory_size / 4`` units per stream with separate
    streams: its ``lstm_hidden_size`` with ``enable_critic_lstm``). ``critic_memory: false``:
    the value stream is an MLP on the current observations (no LSTM, no previous action) and
    the policy's LSTM of ``memory_size / 2`` units holds the whole memory (``enable_critic_lstm=False``).
    """

    def __init__(
        self,
        spec: BehaviorSpec,
        stream_names: Sequence[str] = ("extrinsic",),
        network: NetworkSettings | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        network = NetworkSettings() if network is None else network
        _check_network(spec, stream_names, network)
        self.network = network
        vis_encode_type = network.vis_encode_type
        self.initializer = network.initializer
        self.activation = network.activation
        self.spec = spec
        self.stream_names = list(stream_names)
        self.hidden_units = network.hidden_units
        self.num_layers = network.num_layers
        self.use_recurrent = network.use_recurrent
        self.memory_size = network.memory_size if self.use_recurrent else 0
        #: Steps per training sequence (1 without memory).
        self.sequence_length = network.sequence_length if self.use_recurrent else 1
        self.vis_encode_type = vis_encode_type
        #: The LSTM runs on the observations, before the hidden layers (``recurrent_style: sb3``).
        self.lstm_first = self.use_recurrent and network.recurrent_style == "sb3"
        #: The previous action's one-hot is an input (recurrent discrete policies, ML-Agents' layout).
        self.uses_prev_action = self.use_recurrent and spec.is_discrete and not self.lstm_first
        #: The value stream has an LSTM of its own (recurrent, ``critic_memory``); else the memory is the policy's.
        self.critic_memory = self.use_recurrent and network.critic_memory
        self.seed = seed
        self.is_discrete = spec.is_discrete
        self.is_hybrid = spec.is_hybrid
        self.branches = list(spec.discrete_branches)
        #: Continuous action dimensions (0 for discrete actions).
        self.continuous_size = spec.continuous_size
        self.vector_size = spec.vector_observation_size
        self.num_visual = len(spec.visual_observation_shapes)
        self.normalizer = Normalizer(self.vector_size, name="normalizer") if network.normalize and self.vector_size else None
        separate = network.separate_value_network
        self.separate_value_network = (not self.is_discrete) if separate is None else separate
        if self.use_recurrent and not network.critic_memory:
            self.separate_value_network = True  # NetworkSettings refuses an explicit separate_value_network: false
        self.gaussian_style = network.gaussian_style
        default_scale = MLAGENTS_ACTION_SCALE if network.gaussian_style == "mlagents" else 1.0
        #: The Gaussian sample is clipped at ± this and divided by it (continuous actions).
        self.action_scale = default_scale if network.action_scale is None else float(network.action_scale)
        self._build_layers()
        self(self.dummy_inputs(1))

    def _seed(self, k: int) -> int | None:
        return None if self.seed is None else self.seed * 1000 + k

    def _build_layers(self) -> None:
        """The streams, the action layer(s) and one value head per reward signal."""
        spec, init = self.spec, self.initializer
        # The memory holds [c, h] of every stream with an LSTM.
        shared_memory = self.separate_value_network and self.critic_memory
        lstm_units = self.memory_size // 4 if shared_memory else self.memory_size // 2

        def stream(k: int, units: int, projection: int = 0) -> Stream:
            return Stream(spec, self.hidden_units, self.num_layers, self.vis_encode_type, units, self._seed(k + 1),
                          self.activation, init, self.network.conv_style, lstm_first=self.lstm_first,
                          projection_units=projection, name=f"main_graph_{k}")

        self.body = stream(0, lstm_units)
        value_units = lstm_units if self.critic_memory else 0
        # sb3-contrib's memoryless critic (LSTM first, enable_critic_lstm=False) has a linear layer where its LSTM would be.
        projection = lstm_units if self.lstm_first and not self.critic_memory else 0
        self.value_body = stream(1, value_units, projection) if self.separate_value_network else None
        if self.branches:
            self.branch_logits = [
                keras.layers.Dense(b, use_bias=self.network.action_bias, name=f"branch_{k}",
                                   kernel_initializer=kernel_initializer(init, "action", self._seed(10 + k)))
                for k, b in enumerate(self.branches)
            ]
        if self.continuous_size:
            self.mu = keras.layers.Dense(self.continuous_size,
                                         kernel_initializer=kernel_initializer(init, "action", self._seed(3)), name="mu")
            self._build_log_sigma(self.continuous_size)
        self.value_heads = {
            name: keras.layers.Dense(1, kernel_initializer=kernel_initializer(init, "value", self._seed(20 + i)),
                                     name=f"{name}_value")
            for i, name in enumerate(self.stream_names)
        }

    def _build_log_sigma(self, action_size: int) -> None:
        """The trainable spread: ``log_sigma_sq`` (ML-Agents) or ``log_std`` (SB3)."""
        log_std = self.network.log_std_init
        if self.gaussian_style == "sb3":
            self.log_std = self.add_weight(name="log_std", shape=(action_size,),
                                           initializer=keras.initializers.Constant(log_std), trainable=True)
        else:
            self.log_sigma_sq = self.add_weight(name="log_sigma_squared", shape=(action_size,),
                                                initializer=keras.initializers.Constant(2.0 * log_std), trainable=True)

    def log_sigma_sq_value(self) -> tf.Tensor:
        """``log σ²`` of the continuous actions, whichever variable holds it."""
        return 2.0 * self.log_std if self.gaussian_style == "sb3" else self.log_sigma_sq

    def dummy_inputs(self, batch: int) -> dict[str, tf.Tensor]:
        """Zero inputs of every kind the model takes (used to build the weights)."""
        inputs: dict[str, Any] = {}
        if self.vector_size:
            inputs[Field.VECTOR_OBS] = tf.zeros([batch, self.vector_size])
        for j, shape in enumerate(self.spec.visual_observation_shapes):
            inputs[Field.visual_obs(j)] = tf.zeros([batch, *shape])
        if self.branches:
            inputs[Field.ACTION_MASK] = tf.ones([batch, sum(self.branches)])
        if self.use_recurrent:
            inputs[Field.MEMORY] = tf.zeros([batch, self.memory_size])
            if self.uses_prev_action:
                inputs[Field.PREV_ACTION] = tf.zeros([batch, len(self.branches)], tf.int32)
        return inputs

    def input_signature(self) -> dict[str, tf.TensorSpec]:
        """``tf.function`` input signature with a free batch dimension (no retracing)."""
        return {k: tf.TensorSpec([None, *v.shape[1:]], v.dtype, name=k) for k, v in self.dummy_inputs(1).items()}

    def call(self, inputs: Mapping[str, tf.Tensor], sequence_length: int = 1) -> dict[str, Any]:
        vector = inputs.get(Field.VECTOR_OBS)
        if vector is not None and self.normalizer is not None:
            vector = self.normalizer(vector)
        visual = [inputs[Field.visual_obs(j)] for j in range(self.num_visual)]
        memory = inputs.get(Field.MEMORY)
        out: dict[str, Any] = {}
        extra = None
        if self.uses_prev_action:
            prev = tf.cast(inputs[Field.PREV_ACTION], tf.int32)
            extra = tf.concat([tf.one_hot(prev[:, k], b) for k, b in enumerate(self.branches)], axis=-1)
        if self.value_body is None:
            hidden, mem_out = self.body(vector=vector, visual=visual, extra=extra, memory=memory,
                                        sequence_length=sequence_length)
            value_hidden = hidden
        else:
            hidden, value_hidden, mem_out = self._two_streams(vector, visual, extra, memory, sequence_length)
        if self.branches:
            out["logits"] = tf.concat([layer(hidden) for layer in self.branch_logits], axis=-1)
        if self.continuous_size:
            out["mu"] = self.mu(hidden)
            out["log_sigma_sq"] = self.log_sigma_sq_value()
        out["values"] = {name: tf.squeeze(head(value_hidden), -1) for name, head in self.value_heads.items()}
        if mem_out is not None:
            out[Field.MEMORY_OUT] = mem_out
        return out

    def _two_streams(self, vector: tf.Tensor | None, visual: Sequence[tf.Tensor], extra: tf.Tensor | None,
                     memory: tf.Tensor | None, sequence_length: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
        """The policy's and the value's features and the memory after each sequence (separate
        streams): the memory is split between the streams' LSTMs, or all the policy's when the
        value stream has none (``critic_memory: false``: it maps each row on its own)."""
        assert self.value_body is not None
        if self.use_recurrent and not self.critic_memory:
            hidden, mem_out = self.body(vector=vector, visual=visual, extra=extra, memory=memory,
                                        sequence_length=sequence_length)
            value_hidden, _ = self.value_body(vector=vector, visual=visual)
            return hidden, value_hidden, mem_out
        half = self.memory_size // 2
        mem_p = memory[:, :half] if memory is not None else None
        mem_v = memory[:, half:] if memory is not None else None
        hidden, mem_p_out = self.body(vector=vector, visual=visual, extra=extra, memory=mem_p,
                                      sequence_length=sequence_length)
        value_hidden, mem_v_out = self.value_body(vector=vector, visual=visual, extra=extra, memory=mem_v,
                                                  sequence_length=sequence_length)
        return hidden, value_hidden, (tf.concat([mem_p_out, mem_v_out], axis=-1) if self.use_recurrent else None)

    def distribution(self, out: Mapping[str, Any], inputs: Mapping[str, tf.Tensor]) -> ActionDistribution:
        categorical = (MaskedMultiCategorical(out["logits"], inputs[Field.ACTION_MASK], self.branches)
                       if self.branches else None)
        if self.is_discrete:
            assert categorical is not None
            return categorical
        gaussian = ClippedGaussian(out["mu"], out["log_sigma_sq"], self.action_scale,
                                   sum_entropy=self.gaussian_style == "sb3")
        return gaussian if categorical is None else HybridDistribution(gaussian, categorical)

    def acting_inputs(self, observations: Sequence[np.ndarray], action_mask: Optional[np.ndarray] = None,
                      memory: Optional[np.ndarray] = None,
                      prev_action: Optional[np.ndarray] = None) -> dict[str, np.ndarray]:
        """The inputs of one acting step from one array per observation of the spec: vector
        observations concatenated, cameras as ``visual_obs{j}``, the action mask (branches; all
        actions allowed when ``None``) and, when recurrent, the memory and previous action
        (zeros when ``None``: the start of an episode)."""
        spec = self.spec
        n = len(observations[0])
        inputs: dict[str, np.ndarray] = {}
        if spec.vector_observation_size:
            inputs[Field.VECTOR_OBS] = concat_vector_observations(spec, observations)
        for j, i in enumerate(spec.visual_observation_indices):
            inputs[Field.visual_obs(j)] = observations[i]
        if self.branches:
            inputs[Field.ACTION_MASK] = shared_ones(n, spec.action_mask_size) if action_mask is None else action_mask
        if self.use_recurrent:
            inputs[Field.MEMORY] = np.zeros((n, self.memory_size), np.float32) if memory is None else memory
            if self.uses_prev_action:
                inputs[Field.PREV_ACTION] = (np.zeros((n, len(self.branches)), np.int32) if prev_action is None
                                             else prev_action)
        return inputs

    def draw_noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """The noise ``act`` samples ``n`` actions with, from ``rng``: standard normal for the
        continuous dimensions, then uniform in [1e-7, 1) for the branches (inverse-CDF),
        ``[n, action_size]``."""
        if self.is_discrete:
            return np.maximum(rng.random((n, self.spec.action_size), dtype=np.float32), np.float32(1e-7))
        normal = rng.standard_normal((n, self.continuous_size), dtype=np.float32)
        if not self.branches:
            return normal
        uniform = np.maximum(rng.random((n, len(self.branches)), dtype=np.float32), np.float32(1e-7))
        return np.concatenate([normal, uniform], axis=1)

    def graph_noise(self, batch: tf.Tensor) -> tf.Tensor:
        """Noise of ``draw_noise``'s kinds drawn by TensorFlow ops, for sampling inside an exported graph."""
        if self.is_discrete:
            return tf.random.uniform(tf.stack([batch, len(self.branches)]), minval=1e-7, maxval=1.0)
        normal = tf.random.normal(tf.stack([batch, self.continuous_size]))
        if not self.branches:
            return normal
        uniform = tf.random.uniform(tf.stack([batch, len(self.branches)]), minval=1e-7, maxval=1.0)
        return tf.concat([normal, uniform], axis=-1)

    def select_action(self, dist: ActionDistribution, noise: Optional[tf.Tensor],
                      deterministic: bool = False) -> tuple[tf.Tensor, Optional[tf.Tensor]]:
        """The action the environment gets and, for continuous and hybrid actions, the pre-squash
        action (where log-probs are taken; hybrid: followed by the branch indices). Sampled with
        ``noise``; ``deterministic``: per branch the most probable allowed action, and
        ``squash(μ)`` (``noise`` is then unused)."""
        if isinstance(dist, MaskedMultiCategorical):  # self.is_discrete
            return (dist.mode() if deterministic else dist.sample(noise)), None
        if isinstance(dist, HybridDistribution):
            size = self.continuous_size
            gaussian, categorical = dist.gaussian, dist.categorical
            pre = gaussian.mu if deterministic else gaussian.sample_pre(noise[:, :size])  # type: ignore[index]
            chosen = categorical.mode() if deterministic else categorical.sample(noise[:, size:])  # type: ignore[index]
            chosen = tf.cast(chosen, tf.float32)
            return (tf.concat([ClippedGaussian.squash(pre, self.action_scale), chosen], axis=-1),
                    tf.concat([pre, chosen], axis=-1))
        pre = dist.mu if deterministic else dist.sample_pre(noise)
        return ClippedGaussian.squash(pre, self.action_scale), pre

    def act(self, inputs: Mapping[str, tf.Tensor], noise: tf.Tensor, deterministic: bool = False) -> dict[str, tf.Tensor]:
        """Actions (``select_action``) with what training stores about them.

        Returns, named as ``Field``: ``actions`` (what the env gets), ``action_log_probs`` (per
        dimension, then per branch), ``entropy``, ``{signal}_value_estimates`` and, where they
        apply, ``actions_pre`` and ``memory_out``.
        """
        out = self(inputs)
        dist = self.distribution(out, inputs)
        action, pre = self.select_action(dist, noise, deterministic)
        result: dict[str, tf.Tensor] = {Field.ACTIONS: action}
        if isinstance(dist, MaskedMultiCategorical):  # pre is None
            result[Field.ACTION_LOG_PROBS] = dist.branch_log_prob(action)
        elif isinstance(dist, HybridDistribution):
            result[Field.ACTIONS_PRE] = pre
            result[Field.ACTION_LOG_PROBS] = dist.column_log_prob(pre)
        else:
            result[Field.ACTIONS_PRE] = pre
            result[Field.ACTION_LOG_PROBS] = dist.dim_log_prob(pre)
        result[Field.ENTROPY] = dist.entropy()
        result.update(self._value_outputs(out))
        return result

    def act_function(self, deterministic: bool = False) -> Callable[..., dict[str, tf.Tensor]]:
        """``act(inputs, noise)`` compiled once for any batch size (a fixed input signature)."""
        noise_spec = tf.TensorSpec([None, self.spec.action_size], tf.float32, name="noise")
        return tf.function(lambda inputs, noise: self.act(inputs, noise, deterministic),
                           input_signature=[self.input_signature(), noise_spec])

    def values(self, inputs: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Value estimate of every head, plus ``memory_out`` when recurrent."""
        return self._value_outputs(self(inputs))

    @staticmethod
    def _value_outputs(out: Mapping[str, Any]) -> dict[str, tf.Tensor]:
        res = {Field.value_estimates(k): v for k, v in out["values"].items()}
        if Field.MEMORY_OUT in out:
            res[Field.MEMORY_OUT] = out[Field.MEMORY_OUT]
        return res

    def evaluate_actions(self, inputs: Mapping[str, tf.Tensor], actions: tf.Tensor,
                         sequence_length: int = 1) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
        """Log-prob ``[B]`` of stored actions (pre-clip for continuous; pre-clip then branch
        indices for hybrid), entropy ``[B]`` and values."""
        out = self(inputs, sequence_length=sequence_length)
        dist = self.distribution(out, inputs)
        log_prob = dist.log_prob(actions)
        entropy = dist.entropy()
        if not self.is_discrete:
            entropy = tf.broadcast_to(entropy, tf.shape(log_prob))
        return log_prob, entropy, out["values"]
