"""Acting for SAC: the actor's forward pass, one batched call per step for every agent.

With vector observations only the actor is a small MLP, for which a numpy forward pass costs a
fraction of a compiled call; its weights (and the normalizer's statistics) are re-read after
every update. With cameras the forward pass is one compiled TensorFlow call of the actor (the
same code the exported policy runs), which reads the current weights itself. Continuous
actions are ``tanh(μ + σ·noise)`` in [-1, 1] (the environment maps them onto its bounds);
discrete ones are drawn from the masked categorical of every branch (the Cython kernel the
PPO mirror uses). Before ``buffer_init_steps`` the policy acts uniformly at random (allowed
actions only). Noise comes from a seeded numpy generator, so runs are reproducible.

Recurrent (``use_recurrent``): the compiled call takes every agent's memory and gives the next
one; the memories are kept per agent in one table (looked up and stored for the whole batch at
once), zero at an episode's first step, and the memory each step acted with is stored with it.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from kerasrl._kernels import sample_masked_categorical
from kerasrl.arrays import shared_ones
from kerasrl.common.agent_table import AgentTable
from kerasrl.fields import Field
from kerasrl.models.distributions import EPSILON
from kerasrl.sac.networks import LOG_STD_MAX, LOG_STD_MIN, SACNetworks
from kerasrl.spec import ActionInfo, StepResult, concat_vector_observations
from kerasrl.timers import hierarchical_timer


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0), out=x)


def _swish(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x / (np.float32(1.0) + np.exp(-x))


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"relu": _relu, "tanh": _tanh, "swish": _swish}

#: What the policy acts on: the vector observations ``[n, size]``, or with cameras a dict of
#: ``vector_obs`` (when the behavior has some) and ``visual_obs{j}`` ``[n, h, w, c]``.
PolicyInputs = Union[np.ndarray, Mapping[str, np.ndarray]]


def compiled_actor(networks: SACNetworks) -> Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]:
    """The actor's outputs (``[logits]`` or ``[μ, clipped log σ]``; recurrent: then the next memory)
    for a batch of inputs, as numpy, from one compiled call (traced once: every batch dimension is
    left open). A recurrent actor without ``memory`` in the inputs starts from zeros."""
    signature = {k: v for k, v in networks.input_signature().items() if k != Field.ACTION_MASK}

    @tf.function(input_signature=[signature], autograph=False)
    def forward(inputs: dict[str, tf.Tensor]) -> tuple[tf.Tensor, ...]:
        return networks.actor(networks.observations(inputs), inputs.get(Field.MEMORY))

    def call(inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        arrays = {k: np.asarray(inputs[k], np.float32) for k in signature if k in inputs}
        if networks.recurrent and Field.MEMORY not in arrays:
            arrays[Field.MEMORY] = np.zeros((len(next(iter(arrays.values()))), networks.memory_size), np.float32)
        return [o.numpy() for o in forward(arrays)]

    return call


class SACPolicy:
    """Decides every agent's action of one behavior from the actor's numpy mirror."""

    def __init__(self, networks: SACNetworks, seed: int = 0, deterministic: bool = False) -> None:
        self.networks = networks
        self.spec = networks.spec
        self.rng = np.random.default_rng(seed)
        self.deterministic = deterministic
        #: Act uniformly at random (the trainer sets it until ``buffer_init_steps``).
        self.uniform = False
        self.stream_names = list(networks.stream_names)
        self.activation = _ACTIVATIONS[networks.activation]
        self._branches = np.asarray(networks.branches, np.int64)
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        self.heads: list[tuple[np.ndarray, np.ndarray]] = []
        self.stats: Optional[tuple[np.ndarray, np.ndarray]] = None
        #: Seconds spent tracing (numpy acting traces nothing; run reports add it up).
        self.trace_seconds = 0.0
        #: With cameras or memory, the compiled forward pass (else the numpy mirror acts).
        self._compiled = compiled_actor(networks) if networks.num_visual or networks.recurrent else None
        self.recurrent = networks.recurrent
        self._memories = AgentTable(networks.memory_size, np.float32)
        self.refresh()

    def with_model(self, networks: SACNetworks, seed: int = 0) -> "SACPolicy":
        """A policy like this one acting with ``networks`` (of the same architecture; self-play's opponents)."""
        return SACPolicy(networks, seed=seed, deterministic=self.deterministic)

    @property
    def experience_fields(self) -> list[str]:
        """The outputs of ``evaluate`` stored with every step."""
        return [Field.ACTIONS, Field.MEMORY] if self.recurrent else [Field.ACTIONS]

    def refresh(self) -> None:
        """Re-read the actor's weights and the normalizer's statistics (the compiled path reads them itself)."""
        if self._compiled is not None:
            return
        actor = self.networks.actor
        assert actor.body is not None  # the numpy mirror acts on vector observations only
        self.layers = [(d.kernel.numpy(), d.bias.numpy()) for d in actor.body.dense]
        heads = [actor.logits] if actor.is_discrete else [actor.mu, actor.log_std]
        self.heads = [(h.kernel.numpy(), h.bias.numpy()) for h in heads]
        normalizer = self.networks.normalizer
        self.stats = normalizer.numpy_stats() if normalizer is not None else None

    refresh_normalizer = refresh

    def inputs(self, observations: Sequence[np.ndarray]) -> PolicyInputs:
        """What ``actions`` takes, from one array per observation of the spec."""
        spec = self.spec
        vector = concat_vector_observations(spec, observations) if spec.vector_observation_size else None
        if self._compiled is None:
            assert vector is not None  # without cameras a behavior has vector observations
            return vector
        inputs: dict[str, np.ndarray] = {Field.visual_obs(j): observations[i]
                                         for j, i in enumerate(spec.visual_observation_indices)}
        if vector is not None:
            inputs[Field.VECTOR_OBS] = vector
        return inputs

    def forward(self, obs: PolicyInputs) -> list[np.ndarray]:
        """The actor's outputs: ``[logits]`` or ``[μ, clipped log σ]`` (recurrent: then the next memory)."""
        if self._compiled is not None:
            if not isinstance(obs, Mapping):
                raise ValueError("this policy acts on a dict of vector_obs and visual_obs{j} (cameras or memory).")
            return self._compiled(obs)
        x = np.asarray(obs, np.float32)
        if self.stats is not None:
            mean, inv_std = self.stats
            x = np.clip((x - mean) * inv_std, np.float32(-5.0), np.float32(5.0))
        for kernel, bias in self.layers:
            x = self.activation(x @ kernel + bias)
        out = [x @ k + b for k, b in self.heads]
        if len(out) == 2:
            out[1] = np.clip(out[1], LOG_STD_MIN, LOG_STD_MAX)
        return out

    def actions(self, obs: PolicyInputs, action_mask: Optional[np.ndarray],
                heads: Optional[Sequence[np.ndarray]] = None) -> np.ndarray:
        """Every agent's action from ``obs`` (see ``inputs``; ``heads``: the actor's outputs at
        ``obs``, already computed)."""
        n = len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)
        if heads is None and not self.uniform:
            heads = self.forward(obs)
        if self.spec.is_discrete:
            masks = np.ascontiguousarray(action_mask if action_mask is not None else shared_ones(n, sum(self._branches)),
                                         np.float32)
            logits = np.zeros_like(masks) if heads is None or self.uniform else np.ascontiguousarray(heads[0])
            noise = np.maximum(self.rng.random((n, len(self._branches)), dtype=np.float32), np.float32(1e-7))
            if self.deterministic and not self.uniform:
                return self._mode(logits, masks)
            actions = np.empty((n, len(self._branches)), np.int32)
            log_probs = np.empty((n, len(self._branches)), np.float32)
            sample_masked_categorical(logits, masks, noise, self._branches, EPSILON, actions, log_probs,
                                      np.empty(n, np.float32))
            return actions
        if self.uniform or heads is None:
            return self.rng.uniform(-1.0, 1.0, (n, self.spec.action_size)).astype(np.float32)
        mu, log_std = heads[0], heads[1]
        if self.deterministic:
            return np.tanh(mu)
        noise = self.rng.standard_normal(mu.shape, dtype=np.float32)
        return np.tanh(mu + np.exp(log_std) * noise)

    def _mode(self, logits: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """The most probable allowed action of every branch."""
        out, start = [], 0
        for size in self._branches.tolist():
            lg = np.where(masks[:, start : start + size] > 0, logits[:, start : start + size], -np.inf)
            out.append(np.argmax(lg, axis=-1))
            start += size
        return np.stack(out, axis=-1).astype(np.int32)

    def evaluate(self, result: StepResult) -> dict[str, Any]:
        """Every agent's action; the vector observations acted on come back too, for the
        agent processor. The processor stores one value estimate per reward signal: SAC's
        critics are evaluated at update time, so these are zeros."""
        inputs = self.inputs(result.observations)
        with hierarchical_timer("policy.act"):
            if self.recurrent:
                assert isinstance(inputs, dict)  # the compiled path's inputs
                memory = self._recall(result, inputs)
            actions = self.actions(inputs, result.action_mask, memory[:-1] if self.recurrent else None)
        zeros = np.zeros(len(result), np.float32)
        out = {Field.ACTIONS: actions, **{Field.value_estimates(s): zeros for s in self.stream_names}}
        if self.recurrent:
            out[Field.MEMORY], out[Field.MEMORY_OUT] = inputs[Field.MEMORY], memory[-1]
        vector = inputs.get(Field.VECTOR_OBS) if isinstance(inputs, Mapping) else inputs
        if vector is not None:
            out[Field.VECTOR_OBS] = vector
        return out

    def _recall(self, result: StepResult, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Put every agent's memory into ``inputs`` (zeros where an episode ended at this step),
        run the actor (its heads, even while acting uniformly, and the next memory: the memory is
        the actor's at every stored step) and keep each agent's next memory (zeros after a done
        step: the next episode starts from zeros, as PPO's)."""
        ids = np.asarray(result.agent_ids, np.int64)
        inputs[Field.MEMORY] = self._memories.get(ids, result.done)
        outputs = self.forward(inputs)
        memory_out = outputs[-1]
        self._memories.set(ids, np.where(result.done[:, None], np.float32(0), memory_out))
        return outputs

    def get_action(self, result: StepResult) -> ActionInfo:
        if len(result) == 0:
            dtype = np.int32 if self.spec.is_discrete else np.float32
            return ActionInfo(np.zeros((0, self.spec.action_size), dtype), None, None, None)
        out = self.evaluate(result)
        return ActionInfo(action=out[Field.ACTIONS], memory=out.get(Field.MEMORY_OUT), value=None, outputs=out)

    def forget_agents(self) -> None:
        """Drop every agent's memory (an environment reset)."""
        self._memories.clear()
