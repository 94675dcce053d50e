"""Record any policy in any kerasrl environment as a demonstration file (``kerasrl.demos``):
ML-Agents' demonstration format for a ``.demo`` path (Unity's tools and ``mlagents`` read it),
kerasrl's HDF5 file for any other (``.h5``), unless ``format`` says which.

A policy is a trained kerasrl ``ActorCriticPolicy`` (anything with ``get_action(step_result)``) or a
callable from a batch of observations to a batch of actions, called once per step for all
agents: it gets the step result's only observation array when the spec has exactly one
observation and it is a vector, else the list of observation arrays (spec order).
"""
from __future__ import annotations

import os
from collections import defaultdict
from typing import Any, Callable, Optional, Union

import numpy as np

from kerasrl.buffer import AgentBuffer, AgentBufferField, Buffer
from kerasrl.demos import FORMATS, DemoError, format_for_path, write
from kerasrl.envs.base import Environment, StepResult, check_actions
from kerasrl.envs.env_manager import ActionInfo, EnvManager, SimpleEnvManager
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.fields import Field
from kerasrl.spec import BehaviorSpec, pick_behavior
from kerasrl.trainers.agent_processor import AgentProcessor
from kerasrl.trainers.trajectory import TrajectoryQueue, append_episode

__all__ = ["record"]

PolicyLike = Union[Callable[[Any], Any], Any]


class _CallablePolicy:
    """A callable on observation batches as an env-manager policy (``get_action``)."""

    def __init__(self, fn: Callable[[Any], Any], spec: BehaviorSpec, behavior: str) -> None:
        self.fn = fn
        self.spec = spec
        self.behavior = behavior
        self.single_vector = len(spec.observation_shapes) == 1 and len(spec.observation_shapes[0]) == 1

    def get_action(self, result: StepResult) -> ActionInfo:
        obs = result.observations[0] if self.single_vector else list(result.observations)
        action = check_actions(self.spec, self.fn(obs), len(result), self.behavior)
        return ActionInfo(action, None, None, {Field.ACTIONS: action})


class _RandomPolicy:
    """Uniform random actions for the behaviors that are not recorded."""

    def __init__(self, spec: BehaviorSpec, seed: Optional[int]) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(seed)

    def get_action(self, result: StepResult) -> ActionInfo:
        n = len(result)
        spec = self.spec
        chosen = np.floor(self.rng.random((n, len(spec.discrete_branches))) * np.asarray(spec.discrete_branches))
        if spec.is_discrete:
            action = chosen.astype(np.int32)
        else:  # continuous, then (hybrid) the branch indices as floats
            action = np.concatenate([self.rng.uniform(-1.0, 1.0, (n, spec.continuous_size)), chosen],
                                    axis=1).astype(np.float32)
        return ActionInfo(action, None, None, {Field.ACTIONS: action})


class _Recorder:
    """Turns one behavior's env steps into whole episodes in an update buffer (rows in episode order)."""

    def __init__(self, spec: BehaviorSpec) -> None:
        self.buffer = Buffer()
        self.queue = TrajectoryQueue()
        self.processor = AgentProcessor(spec, {}, [Field.ACTIONS], defaultdict(list), self.queue)
        self.processor.store_next_obs = True
        self.episodes = 0

    @property
    def rows(self) -> int:
        return self.processor.transitions

    def add(self, curr: StepResult, nxt: StepResult, action: np.ndarray) -> None:
        self.processor.add_step(curr, nxt, {Field.ACTIONS: action})
        self._take()

    def _take(self) -> None:
        """Number the closed episodes and append them to the update buffer."""
        for trajectory in self.queue.take_all():
            if append_episode(self.buffer, trajectory, self.episodes):
                self.episodes += 1

    def finish(self, num_steps: int) -> AgentBuffer:
        """Close every unfinished episode; the first ``num_steps`` rows."""
        self.processor.close_all()
        self._take()
        return _first_rows(self.buffer.update_buffer, num_steps)


def _first_rows(buffer: AgentBuffer, n: int) -> AgentBuffer:
    out = AgentBuffer()
    for key, field in buffer.items():
        out[key] = AgentBufferField.from_array(np.ascontiguousarray(field.array[:n]), padding_value=field.padding_value)
    return out


def _as_manager(env: Any, seed: Optional[int]) -> tuple[EnvManager, bool]:
    """``env`` as an env manager, and whether we made it (and so close it)."""
    if isinstance(env, EnvManager):
        return env, False
    if isinstance(env, Environment):
        return SimpleEnvManager(env), False
    return SimpleEnvManager(GymnasiumEnv(env, num_envs=1, seed=seed)), True


def record(env: Any, policy: PolicyLike, num_steps: int, path: Union[str, os.PathLike[str]],
           behavior: Optional[str] = None, seed: Optional[int] = None,
           format: Optional[str] = None) -> tuple[BehaviorSpec, AgentBuffer]:
    """Run ``policy`` for ``behavior`` in ``env`` until ``num_steps`` transitions are stored, and
    write them to ``path``.

    ``env``: a kerasrl ``Environment``, an ``EnvManager``, or a Gymnasium id / env (one copy,
    through ``GymnasiumEnv``). Other behaviors of the environment act uniformly at random.
    ``seed`` seeds a Gymnasium env made here and those random actions. ``format``: ``"unity"``
    (ML-Agents' demonstration format) or ``"hdf5"`` (kerasrl's); by default ``"unity"`` for a
    ``.demo`` path and ``"hdf5"`` for any other. Returns what was written.
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
        raise DemoError(f"num_steps must be an integer >= 1, got {num_steps!r}.")
    if format is not None and format not in FORMATS:
        raise DemoError(f"Unknown demonstration format {format!r}; the formats are {list(FORMATS)}.")
    path = os.fspath(path)
    manager, owned = _as_manager(env, seed)
    try:
        specs = dict(manager.behavior_specs)
        name = pick_behavior(specs, behavior, DemoError)
        spec = specs[name]
        acting = policy if hasattr(policy, "get_action") else _CallablePolicy(policy, spec, name)
        for other, other_spec in specs.items():
            manager.set_policy(other, acting if other == name else _RandomPolicy(other_spec, seed))
        buffer = _run(manager, name, spec, int(num_steps))
    finally:
        if owned:
            manager.close()
    write(path, spec, buffer, name, format=format or format_for_path(path))
    return spec, buffer


def _run(manager: EnvManager, name: str, spec: BehaviorSpec, num_steps: int) -> AgentBuffer:
    recorder = _Recorder(spec)
    manager.reset()
    while recorder.rows < num_steps:
        for info in manager.step():
            curr = (info.previous or {}).get(name)
            nxt = info.current.get(name)
            action_info = (info.action_infos or {}).get(name)
            if curr is None or nxt is None or action_info is None or len(curr) == 0:
                continue
            recorder.add(curr, nxt, np.asarray(action_info.action))
    return recorder.finish(num_steps)
