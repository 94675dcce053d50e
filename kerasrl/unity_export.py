"""A policy as the ONNX model that the ML-Agents Unity package's inference runs (model version 3).

``{behavior}.unity.onnx`` can be dropped into a scene's Behavior Parameters (Model), as a model
that ``mlagents-learn`` exported. Its contract, as the package reads it:

* inputs ``obs_0``, ``obs_1``, ... one per observation in the behavior's order: vectors
  ``[batch, size]``, images channels first ``[batch, channels, height, width]``; and, for
  discrete (and hybrid) actions, ``action_masks`` ``[batch, sum of branch sizes]`` (1 allowed, 0 masked);
* outputs ``version_number`` (``[3]``) and ``memory_size`` (``[0]``), float constants; for
  continuous actions ``continuous_actions`` (sampled) and ``deterministic_continuous_actions``
  ``[batch, size]`` in [-1, 1], and ``continuous_action_output_shape`` (``[size]``); for discrete
  actions ``discrete_actions`` (sampled) and ``deterministic_discrete_actions`` ``[batch,
  branches]`` (int64 indices), and ``discrete_action_output_shape`` (the branch sizes); for
  hybrid actions both sets, as ``mlagents-learn`` exports them.

PPO's policies (actor-critics) and SAC's actors are exported alike. PPO's continuous actions
are ``clip(a, -3, 3) / 3`` of its Gaussian's sample (deterministic: of ``μ``), as
``mlagents-learn`` exports them; SAC's are its tanh-squashed Gaussian's, ``tanh(μ + σ·noise)``
(deterministic: ``tanh(μ)``), already in [-1, 1], so nothing is clipped. Discrete actions of
either are drawn from (deterministic: the argmax of) the masked probabilities of every branch.
The observation normalizer is inside the graph. Recurrent policies are not exported this way yet.
"""
from __future__ import annotations

import os
from typing import Any, Union

import tensorflow as tf

from kerasrl.exception import TrainerError
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.sac.exported import graph_noise
from kerasrl.sac.networks import SACNetworks

#: The ``version_number`` the ML-Agents package 2.x and 3.x expect.
UNITY_MODEL_VERSION = 3
UNITY_ONNX_OPSET = 13

__all__ = ["UNITY_MODEL_VERSION", "UnityInferencePolicy", "save_unity_onnx", "unity_contract_supported"]

#: What is exported: PPO's (and BC's) actor-critic, or SAC's networks (their actor).
Policy = Union[ActorCritic, SACNetworks]


def unity_contract_supported(model: Policy) -> str:
    """Why ``model`` cannot be exported for Unity's inference ('' when it can)."""
    if isinstance(model, SACNetworks):
        if model.network_settings.use_recurrent:
            return "recurrent SAC policies are not exported for Unity's inference yet"
        if model.spec.is_hybrid:
            return "SAC does not act on hybrid actions (train them with PPO)"
        return ""
    if model.use_recurrent or model.uses_prev_action:
        return "recurrent policies are not exported for Unity's inference yet"
    return ""


class UnityInferencePolicy(tf.Module):
    """The acting part of an :class:`ActorCritic`, or SAC's actor, under the names and layouts
    Unity's inference reads."""

    def __init__(self, model: Policy) -> None:
        super().__init__(name="unity_policy")
        why = unity_contract_supported(model)
        if why:
            raise TrainerError(f"Cannot export for Unity: {why}.")
        self.model = model
        spec = model.spec
        self.input_specs = [tf.TensorSpec([None, *(s if len(s) == 1 else (s[2], s[0], s[1]))], tf.float32,
                                          name=f"obs_{i}") for i, s in enumerate(spec.observation_shapes)]
        if spec.has_action_mask:
            self.input_specs.append(tf.TensorSpec([None, spec.action_mask_size], tf.float32, name="action_masks"))
        self.act = tf.function(self._act, input_signature=self.input_specs)

    def _model_inputs(self, tensors: tuple[tf.Tensor, ...]) -> dict[str, tf.Tensor]:
        spec = self.model.spec
        obs = list(tensors[: len(spec.observation_shapes)])
        inputs: dict[str, tf.Tensor] = {}
        if spec.vector_observation_size:
            vectors = [obs[i] for i in spec.vector_observation_indices]
            inputs[Field.VECTOR_OBS] = vectors[0] if len(vectors) == 1 else tf.concat(vectors, axis=-1)
        for j, i in enumerate(spec.visual_observation_indices):
            inputs[Field.visual_obs(j)] = tf.transpose(obs[i], [0, 2, 3, 1])  # channels first -> last
        if spec.has_action_mask:
            inputs[Field.ACTION_MASK] = tensors[-1]
        return inputs

    def _actions(self, inputs: dict[str, tf.Tensor], rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The sampled (noise drawn in the graph) and the deterministic action of every row, as the
        model acts. SAC's two calls of its actor become one in the ONNX graph (tf2onnx merges
        duplicated nodes)."""
        model = self.model
        if isinstance(model, SACNetworks):
            return model.act(inputs, graph_noise(model, rows))[0], model.act(inputs, None)[0]
        out = model(inputs)
        dist = model.distribution(out, inputs)
        sampled, _ = model.select_action(dist, model.graph_noise(rows), False)
        best, _ = model.select_action(dist, None, True)
        return sampled, best

    def _act(self, *tensors: tf.Tensor) -> dict[str, tf.Tensor]:
        spec = self.model.spec
        sampled, best = self._actions(self._model_inputs(tensors), tf.shape(tensors[0])[0])
        result: dict[str, Any] = {"version_number": tf.constant([float(UNITY_MODEL_VERSION)]),
                                  "memory_size": tf.constant([0.0])}
        size = spec.continuous_size  # the continuous columns come first (hybrid actions have both kinds)
        if size:
            result["continuous_actions"] = sampled[:, :size]
            result["deterministic_continuous_actions"] = best[:, :size]
            result["continuous_action_output_shape"] = tf.constant([float(size)])
        if spec.discrete_branches:
            result["discrete_actions"] = tf.cast(sampled[:, size:], tf.int64)
            result["deterministic_discrete_actions"] = tf.cast(best[:, size:], tf.int64)
            result["discrete_action_output_shape"] = tf.constant([float(b) for b in spec.discrete_branches])
        return {name: tf.identity(value, name=name) for name, value in result.items()}


def save_unity_onnx(model: Policy, path: str) -> str:
    """Write ``model`` as Unity's inference reads it to ``path`` (needs tf2onnx), atomically."""
    try:
        import tf2onnx
    except ImportError as e:
        raise TrainerError(f"The Unity ONNX export needs the optional extra kerasrl[onnx] (pip install tf2onnx); "
                           f"{e}.") from e
    policy = UnityInferencePolicy(model)
    tmp = path + ".tmp"
    try:
        tf2onnx.convert.from_function(policy.act, input_signature=policy.input_specs, opset=UNITY_ONNX_OPSET,
                                      output_path=tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
