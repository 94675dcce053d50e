"""The actor-critic's forward pass in numpy, for acting with small vector policies.

A ``tf.function`` call costs ~0.15–0.25 ms whatever the batch; the same two-layer MLP in
numpy costs a few microseconds. For feed-forward policies on vector observations the policy
acts through this mirror of the Keras model, whose weights it re-reads after every update.
It computes exactly what ``ActorCritic.act`` / ``ActorCritic.values`` compute (same noise →
same actions, to float32 round-off); recurrent and visual policies keep the compiled TF path.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import EPSILON

_LOG_2PI = np.float32(math.log(2.0 * math.pi))
_LOG_2PIE = np.float32(math.log(2.0 * math.pi * math.e))


def _swish(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x / (np.float32(1.0) + np.exp(-x))


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0))


_ACTIVATIONS = {"swish": _swish, "tanh": _tanh, "relu": _relu}


class NumpyActorCritic:
    """Numpy mirror of a feed-forward, vector-observation ``ActorCritic``."""

    def __init__(self, model: ActorCritic) -> None:
        if not self.supports(model):
            raise ValueError("NumpyActorCritic supports feed-forward actor-critics on vector observations only.")
        self.model = model
        self.is_discrete = model.is_discrete
        self.branches = list(model.branches)
        self.stream_names = list(model.stream_names)
        self.activation = _ACTIVATIONS[model.activation]
        self.refresh()

    @staticmethod
    def supports(model: ActorCritic) -> bool:
        return not model.use_recurrent and model.num_visual == 0 and model.vector_size > 0

    def refresh(self) -> None:
        """Re-read every weight from the Keras model (call after each update)."""
        m = self.model

        def dense(layer: object) -> list[np.ndarray]:
            return [w.numpy().astype(np.float32) for w in layer.weights]  # type: ignore[attr-defined]

        self.norm = None
        if m.normalizer is not None:
            mean, inv_std = m.normalizer.numpy_stats()
            self.norm = (mean, inv_std, np.float32(m.normalizer.clip))
        self.body = [dense(layer) for layer in m.body.vector.dense]
        self.value_body = [dense(layer) for layer in m.value_body.vector.dense] if m.value_body is not None else None
        if self.is_discrete:
            self.logit_kernel = np.concatenate([dense(layer)[0] for layer in m.branch_logits], axis=1)
        else:
            self.mu = dense(m.mu)
            self.log_sigma_sq = m.log_sigma_sq.numpy().astype(np.float32)
            self.sigma = np.exp(np.float32(0.5) * self.log_sigma_sq)
            self.entropy_value = np.float32(0.5) * np.mean(_LOG_2PIE + self.log_sigma_sq, dtype=np.float32)
        heads = [dense(m.value_heads[name]) for name in self.stream_names]
        self.value_kernel = np.concatenate([k for k, _ in heads], axis=1)
        self.value_bias = np.concatenate([b for _, b in heads])

    def _encode(self, x: np.ndarray, layers: list[list[np.ndarray]]) -> np.ndarray:
        for kernel, bias in layers:
            x = self.activation(x @ kernel + bias)
        return x

    def _hidden(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(inputs["vector_obs"], np.float32)
        if self.norm is not None:
            mean, inv_std, clip = self.norm
            x = np.clip((x - mean) * inv_std, -clip, clip)
        hidden = self._encode(x, self.body)
        value_hidden = self._encode(x, self.value_body) if self.value_body is not None else hidden
        return hidden, value_hidden

    def _values(self, value_hidden: np.ndarray, out: dict[str, np.ndarray]) -> None:
        v = value_hidden @ self.value_kernel + self.value_bias
        for i, name in enumerate(self.stream_names):
            out[f"value_{name}"] = v[:, i]

    def values(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        _, value_hidden = self._hidden(inputs)
        out: dict[str, np.ndarray] = {}
        self._values(value_hidden, out)
        return out

    def act(self, inputs: Mapping[str, np.ndarray], noise: np.ndarray) -> dict[str, np.ndarray]:
        """Same outputs as ``ActorCritic.act`` for the same inputs and noise."""
        hidden, value_hidden = self._hidden(inputs)
        out: dict[str, np.ndarray] = {}
        n = hidden.shape[0]
        if self.is_discrete:
            logits = hidden @ self.logit_kernel
            masks = np.asarray(inputs["action_masks"], np.float32)
            actions = np.empty((n, len(self.branches)), np.int32)
            log_probs = np.empty((n, len(self.branches)), np.float32)
            entropy = np.zeros(n, np.float32)
            start = 0
            rows = np.arange(n)
            for k, size in enumerate(self.branches):
                lg = logits[:, start : start + size]
                e = np.exp(lg - lg.max(axis=1, keepdims=True))
                p = e / e.sum(axis=1, keepdims=True)
                raw = (p + np.float32(EPSILON)) * masks[:, start : start + size]
                probs = raw / raw.sum(axis=1, keepdims=True)
                logp = np.log(probs + np.float32(EPSILON))
                cdf = np.cumsum(probs, axis=1)
                threshold = noise[:, k : k + 1] * cdf[:, -1:]
                a = np.minimum((cdf < threshold).sum(axis=1), size - 1)
                actions[:, k] = a
                log_probs[:, k] = logp[rows, a]
                entropy -= (probs * logp).sum(axis=1)
                start += size
            out["action"] = actions
            out["log_probs"] = log_probs
            out["entropy"] = entropy
        else:
            kernel, bias = self.mu
            mu = hidden @ kernel + bias
            pre = mu + self.sigma * noise
            out["action"] = np.clip(pre, -3.0, 3.0) / np.float32(3.0)
            out["pre_action"] = pre
            out["log_probs"] = (
                np.float32(-0.5) * np.square(pre - mu) / np.exp(self.log_sigma_sq)
                - np.float32(0.5) * _LOG_2PI - np.float32(0.5) * self.log_sigma_sq
            ).astype(np.float32)
            out["entropy"] = np.full(n, self.entropy_value, np.float32)
        self._values(value_hidden, out)
        return out
