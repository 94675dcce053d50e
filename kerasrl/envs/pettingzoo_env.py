"""PettingZoo games as kerasrl environments: a Parallel API env, its agents grouped into behaviors.

``PettingZooEnv`` takes a ``pettingzoo.ParallelEnv`` (an AEC env is turned into one with
PettingZoo's own ``aec_to_parallel``). Each agent belongs to one behavior: by default its agent
type, the name without a trailing ``_<number>`` (``pursuer_0`` and ``pursuer_1`` are agents of
``pursuer``; ``first_0`` and ``second_0`` two behaviors of one agent each); ``behavior_of`` (a
mapping or a function of the agent's name) chooses otherwise. ``teams`` (agent name → team
number) makes each team a behavior named ``<behavior>?team=<n>``, Unity's convention, which
self-play trains as teams of one behavior and a config's ``<behavior>`` section configures.
``groups=True`` reports each behavior's (each team's) agents as one group (``StepResult.group_id``,
1, 2, ... in behavior order; no group reward: PettingZoo's rewards are the agents' own).

Agents of one behavior must have the same spaces (``kerasrl.envs.spaces`` maps them as for
Gymnasium). An observation ``Dict`` with an ``action_mask`` entry (PettingZoo's classic games)
gives a discrete behavior its action mask, the rest being the observation; so does an
``action_mask`` in an agent's info. Agent ids are fixed: an agent's index in ``possible_agents``.

Steps. An agent that terminates or is truncated is reported with its final observation and
then leaves (PettingZoo removes it from ``env.agents``) until the game's next episode; once no
agent is left, the next step resets the game (the actions given are for agents that have left,
and are ignored) and reports every agent's first observation, reward 0, not done. ``seed`` seeds
the first reset; reset parameters go to the env as they go to a Gymnasium env
(``kerasrl.envs.parameters``).
"""
from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np
from gymnasium import spaces

from kerasrl.envs.base import BehaviorSpec, Environment, EnvironmentException, StepResult
from kerasrl.envs.parameters import apply_gymnasium_parameters
from kerasrl.envs.spaces import SpaceCodec

__all__ = ["PettingZooEnv", "agent_type", "make_pettingzoo_env"]

MASK_KEY = "action_mask"


def agent_type(agent: str) -> str:
    """An agent's name without a trailing ``_<number>`` (``pursuer_3`` -> ``pursuer``)."""
    return re.sub(r"_\d+$", "", agent) or agent


def _stack(raws: list[Any], space: spaces.Space) -> Any:
    """Several agents' raw observations of one space as one batch (a Dict space: per key)."""
    if isinstance(space, spaces.Dict):
        return {k: _stack([r[k] for r in raws], sub) for k, sub in space.spaces.items()}
    return np.stack([np.asarray(r) for r in raws])


def _row(batch: Any, i: int) -> Any:
    """Agent ``i``'s action out of a batch of the env's actions (tuples and dicts part by part)."""
    if isinstance(batch, dict):
        return {k: _row(v, i) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_row(v, i) for v in batch)
    value = batch[i]
    return int(value) if np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.integer) else value


class _Behavior:
    """One behavior's agents (in ``possible_agents`` order), their spaces and codec."""

    def __init__(self, name: str, agents: list[str], ids: list[int], env: Any) -> None:
        self.name, self.agents = name, agents
        self.id_of = dict(zip(agents, ids))
        obs_space, act_space = env.observation_space(agents[0]), env.action_space(agents[0])
        for agent in agents[1:]:
            if env.observation_space(agent) != obs_space or env.action_space(agent) != act_space:
                raise EnvironmentException(f"PettingZoo agents {agents[0]} and {agent} of behavior '{name}' have "
                                           "different spaces; give them different behaviors (behavior_of).")
        self.masked = isinstance(obs_space, spaces.Dict) and MASK_KEY in obs_space.spaces
        if self.masked:
            obs_space = spaces.Dict({k: s for k, s in obs_space.spaces.items() if k != MASK_KEY})
            if len(obs_space.spaces) == 1:
                obs_space = next(iter(obs_space.spaces.values()))
        self.obs_space = obs_space
        self.codec = SpaceCodec(obs_space, act_space, f"PettingZoo behavior '{name}'", name)
        self.spec: BehaviorSpec = self.codec.spec
        self.order: list[str] = []  # the agents of the latest result, in its row order

    def observation_of(self, raw: Any) -> Any:
        if not self.masked:
            return raw
        rest = {k: v for k, v in raw.items() if k != MASK_KEY}
        return next(iter(rest.values())) if not isinstance(self.obs_space, spaces.Dict) else rest

    def mask_of(self, raw: Any, info: Mapping[str, Any]) -> Optional[np.ndarray]:
        mask = raw.get(MASK_KEY) if self.masked else info.get(MASK_KEY) if isinstance(info, Mapping) else None
        return None if mask is None else np.asarray(mask, np.float32).reshape(-1)


class PettingZooEnv(Environment):
    """A PettingZoo Parallel API env (or an AEC env, converted) as a kerasrl ``Environment``
    (see the module doc)."""

    validates_results = False  # the env manager checks shapes and NaN/inf against the specs

    def __init__(self, env: Any, seed: Optional[int] = None,
                 behavior_of: Union[Mapping[str, str], Callable[[str], str], None] = None,
                 teams: Optional[Mapping[str, int]] = None, groups: bool = False) -> None:
        self.env = _parallel(env)
        self.seed = seed
        possible = list(self.env.possible_agents)
        if not possible:
            raise EnvironmentException("The PettingZoo env has no possible_agents.")
        names = {agent: _behavior_name(agent, behavior_of, teams) for agent in possible}
        self._behaviors: dict[str, _Behavior] = {}
        for name in dict.fromkeys(names.values()):
            agents = [a for a in possible if names[a] == name]
            self._behaviors[name] = _Behavior(name, agents, [possible.index(a) for a in agents], self.env)
        self._group_of = {name: k + 1 for k, name in enumerate(self._behaviors)} if groups else None
        self._specs = {name: b.spec for name, b in self._behaviors.items()}
        self._seed_pending = seed is not None
        self._episode_over = True

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        if config:
            apply_gymnasium_parameters(self.env, config, "the PettingZoo env")
        if self._seed_pending:
            observations, infos = self.env.reset(seed=self.seed)
            self._seed_pending = False
        else:
            observations, infos = self.env.reset()
        self._episode_over = not self.env.agents
        zeros = {agent: 0.0 for agent in observations}
        return self._results(observations, zeros, {}, {}, infos)

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        if self._episode_over:  # every agent left: the game starts its next episode
            return self.reset()
        observations, rewards, terminated, truncated, infos = self.env.step(self._env_actions(actions))
        self._episode_over = not self.env.agents
        return self._results(observations, rewards, terminated, truncated, infos)

    def _env_actions(self, actions: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Each alive agent's action, from the rows of its behavior's array (previous result's order)."""
        alive = set(self.env.agents)
        out: dict[str, Any] = {}
        for name, behavior in self._behaviors.items():
            if not behavior.order:
                continue
            if name not in actions:
                raise EnvironmentException(f"No actions for behavior '{name}' (got {sorted(actions)}).")
            arr = np.asarray(actions[name])
            expected = (len(behavior.order), behavior.spec.action_size)
            if arr.shape != expected:
                raise EnvironmentException(f"Actions for behavior '{name}' have shape {arr.shape}, expected {expected}.")
            batch = behavior.codec.env_actions(arr, batched=True)
            out.update({agent: _row(batch, i) for i, agent in enumerate(behavior.order) if agent in alive})
        return out

    def _results(self, observations: Mapping[str, Any], rewards: Mapping[str, float], terminated: Mapping[str, bool],
                 truncated: Mapping[str, bool], infos: Mapping[str, Any]) -> dict[str, StepResult]:
        out = {}
        for name, behavior in self._behaviors.items():
            order = [a for a in behavior.agents if a in observations]
            behavior.order = order
            if not order:
                out[name] = StepResult.empty(behavior.spec)
                continue
            raws = [observations[a] for a in order]
            obs = behavior.codec.observations(_stack([behavior.observation_of(r) for r in raws], behavior.obs_space))
            masks = [behavior.mask_of(r, infos.get(a, {})) for a, r in zip(order, raws)]
            given = [m for m in masks if m is not None]
            n = len(order)
            out[name] = StepResult(
                np.array([behavior.id_of[a] for a in order], np.int64), obs,
                np.array([rewards.get(a, 0.0) for a in order], np.float32),
                np.array([bool(terminated.get(a, False)) for a in order]),
                np.array([bool(truncated.get(a, False)) and not bool(terminated.get(a, False)) for a in order]),
                action_mask=np.stack(given) if len(given) == n else None,
                group_id=None if self._group_of is None else np.full(n, self._group_of[name], np.int32),
                group_reward=None if self._group_of is None else np.zeros(n, np.float32))
        return out

    def close(self) -> None:
        self.env.close()


def _behavior_name(agent: str, behavior_of: Union[Mapping[str, str], Callable[[str], str], None],
                   teams: Optional[Mapping[str, int]]) -> str:
    if behavior_of is None:
        name = agent_type(agent)
    elif callable(behavior_of):
        name = str(behavior_of(agent))
    elif agent in behavior_of:
        name = str(behavior_of[agent])
    else:
        raise EnvironmentException(f"behavior_of names no behavior for the PettingZoo agent {agent!r}.")
    if teams is None:
        return name
    if agent not in teams:
        raise EnvironmentException(f"teams gives no team for the PettingZoo agent {agent!r}.")
    return f"{name}?team={int(teams[agent])}"


def _parallel(env: Any) -> Any:
    """``env`` as a Parallel API env: an AEC env through PettingZoo's own converter."""
    if hasattr(env, "agent_iter"):  # the AEC API
        from pettingzoo.utils.conversions import aec_to_parallel  # the optional extra

        return aec_to_parallel(env)
    if not (callable(getattr(env, "step", None)) and hasattr(env, "possible_agents")):
        raise EnvironmentException(f"{env!r} is not a PettingZoo env (no possible_agents and step).")
    return env


def make_pettingzoo_env(target: str, seed: Optional[int] = None) -> Environment:
    """The game that ``<module>[:<function>]`` names (``--env pettingzoo:<module>``): the module's
    ``function`` (default ``parallel_env``, else ``env``) called without arguments; it may return
    a PettingZoo env (Parallel or AEC) or a :class:`PettingZooEnv` already set up (teams, groups)."""
    module_name, _, function = target.partition(":")
    where = f"--env pettingzoo:{target}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        missing = getattr(e, "name", None) or module_name
        hint = " (pip install 'kerasrl[pettingzoo]')" if missing.split(".")[0] == "pettingzoo" else ""
        raise EnvironmentException(f"{where}: the module {module_name} cannot be imported: {e}{hint}.") from e
    names = [function] if function else ["parallel_env", "env"]
    make = next((getattr(module, n) for n in names if callable(getattr(module, n, None))), None)
    if make is None:
        raise EnvironmentException(f"{where}: the module {module_name} has no {' or '.join(names)} function.")
    game = make()
    return game if isinstance(game, PettingZooEnv) else PettingZooEnv(game, seed=seed)
