"""Acting: a compiled inference function over the batch of agents, fed with the learner's weights."""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf

from kerasrl.common.agent_table import AgentTable
from kerasrl.common.fast_path import choose_inference, numpy_mirror
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.settings import INFERENCE_MODES
from kerasrl.spec import ActionInfo, BehaviorSpec, StepResult
from kerasrl.timers import hierarchical_timer


class TimedFirstCall:
    """Calls ``fn``; adds the duration of the first call (tracing included) to ``owner.trace_seconds``."""

    def __init__(self, fn: Any, owner: Any) -> None:
        self.fn = fn
        self.owner = owner
        self.first = True

    def __call__(self, *args: Any) -> Any:
        if not self.first:
            return self.fn(*args)
        start = time.perf_counter()
        out = self.fn(*args)
        self.owner.trace_seconds += time.perf_counter() - start
        self.first = False
        return out


class ActorCriticPolicy:
    """Decides actions for every agent of one behavior with one compiled call per step.

    Noise comes from a seeded numpy ``Generator`` (``ActorCritic.draw_noise``), so runs are
    reproducible; ``deterministic`` acts without it (``ActorCritic.select_action``). Recurrent
    memories and previous actions are kept per agent and reset when an agent's episode ends.
    """

    def __init__(self, spec: BehaviorSpec, model: ActorCritic, seed: int = 0, inference: str = "auto",
                 deterministic: bool = False) -> None:
        if inference not in INFERENCE_MODES:
            raise ValueError(f"inference must be one of {list(INFERENCE_MODES)}, got '{inference}'.")
        self.spec = spec
        self.model = model
        inference = choose_inference(inference, model)
        self.inference = inference
        self.numpy_model = numpy_mirror(model)(model) if inference == "numpy" else None
        self.rng = np.random.default_rng(seed)
        self.deterministic = deterministic
        self.use_recurrent = model.use_recurrent
        self.stream_names = list(model.stream_names)
        #: Each reward signal's name and the key of its value estimates in the policy's outputs.
        self._value_keys = [(name, Field.value_estimates(name)) for name in self.stream_names]
        self._memories = AgentTable(model.memory_size, np.float32)
        self._prev_actions = AgentTable(spec.action_size, np.int32)
        self._act_fn = TimedFirstCall(model.act_function(deterministic), self)
        self._value_fn = TimedFirstCall(
            tf.function(lambda inputs: self.model.values(inputs), input_signature=[model.input_signature()]), self
        )
        self.trace_seconds = 0.0

    def with_model(self, model: ActorCritic, seed: int = 0) -> "ActorCriticPolicy":
        """A policy like this one acting with ``model`` (of the same architecture; self-play's opponents)."""
        return ActorCriticPolicy(self.spec, model, seed=seed, inference=self.inference, deterministic=self.deterministic)

    @property
    def experience_fields(self) -> list[str]:
        """The outputs of ``evaluate`` that are stored as experience, per agent and step."""
        fields = [Field.ACTIONS, Field.ACTION_LOG_PROBS]
        if not self.spec.is_discrete:  # continuous and hybrid actions
            fields.append(Field.ACTIONS_PRE)
        if self.use_recurrent:
            fields.append(Field.MEMORY)
            if self.model.uses_prev_action:
                fields.append(Field.PREV_ACTION)
        return fields

    def model_inputs(self, result: StepResult, rows: Optional[np.ndarray] = None,
                     reset_done: bool = True) -> dict[str, np.ndarray]:
        """Model inputs for the agents of ``result`` (optionally only ``rows``), with their
        recurrent memories and previous actions (zeroed where an episode ended, ``reset_done``)."""
        obs = result.observations if rows is None else [o[rows] for o in result.observations]
        masks = result.action_mask if rows is None or result.action_mask is None else result.action_mask[rows]
        if not self.use_recurrent:
            return self.model.acting_inputs(obs, masks)
        ids = np.asarray(result.agent_ids if rows is None else result.agent_ids[rows], np.int64)
        done = None
        if reset_done:
            done = result.done if rows is None else result.done[rows]
        memory = self._memories.get(ids, done)
        prev = self._prev_actions.get(ids, done) if self.model.uses_prev_action else None
        return self.model.acting_inputs(obs, masks, memory, prev)

    def draw_noise(self, n: int) -> np.ndarray:
        """Noise for ``n`` agents from the policy's generator (zeros, drawing nothing, when deterministic)."""
        if self.deterministic:
            return np.zeros((n, self.spec.action_size), np.float32)
        return self.model.draw_noise(self.rng, n)

    def evaluate(self, result: StepResult) -> dict[str, Any]:
        """Run the compiled policy on every agent of ``result``; numpy outputs. The vector
        observations it acted on come back too (``Field.VECTOR_OBS``), so that the agent
        processor stores them without concatenating them again."""
        inputs = self.model_inputs(result)
        noise = self.draw_noise(len(result.agent_ids))
        with hierarchical_timer("policy.act"):
            if self.numpy_model is not None:
                outputs = self.numpy_model.act(inputs, noise, self.deterministic)
            else:
                outputs = {k: v.numpy() for k, v in self._act_fn(inputs, noise).items()}
        if Field.VECTOR_OBS in inputs:
            outputs[Field.VECTOR_OBS] = inputs[Field.VECTOR_OBS]
        if self.use_recurrent:
            outputs[Field.MEMORY] = inputs[Field.MEMORY]
            if self.model.uses_prev_action:
                outputs[Field.PREV_ACTION] = inputs[Field.PREV_ACTION]
            self._remember(result, outputs)
        return outputs

    def _remember(self, result: StepResult, outputs: dict[str, Any]) -> None:
        """Keep each agent's new memory and action for its next step; an agent whose episode
        ended at this step starts the next one from zeros (the action chosen on its final
        observation is never taken), as ML-Agents and RecurrentPPO do: keeping them started
        every episode from one LSTM step on the previous episode's final observation."""
        ids = np.asarray(result.agent_ids, np.int64)
        done = result.done
        ended = done.any()
        memory = outputs[Field.MEMORY_OUT]
        self._memories.set(ids, np.where(done[:, None], np.float32(0), memory) if ended else memory)
        if self.model.uses_prev_action:
            actions = outputs[Field.ACTIONS]
            self._prev_actions.set(ids, np.where(done[:, None], 0, actions).astype(np.int32) if ended else actions)

    def get_action(self, result: StepResult) -> ActionInfo:
        if not len(result.agent_ids):
            return ActionInfo(np.zeros((0, self.spec.action_size), np.int32 if self.spec.is_discrete else np.float32),
                              None, None, None)
        out = self.evaluate(result)
        value = {name: out[key] for name, key in self._value_keys}
        return ActionInfo(out[Field.ACTIONS], out.get(Field.MEMORY_OUT), value, out)

    def get_value_estimates(self, result: StepResult, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Value of every head at ``rows`` of ``result`` (the agents' current memories are used)."""
        inputs = self.model_inputs(result, rows, reset_done=False)
        if self.numpy_model is not None:
            out = self.numpy_model.values(inputs)
            return {name: out[Field.value_estimates(name)] for name in self.stream_names}
        tf_out = self._value_fn(inputs)
        return {name: tf_out[Field.value_estimates(name)].numpy() for name in self.stream_names}

    def refresh(self, weights: Optional[Sequence[np.ndarray]] = None,
                normalizer: Optional[tuple[np.ndarray, np.ndarray, float]] = None) -> None:
        """Pick up the learner's new weights (the numpy mirror re-reads them, or takes
        ``weights``, the model's trainable variables as numpy arrays; TF shares them) and,
        when given, the normalizer's ``(mean, 1/std, clip)`` that goes with them."""
        if self.numpy_model is not None:
            self.numpy_model.refresh(weights)
            if normalizer is not None:
                self.numpy_model.refresh_normalizer(normalizer)

    def refresh_normalizer(self) -> None:
        """Pick up the normalizer's new statistics (TF reads the shared variables already)."""
        if self.numpy_model is not None:
            self.numpy_model.refresh_normalizer()

    def forget_agents(self) -> None:
        """Drop every agent's recurrent memory and previous action (an environment reset)."""
        self._memories.clear()
        self._prev_actions.clear()
