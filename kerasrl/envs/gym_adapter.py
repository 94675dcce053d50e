"""Gymnasium environments as kerasrl ``Environment``s.

``GymnasiumEnv`` wraps one ``gymnasium.Env`` (one agent, id 0) or a ``gymnasium.vector.VectorEnv``
(``n`` agents, ids ``0..n-1``) as a single behavior.

Episode ends and autoreset. kerasrl reports the step that ends an episode with the agent's
*final* observation and ``terminated`` / ``truncated`` kept apart (the trainer bootstraps a
truncated episode from the value of the final observation), and never stores the transition
that follows a done step. Gymnasium's default NEXT_STEP autoreset fits that directly: the step
after a done returns the reset observation and a meaningless reward, which this adapter reports
as a normal, not-done step with reward 0 — the first observation of the new episode, which the
next action is chosen from. A single (non-vector) env is driven the same way: the call after a
done resets it (ignoring the action) and reports the reset observation with reward 0. With
SAME_STEP autoreset (the returned observation is already the reset one) the final observation
is taken from ``info["final_obs"]``; the following transition is real but, acting on the final
observation, is discarded by the trainer like any transition after a done step. DISABLED
autoreset is not supported.

Spaces. Observations: ``Box`` of 1 dimension → vector observation; 3 dimensions → visual
observation ``(h, w, c)`` (channels last); 2-D ``uint8`` → visual ``(h, w, 1)``; other shapes
are flattened to vectors; ``Discrete`` → one-hot vector; ``Dict`` → one observation per key,
in the space's key order. Everything becomes float32; ``uint8`` images are scaled to [0, 1], the
range kerasrl's visual encoders expect (as ML-Agents cameras give). Actions: ``Discrete(n)`` → discrete ``[n]``;
``MultiDiscrete`` → one discrete branch per entry; ``MultiBinary(n)`` → ``n`` branches of 2;
``Box`` → continuous with ``prod(shape)`` dimensions. kerasrl continuous actions lie in
[−1, 1] (the policy emits ``clip(x, −3, 3) / 3``); they are clipped to [−1, 1] and mapped
affinely onto ``[low, high]`` for dimensions with both bounds finite, passed through otherwise
(and clipped to the one finite bound, if any). A ``Tuple`` or ``Dict`` of one ``Box`` and one
``Discrete`` or ``MultiDiscrete`` → hybrid actions (the Box's dimensions, mapped as above, then
the branches), given back to the env as a tuple or dict in the space's own order.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from kerasrl.envs.base import (
    ActionType,
    BehaviorSpec,
    Environment,
    EnvironmentException,
    StepResult,
    check_actions,
)
from kerasrl.envs.parameters import apply_gymnasium_parameters

__all__ = ["GymnasiumEnv"]

_BOX, _ONE_HOT = 0, 1


class _HybridActions:
    """A ``Tuple`` or ``Dict`` action space of one ``Box`` and one ``Discrete`` or ``MultiDiscrete``:
    kerasrl's hybrid actions (the Box's dimensions, then the branches)."""

    def __init__(self, space: spaces.Tuple | spaces.Dict, name: str) -> None:
        parts = list(space.spaces.items()) if isinstance(space, spaces.Dict) else list(enumerate(space.spaces))
        boxes = [(k, s) for k, s in parts if isinstance(s, spaces.Box)]
        branches = [(k, s) for k, s in parts if isinstance(s, (spaces.Discrete, spaces.MultiDiscrete))]
        if len(parts) != 2 or len(boxes) != 1 or len(branches) != 1:
            raise EnvironmentException(
                f"Gymnasium env '{name}': action space {space} is not supported; a Tuple or Dict action space "
                "must hold one Box and one Discrete or MultiDiscrete (hybrid actions).")
        self.keys = [k for k, _ in parts]
        self.as_dict = isinstance(space, spaces.Dict)
        (self.box_key, box), (self.branch_key, branch) = boxes[0], branches[0]
        low = np.asarray(box.low, np.float64).reshape(-1)
        high = np.asarray(box.high, np.float64).reshape(-1)
        finite = np.isfinite(low) & np.isfinite(high)
        low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)
        self.scale = ((high - low) / 2.0).astype(np.float32)
        self.offset = ((high + low) / 2.0).astype(np.float32)
        self.box_shape, self.box_dtype = tuple(box.shape), box.dtype
        self.single = isinstance(branch, spaces.Discrete)
        nvec = np.asarray(branch.n if self.single else branch.nvec, np.int64)  # type: ignore[union-attr]
        self.branch_shape = tuple(nvec.shape)
        self.start = np.asarray(branch.start, np.int64).reshape(1, -1)
        self.action_shape = (int(low.shape[0]), *(int(n) for n in nvec.reshape(-1)))

    def env_action(self, arr: np.ndarray, batched: bool) -> Any:
        """kerasrl's (checked) hybrid action array as the env's tuple or dict."""
        size = self.action_shape[0]
        box = (np.clip(arr[:, :size], -1.0, 1.0) * self.scale + self.offset).astype(self.box_dtype)
        chosen = arr[:, size:].astype(np.int64) + self.start
        if batched:
            values = {self.box_key: box.reshape((-1, *self.box_shape)),
                      self.branch_key: chosen[:, 0] if self.single else chosen.reshape((-1, *self.branch_shape))}
        else:
            values = {self.box_key: box[0].reshape(self.box_shape),
                      self.branch_key: int(chosen[0, 0]) if self.single else chosen[0].reshape(self.branch_shape)}
        if self.as_dict:
            return {k: values[k] for k in self.keys}
        return tuple(values[k] for k in self.keys)


def _observation_parts(space: spaces.Space, name: str) -> list[tuple[Optional[str], int, tuple[int, ...], Any]]:
    """How to turn each part of an observation into a float32 array: (dict key, kind, kerasrl shape, extra)."""
    if isinstance(space, spaces.Dict):
        parts: list[tuple[Optional[str], int, tuple[int, ...], Any]] = []
        for key, sub in space.spaces.items():
            if isinstance(sub, spaces.Dict):
                raise EnvironmentException(f"Gymnasium env '{name}': nested Dict observation spaces are not supported.")
            (_, kind, shape, extra), = _observation_parts(sub, name)
            parts.append((str(key), kind, shape, extra))
        if not parts:
            raise EnvironmentException(f"Gymnasium env '{name}' has an empty Dict observation space.")
        return parts
    if isinstance(space, spaces.Box):
        shape = tuple(int(d) for d in space.shape)
        out: tuple[int, ...]
        if len(shape) == 3:
            out = shape
        elif len(shape) == 2 and space.dtype == np.uint8:
            out = shape + (1,)
        else:
            out = (int(np.prod(shape, dtype=np.int64)),)
        scale = np.float32(1.0 / 255.0) if len(out) == 3 and space.dtype == np.uint8 else None
        return [(None, _BOX, out, scale)]
    if isinstance(space, spaces.Discrete):
        return [(None, _ONE_HOT, (int(space.n),), int(space.start))]
    raise EnvironmentException(
        f"Gymnasium env '{name}': observation space {space} is not supported (Box, Discrete or Dict of them)."
    )


def _make_env(env_id_or_env: Any, num_envs: int, vectorization_mode: Optional[str],
              make_kwargs: dict[str, Any]) -> tuple[Union[gymnasium.Env, VectorEnv], str]:
    """The Gymnasium env (made from an id, vectorised when ``num_envs > 1``) and its name."""
    if not isinstance(env_id_or_env, str):
        if make_kwargs or vectorization_mode is not None:
            raise EnvironmentException("make_kwargs / vectorization_mode only apply when an env id is given.")
        spec = getattr(env_id_or_env, "spec", None)
        return env_id_or_env, spec.id if spec is not None else type(getattr(env_id_or_env, "unwrapped", env_id_or_env)).__name__
    if num_envs == 1 and vectorization_mode is None:
        return gymnasium.make(env_id_or_env, **make_kwargs), env_id_or_env
    if vectorization_mode is None:
        has_native = gymnasium.spec(env_id_or_env).vector_entry_point is not None
        vectorization_mode = "vector_entry_point" if has_native else "sync"
    return gymnasium.make_vec(env_id_or_env, num_envs=num_envs, vectorization_mode=vectorization_mode,
                              **make_kwargs), env_id_or_env


class GymnasiumEnv(Environment):
    """A gymnasium env or vector env as a one-behavior kerasrl ``Environment`` (see the module doc).

    ``env_id_or_env``: a registered id (built with ``gymnasium.make`` for ``num_envs == 1``, else
    ``gymnasium.make_vec``: the id's native vector implementation when it has one, which is the
    fastest for CartPole, otherwise ``SyncVectorEnv``; ``vectorization_mode`` overrides), an
    ``Env`` or a ``VectorEnv``. ``make_kwargs`` go to ``make``/``make_vec`` (e.g.
    ``max_episode_steps``). ``seed`` seeds the first ``reset`` and the action spaces.
    ``behavior_name`` defaults to the env id. ``last_info`` holds the latest gymnasium info dict.
    """

    validates_results = True  # observations are reshaped to the spec and checked for NaN/inf here

    def __init__(
        self,
        env_id_or_env: Union[str, gymnasium.Env, VectorEnv],
        num_envs: int = 1,
        seed: Optional[int] = None,
        behavior_name: Optional[str] = None,
        vectorization_mode: Optional[str] = None,
        **make_kwargs: Any,
    ) -> None:
        if num_envs < 1:
            raise EnvironmentException(f"num_envs must be at least 1, got {num_envs}.")
        env, name = _make_env(env_id_or_env, num_envs, vectorization_mode, make_kwargs)
        self.env = env
        self.env_name = str(name)
        self.behavior_name = behavior_name or self.env_name
        self.is_vector = isinstance(env, VectorEnv)
        obs_space, act_space = self._read_spaces(num_envs)
        self._label = f"Gymnasium env '{self.env_name}' (behavior '{self.behavior_name}')"

        self._obs_parts = _observation_parts(obs_space, self.env_name)
        self._single_box = (len(self._obs_parts) == 1 and self._obs_parts[0][0] is None
                            and self._obs_parts[0][1] == _BOX and self._obs_parts[0][3] is None)
        self._obs_batch_shapes = [(-1,) + shape for _, _, shape, _ in self._obs_parts]
        self._obs_ndim = len(self._obs_parts[0][2]) + 1 if self.is_vector and self._single_box else -1
        self._one_hot = [np.eye(shape[0], dtype=np.float32) if kind == _ONE_HOT else None
                         for _, kind, shape, _ in self._obs_parts]
        self._spec = BehaviorSpec(
            observation_shapes=tuple(shape for _, _, shape, _ in self._obs_parts),
            action_type=self._setup_actions(act_space),
            action_shape=self._action_shape,
        )
        self._specs = {self.behavior_name: self._spec}
        self._act_arr_shape = (self.num_envs, self._spec.action_size)
        self._next_step_mode = self.autoreset_mode == AutoresetMode.NEXT_STEP
        self._same_step_mode = self.autoreset_mode == AutoresetMode.SAME_STEP

        self.seed = seed
        if seed is not None:
            env.action_space.seed(seed)
            if self.is_vector:
                env.single_action_space.seed(seed)  # type: ignore[union-attr]
        self._seed_pending = seed is not None
        self._agent_ids = np.arange(self.num_envs, dtype=np.int64)
        self._no_flags = np.zeros(self.num_envs, bool)
        self._prev_done = np.zeros(self.num_envs, bool)
        self._any_prev_done = False
        self.last_info: dict[str, Any] = {}

    def _read_spaces(self, num_envs: int) -> tuple[spaces.Space, spaces.Space]:
        """The (single-env) observation and action spaces; sets ``num_envs`` and the autoreset mode."""
        env = self.env
        if not self.is_vector:
            if num_envs != 1:
                raise EnvironmentException(f"num_envs={num_envs} given with a single gymnasium.Env '{self.env_name}'.")
            self.num_envs = 1
            self.autoreset_mode = AutoresetMode.NEXT_STEP
            return env.observation_space, env.action_space
        self.num_envs = int(env.num_envs)  # type: ignore[union-attr]
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode.value if isinstance(mode, AutoresetMode) else mode)
        if self.autoreset_mode == AutoresetMode.DISABLED:
            raise EnvironmentException(
                f"Gymnasium vector env '{self.env_name}' has autoreset disabled; use NEXT_STEP or SAME_STEP."
            )
        return env.single_observation_space, env.single_action_space  # type: ignore[union-attr]

    def _setup_actions(self, space: spaces.Space) -> ActionType:
        """Record how kerasrl actions map to the env's action space; return the kerasrl action type."""
        self._hybrid: Optional[_HybridActions] = None
        if isinstance(space, (spaces.Tuple, spaces.Dict)):
            self._hybrid = _HybridActions(space, self.env_name)
            self._action_shape: tuple[int, ...] = self._hybrid.action_shape
            return ActionType.HYBRID
        self._act_kind: type = next(
            (k for k in (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box) if isinstance(space, k)),
            type(space),
        )
        self._act_discrete = not isinstance(space, spaces.Box)
        self._act_has_start = False
        self._act_start: Any = 0
        if isinstance(space, spaces.Discrete):
            self._action_shape = (int(space.n),)
            self._act_start = np.int64(space.start)
            self._act_has_start = bool(space.start != 0)
            self._act_env_shape: tuple[int, ...] = ()
        elif isinstance(space, spaces.MultiDiscrete):
            nvec = np.asarray(space.nvec)
            self._action_shape = tuple(int(n) for n in nvec.reshape(-1))
            self._act_start = np.asarray(space.start, dtype=np.int64).reshape(1, -1)
            self._act_has_start = bool(np.any(self._act_start != 0))
            self._act_env_shape = tuple(nvec.shape)
        elif isinstance(space, spaces.MultiBinary):
            self._act_env_shape = tuple(int(d) for d in np.atleast_1d(np.asarray(space.n)))
            self._action_shape = (2,) * int(np.prod(self._act_env_shape))
        elif isinstance(space, spaces.Box):
            self._setup_box_actions(space)
        else:
            raise EnvironmentException(
                f"Gymnasium env '{self.env_name}': action space {space} is not supported "
                "(Discrete, MultiDiscrete, MultiBinary, Box, or a Tuple or Dict of a Box and a Discrete or "
                "MultiDiscrete)."
            )
        self._act_dtype = space.dtype if space.dtype is not None else np.int64
        self._act_single_branch = isinstance(space, spaces.Discrete)
        self._act_limits = np.asarray(self._action_shape, np.uint64)
        if self._act_single_branch:
            self._act_limits = self._act_limits[0]
        self._act_env_shape_batched = (self.num_envs,) + self._act_env_shape
        return ActionType.DISCRETE if self._act_discrete else ActionType.CONTINUOUS

    def _setup_box_actions(self, space: spaces.Box) -> None:
        """A Box's actions: kerasrl's [-1, 1] scaled to the finite bounds (half-bounded ones clipped)."""
        low = np.asarray(space.low, np.float64).reshape(-1)
        high = np.asarray(space.high, np.float64).reshape(-1)
        finite = np.isfinite(low) & np.isfinite(high)
        self._action_shape = (int(low.shape[0]),)
        safe_low, safe_high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)
        self._act_scale = ((safe_high - safe_low) / 2.0).astype(np.float32)
        self._act_offset = ((safe_high + safe_low) / 2.0).astype(np.float32)
        self._act_identity = bool(np.all(self._act_scale == 1.0) and np.all(self._act_offset == 0.0))
        half = ~finite & (np.isfinite(low) | np.isfinite(high))
        self._act_bounds = (low.astype(np.float32), high.astype(np.float32)) if half.any() else None
        self._act_env_shape = tuple(space.shape)

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def _env_action(self, actions: Mapping[str, np.ndarray]) -> Any:
        """Validate the kerasrl action array and convert it to what the gymnasium env expects."""
        try:
            raw = actions[self.behavior_name]
        except KeyError:
            raise EnvironmentException(f"No actions for behavior '{self.behavior_name}' (got {sorted(actions)}).") from None
        shape = self._act_arr_shape
        arr = raw if type(raw) is np.ndarray else np.asarray(raw)
        if arr.shape != shape:
            if arr.ndim == 1 and arr.shape[0] == shape[0] * shape[1] and 1 in shape:
                arr = arr.reshape(shape)  # one action per agent, or one agent's action vector
            else:
                raise EnvironmentException(
                    f"Actions for behavior '{self.behavior_name}' have shape {arr.shape}, expected {shape}."
                )
        if self._hybrid is not None:
            checked = check_actions(self._spec, arr, shape[0], self.behavior_name)
            return self._hybrid.env_action(checked, self.is_vector)
        if self._act_discrete:
            a = arr[:, 0] if self._act_single_branch else arr
            a = a.astype(np.int64)  # a fresh copy, so the caller's array is never modified
            if np.count_nonzero(a.view(np.uint64) >= self._act_limits):
                raise EnvironmentException(
                    f"Discrete actions for behavior '{self.behavior_name}' fall outside branch sizes {self._action_shape}."
                )
            if self._act_has_start:
                a += self._act_start
        else:
            if np.count_nonzero(np.isfinite(arr)) != arr.size:
                raise EnvironmentException(f"Continuous actions for behavior '{self.behavior_name}' contain NaN or inf.")
            a = np.minimum(np.maximum(arr, -1.0), 1.0)
            if not self._act_identity:
                a = a * self._act_scale + self._act_offset
            if self._act_bounds is not None:
                a = np.minimum(np.maximum(a, self._act_bounds[0]), self._act_bounds[1])
        if self._act_kind is spaces.Discrete:
            return a if self.is_vector else int(a[0])
        a = a.astype(self._act_dtype, copy=False)
        return a.reshape(self._act_env_shape_batched if self.is_vector else self._act_env_shape)

    def _convert_obs(self, raw: Any) -> list[np.ndarray]:
        """Gymnasium observation (batched or single) → fresh float32 arrays ``[n, *shape]`` (n = 1 if single)."""
        if self._single_box:
            o = np.array(raw, dtype=np.float32)
            return [o if o.ndim == self._obs_ndim else o.reshape(self._obs_batch_shapes[0])]
        out = []
        for (key, kind, _, extra), batch_shape, eye in zip(self._obs_parts, self._obs_batch_shapes, self._one_hot):
            part = raw[key] if key is not None else raw
            if kind == _ONE_HOT:
                out.append(eye[np.asarray(part, np.int64).reshape(-1) - extra])  # type: ignore[index]
            elif extra is not None:
                out.append(np.multiply(part, extra, dtype=np.float32).reshape(batch_shape))
            else:
                out.append(np.array(part, dtype=np.float32).reshape(batch_shape))
        return out

    def _check_finite(self, obs: list[np.ndarray], rewards: np.ndarray) -> None:
        """Raise on NaN/inf in observations or rewards (``count_nonzero(isfinite)``: the cheapest exact test)."""
        for i, o in enumerate(obs):
            if np.count_nonzero(np.isfinite(o)) != o.size:
                raise EnvironmentException(f"{self._label}: observation {i} contains NaN or inf.")
        if np.count_nonzero(np.isfinite(rewards)) != rewards.size:
            raise EnvironmentException(f"{self._label}: reward contains NaN or inf.")

    def _result(self, obs: list[np.ndarray], rewards: np.ndarray, terminated: np.ndarray,
                truncated: np.ndarray) -> dict[str, StepResult]:
        self._check_finite(obs, rewards)
        return {self.behavior_name: StepResult(self._agent_ids, obs, rewards, terminated, truncated)}

    def set_reset_parameters(self, params: Mapping[str, float]) -> None:
        """Apply reset parameters to the Gymnasium env(s) (rule: ``kerasrl.envs.parameters``)."""
        apply_gymnasium_parameters(self.env, params, self._label)

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        """Reset every sub-env; the first reset passes the seed. ``config`` (reset parameters)
        is applied first, by the rule of ``kerasrl.envs.parameters``."""
        if config:
            self.set_reset_parameters(config)
        if self._seed_pending:
            raw, info = self.env.reset(seed=self.seed)
            self._seed_pending = False
        else:
            raw, info = self.env.reset()
        self.last_info = info
        self._prev_done = self._no_flags.copy()
        self._any_prev_done = False
        return self._result(self._convert_obs(raw), np.zeros(self.num_envs, np.float32),
                            self._no_flags.copy(), self._no_flags.copy())

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        env_action = self._env_action(actions)
        if not self.is_vector:
            return self._step_single(env_action)
        raw, rew, term, trunc, info = self.env.step(env_action)
        self.last_info = info
        obs = self._convert_obs(raw)
        rewards = np.array(rew, dtype=np.float32)
        terminated = np.array(term, dtype=bool)
        truncated = np.array(trunc, dtype=bool)
        if self._any_prev_done and self._next_step_mode:
            prev = self._prev_done
            rewards[prev] = 0.0
            terminated[prev] = False
            truncated[prev] = False
        done = terminated | truncated
        any_done = int(np.count_nonzero(done)) > 0
        if any_done and self._same_step_mode:
            self._insert_final_obs(obs, done, info)
        self._prev_done = done
        self._any_prev_done = any_done
        return self._result(obs, rewards, terminated, truncated)

    def _insert_final_obs(self, obs: list[np.ndarray], done: np.ndarray, info: Mapping[str, Any]) -> None:
        """SAME_STEP autoreset: put each done env's final observation (from the info dict) into ``obs``."""
        if "final_obs" not in info:
            raise EnvironmentException(f"{self._label}: SAME_STEP autoreset without info['final_obs'].")
        final = info["final_obs"]
        for i in np.flatnonzero(done):
            for o, c in zip(obs, self._convert_obs(final[i])):
                o[i] = c[0]

    def _step_single(self, env_action: Any) -> dict[str, StepResult]:
        if self._any_prev_done:
            raw, info = self.env.reset()
            self.last_info = info
            self._any_prev_done = False
            return self._result(self._convert_obs(raw),
                                np.zeros(1, np.float32), self._no_flags.copy(), self._no_flags.copy())
        raw, rew, term, trunc, info = self.env.step(env_action)
        self.last_info = info
        self._any_prev_done = bool(term or trunc)
        return self._result(self._convert_obs(raw),
                            np.array([rew], dtype=np.float32), np.array([bool(term)]), np.array([bool(trunc)]))

    def close(self) -> None:
        self.env.close()
