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
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

from kerasrl.exception import EnvironmentException
from kerasrl.spec import ActionType, BehaviorSpec, concat_vector_observations

__all__ = [
    "ActionType", "BehaviorSpec", "Environment", "EnvironmentException", "StepResult", "check_actions",
    "concat_vector_observations",
]


def _as_1d(x: Any, dtype: type) -> np.ndarray:
    """``x`` as a 1-D array of ``dtype``; an array that already is one is returned as is (hot path)."""
    if type(x) is np.ndarray and x.dtype == dtype and x.ndim == 1:
        return x
    return np.asarray(x, dtype=dtype).reshape(-1)


@dataclass
class StepResult:
    """One behavior's agents after a step, batched: row ``i`` of every array is agent ``agent_ids[i]``.

    ``observations`` holds one float32 array ``[n, *shape]`` per entry of the spec's
    ``observation_shapes``. ``action_mask`` (discrete only) is ``[n, sum(branches)]`` with
    1 = allowed, 0 = masked; ``None`` means everything is allowed.
    """

    agent_ids: np.ndarray
    observations: list[np.ndarray]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    action_mask: Optional[np.ndarray] = None
    previous_actions: Optional[np.ndarray] = None
    _index: Optional[dict[int, int]] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.agent_ids = _as_1d(self.agent_ids, np.int64)
        n = self.agent_ids.shape[0]
        self.rewards = _as_1d(self.rewards, np.float32)
        self.terminated = _as_1d(self.terminated, np.bool_)
        self.truncated = _as_1d(self.truncated, np.bool_)
        if not (self.rewards.shape[0] == self.terminated.shape[0] == self.truncated.shape[0] == n):
            for name in ("rewards", "terminated", "truncated"):
                if getattr(self, name).shape[0] != n:
                    raise EnvironmentException(
                        f"StepResult.{name} has {getattr(self, name).shape[0]} rows for {n} agents."
                    )
        observations = self.observations = list(self.observations)
        for i, o in enumerate(observations):
            if type(o) is not np.ndarray or o.dtype != np.float32:
                o = observations[i] = np.asarray(o, dtype=np.float32)
            if o.ndim == 0 or o.shape[0] != n:
                raise EnvironmentException(f"StepResult.observations[{i}] has shape {o.shape} for {n} agents.")
        if self.action_mask is not None:
            self.action_mask = np.asarray(self.action_mask, dtype=np.float32)
            if self.action_mask.ndim != 2 or self.action_mask.shape[0] != n:
                raise EnvironmentException(
                    f"StepResult.action_mask has shape {self.action_mask.shape} for {n} agents."
                )

    def __len__(self) -> int:
        return int(self.agent_ids.shape[0])

    @property
    def done(self) -> np.ndarray:
        """``terminated | truncated`` (ML-Agents' ``local_done``)."""
        return self.terminated | self.truncated

    def index_of(self, agent_id: int) -> int:
        """Row of ``agent_id`` in this result; ``KeyError`` if absent."""
        if self._index is None:
            self._index = {int(a): i for i, a in enumerate(self.agent_ids)}
        return self._index[int(agent_id)]

    def validate(self, spec: BehaviorSpec, behavior: str = "") -> "StepResult":
        """Check shapes against ``spec`` and catch NaN/inf where they enter."""
        label = f" of behavior '{behavior}'" if behavior else ""
        if len(self.observations) != len(spec.observation_shapes):
            raise EnvironmentException(
                f"Step result{label} has {len(self.observations)} observations, spec has "
                f"{len(spec.observation_shapes)}."
            )
        for i, (o, s) in enumerate(zip(self.observations, spec.observation_shapes)):
            if o.shape[1:] != s:
                raise EnvironmentException(
                    f"Observation {i}{label} has shape {o.shape[1:]}, spec says {s}."
                )
            if not np.isfinite(o).all():
                raise EnvironmentException(f"Observation {i}{label} contains NaN or inf.")
        if not np.isfinite(self.rewards).all():
            raise EnvironmentException(f"Rewards{label} contain NaN or inf.")
        if self.action_mask is not None and self.action_mask.shape[1] != spec.action_mask_size:
            raise EnvironmentException(
                f"Action masks{label} have {self.action_mask.shape[1]} columns, spec needs "
                f"{spec.action_mask_size} (sum of branch sizes)."
            )
        return self

    @staticmethod
    def empty(spec: BehaviorSpec) -> "StepResult":
        return StepResult(
            agent_ids=np.zeros(0, np.int64),
            observations=[np.zeros((0,) + s, np.float32) for s in spec.observation_shapes],
            rewards=np.zeros(0, np.float32),
            terminated=np.zeros(0, bool),
            truncated=np.zeros(0, bool),
            action_mask=np.ones((0, spec.action_mask_size), np.float32) if spec.has_action_mask else None,
        )


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
