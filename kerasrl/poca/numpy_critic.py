"""The centralised critic's estimates in numpy, for the trainer's estimates of closed trajectories.

The trainer asks the critic for the group values, the baselines and the bootstrap values of the
trajectories that close together, in one call: a few dozen rows to a few thousand, where a
``tf.function`` call of the critic (some 300 graph ops: normaliser, embeddings, attention, body,
heads) costs milliseconds whatever the rows and the same forward pass in numpy a fraction of that
(figures in ``docs/benchmarks/multi-agent.md``). This mirror computes exactly what
:meth:`kerasrl.poca.networks.POCACritic.estimates` computes (to float32 round-off). It copies the
critic's weights at ``refresh`` (the trainer calls it after each update and each checkpoint
restore) and reads the normaliser's statistics and the member-count scale at each call (they move
between updates). Its products are 2-D (one BLAS call each, on one thread: ``single_threaded_blas``).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import numpy as np

from kerasrl.models.numpy_policy import _ACTIVATIONS, single_threaded_blas
from kerasrl.poca.networks import POCACritic

Estimates = dict[str, np.ndarray]
#: Attention scores (rows × heads × entities²) per call of the forward pass: about 8 MB of float32.
CHUNK_SCORES = 1 << 21
#: Entities (rows × members) per call of the forward pass: past a few hundred rows of a small
#: group, the intermediate arrays leave the processor's caches and each row costs half again as much.
CHUNK_ENTITIES = 768
#: ``(own, mates, actions, mask) -> (values, baselines)``: the mirror's forward pass or the critic's compiled one.
EstimateFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[Mapping[str, Any], Mapping[str, Any]]]


def _matmul(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``x @ kernel`` over the last axis as one 2-D product (numpy's batched 3-D product is far slower)."""
    return (x.reshape(-1, x.shape[-1]) @ kernel).reshape(*x.shape[:-1], kernel.shape[-1])


def _layer_norm(weights: tuple[np.ndarray, ...], x: np.ndarray) -> np.ndarray:
    gamma, beta, epsilon = weights
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    variance = np.square(centred).mean(-1, keepdims=True)
    return centred / np.sqrt(variance + epsilon) * gamma + beta


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def chunked_estimates(estimates: EstimateFn, heads: int, own: np.ndarray, mates: np.ndarray, actions: np.ndarray,
                      mask: np.ndarray) -> tuple[Estimates, Estimates]:
    """``estimates`` of many rows in chunks whose attention scores (rows × ``heads`` × entities²)
    stay near ``CHUNK_SCORES`` and whose entities stay near ``CHUNK_ENTITIES``: the many
    trajectories of a large group that close together would otherwise make arrays of gigabytes,
    slower per row than the chunks (3x on 64 agents), and an update's worth of a small group's
    (threaded: estimated together) arrays that leave the caches."""
    entities = np.shape(mates)[1] + 1
    step = max(1, min(CHUNK_SCORES // (heads * entities ** 2), CHUNK_ENTITIES // entities))
    rows = len(own)
    if rows <= step:
        values, baselines = estimates(own, mates, actions, mask)
        return {k: np.asarray(v) for k, v in values.items()}, {k: np.asarray(b) for k, b in baselines.items()}
    parts = [estimates(own[i:i + step], mates[i:i + step], actions[i:i + step], mask[i:i + step])
             for i in range(0, rows, step)]
    return ({k: np.concatenate([np.asarray(p[0][k]) for p in parts]) for k in parts[0][0]},
            {k: np.concatenate([np.asarray(p[1][k]) for p in parts]) for k in parts[0][1]})


class NumpyCritic:
    """``estimates(own, mates, actions, mask) -> (values, baselines)`` of a :class:`POCACritic` in numpy."""

    def __init__(self, critic: POCACritic, activation: str) -> None:
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got '{activation}'.")
        self.critic = critic
        self.activation = activation
        single_threaded_blas()
        self.weights: dict[str, tuple[np.ndarray, ...]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Copy the critic's weights (after each update or restore)."""
        c = self.critic
        attention = c.self_attention.attention
        units = attention._query_dense.kernel.shape[0]

        def dense(layer: Any, rows: Optional[int] = None) -> tuple[np.ndarray, ...]:
            kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
            return kernel.reshape(rows or kernel.shape[0], -1), bias.reshape(-1)

        def norm(layer: Any) -> tuple[np.ndarray, ...]:
            return layer.gamma.numpy(), layer.beta.numpy(), np.float32(layer.epsilon)

        w = {"obs": dense(c.obs_embedding.dense), "obs_action": dense(c.obs_action_embedding.dense),
             "embedding_norm": norm(c.self_attention.embedding_norm), "residual_norm": norm(c.self_attention.residual_norm),
             "output": dense(attention._output_dense, attention.num_heads * attention.key_dim)}
        for name in ("query", "key", "value"):
            w[name] = dense(getattr(attention, f"_{name}_dense"), units)
        w.update({f"body{i}": dense(layer) for i, layer in enumerate(c.body.dense)})
        w.update({f"head:{name}": dense(head) for name, head in c.value_heads.items()})
        self.weights = w
        #: The member count's scale (``max_entities``, read here rather than at every estimate).
        self.count_scale = max(float(c.max_entities.numpy()), 1.0)

    def _dense(self, name: str, x: np.ndarray, activate: bool = True) -> np.ndarray:
        kernel, bias = self.weights[name]
        y = _matmul(x, kernel) + bias
        return _ACTIVATIONS[self.activation](y) if activate else y

    def _normalized(self, obs: np.ndarray) -> np.ndarray:
        normalizer = self.critic.normalizer
        if normalizer is None:
            return obs
        mean, inv_std = normalizer.numpy_stats()
        return np.clip((obs - mean) * inv_std, -normalizer.clip, normalizer.clip).astype(np.float32)

    def _action_features(self, actions: np.ndarray) -> np.ndarray:
        branches = self.critic.branches
        if not branches:
            return actions.astype(np.float32)
        actions = actions.astype(np.int64)
        return np.concatenate([np.eye(b, dtype=np.float32)[actions[..., k]] for k, b in enumerate(branches)], -1)

    def _attention(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Keras' ``MultiHeadAttention`` of ``x`` on itself, the keys masked by ``mask``."""
        layer = self.critic.self_attention.attention
        rows, entities, _ = x.shape
        heads, size = layer.num_heads, layer.key_dim

        def project(name: str) -> np.ndarray:  # [B, h, E, d]
            return self._dense(name, x, False).reshape(rows, entities, heads, size).transpose(0, 2, 1, 3)

        query = project("query") * np.float32(1.0 / np.sqrt(size))
        key, value = project("key"), project("value")
        scores = np.where(mask[:, None, None, :] > 0, query @ key.transpose(0, 1, 3, 2), np.float32(-1e9))
        attended = (_softmax(scores) @ value).transpose(0, 2, 1, 3).reshape(rows, entities, heads * size)
        return self._dense("output", attended, False)

    def _pooled(self, entities: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """:class:`kerasrl.models.attention.ResidualSelfAttention` in numpy."""
        x = _layer_norm(self.weights["embedding_norm"], entities)
        out = _layer_norm(self.weights["residual_norm"], self._attention(x, mask) + x)
        total = (out * mask[:, :, None]).sum(1)
        return total / (mask.sum(1, keepdims=True) + np.float32(self.critic.self_attention.EPSILON))

    def _heads(self, entities: np.ndarray, mask: np.ndarray) -> Estimates:
        critic = self.critic
        x = self._pooled(entities, mask)
        for i in range(len(critic.body.dense)):
            x = self._dense(f"body{i}", x)
        count = mask.sum(1, keepdims=True) * np.float32(2.0) / self.count_scale - 1.0
        features = np.concatenate([x, count.astype(np.float32)], -1)
        return {name: self._dense(f"head:{name}", features, False)[:, 0] for name in critic.value_heads}

    def estimates(self, own: np.ndarray, mates: np.ndarray, actions: np.ndarray,
                  mask: np.ndarray) -> tuple[Estimates, Estimates]:
        """The group values and the counterfactual baselines of ``own`` ``[B, V]`` with ``mates``
        ``[B, M, V]``, their ``actions`` ``[B, M, ...]`` and ``mask`` ``[B, M]``, one ``[B]`` per head
        (in chunks of rows: ``chunked_estimates``)."""
        heads = self.critic.self_attention.attention.num_heads
        return chunked_estimates(self._estimates, heads, own, mates, actions, mask)

    def _estimates(self, own: np.ndarray, mates: np.ndarray, actions: np.ndarray,
                   mask: np.ndarray) -> tuple[Estimates, Estimates]:
        """``estimates`` of one chunk of rows, in one pass."""
        own = np.asarray(own, np.float32)
        rows, width = mates.shape[:2]
        own_entity = self._dense("obs", self._normalized(own)[:, None, :])
        size = own.shape[-1]
        normalized = self._normalized(np.asarray(mates, np.float32).reshape(rows * width, size))
        normalized = normalized.reshape(rows, width, size)
        values_in = np.concatenate([own_entity, self._dense("obs", normalized)], 1)
        mates_in = np.concatenate([normalized, self._action_features(np.asarray(actions))], -1)
        baselines_in = np.concatenate([own_entity, self._dense("obs_action", mates_in)], 1)
        members = np.concatenate([np.ones((rows, 1), np.float32), np.asarray(mask, np.float32)], 1)
        heads = self._heads(np.concatenate([values_in, baselines_in]), np.concatenate([members, members]))
        return {k: v[:rows] for k, v in heads.items()}, {k: v[rows:] for k, v in heads.items()}
