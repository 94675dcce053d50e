"""The numpy mirror of feed-forward actor-critics with visual observations (acting only).

One compiled TF call of a Nature CNN on a few small images is mostly per-op dispatch; the same
forward pass as strided patch views and one matmul per convolution is faster
(``benchmarks/README.md``). ``NumpyVisualActorCritic`` mirrors the ``simple`` and
``nature_cnn`` encoders (valid padding, no pooling); ``resnet`` keeps the compiled TF path.
It computes what ``ActorCritic.act`` / ``values`` compute (same noise → same actions, to
float32 round-off) and re-reads the weights after every update, as the vector mirror.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.numpy_policy import _ACTIVATIONS, NumpyActorCritic

#: Encoders whose convolutions the mirror computes (valid padding, no pooling or skips).
MIRRORED_ENCODERS = ("simple", "nature_cnn")


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, np.float32(0.0))))


_CONV_ACTIVATIONS = {**_ACTIVATIONS, "elu": _elu}

Conv = tuple[np.ndarray, np.ndarray, int, int]  # kernel as a (k·k·c_in, c_out) matrix, bias, k, stride
Dense = tuple[np.ndarray, np.ndarray]


def conv2d_valid(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, k: int, stride: int) -> np.ndarray:
    """``[n, h, w, c]`` → ``[n, h', w', c_out]``: a valid-padding convolution as patches @ kernel."""
    n, h, w, c = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    sn, sh, sw, sc = x.strides
    patches = as_strided(x, (n, oh, ow, k, k, c), (sn, sh * stride, sw * stride, sh, sw, sc), writeable=False)
    y = patches.reshape(n * oh * ow, k * k * c) @ kernel
    y += bias
    return y.reshape(n, oh, ow, -1)


class NumpyVisualActorCritic(NumpyActorCritic):
    """Numpy mirror of a feed-forward ``ActorCritic`` whose cameras use ``simple`` or ``nature_cnn``
    encoders (with or without vector observations, one or two streams)."""

    @staticmethod
    def supports(model: ActorCritic) -> bool:
        return not model.use_recurrent and model.num_visual > 0 and model.vis_encode_type in MIRRORED_ENCODERS

    def refresh(self, values: Optional[Sequence[np.ndarray]] = None) -> None:
        """Re-read every weight (``values``: ``trainable_variables`` as numpy, when the caller has them)."""
        m = self.model
        if self._variables is None:
            self._variables = list(m.trainable_variables)
            self._index = {id(v): i for i, v in enumerate(self._variables)}
        if values is None:
            values = [np.asarray(v.numpy()) for v in self._variables]
        elif len(values) != len(self._variables) or any(
                tuple(a.shape) != tuple(v.shape) for a, v in zip(values, self._variables)):
            raise ValueError("refresh(values): values must match the model's trainable_variables in number and shapes.")

        def weights(layer: Any) -> list[np.ndarray]:
            return [values[self._index[id(w)]].astype(np.float32, copy=False) for w in layer.weights]

        self.refresh_normalizer()
        self.streams = [self._stream(s, weights) for s in (m.body, m.value_body) if s is not None]
        self.action_head: tuple[np.ndarray, Optional[np.ndarray]]
        kernels, biases = [], []
        if self.continuous_size:  # μ first, then the branches' logits (hybrid actions have both)
            mu_kernel, mu_bias = weights(m.mu)
            kernels.append(mu_kernel)
            biases.append(mu_bias)
            self._refresh_gaussian(values)
        if self.branches:
            branch = [weights(layer) for layer in m.branch_logits]  # [kernel] or, with action_bias, [kernel, bias]
            kernels += [w[0] for w in branch]
            if biases or m.network.action_bias:
                biases += [w[1] if len(w) > 1 else np.zeros(size, np.float32) for w, size in zip(branch, self.branches)]
        self.action_head = (np.concatenate(kernels, axis=1), np.concatenate(biases) if biases else None)
        heads = [weights(m.value_heads[name]) for name in self.stream_names]
        self.value_head = (np.concatenate([k for k, _ in heads], axis=1), np.concatenate([b for _, b in heads]))

    @staticmethod
    def _stream(stream: Any, weights: Any) -> tuple[list[tuple[Any, list[Conv], list[Dense]]], Optional[list[Dense]]]:
        """Per camera: (conv activation, convolutions, dense stack); the vector encoder's dense stack."""
        cameras = []
        for enc in stream.visual:
            convs = []
            for conv in enc.convs:
                kernel, bias = weights(conv)
                convs.append((kernel.reshape(-1, kernel.shape[-1]), bias, int(conv.kernel_size[0]), int(conv.strides[0])))
            cameras.append((_CONV_ACTIVATIONS[enc.conv_activation_name], convs,
                            [tuple(weights(layer)) for layer in enc.dense.dense]))
        vector = [tuple(weights(layer)) for layer in stream.vector.dense] if stream.vector is not None else None
        return cameras, vector

    def _dense(self, x: np.ndarray, layers: Sequence[Dense]) -> np.ndarray:
        for kernel, bias in layers:
            x = x @ kernel
            x += bias
            x = self.activation(x)
        return x

    def _encode(self, stream: Any, inputs: Mapping[str, np.ndarray], vector: Optional[np.ndarray]) -> np.ndarray:
        cameras, vector_layers = stream
        parts = []
        for j, (conv_activation, convs, dense) in enumerate(cameras):
            x = np.ascontiguousarray(inputs[Field.visual_obs(j)], np.float32)
            for kernel, bias, k, stride in convs:
                x = conv_activation(conv2d_valid(x, kernel, bias, k, stride))
            parts.append(self._dense(x.reshape(x.shape[0], -1), dense))
        if vector_layers is not None and vector is not None:
            parts.append(self._dense(vector, vector_layers))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def _forward(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Action outputs (logits or μ) and value heads."""
        vector = None
        if Field.VECTOR_OBS in inputs and self.model.vector_size:
            vector = np.asarray(inputs[Field.VECTOR_OBS], np.float32)
            if self.norm is not None:
                mean, inv_std, clip = self.norm
                vector = np.clip((vector - mean) * inv_std, -clip, clip)
        hidden = [self._encode(s, inputs, vector) for s in self.streams]
        kernel, bias = self.action_head
        action_out = hidden[0] @ kernel
        if bias is not None:
            action_out += bias
        value = hidden[-1] @ self.value_head[0]
        value += self.value_head[1]
        return action_out, value
