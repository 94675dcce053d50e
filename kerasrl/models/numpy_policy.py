"""The actor-critic's forward pass in numpy, for acting with small vector policies.

A ``tf.function`` call costs ~0.15–0.25 ms whatever the batch; the same two-layer MLP in
numpy costs a few microseconds. For feed-forward policies on vector observations the policy
acts through this mirror of the Keras model, whose weights it re-reads after every update.
It computes exactly what ``ActorCritic.act`` / ``ActorCritic.values`` compute (same noise →
same actions, to float32 round-off); recurrent and visual policies keep the compiled TF path.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from kerasrl._kernels import sample_masked_categorical
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import EPSILON

_LOG_2PI = np.float32(math.log(2.0 * math.pi))
_LOG_2PIE = np.float32(math.log(2.0 * math.pi * math.e))


def _swish(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x / (np.float32(1.0) + np.exp(-x))


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0), out=x)


_ACTIVATIONS = {"swish": _swish, "tanh": _tanh, "relu": _relu}


def _block_diag(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0] + b.shape[0], a.shape[1] + b.shape[1]), np.float32)
    out[: a.shape[0], : a.shape[1]] = a
    out[a.shape[0] :, a.shape[1] :] = b
    return out


class NumpyActorCritic:
    """Numpy mirror of a feed-forward, vector-observation ``ActorCritic``."""

    def __init__(self, model: ActorCritic) -> None:
        if not self.supports(model):
            raise ValueError("NumpyActorCritic supports feed-forward actor-critics on vector observations only.")
        self.model = model
        self.is_discrete = model.is_discrete
        self.branches = list(model.branches)
        self._branch_sizes = np.asarray(self.branches, np.int64)
        self.stream_names = list(model.stream_names)
        self.activation = _ACTIVATIONS[model.activation]
        self._variables: Optional[list[Any]] = None
        self.refresh()

    @staticmethod
    def supports(model: ActorCritic) -> bool:
        return not model.use_recurrent and model.num_visual == 0 and model.vector_size > 0

    def refresh_normalizer(self) -> None:
        """Re-read the observation normalizer's statistics (after it saw new observations)."""
        normalizer = self.model.normalizer
        self.norm = None
        if normalizer is not None:
            mean, inv_std = normalizer.numpy_stats()
            self.norm = (mean, inv_std, np.float32(normalizer.clip))

    def refresh(self, values: Optional[Sequence[np.ndarray]] = None) -> None:
        """Re-read every weight from the Keras model (call after each update).

        ``values``: the model's ``trainable_variables`` as numpy arrays, when the caller already
        has them (the fused PPO update returns them), which saves a read. Policy and value
        streams are fused into one stack of block-diagonal layers, so that both networks cost
        one matmul per layer (numpy's per-call overhead dominates here).
        """
        m = self.model
        if self._variables is None:
            # The variable list is fixed once the model is built (walking the layers costs ~0.3 ms).
            self._variables = variables = list(m.trainable_variables)
            self._index = {id(v): i for i, v in enumerate(variables)}
        variables = self._variables
        if values is None:
            values = [np.asarray(v.numpy()) for v in variables]
        elif len(values) != len(variables) or any(tuple(a.shape) != tuple(v.shape) for a, v in zip(values, variables)):
            raise ValueError("refresh(values): values must match the model's trainable_variables in number and shapes.")

        def dense(layer: object) -> list[np.ndarray]:
            return [values[self._index[id(w)]].astype(np.float32, copy=False)
                    for w in layer.weights]  # type: ignore[attr-defined]

        self.refresh_normalizer()
        body = [dense(layer) for layer in m.body.vector.dense]
        heads = [dense(m.value_heads[name]) for name in self.stream_names]
        value_kernel = np.concatenate([k for k, _ in heads], axis=1)
        value_bias = np.concatenate([b for _, b in heads])
        if self.is_discrete:
            action_kernel = np.concatenate([dense(layer)[0] for layer in m.branch_logits], axis=1)
            action_bias = np.zeros(action_kernel.shape[1], np.float32)
        else:
            action_kernel, action_bias = dense(m.mu)
            self._refresh_gaussian(values)
        self.n_actions = action_kernel.shape[1]
        if m.value_body is None:
            self.layers = body
            self.head = (np.concatenate([action_kernel, value_kernel], axis=1),
                         np.concatenate([action_bias, value_bias]))
        else:
            value_body = [dense(layer) for layer in m.value_body.vector.dense]
            self.layers = [(np.concatenate([body[0][0], value_body[0][0]], axis=1),
                            np.concatenate([body[0][1], value_body[0][1]]))]
            self.layers += [(_block_diag(p[0], v[0]), np.concatenate([p[1], v[1]]))
                            for p, v in zip(body[1:], value_body[1:])]
            self.head = (_block_diag(action_kernel, value_kernel), np.concatenate([action_bias, value_bias]))

    def _refresh_gaussian(self, values: Sequence[np.ndarray]) -> None:
        """``σ`` and the constants of the log-density and entropy (``ClippedGaussian``'s)."""
        m = self.model
        if m.gaussian_style == "sb3":
            self.log_sigma_sq = np.float32(2.0) * values[self._index[id(m.log_std)]].astype(np.float32)
        else:
            self.log_sigma_sq = values[self._index[id(m.log_sigma_sq)]].astype(np.float32)
        self.sigma = np.exp(np.float32(0.5) * self.log_sigma_sq)
        self.inv_var = np.exp(-self.log_sigma_sq)
        reduce = np.sum if m.gaussian_style == "sb3" else np.mean
        self.entropy_value = np.float32(0.5) * reduce(_LOG_2PIE + self.log_sigma_sq, dtype=np.float32)
        self.action_scale = np.float32(m.action_scale)

    def _forward(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Action outputs (logits or μ) and value heads."""
        x = np.asarray(inputs[Field.VECTOR_OBS], np.float32)
        if self.norm is not None:
            mean, inv_std, clip = self.norm
            x = np.clip((x - mean) * inv_std, -clip, clip)
        for kernel, bias in self.layers:
            x = x @ kernel  # a fresh array: the activations below may work in place
            x += bias
            x = self.activation(x)
        out = x @ self.head[0]
        out += self.head[1]
        return out[:, : self.n_actions], out[:, self.n_actions :]

    def _values(self, v: np.ndarray, out: dict[str, np.ndarray]) -> None:
        for i, name in enumerate(self.stream_names):
            out[Field.value_estimates(name)] = v[:, i]

    def values(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        _, v = self._forward(inputs)
        out: dict[str, np.ndarray] = {}
        self._values(v, out)
        return out

    def act(self, inputs: Mapping[str, np.ndarray], noise: np.ndarray) -> dict[str, np.ndarray]:
        """Same outputs as ``ActorCritic.act`` for the same inputs and noise."""
        action_out, v = self._forward(inputs)
        out: dict[str, np.ndarray] = {}
        n = action_out.shape[0]
        if self.is_discrete:
            actions = np.empty((n, len(self.branches)), np.int32)
            log_probs = np.empty((n, len(self.branches)), np.float32)
            entropy = np.empty(n, np.float32)
            sample_masked_categorical(
                np.ascontiguousarray(action_out), np.ascontiguousarray(inputs[Field.ACTION_MASK], np.float32),
                np.ascontiguousarray(noise, np.float32), self._branch_sizes, np.float32(EPSILON),
                actions, log_probs, entropy,
            )
            out[Field.ACTIONS] = actions
            out[Field.ACTION_LOG_PROBS] = log_probs
            out[Field.ENTROPY] = entropy
        else:
            mu = action_out
            pre = mu + self.sigma * noise
            out[Field.ACTIONS] = np.clip(pre, -self.action_scale, self.action_scale) / self.action_scale
            out[Field.ACTIONS_PRE] = pre
            out[Field.ACTION_LOG_PROBS] = (
                np.float32(-0.5) * np.square(pre - mu) * self.inv_var
                - np.float32(0.5) * _LOG_2PI - np.float32(0.5) * self.log_sigma_sq
            ).astype(np.float32)
            out[Field.ENTROPY] = np.full(n, self.entropy_value, np.float32)
        self._values(v, out)
        return out
