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

Sampled parameters (a config's ``environment_parameters`` samplers; ``kerasrl.envs.parameters``)
are drawn for each copy at every reset and again whenever that copy's episode ends, before its
next episode starts (with SAME_STEP autoreset the copy has already reset, so its new values
apply from the new episode's first step on). A native vector env's copies (CartPole's) share
one set of parameters: there the values are drawn anew at each episode end of copy 0, for all
copies (a one-time warning says so).
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Optional, Union

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from kerasrl.envs.base import BehaviorSpec, Environment, EnvironmentException, StepResult
from kerasrl.envs.parameters import (
    EpisodeDraws,
    check_gymnasium_parameters,
    is_sampled,
    parameter_targets,
    set_parameters,
)
from kerasrl.envs.spaces import SpaceCodec

__all__ = ["GymnasiumEnv"]

logger = logging.getLogger("kerasrl")

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

        self._codec = SpaceCodec(obs_space, act_space, f"Gymnasium env '{self.env_name}'", self.behavior_name)
        codec = self._codec
        self._obs_ndim = len(codec.obs_parts[0][2]) + 1 if self.is_vector and codec.single_box else -1
        self._spec = codec.spec
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
        self._draws = EpisodeDraws(self.num_envs, seed)
        self._drawing = False  # whether a parameter is a sampler, drawn per episode
        self._told_shared = False

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
        return self._codec.env_actions(arr, self.is_vector)

    def _convert_obs(self, raw: Any) -> list[np.ndarray]:
        """Gymnasium observation (batched or single) → fresh float32 arrays ``[n, *shape]`` (n = 1 if single)."""
        return self._codec.observations(raw, self._obs_ndim)

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
        """Apply reset parameters to the Gymnasium env(s) (rule: ``kerasrl.envs.parameters``); a
        sampled one is drawn for each copy now and again for each of its episodes."""
        check_gymnasium_parameters(self.env, list(params), self._label)
        self._draws.configure(params)
        self._drawing = self._draws.active
        values = {name: value for name, value in params.items() if not is_sampled(value)}
        for target in parameter_targets(self.env) if values else ():
            set_parameters(target, values)
        shared = len(parameter_targets(self.env)) != self.num_envs
        if self._drawing and shared and not self._told_shared:
            self._told_shared = True
            logger.warning("%s: its copies share their parameters, so a sampled parameter is drawn anew at each "
                           "episode end of copy 0, for all copies.", self._label)
        self._draw_all()

    def _draw_all(self) -> None:
        """Fresh values of the sampled parameters for every copy (all of them start an episode)."""
        if not self._drawing:
            return
        targets = parameter_targets(self.env)
        for copy, target in enumerate(targets):
            set_parameters(target, self._draws.draw(copy))

    def _draw_for_ended(self, done: np.ndarray) -> None:
        """New values for each copy whose episode ended (its next episode has them); copies that
        share their parameters draw when copy 0's episode ends."""
        targets = parameter_targets(self.env)
        if len(targets) == self.num_envs:
            for copy in np.flatnonzero(done):
                set_parameters(targets[copy], self._draws.draw(int(copy)))
        elif done[0]:
            set_parameters(targets[0], self._draws.draw(0))

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        """Reset every sub-env; the first reset passes the seed. ``config`` (reset parameters)
        is applied first, by the rule of ``kerasrl.envs.parameters``; without it, sampled
        parameters are drawn anew."""
        if config:
            self.set_reset_parameters(config)
        else:
            self._draw_all()
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
        obs = self._codec.observations(raw, self._obs_ndim)  # _convert_obs, one call less per step
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
        if any_done and self._drawing:
            self._draw_for_ended(done)
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
            if self._drawing:
                set_parameters(self.env, self._draws.draw(0))
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
