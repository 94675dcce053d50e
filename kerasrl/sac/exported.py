"""The SAC actor as an exportable ``tf.Module``: ``deterministic`` and ``stochastic`` functions
with flat, named inputs (what a SavedModel signature and tf2onnx need), as the PPO export's."""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from kerasrl.sac.networks import SACNetworks


def graph_noise(model: SACNetworks, rows: tf.Tensor) -> tf.Tensor:
    """Noise for ``model.act`` drawn inside the graph, for ``rows`` agents: uniform in (0, 1) per
    branch (discrete), standard normal per action dimension (continuous)."""
    shape = tf.stack([rows, len(model.branches) or model.action_size])
    return tf.random.uniform(shape, minval=1e-7, maxval=1.0) if model.is_discrete else tf.random.normal(shape)


class SACExportedPolicy(tf.Module):
    """``action`` (continuous: in [-1, 1]) and ``action_probs`` (discrete: the masked
    probabilities; continuous: ``tanh(μ)``) from the actor, the normalizer included; recurrent,
    ``memory`` in and ``memory_out`` (the next step's ``memory``) out. The actor computes in
    float32 even when it trained with ``dtype_policy: mixed_bfloat16`` (a float32 copy of its
    weights is exported), so the files run wherever float32 does."""

    def __init__(self, model: SACNetworks) -> None:
        super().__init__(name="policy")
        self.model = model.float32_copy()
        self.input_names = list(model.input_signature())
        specs = list(model.input_signature().values())
        self.deterministic = tf.function(self._flat(deterministic=True), input_signature=specs)
        self.stochastic = tf.function(self._flat(deterministic=False), input_signature=specs)

    def _flat(self, deterministic: bool) -> Callable[..., dict[str, tf.Tensor]]:
        model, names = self.model, self.input_names

        def call(*tensors: tf.Tensor) -> dict[str, tf.Tensor]:
            inputs = dict(zip(names, tensors))
            noise = None if deterministic else graph_noise(model, tf.shape(tensors[0])[0])
            action, probs, memory = model.act_with_memory(inputs, noise)
            out = {"action": action, "action_probs": probs}
            if memory is not None:
                out["memory_out"] = memory
            return out

        return call

    def description(self) -> dict[str, Any]:
        """What a user of the exported files needs to feed and read them."""
        model = self.model
        return {
            "trainer": "sac",
            "inputs": {k: [None, *v.shape[1:]] for k, v in model.input_signature().items()},
            "outputs": ["action", "action_probs", *(["memory_out"] if model.recurrent else [])],
            "is_continuous_control": int(not model.is_discrete),
            "action_output_shape": list(model.spec.action_shape),
            "memory_size": model.memory_size,
            "normalized_inside": model.normalizer is not None,
        }
