"""The kerasrl environment API: behavior specs, batched step results, the Environment ABC.

Semantics follow ML-Agents 0.9: an environment hosts one or more
*behaviors*; each behavior has any number of agents, which may appear and disappear
between steps. A step result reports, for every agent currently present, its observation,
the reward received since its last decision, and whether its episode ended. ``terminated``
(a true terminal state: do not bootstrap) and ``truncated`` (max steps reached: bootstrap
from the value of the final observation) are kept apart end to end. An agent whose episode
ended reports its *final* observation with ``done``; the transition that follows a done step
is never stored as experience, so an environment is free to reset the agent in between.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping, Optional

import numpy as np

from kerasrl.exception import EnvironmentException
from kerasrl.spec import ActionType, BehaviorSpec, StepResult, concat_vector_observations

__all__ = [
    "ActionType", "BehaviorSpec", "Environment", "EnvironmentException", "StepResult", "check_actions",
    "concat_vector_observations",
]


class Environment(abc.ABC):
    """A multi-agent, multi-behavior environment (the kerasrl analogue of BaseUnityEnvironment).

    ``step(actions)`` takes, per behavior, an array whose rows follow the agent order of the
    *previous* result of that behavior: int32 ``[n, branches]`` for discrete actions,
    float32 ``[n, size]`` for continuous ones, float32 ``[n, size + branches]`` for hybrid ones
    (continuous first, then the branch indices).
    """

    #: True when the environment itself checks what it returns against its specs (shapes,
    #: NaN/inf), so that env managers need not check every step again.
    validates_results: bool = False

    @property
    @abc.abstractmethod
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        """Behavior name → spec."""

    @abc.abstractmethod
    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        """Start new episodes for every agent and return their first observations."""

    @abc.abstractmethod
    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        """Apply one action per agent and advance the simulation by one decision step."""

    def close(self) -> None:
        """Release resources; the default does nothing."""

    @property
    def reset_parameters(self) -> dict[str, float]:
        """Parameters a curriculum or sampler may set on reset."""
        return {}

    @property
    def global_done(self) -> bool:
        return False

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_actions(spec: BehaviorSpec, actions: np.ndarray, n_agents: int, behavior: str) -> np.ndarray:
    """Coerce and validate an action array for ``behavior``; errors name the behavior and shapes."""
    dtype = np.int32 if spec.is_discrete else np.float32
    arr = np.asarray(actions, dtype=dtype)
    if arr.ndim == 1 and n_agents == arr.shape[0] and spec.action_size == 1:
        arr = arr.reshape(n_agents, 1)
    if arr.shape != (n_agents, spec.action_size):
        raise EnvironmentException(
            f"Actions for behavior '{behavior}' have shape {arr.shape}, expected {(n_agents, spec.action_size)}."
        )
    branches = spec.discrete_branches
    if branches and n_agents:
        chosen = arr[:, spec.continuous_size:]
        bad = (chosen < 0) | (chosen >= np.asarray(branches)[None, :])
        if spec.is_hybrid:  # branch indices carried as floats must be whole numbers
            bad |= chosen != np.floor(chosen)
        if bad.any():
            raise EnvironmentException(
                f"Discrete actions for behavior '{behavior}' fall outside branch sizes {branches}."
            )
    if spec.continuous_size and not np.isfinite(arr[:, : spec.continuous_size]).all():
        raise EnvironmentException(f"Continuous actions for behavior '{behavior}' contain NaN or inf.")
    return arr
