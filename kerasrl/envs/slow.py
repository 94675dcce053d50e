"""Slow environments: every step costs a fixed amount of CPU time (for benchmarks of env workers).

A CartPole step is cheap, so running its copies in worker processes can only lose (the pipe
round trip costs more than the step). Real simulators are slower; to measure what workers
buy on such an environment, ``SlowStep`` (a Gymnasium wrapper) and ``SlowEnvironment`` (a
kerasrl ``Environment`` wrapper) add a fixed cost to every step of every copy:
``DEFAULT_STEP_COST_S`` = 1 ms by default.

``mode="busy"`` (the default) spins on ``time.perf_counter`` for the whole cost, holding a
core (and the GIL) as a physics step written in C would. ``mode="sleep"`` sleeps instead,
which uses no core at all: W sleeping workers overlap perfectly even on fewer than W cores, so
a sleep-based figure overstates what workers buy on a machine with fewer cores than workers.
The benchmark figures use ``busy``; ``sleep`` is there to model an environment that
waits on something else (a GPU renderer, a remote simulator).

``SlowCartPole-v1`` is registered with Gymnasium when this module is imported (which
``import kerasrl.envs`` does): CartPole-v1 (same dynamics, 500-step time limit, reward
threshold 475) whose every step costs 1 ms of busy CPU. ``gymnasium.make("SlowCartPole-v1",
step_cost_s=..., mode=...)`` changes the cost, and so does ``GymnasiumEnv("SlowCartPole-v1",
num_envs=8, step_cost_s=...)``; it has no native vector version, so 8 copies are a
``SyncVectorEnv`` costing 8 ms per step.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional, SupportsFloat

import gymnasium
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from kerasrl.envs.base import BehaviorSpec, Environment, EnvironmentException, StepResult

__all__ = ["DEFAULT_STEP_COST_S", "SLOW_CARTPOLE", "SlowEnvironment", "SlowStep", "burn", "make_slow_cartpole"]

DEFAULT_STEP_COST_S = 1e-3
SLOW_CARTPOLE = "SlowCartPole-v1"
MODES = ("busy", "sleep")


def _check(step_cost_s: float, mode: str) -> None:
    if mode not in MODES:
        raise EnvironmentException(f"Slow environment mode must be one of {MODES}, got {mode!r}.")
    if not step_cost_s >= 0:
        raise EnvironmentException(f"step_cost_s must be >= 0, got {step_cost_s}.")


def burn(seconds: float, mode: str = "busy") -> None:
    """Spend ``seconds``: spinning on one core (``busy``) or sleeping (``sleep``, no core used)."""
    if seconds <= 0:
        return
    if mode == "sleep":
        time.sleep(seconds)
        return
    clock = time.perf_counter
    deadline = clock() + seconds
    while clock() < deadline:
        pass


class SlowStep(gymnasium.Wrapper):
    """A Gymnasium wrapper whose ``step`` costs ``step_cost_s`` more (``mode``: see the module doc)."""

    def __init__(self, env: gymnasium.Env, step_cost_s: float = DEFAULT_STEP_COST_S, mode: str = "busy") -> None:
        _check(step_cost_s, mode)
        super().__init__(env)
        self.step_cost_s = float(step_cost_s)
        self.mode = mode

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        burn(self.step_cost_s, self.mode)
        return self.env.step(action)


def make_slow_cartpole(step_cost_s: float = DEFAULT_STEP_COST_S, mode: str = "busy", **kwargs: Any) -> gymnasium.Env:
    """Entry point of ``SlowCartPole-v1``: CartPole whose every step costs ``step_cost_s``."""
    return SlowStep(CartPoleEnv(**kwargs), step_cost_s, mode)


def register_slow_envs() -> None:
    """Register ``SlowCartPole-v1`` with Gymnasium (once; the module does it on import)."""
    if SLOW_CARTPOLE not in gymnasium.registry:
        gymnasium.register(SLOW_CARTPOLE, entry_point="kerasrl.envs.slow:make_slow_cartpole",
                           max_episode_steps=500, reward_threshold=475.0)


class SlowEnvironment(Environment):
    """A kerasrl ``Environment`` whose steps cost ``step_cost_s`` more per agent that acts (as
    ``SlowStep`` on each copy of a vector env), or per step when ``per_agent`` is false.
    Everything else is the wrapped environment's."""

    def __init__(self, env: Environment, step_cost_s: float = DEFAULT_STEP_COST_S, mode: str = "busy",
                 per_agent: bool = True) -> None:
        _check(step_cost_s, mode)
        self.env = env
        self.step_cost_s = float(step_cost_s)
        self.mode = mode
        self.per_agent = per_agent
        self.validates_results = bool(getattr(env, "validates_results", False))
        self.env_name = f"Slow({getattr(env, 'env_name', type(env).__name__)})"

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self.env.behavior_specs

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        return self.env.reset(config)

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        agents = sum(len(np.asarray(a)) for a in actions.values()) if self.per_agent else 1
        burn(self.step_cost_s * agents, self.mode)
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()

    @property
    def reset_parameters(self) -> dict[str, float]:
        return self.env.reset_parameters

    @property
    def global_done(self) -> bool:
        return self.env.global_done


register_slow_envs()
