"""Actor-critic Keras models: continuous (separate policy/value streams) and multi-branch discrete.

Inputs are a dict of tensors:
``vector_obs`` ``[B, V]`` (when the behavior has vector observations), ``visual_obs_{i}``
``[B, h, w, c]`` per camera, ``action_masks`` ``[B, Σ branches]`` (discrete), ``memory``
``[B / L, memory_size]`` (recurrent: the memory at the start of each sequence of length ``L``)
and ``prev_action`` ``[B, n_branches]`` (recurrent discrete). One value head per reward signal.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import keras
import tensorflow as tf

from kerasrl.envs.base import BehaviorSpec
from kerasrl.models.distributions import ClippedGaussian, MaskedMultiCategorical
from kerasrl.models.encoders import (
    ACTIVATIONS, INITIALIZERS, VIS_ENCODE_TYPES, VectorEncoder, VisualEncoder, kernel_initializer,
)
from kerasrl.models.normalizer import Normalizer


class ModelConfigError(ValueError):
    """A model hyper-parameter is invalid; the message names it."""


class _Stream(keras.layers.Layer):
    """Encoders of every observation of one stream (visual first, then vector), concatenated,
    optionally followed by an LSTM over sequences."""

    def __init__(self, spec: BehaviorSpec, hidden_units: int, num_layers: int, vis_encode_type: str,
                 lstm_units: int, seed: int | None, activation: str = "swish",
                 initializer: str = "variance_scaling", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.visual = [
            VisualEncoder(vis_encode_type, hidden_units, num_layers,
                          seed=None if seed is None else seed + 7919 * (j + 1), name=f"encoder{j}")
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
                lstm_units, return_sequences=True, return_state=True, name="lstm",
                kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
                recurrent_initializer=keras.initializers.Orthogonal(seed=None if seed is None else seed + 1),
            )
            if lstm_units else None
        )

    def call(self, vector: tf.Tensor | None = None, visual: Sequence[tf.Tensor] = (), extra: tf.Tensor | None = None,
             memory: tf.Tensor | None = None, sequence_length: int = 1) -> tuple[tf.Tensor, tf.Tensor | None]:
        parts = [enc(v) for enc, v in zip(self.visual, visual)]
        if self.vector is not None and vector is not None:
            parts.append(self.vector(vector))
        if extra is not None:
            parts.append(extra)
        hidden = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)
        if self.lstm is None:
            return hidden, None
        features = hidden.shape[-1]
        seq = tf.reshape(hidden, [-1, sequence_length, features])
        c0, h0 = memory[:, : self.lstm_units], memory[:, self.lstm_units:]
        out, h, c = self.lstm(seq, initial_state=[h0, c0])
        return tf.reshape(out, [-1, self.lstm_units]), tf.concat([c, h], axis=-1)


class ActorCritic(keras.Model):
    """PPO actor-critic for one behavior.

    Continuous: separate policy and value streams; ``μ`` from a dense layer (init scale 0.01),
    a trainable state-independent ``log σ²``. Discrete: one shared stream, per-branch logits
    (no bias, init scale 0.01), masked. Value heads ``{name}_value`` on the value stream.
    ``separate_value_network`` overrides the ML-Agents choice of streams (e.g. ``True`` for
    discrete actions, as Stable-Baselines3's default MLP policy).
    """

    def __init__(
        self,
        spec: BehaviorSpec,
        stream_names: Sequence[str] = ("extrinsic",),
        hidden_units: int = 128,
        num_layers: int = 2,
        normalize: bool = False,
        vis_encode_type: str = "simple",
        use_recurrent: bool = False,
        memory_size: int = 0,
        seed: int | None = None,
        activation: str = "swish",
        separate_value_network: bool | None = None,
        initializer: str = "variance_scaling",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if initializer not in INITIALIZERS:
            raise ModelConfigError(f"initializer must be one of {INITIALIZERS}, got '{initializer}'.")
        self.initializer = initializer
        if activation not in ACTIVATIONS:
            raise ModelConfigError(f"activation must be one of {sorted(ACTIVATIONS)}, got '{activation}'.")
        self.activation = activation
        if not stream_names:
            raise ModelConfigError("ActorCritic needs at least one reward signal (value head).")
        if vis_encode_type not in VIS_ENCODE_TYPES:
            raise ModelConfigError(f"vis_encode_type must be one of {VIS_ENCODE_TYPES}, got '{vis_encode_type}'.")
        if int(hidden_units) < 1:
            raise ModelConfigError(f"hidden_units must be >= 1, got {hidden_units}.")
        for shape in spec.visual_observation_shapes:
            need = VisualEncoder.MIN_SIZE[vis_encode_type]
            if shape[0] < need or shape[1] < need:
                raise ModelConfigError(
                    f"Visual observation {shape} is too small for vis_encode_type '{vis_encode_type}' "
                    f"(needs at least {need}×{need})."
                )
        if use_recurrent:
            if int(memory_size) <= 0:
                raise ModelConfigError(f"memory_size is {memory_size} even though use_recurrent is true; it must be > 0.")
            if int(memory_size) % 4 != 0:
                raise ModelConfigError(
                    f"memory_size is {memory_size}; with use_recurrent it must be divisible by 4 "
                    "(it holds LSTM cell and hidden state for up to two streams)."
                )
        self.spec = spec
        self.stream_names = list(stream_names)
        self.hidden_units = int(hidden_units)
        self.num_layers = max(int(num_layers), 1)
        self.use_recurrent = bool(use_recurrent)
        self.memory_size = int(memory_size) if use_recurrent else 0
        self.vis_encode_type = vis_encode_type
        self.seed = seed
        self.is_discrete = spec.is_discrete
        self.branches = list(spec.discrete_branches)
        self.vector_size = spec.vector_observation_size
        self.num_visual = len(spec.visual_observation_shapes)
        self.normalizer = Normalizer(self.vector_size, name="normalizer") if normalize and self.vector_size else None

        def seed_of(k: int) -> int | None:
            return None if seed is None else seed * 1000 + k

        self.separate_value_network = (not self.is_discrete) if separate_value_network is None else bool(separate_value_network)
        lstm_units = self.memory_size // 4 if self.separate_value_network else self.memory_size // 2
        self.body = _Stream(spec, hidden_units, num_layers, vis_encode_type, lstm_units, seed_of(1), activation,
                            initializer, name="main_graph_0")
        self.value_body = (
            _Stream(spec, hidden_units, num_layers, vis_encode_type, lstm_units, seed_of(2), activation,
                    initializer, name="main_graph_1")
            if self.separate_value_network else None
        )
        if self.is_discrete:
            self.branch_logits = [
                keras.layers.Dense(b, use_bias=False, kernel_initializer=kernel_initializer(initializer, "action", seed_of(10 + k)),
                                   name=f"branch_{k}")
                for k, b in enumerate(self.branches)
            ]
        else:
            self.mu = keras.layers.Dense(spec.action_size, kernel_initializer=kernel_initializer(initializer, "action", seed_of(3)),
                                         name="mu")
            self.log_sigma_sq = self.add_weight(name="log_sigma_squared", shape=(spec.action_size,),
                                                initializer="zeros", trainable=True)
        self.value_heads = {
            name: keras.layers.Dense(1, kernel_initializer=kernel_initializer(initializer, "value", seed_of(20 + i)),
                                     name=f"{name}_value")
            for i, name in enumerate(self.stream_names)
        }
        self(self.dummy_inputs(1))

    def dummy_inputs(self, batch: int) -> dict[str, tf.Tensor]:
        """Zero inputs of every kind the model takes (used to build the weights)."""
        inputs: dict[str, Any] = {}
        if self.vector_size:
            inputs["vector_obs"] = tf.zeros([batch, self.vector_size])
        for j, shape in enumerate(self.spec.visual_observation_shapes):
            inputs[f"visual_obs_{j}"] = tf.zeros([batch, *shape])
        if self.is_discrete:
            inputs["action_masks"] = tf.ones([batch, sum(self.branches)])
        if self.use_recurrent:
            inputs["memory"] = tf.zeros([batch, self.memory_size])
            if self.is_discrete:
                inputs["prev_action"] = tf.zeros([batch, len(self.branches)], tf.int32)
        return inputs

    def input_signature(self) -> dict[str, tf.TensorSpec]:
        """``tf.function`` input signature with a free batch dimension (no retracing)."""
        return {k: tf.TensorSpec([None, *v.shape[1:]], v.dtype, name=k) for k, v in self.dummy_inputs(1).items()}

    def call(self, inputs: Mapping[str, tf.Tensor], sequence_length: int = 1) -> dict[str, Any]:
        vector = inputs.get("vector_obs")
        if vector is not None and self.normalizer is not None:
            vector = self.normalizer(vector)
        visual = [inputs[f"visual_obs_{j}"] for j in range(self.num_visual)]
        memory = inputs.get("memory")
        out: dict[str, Any] = {}
        extra = None
        if self.is_discrete and self.use_recurrent:
            prev = tf.cast(inputs["prev_action"], tf.int32)
            extra = tf.concat([tf.one_hot(prev[:, k], b) for k, b in enumerate(self.branches)], axis=-1)
        if self.value_body is None:
            hidden, mem_out = self.body(vector=vector, visual=visual, extra=extra, memory=memory,
                                        sequence_length=sequence_length)
            value_hidden = hidden
        else:
            half = self.memory_size // 2
            mem_p = memory[:, :half] if memory is not None else None
            mem_v = memory[:, half:] if memory is not None else None
            hidden, mem_p_out = self.body(vector=vector, visual=visual, extra=extra, memory=mem_p,
                                          sequence_length=sequence_length)
            value_hidden, mem_v_out = self.value_body(vector=vector, visual=visual, extra=extra, memory=mem_v,
                                                      sequence_length=sequence_length)
            mem_out = tf.concat([mem_p_out, mem_v_out], axis=-1) if self.use_recurrent else None
        if self.is_discrete:
            out["logits"] = tf.concat([layer(hidden) for layer in self.branch_logits], axis=-1)
        else:
            out["mu"] = self.mu(hidden)
            out["log_sigma_sq"] = self.log_sigma_sq
        out["values"] = {name: tf.squeeze(head(value_hidden), -1) for name, head in self.value_heads.items()}
        if mem_out is not None:
            out["memory_out"] = mem_out
        return out

    def distribution(self, out: Mapping[str, Any], inputs: Mapping[str, tf.Tensor]) -> MaskedMultiCategorical | ClippedGaussian:
        if self.is_discrete:
            return MaskedMultiCategorical(out["logits"], inputs["action_masks"], self.branches)
        return ClippedGaussian(out["mu"], out["log_sigma_sq"])

    def act(self, inputs: Mapping[str, tf.Tensor], noise: tf.Tensor) -> dict[str, tf.Tensor]:
        """Sample actions with caller-supplied noise (uniform for discrete, standard normal for continuous).

        Returns ``action`` (what the env gets), ``log_probs`` (per branch / per dimension, stored
        as ``action_probs``), ``entropy``, ``value_{name}`` and, where they apply, ``pre_action``
        and ``memory_out``.
        """
        out = self(inputs)
        dist = self.distribution(out, inputs)
        result: dict[str, tf.Tensor] = {}
        if self.is_discrete:
            action = dist.sample(noise)
            result["action"] = action
            result["log_probs"] = dist.branch_log_prob(action)
        else:
            pre = dist.sample_pre(noise)
            result["action"] = ClippedGaussian.squash(pre)
            result["pre_action"] = pre
            result["log_probs"] = dist.dim_log_prob(pre)
        result["entropy"] = dist.entropy()
        for name, v in out["values"].items():
            result[f"value_{name}"] = v
        if "memory_out" in out:
            result["memory_out"] = out["memory_out"]
        return result

    def values(self, inputs: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Value estimate of every head, plus ``memory_out`` when recurrent."""
        out = self(inputs)
        res = {f"value_{k}": v for k, v in out["values"].items()}
        if "memory_out" in out:
            res["memory_out"] = out["memory_out"]
        return res

    def evaluate_actions(self, inputs: Mapping[str, tf.Tensor], actions: tf.Tensor,
                         sequence_length: int = 1) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
        """Log-prob ``[B]`` of stored actions (pre-clip for continuous), entropy ``[B]`` and values."""
        out = self(inputs, sequence_length=sequence_length)
        dist = self.distribution(out, inputs)
        log_prob = dist.log_prob(actions)
        entropy = dist.entropy()
        if not self.is_discrete:
            entropy = tf.broadcast_to(entropy, tf.shape(log_prob))
        return log_prob, entropy, out["values"]
