"""Demonstrations: record any policy in any kerasrl environment, and load the recording.

A demo file is HDF5 (``.demo`` by convention)::

    attrs  kerasrl_demo_version = 1
           behavior_spec        = JSON {"observation_shapes", "action_type", "action_shape"}
           behavior_name        = the behavior that was recorded
    /buffer                     = the experience, written by ``AgentBuffer.save_to_file``

It is written to a temporary file beside ``path`` and renamed into place, so a failed
recording leaves nothing behind and an existing file untouched.

**Contract of the loaded** :class:`~kerasrl.buffer.AgentBuffer` (what BC and GAIL rely on).
Keys are ``Field`` names; rows are transitions, whole episodes one after another in the order
they ended (an agent's unfinished episode at the end of the recording comes last, cut short);
``N`` rows in all, exactly the ``num_steps`` recorded:

* ``Field.VECTOR_OBS`` float32 ``[N, V]`` and ``Field.NEXT_VECTOR_OBS`` float32 ``[N, V]``
  (when the spec has vector observations; concatenated in spec order);
* ``Field.visual_obs(j)`` / ``Field.next_visual_obs(j)`` float32 ``[N, h, w, c]`` per camera;
* ``Field.ACTIONS``: discrete int32 ``[N, n_branches]``; continuous float32 ``[N, action_size]``
  (the action sent to the environment);
* ``Field.ACTION_MASK`` float32 ``[N, Σ branches]`` (discrete only; 1 = allowed);
* ``Field.DONE``, ``Field.TERMINATED``, ``Field.TRUNCATED`` float32 ``[N]`` (``DONE`` is 1.0 on
  an episode's last step, terminated or truncated);
* ``Field.ENVIRONMENT_REWARDS`` float32 ``[N]``; ``Field.MASKS`` float32 ``[N]`` (all 1);
* ``Field.EPISODE_ID`` int64 ``[N]``: the episode a row belongs to, 0, 1, 2, ... in row order
  (recurrent BC cuts its sequences at episode boundaries with it).

A policy is a trained kerasrl ``PPOPolicy`` (anything with ``get_action(step_result)``) or a
callable from a batch of observations to a batch of actions, called once per step for all
agents: it gets the step result's only observation array when the spec has exactly one
observation and it is a vector, else the list of observation arrays (spec order).
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Any, Callable, Optional, Union

import numpy as np

from kerasrl.buffer import AgentBuffer, AgentBufferField, Buffer, BufferException, atomic_h5_file
from kerasrl.envs.base import Environment, StepResult, check_actions
from kerasrl.envs.env_manager import ActionInfo, EnvManager, SimpleEnvManager
from kerasrl.exception import UnityTrainerException, one_line
from kerasrl.fields import Field
from kerasrl.spec import BehaviorSpec, pick_behavior

__all__ = ["DEMO_FORMAT_VERSION", "DemoError", "describe_spec", "load", "load_demo", "record"]

DEMO_FORMAT_VERSION = 1
_VERSION_ATTR = "kerasrl_demo_version"
_SPEC_ATTR = "behavior_spec"
_NAME_ATTR = "behavior_name"
_BUFFER_GROUP = "buffer"

PolicyLike = Union[Callable[[Any], Any], Any]


class DemoError(UnityTrainerException):
    """A demo file is missing, foreign, truncated, or for another behavior spec; the message names it."""


def describe_spec(spec: BehaviorSpec) -> str:
    """A spec on one line: ``observations [(1,)], discrete actions (2,)``."""
    shapes = ", ".join(str(s) for s in spec.observation_shapes)
    return f"observations [{shapes}], {spec.action_type.value} actions {spec.action_shape}"


def _spec_to_json(spec: BehaviorSpec) -> str:
    return json.dumps({"observation_shapes": [list(s) for s in spec.observation_shapes],
                       "action_type": spec.action_type.value, "action_shape": list(spec.action_shape)})


def _spec_from_json(text: str) -> BehaviorSpec:
    raw = json.loads(text)
    return BehaviorSpec(observation_shapes=tuple(tuple(s) for s in raw["observation_shapes"]),
                        action_type=raw["action_type"], action_shape=tuple(raw["action_shape"]))


# -- recording -----------------------------------------------------------------------------
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
        if self.spec.is_discrete:
            action = (self.rng.random((n, self.spec.action_size)) * np.asarray(self.spec.discrete_branches)).astype(np.int32)
        else:
            action = self.rng.uniform(-1.0, 1.0, (n, self.spec.action_size)).astype(np.float32)
        return ActionInfo(action, None, None, {Field.ACTIONS: action})


class _Recorder:
    """Turns one behavior's env steps into whole episodes in an update buffer (rows in episode order)."""

    def __init__(self, spec: BehaviorSpec) -> None:
        from kerasrl.trainers.agent_processor import AgentProcessor

        self.buffer = Buffer()
        self.processor = AgentProcessor(spec, {}, [Field.ACTIONS], self.buffer, defaultdict(list))
        self.processor.store_next_obs = True
        self.episodes = 0
        self.rows = 0

    def add(self, curr: StepResult, nxt: StepResult, action: np.ndarray) -> None:
        lengths = self.processor.agents.columns["trajectory_length"]
        before = float(lengths.sum())
        self.processor.add_experiences(curr, nxt, {Field.ACTIONS: action})
        self.rows += int(round(float(self.processor.agents.columns["trajectory_length"].sum()) - before))
        for agent_id in nxt.agent_ids[nxt.done].tolist():
            self._close(agent_id)

    def _close(self, agent_id: int) -> None:
        agent = self.buffer[agent_id]
        n = len(agent[Field.ACTIONS]) if Field.ACTIONS in agent else 0
        if n:
            agent[Field.EPISODE_ID].set(np.full(n, self.episodes, np.int64))
            self.episodes += 1
            self.buffer.append_update_buffer(agent_id, training_length=1)
        self.processor.trajectory_closed(agent_id)

    def finish(self, num_steps: int) -> AgentBuffer:
        """Close every unfinished episode; the first ``num_steps`` rows."""
        for agent_id in list(self.buffer.keys()):
            self._close(agent_id)
        update = self.buffer.update_buffer
        return _first_rows(update, num_steps)


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
    from kerasrl.envs.gym_adapter import GymnasiumEnv

    return SimpleEnvManager(GymnasiumEnv(env, num_envs=1, seed=seed)), True


def record(env: Any, policy: PolicyLike, num_steps: int, path: Union[str, os.PathLike[str]],
           behavior: Optional[str] = None, seed: Optional[int] = None) -> tuple[BehaviorSpec, AgentBuffer]:
    """Run ``policy`` for ``behavior`` in ``env`` until ``num_steps`` transitions are stored, and
    write them to ``path``.

    ``env``: a kerasrl ``Environment``, an ``EnvManager``, or a Gymnasium id / env (one copy,
    through ``GymnasiumEnv``). Other behaviors of the environment act uniformly at random.
    ``seed`` seeds a Gymnasium env made here and those random actions. Returns what was written.
    """
    if int(num_steps) < 1:
        raise DemoError(f"num_steps must be >= 1, got {num_steps}.")
    path = os.fspath(path)
    manager, owned = _as_manager(env, seed)
    try:
        specs = dict(manager.external_brains)
        name = pick_behavior(specs, behavior, DemoError)
        spec = specs[name]
        acting = policy if hasattr(policy, "get_action") else _CallablePolicy(policy, spec, name)
        for other, other_spec in specs.items():
            manager.set_policy(other, acting if other == name else _RandomPolicy(other_spec, seed))
        buffer = _run(manager, name, spec, int(num_steps))
    finally:
        if owned:
            manager.close()
    write(path, spec, buffer, name)
    return spec, buffer


def _run(manager: EnvManager, name: str, spec: BehaviorSpec, num_steps: int) -> AgentBuffer:
    recorder = _Recorder(spec)
    manager.reset()
    while recorder.rows < num_steps:
        for info in manager.step():
            curr = (info.previous_all_brain_info or {}).get(name)
            nxt = info.current_all_brain_info.get(name)
            action_info = (info.brain_name_to_action_info or {}).get(name)
            if curr is None or nxt is None or action_info is None or len(curr) == 0:
                continue
            recorder.add(curr, nxt, np.asarray(action_info.action))
    return recorder.finish(num_steps)


def write(path: Union[str, os.PathLike[str]], spec: BehaviorSpec, buffer: AgentBuffer, behavior: str = "") -> None:
    """Write ``buffer`` with ``spec`` as a demo file, atomically (temporary file, then rename)."""
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    try:
        with atomic_h5_file(path) as f:
            f.attrs[_VERSION_ATTR] = DEMO_FORMAT_VERSION
            f.attrs[_SPEC_ATTR] = _spec_to_json(spec)
            f.attrs[_NAME_ATTR] = behavior
            buffer.save_to_file(f.create_group(_BUFFER_GROUP))
    except (OSError, BufferException) as e:
        raise DemoError(f"Unable to write the demonstration {path}: {one_line(e)}") from e


# -- loading -------------------------------------------------------------------------------
def _demo_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".demo"))
        if not files:
            raise DemoError(f"The demonstration folder {path} holds no .demo files.")
        return files
    if not os.path.exists(path):
        raise DemoError(f"The demonstration file {path} does not exist.")
    return [path]


def _load_file(path: str) -> tuple[BehaviorSpec, AgentBuffer]:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            version = f.attrs.get(_VERSION_ATTR)
            if version is None or _BUFFER_GROUP not in f or _SPEC_ATTR not in f.attrs:
                raise DemoError(f"{path} is not a kerasrl demonstration file (no {_VERSION_ATTR} and buffer).")
            if int(version) > DEMO_FORMAT_VERSION:
                raise DemoError(f"The demonstration {path} has format version {int(version)}; this kerasrl reads "
                                f"up to {DEMO_FORMAT_VERSION}.")
            spec = _spec_from_json(str(f.attrs[_SPEC_ATTR]))
            buffer = AgentBuffer()
            buffer.load_from_file(f[_BUFFER_GROUP])
    except DemoError:
        raise
    except Exception as e:  # h5py's OSError for a foreign or truncated file, a bad spec, a bad dataset
        raise DemoError(f"The demonstration file {path} could not be read: {one_line(e)}") from e
    _check_contract(path, spec, buffer)
    return spec, buffer


def _check_contract(path: str, spec: BehaviorSpec, buffer: AgentBuffer) -> None:
    """Every field the contract promises is there, with one length, finite."""
    needed = [Field.ACTIONS, Field.DONE, Field.ENVIRONMENT_REWARDS, Field.EPISODE_ID]
    if spec.vector_observation_size:
        needed.append(Field.VECTOR_OBS)
    needed += [Field.visual_obs(j) for j in range(len(spec.visual_observation_shapes))]
    if spec.is_discrete:
        needed.append(Field.ACTION_MASK)
    missing = [k for k in needed if k not in buffer]
    if missing:
        raise DemoError(f"The demonstration file {path} lacks the fields {missing}.")
    if not buffer.check_length(list(buffer.keys())):
        raise DemoError(f"The demonstration file {path} has fields of different lengths.")
    for key in needed:
        arr = buffer[key].array
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise DemoError(f"The demonstration file {path} has NaN or inf in field {key}.")


def load(path: Union[str, os.PathLike[str]]) -> tuple[BehaviorSpec, AgentBuffer]:
    """The behavior spec and experience of a demo file, or of every ``.demo`` file of a folder
    (which must share one spec; episode ids are renumbered to stay distinct)."""
    files = _demo_files(os.fspath(path))
    spec, buffer = _load_file(files[0])
    for other in files[1:]:
        other_spec, more = _load_file(other)
        if other_spec != spec:
            raise DemoError(f"The demonstration {other} is for {describe_spec(other_spec)}, but {files[0]} is for "
                            f"{describe_spec(spec)}.")
        offset = int(buffer[Field.EPISODE_ID].array.max(initial=-1)) + 1
        arrays = {k: np.asarray(v.array) for k, v in more.items()}
        arrays[Field.EPISODE_ID] = arrays[Field.EPISODE_ID] + offset
        buffer.extend_fields({k: arrays[k] for k in buffer.keys()})
    return spec, buffer


def load_demo(path: Union[str, os.PathLike[str]], expected_spec: Optional[BehaviorSpec] = None,
              behavior: str = "") -> tuple[BehaviorSpec, AgentBuffer]:
    """``load(path)``, refusing a demo whose spec is not ``expected_spec`` (the error names both)."""
    spec, buffer = load(path)
    if expected_spec is not None and spec != expected_spec:
        who = f" of behavior {behavior}" if behavior else ""
        raise DemoError(f"The demonstration {os.fspath(path)} is for {describe_spec(spec)}, but the behavior"
                        f"{who} has {describe_spec(expected_spec)}.")
    return spec, buffer
