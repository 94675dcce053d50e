"""The actor-critic's forward pass in numpy, for acting with small vector policies.

A ``tf.function`` call has a fixed cost whatever the batch, far above what the same small
MLP costs in numpy (figures in ``benchmarks/README.md``). For policies on vector observations,
feed-forward or recurrent (one LSTM step per decision, memories in and out), the policy acts
through this mirror of the Keras model, whose weights it re-reads after every update. It
computes exactly what ``ActorCritic.act`` / ``ActorCritic.values`` compute (same noise → same
actions, to float32 round-off); visual policies keep the compiled TF path.
"""
from __future__ import annotations

import ctypes
import glob
import logging
import math
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from kerasrl._kernels import sample_masked_categorical
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import EPSILON

logger = logging.getLogger("kerasrl")

#: Environment variables by which a user chooses BLAS threads (then left as they are).
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
#: ``set_num_threads`` of the OpenBLAS builds that numpy wheels bundle (scipy-openblas, plain).
_OPENBLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_blas_limited = False


def single_threaded_blas() -> bool:
    """Run numpy's bundled OpenBLAS on one thread, unless the user chose a thread count.

    The mirror's matrices are tiny: OpenBLAS's thread pool makes their products much slower
    on a busy machine (``benchmarks/README.md``), and the update runs in TensorFlow's own
    threads. Best effort (numpy's wheel layout); returns whether a thread count was set.
    """
    global _blas_limited
    if _blas_limited or any(v in os.environ for v in BLAS_THREAD_VARS):
        return False
    _blas_limited = True
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs", "*openblas*")
    for path in glob.glob(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _OPENBLAS_SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(1)
                logger.debug("numpy's OpenBLAS set to one thread (%s).", os.path.basename(path))
                return True
    return False


_LOG_2PI = np.float32(math.log(2.0 * math.pi))
_LOG_2PIE = np.float32(math.log(2.0 * math.pi * math.e))


def _clip(x: np.ndarray, low: np.float32, high: np.float32) -> np.ndarray:
    """``np.clip`` as two ufunc calls: the same values (NaN stays NaN) without its Python wrapper."""
    return np.minimum(np.maximum(x, low), high)


def _swish(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x / (np.float32(1.0) + np.exp(-x))


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0), out=x)


_ACTIVATIONS = {"swish": _swish, "tanh": _tanh, "relu": _relu}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Keras' sigmoid, as ``0.5·tanh(x/2) + 0.5`` (no overflow, one transcendental)."""
    x *= np.float32(0.5)
    np.tanh(x, out=x)
    x *= np.float32(0.5)
    x += np.float32(0.5)
    return x


def _block_diag(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0] + b.shape[0], a.shape[1] + b.shape[1]), np.float32)
    out[: a.shape[0], : a.shape[1]] = a
    out[a.shape[0] :, a.shape[1] :] = b
    return out


#: Streams at least this wide multiply their own kernels, stacked (one batched matmul), rather
#: than one block-diagonal kernel: half of that kernel is zeros, which for wide layers costs more
#: memory traffic than the second call saves (256 units: 512x512 against 2x256x256).
_STACK_WIDTH = 128


def _stream_pair(p: Sequence[np.ndarray], v: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The policy (``p``) and value (``v``) streams' layer as one: a block-diagonal ``[2i, 2o]``
    kernel, or for wide layers both kernels stacked ``[2, i, o]`` with biases ``[2, 1, o]``."""
    if p[0].shape == v[0].shape and p[0].shape[1] >= _STACK_WIDTH:
        return np.stack([p[0], v[0]]), np.stack([p[1], v[1]])[:, None, :]
    return _block_diag(p[0], v[0]), np.concatenate([p[1], v[1]])


class NumpyActorCritic:
    """Numpy mirror of a vector-observation ``ActorCritic`` (feed-forward or LSTM)."""

    def __init__(self, model: ActorCritic) -> None:
        if not self.supports(model):
            raise ValueError("NumpyActorCritic supports actor-critics on vector observations only.")
        self.model = model
        self.is_discrete = model.is_discrete
        self.continuous_size = model.continuous_size
        self.branches = list(model.branches)
        self._branch_sizes = np.asarray(self.branches, np.int64)
        self.stream_names = list(model.stream_names)
        self.use_recurrent = model.use_recurrent
        #: ``critic_memory: false``: the value stream has no LSTM, the memory is the policy's alone.
        self.memoryless_critic = model.use_recurrent and not model.critic_memory
        self.activation = _ACTIVATIONS[model.activation]
        self._variables: Optional[list[Any]] = None
        single_threaded_blas()
        self.refresh()

    @staticmethod
    def supports(model: ActorCritic) -> bool:
        return model.num_visual == 0 and model.vector_size > 0

    def _fuse(self, body: list[Sequence[np.ndarray]], value_body: Optional[list[Sequence[np.ndarray]]],
              action: tuple[np.ndarray, np.ndarray], value: tuple[np.ndarray, np.ndarray]) -> None:
        """``self.layers`` and ``self.head``: the policy and value streams as one stack of layers
        (side by side where they share their input, block-diagonal after)."""
        if value_body is None:
            self.layers = body
            self.head = (np.concatenate([action[0], value[0]], axis=1), np.concatenate([action[1], value[1]]))
            return
        # The streams share their input (the observations), unless the LSTM comes first:
        # then the first layer's inputs are the streams' LSTM outputs side by side (a memoryless
        # critic's: the policy's LSTM output, then the observations).
        first = 0 if self.lstm_first else 1
        layers: list[Sequence[np.ndarray]] = [] if first == 0 else [
            (np.concatenate([body[0][0], value_body[0][0]], axis=1), np.concatenate([body[0][1], value_body[0][1]]))]
        layers += [_stream_pair(p, v) for p, v in zip(body[first:], value_body[first:])]
        self.layers = layers
        self.head = (_block_diag(action[0], value[0]), np.concatenate([action[1], value[1]]))

    def refresh_normalizer(self, stats: Optional[tuple[np.ndarray, np.ndarray, float]] = None) -> None:
        """Re-read the observation normalizer's statistics (after it saw new observations), or
        take ``stats``, its ``(mean, 1/std, clip)`` as read before (a snapshot of another thread's)."""
        normalizer = self.model.normalizer
        self.norm = None
        if stats is not None:
            self.norm = (stats[0], stats[1], np.float32(stats[2]))
        elif normalizer is not None:
            mean, inv_std = normalizer.numpy_stats()
            self.norm = (mean, inv_std, np.float32(normalizer.clip))

    def refresh(self, values: Optional[Sequence[np.ndarray]] = None) -> None:
        """Re-read every weight from the Keras model (call after each update).

        ``values``: the model's ``trainable_variables`` as numpy arrays, when the caller already
        has them (the fused PPO update returns them), which saves a read. Policy and value
        streams are fused into one stack of layers (block-diagonal kernels, or both kernels
        stacked when wide), so that both networks cost one matmul per layer (numpy's per-call
        overhead dominates here).
        """
        m = self.model
        values = self._trainable_values(values)

        def dense(layer: object) -> list[np.ndarray]:
            return [values[self._index[id(w)]].astype(np.float32, copy=False)
                    for w in layer.weights]  # type: ignore[attr-defined]

        self.refresh_normalizer()
        self.lstm_first = m.lstm_first
        vector = m.body.vector
        assert vector is not None  # supports(): vector observations
        body: list[Sequence[np.ndarray]] = [dense(layer) for layer in vector.dense]
        heads = [dense(m.value_heads[name]) for name in self.stream_names]
        value_kernel = np.concatenate([k for k, _ in heads], axis=1)
        value_bias = np.concatenate([b for _, b in heads])
        action_kernel, action_bias = self._action_head(dense, values)
        self.n_actions = action_kernel.shape[1]
        value_body: Optional[list[Sequence[np.ndarray]]] = None
        if m.value_body is not None:
            value_vector = m.value_body.vector
            assert value_vector is not None  # the value stream encodes the same observations
            value_body = [dense(layer) for layer in value_vector.dense]
            if m.value_body.projection is not None:  # linear, so folded into the first hidden layer
                (p_kernel, p_bias), (kernel, bias) = dense(m.value_body.projection), value_body[0]
                value_body[0] = (p_kernel @ kernel, p_bias @ kernel + bias)
        self._fuse(body, value_body, (action_kernel, action_bias), (value_kernel, value_bias))
        #: The policy stream's width after its hidden layers (where a memoryless critic's columns start).
        self._policy_width = body[-1][0].shape[1]
        if self.use_recurrent:
            streams = [m.body] if m.value_body is None or self.memoryless_critic else [m.body, m.value_body]
            cells = [dense(s.lstm) for s in streams]
            if self.lstm_first:
                self._refresh_lstm(cells, m.vector_size, shared_input=True)
            else:
                self._refresh_lstm(cells, body[-1][0].shape[1])

    def _trainable_values(self, values: Optional[Sequence[np.ndarray]]) -> Sequence[np.ndarray]:
        """The model's trainable variables as numpy (``values`` checked against them when given)."""
        if self._variables is None:
            # The variable list is fixed once the model is built: walk the layers once, not every call.
            self._variables = list(self.model.trainable_variables)
            self._index = {id(v): i for i, v in enumerate(self._variables)}
        variables = self._variables
        if values is None:
            return [np.asarray(v.numpy()) for v in variables]
        if len(values) != len(variables) or any(tuple(a.shape) != tuple(v.shape) for a, v in zip(values, variables)):
            raise ValueError("refresh(values): values must match the model's trainable_variables in number and shapes.")
        return values

    def _action_head(self, dense: Any, values: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """One kernel and bias for every action output: μ first, then the branches' logits
        (hybrid actions have both)."""
        m = self.model
        kernels, biases = [], []
        if self.continuous_size:
            mu_kernel, mu_bias = dense(m.mu)
            kernels.append(mu_kernel)
            biases.append(mu_bias)
            self._refresh_gaussian(values)
        if self.branches:
            for layer, size in zip(m.branch_logits, self.branches):
                weights = dense(layer)  # [kernel] or, with action_bias, [kernel, bias]
                kernels.append(weights[0])
                biases.append(weights[1] if len(weights) > 1 else np.zeros(size, np.float32))
        return np.concatenate(kernels, axis=1), np.concatenate(biases)

    def _refresh_lstm(self, cells: list[list[np.ndarray]], hidden: int, shared_input: bool = False) -> None:
        """The LSTM step of every stream as one: ``z = [x, extra, h] @ [W; U] + b`` with the
        gate columns grouped across streams (``i``, ``f``, ``c̃``, ``o``, each ``[streams × units]``),
        so that each gate is one slice of ``z`` for every stream at once.

        ``x`` holds the streams' encodings side by side (``hidden`` columns each) and
        ``extra`` the previous actions' one-hots, which every stream takes after its encoding;
        with ``shared_input`` every stream reads the same ``hidden`` columns of ``x`` (the
        observations, when the LSTM comes first).
        """
        units = cells[0][1].shape[0]
        k = len(cells)
        extra = cells[0][0].shape[0] - hidden
        width = hidden if shared_input else k * hidden
        kernel = np.zeros((width + extra, 4 * k * units), np.float32)
        recurrent = np.zeros((k * units, 4 * k * units), np.float32)
        bias = np.zeros(4 * k * units, np.float32)
        for s, (w, u, b) in enumerate(cells):
            rows = slice(0, hidden) if shared_input else slice(s * hidden, (s + 1) * hidden)
            for g in range(4):  # Keras' gate order: input, forget, cell, output
                cols = slice((g * k + s) * units, (g * k + s + 1) * units)
                gate = slice(g * units, (g + 1) * units)
                kernel[rows, cols] = w[:hidden, gate]
                kernel[width:, cols] = w[hidden:, gate]
                recurrent[s * units : (s + 1) * units, cols] = u[:, gate]
                bias[cols] = b[gate]
        self.lstm = (np.concatenate([kernel, recurrent]), bias)
        self.lstm_units = units
        self.lstm_streams = k

    def _lstm_step(self, parts: list[np.ndarray], memory: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One LSTM step of every stream on the inputs ``parts`` (encodings, previous actions):
        the streams' outputs side by side, and the new memory (``[c, h]`` per stream, as
        ``ActorCritic``)."""
        kernel, bias = self.lstm
        n, u, k = parts[0].shape[0], self.lstm_units, self.lstm_streams
        mem = np.asarray(memory, np.float32).reshape(n, k, 2, u)
        c, h = mem[:, :, 0].reshape(n, k * u), mem[:, :, 1].reshape(n, k * u)
        z = np.concatenate([*parts, h], axis=1) @ kernel
        z += bias
        ku = k * u
        _sigmoid(z[:, : 2 * ku])
        _sigmoid(z[:, 3 * ku :])
        np.tanh(z[:, 2 * ku : 3 * ku], out=z[:, 2 * ku : 3 * ku])
        c_new = z[:, ku : 2 * ku] * c
        c_new += z[:, :ku] * z[:, 2 * ku : 3 * ku]
        h_new = np.tanh(c_new) * z[:, 3 * ku :]
        memory_out = np.stack([c_new.reshape(n, k, u), h_new.reshape(n, k, u)], axis=2).reshape(n, 2 * ku)
        return h_new, memory_out

    def _extra(self, inputs: Mapping[str, np.ndarray]) -> Optional[np.ndarray]:
        """The one-hot previous actions that a recurrent discrete policy takes."""
        if not self.model.uses_prev_action:
            return None
        prev = np.asarray(inputs[Field.PREV_ACTION], np.int64)
        out = np.zeros((prev.shape[0], int(self._branch_sizes.sum())), np.float32)
        offsets = np.concatenate([[0], np.cumsum(self._branch_sizes[:-1])])
        np.put_along_axis(out, prev + offsets, np.float32(1.0), axis=1)
        return out

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
        # log N(pre; μ, σ²) = -(pre - μ)²/(2σ²) - log(2π)/2 - log(σ²)/2, with the constants folded
        self._neg_half_inv_var = np.float32(-0.5) * self.inv_var
        self._log_prob_shift = np.float32(-0.5) * _LOG_2PI - np.float32(0.5) * self.log_sigma_sq

    def _observations(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The (normalised) vector observations."""
        x = np.asarray(inputs[Field.VECTOR_OBS], np.float32)
        if self.norm is not None:
            mean, inv_std, clip = self.norm
            x = x - mean
            x *= inv_std
            x = _clip(x, -clip, clip)
        return x

    def _hidden(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The streams' encodings of the (normalised) vector observations, side by side."""
        return self._layers(self._observations(inputs))

    def _layers(self, x: np.ndarray) -> np.ndarray:
        """The hidden layers of every stream (fused) on ``x``: ``[n, width of all streams]``."""
        n = x.shape[0]
        for kernel, bias in self.layers:
            if kernel.ndim == 3 and x.ndim == 2:  # the streams side by side -> [2, n, width]
                x = x.reshape(n, 2, -1).swapaxes(0, 1)
            elif kernel.ndim == 2 and x.ndim == 3:
                x = x.swapaxes(0, 1).reshape(n, -1)
            x = x @ kernel  # a fresh array: the activations below may work in place
            x += bias
            x = self.activation(x)
        return x.swapaxes(0, 1).reshape(n, -1) if x.ndim == 3 else x

    def _heads(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = x @ self.head[0]
        out += self.head[1]
        return out[:, : self.n_actions], out[:, self.n_actions :]

    def _forward(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Action outputs (logits or μ) and value heads of a feed-forward policy."""
        return self._heads(self._hidden(inputs))

    def _step(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        """Action outputs, value heads and (recurrent) the new memory."""
        if not self.use_recurrent:
            return (*self._forward(inputs), None)
        if self.lstm_first:
            obs = self._observations(inputs)
            h, memory_out = self._lstm_step([obs], inputs[Field.MEMORY])
            x = np.concatenate([h, obs], axis=1) if self.memoryless_critic else h
            return (*self._heads(self._layers(x)), memory_out)
        extra = self._extra(inputs)
        x = self._hidden(inputs)
        if self.memoryless_critic:  # the LSTM on the policy's columns; the value's go straight to its heads
            width = self._policy_width
            h, memory_out = self._lstm_step([x[:, :width]] + ([] if extra is None else [extra]), inputs[Field.MEMORY])
            return (*self._heads(np.concatenate([h, x[:, width:]], axis=1)), memory_out)
        h, memory_out = self._lstm_step([x] if extra is None else [x, extra], inputs[Field.MEMORY])
        return (*self._heads(h), memory_out)

    def _values(self, v: np.ndarray, memory_out: Optional[np.ndarray], out: dict[str, np.ndarray]) -> None:
        for i, name in enumerate(self.stream_names):
            out[Field.value_estimates(name)] = v[:, i]
        if memory_out is not None:
            out[Field.MEMORY_OUT] = memory_out

    def values(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Same outputs as ``ActorCritic.values``."""
        _, v, memory_out = self._step(inputs)
        out: dict[str, np.ndarray] = {}
        self._values(v, memory_out, out)
        return out

    def act(self, inputs: Mapping[str, np.ndarray], noise: np.ndarray,
            deterministic: bool = False) -> dict[str, np.ndarray]:
        """Same outputs as ``ActorCritic.act`` for the same inputs, noise and ``deterministic``."""
        action_out, v, memory_out = self._step(inputs)
        size = self.continuous_size
        if self.is_discrete:
            out = self._categorical(action_out, inputs, noise, deterministic)
        elif not self.branches:
            out = self._gaussian(action_out, noise, deterministic)
        else:
            out = self._hybrid(self._gaussian(action_out[:, :size], noise[:, :size], deterministic),
                               self._categorical(action_out[:, size:], inputs, noise[:, size:], deterministic))
        self._values(v, memory_out, out)
        return out

    def _categorical(self, logits: np.ndarray, inputs: Mapping[str, np.ndarray], noise: np.ndarray,
                     deterministic: bool) -> dict[str, np.ndarray]:
        mask = inputs[Field.ACTION_MASK]
        if deterministic:
            return self._categorical_mode(logits, np.asarray(mask, np.float32))
        return self._categorical_sample(np.ascontiguousarray(logits), mask, noise)

    @staticmethod
    def _hybrid(gaussian: dict[str, np.ndarray], categorical: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Hybrid actions' outputs (``ActorCritic.act``'s): continuous columns, then the branches."""
        chosen = categorical[Field.ACTIONS].astype(np.float32)
        return {Field.ACTIONS: np.concatenate([gaussian[Field.ACTIONS], chosen], axis=1),
                Field.ACTIONS_PRE: np.concatenate([gaussian[Field.ACTIONS_PRE], chosen], axis=1),
                Field.ACTION_LOG_PROBS: np.concatenate([gaussian[Field.ACTION_LOG_PROBS],
                                                        categorical[Field.ACTION_LOG_PROBS]], axis=1),
                Field.ENTROPY: gaussian[Field.ENTROPY] + categorical[Field.ENTROPY]}

    def _categorical_sample(self, logits: np.ndarray, mask: np.ndarray, noise: np.ndarray) -> dict[str, np.ndarray]:
        """``MaskedMultiCategorical.sample`` with its log-probs and entropy, in one kernel call."""
        n, nb = logits.shape[0], len(self.branches)
        actions = np.empty((n, nb), np.int32)
        log_probs = np.empty((n, nb), np.float32)
        entropy = np.empty(n, np.float32)
        sample_masked_categorical(
            np.ascontiguousarray(logits), np.ascontiguousarray(mask, np.float32),
            np.ascontiguousarray(noise, np.float32), self._branch_sizes, np.float32(EPSILON),
            actions, log_probs, entropy,
        )
        return {Field.ACTIONS: actions, Field.ACTION_LOG_PROBS: log_probs, Field.ENTROPY: entropy}

    def _categorical_mode(self, logits: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """``MaskedMultiCategorical.mode`` (per branch the most probable allowed action), its
        log-probs and the entropy, with ``MaskedMultiCategorical``'s arithmetic."""
        rows = np.arange(logits.shape[0])
        actions, log_probs, entropy = [], [], np.float32(0.0)
        for start, size in zip(np.cumsum([0, *self.branches[:-1]]), self.branches):
            z = logits[:, start : start + size]
            p = np.exp(z - z.max(axis=1, keepdims=True))
            raw = (p / p.sum(axis=1, keepdims=True) + np.float32(EPSILON)) * mask[:, start : start + size]
            probs = raw / raw.sum(axis=1, keepdims=True)
            log_p = np.log(probs + np.float32(EPSILON))
            best = probs.argmax(axis=1)
            actions.append(best)
            log_probs.append(log_p[rows, best])
            entropy = entropy - (probs * log_p).sum(axis=1)
        return {Field.ACTIONS: np.stack(actions, axis=1).astype(np.int32),
                Field.ACTION_LOG_PROBS: np.stack(log_probs, axis=1).astype(np.float32),
                Field.ENTROPY: np.asarray(entropy, np.float32)}

    def _gaussian(self, mu: np.ndarray, noise: np.ndarray, deterministic: bool) -> dict[str, np.ndarray]:
        """``ClippedGaussian``'s action (``μ + σ·noise``, or ``μ`` when deterministic), its log-densities and entropy."""
        pre = mu.copy() if deterministic else mu + self.sigma * noise
        log_probs = np.subtract(pre, mu, dtype=np.float32)
        log_probs *= log_probs
        log_probs *= self._neg_half_inv_var
        log_probs += self._log_prob_shift
        scale = self.action_scale
        actions = _clip(pre, -scale, scale)
        if scale != 1:
            actions /= scale
        return {Field.ACTIONS: actions, Field.ACTIONS_PRE: pre, Field.ACTION_LOG_PROBS: log_probs,
                Field.ENTROPY: np.full(mu.shape[0], self.entropy_value, np.float32)}
