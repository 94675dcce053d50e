"""What a behavior's agents observe and how they act: the behavior spec and action types, a
step's results (:class:`StepResult`) and a policy's decisions (:class:`ActionInfo`).

Everything downstream of the environment (models, policies, trainers) reads these, so they
live apart from the environments themselves.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from kerasrl.exception import EnvironmentException


class ActionType(str, enum.Enum):
    DISCRETE = "discrete"
    CONTINUOUS = "continuous"
    #: Continuous and discrete actions at once (ML-Agents' hybrid actions).
    HYBRID = "hybrid"


@dataclass(frozen=True)
class BehaviorSpec:
    """What a behavior's agents observe and how they act.

    ``observation_shapes``: one entry per observation; 1-D shapes are vector observations,
    3-D shapes ``(height, width, channels)`` are visual observations.
    ``action_shape``: ``(size,)`` for continuous actions; the branch sizes for discrete;
    ``(continuous size, *branch sizes)`` for hybrid actions.

    The action array of one step is int32 ``[n, branches]`` (discrete), float32 ``[n, size]``
    (continuous) or, for hybrid actions, float32 ``[n, continuous size + branches]``: the
    continuous actions first, then the branch indices as whole numbers.
    """

    observation_shapes: tuple[tuple[int, ...], ...]
    action_type: ActionType
    action_shape: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON/YAML values (demo files and run folders keep it so)."""
        return {"observation_shapes": [list(s) for s in self.observation_shapes],
                "action_type": self.action_type.value, "action_shape": list(self.action_shape)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "BehaviorSpec":
        """The spec that :meth:`to_dict` wrote."""
        return cls(observation_shapes=tuple(tuple(s) for s in raw["observation_shapes"]),
                   action_type=raw["action_type"], action_shape=tuple(raw["action_shape"]))

    def __post_init__(self) -> None:
        object.__setattr__(self, "action_type", ActionType(self.action_type))
        shapes = tuple(tuple(int(d) for d in s) for s in self.observation_shapes)
        object.__setattr__(self, "observation_shapes", shapes)
        object.__setattr__(self, "action_shape", tuple(int(a) for a in self.action_shape))
        if not shapes:
            raise EnvironmentException("BehaviorSpec needs at least one observation shape.")
        for s in shapes:
            if len(s) not in (1, 3) or any(d <= 0 for d in s):
                raise EnvironmentException(
                    f"Observation shape {s} is not a positive 1-D (vector) or 3-D (h, w, c) shape."
                )
        if not self.action_shape or any(a <= 0 for a in self.action_shape):
            raise EnvironmentException(f"Action shape {self.action_shape} must be non-empty and positive.")
        if self.action_type == ActionType.CONTINUOUS and len(self.action_shape) != 1:
            raise EnvironmentException(
                f"A continuous action shape must be (size,), got {self.action_shape}."
            )
        if self.action_type == ActionType.HYBRID and len(self.action_shape) < 2:
            raise EnvironmentException(
                f"A hybrid action shape must be (continuous size, *branch sizes), got {self.action_shape}."
            )

    @cached_property
    def is_discrete(self) -> bool:
        return self.action_type == ActionType.DISCRETE

    @cached_property
    def is_continuous(self) -> bool:
        return self.action_type == ActionType.CONTINUOUS

    @cached_property
    def is_hybrid(self) -> bool:
        return self.action_type == ActionType.HYBRID

    @cached_property
    def discrete_branches(self) -> tuple[int, ...]:
        """Branch sizes (discrete and hybrid; empty for continuous)."""
        if self.is_discrete:
            return self.action_shape
        return self.action_shape[1:] if self.is_hybrid else ()

    @cached_property
    def continuous_size(self) -> int:
        """Continuous action dimensions (continuous and hybrid; 0 for discrete)."""
        return 0 if self.is_discrete else self.action_shape[0]

    @cached_property
    def has_action_mask(self) -> bool:
        """Whether the agents have discrete branches, and so an action mask."""
        return bool(self.discrete_branches)

    @cached_property
    def action_size(self) -> int:
        """Columns of the action array sent to the env: continuous dimensions plus branches."""
        return self.continuous_size + len(self.discrete_branches)

    @cached_property
    def action_mask_size(self) -> int:
        """Width of the action-mask array: the sum of the branch sizes (0 for continuous)."""
        return int(sum(self.discrete_branches))

    @cached_property
    def vector_observation_size(self) -> int:
        return int(sum(s[0] for s in self.observation_shapes if len(s) == 1))

    @cached_property
    def vector_observation_indices(self) -> list[int]:
        return [i for i, s in enumerate(self.observation_shapes) if len(s) == 1]

    @cached_property
    def visual_observation_shapes(self) -> list[tuple[int, int, int]]:
        return [s for s in self.observation_shapes if len(s) == 3]

    @cached_property
    def visual_observation_indices(self) -> list[int]:
        return [i for i, s in enumerate(self.observation_shapes) if len(s) == 3]


def concat_vector_observations(spec: BehaviorSpec, observations: Sequence[np.ndarray]) -> np.ndarray:
    """All vector observations of a result, concatenated in spec order: ``[n, vector_observation_size]``."""
    idx = spec.vector_observation_indices
    if len(idx) == 1:
        return observations[idx[0]]
    n = observations[0].shape[0]
    if not idx:
        return np.zeros((n, 0), np.float32)
    return np.concatenate([observations[i] for i in idx], axis=1)


def behavior_file_name(behavior: str) -> str:
    """``behavior`` as it names files and folders (checkpoints, metrics CSV, TensorBoard folder,
    exported models): ``?`` and ``=`` become ``_``, so that a team suffix names no file with them
    (``Striker?team=1`` -> ``Striker_team_1``); the behavior itself keeps its id everywhere else."""
    return behavior.replace("?", "_").replace("=", "_")


def pick_behavior(specs: Mapping[str, BehaviorSpec], behavior: Optional[str],
                  error: type[Exception] = ValueError) -> str:
    """``behavior`` if the environment has it, else (``None``) its only behavior; otherwise
    ``error`` with a one-line message listing the behaviors."""
    if behavior is None:
        if len(specs) != 1:
            raise error(f"The environment has behaviors {sorted(specs)}; choose one with behavior=.")
        return next(iter(specs))
    if behavior not in specs:
        raise error(f"The environment has no behavior {behavior!r}; its behaviors: {sorted(specs)}.")
    return behavior


#: The dtypes of a step result's columns, as the (singleton) dtype objects its hot path compares by identity.
_INT64, _INT32, _FLOAT32, _BOOL = np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.bool_)
_NDARRAY = np.ndarray


def _as_1d(x: Any, dtype: np.dtype) -> np.ndarray:
    """``x`` as a 1-D array of ``dtype``; an array that already is one is returned as is (hot path)."""
    if type(x) is _NDARRAY and x.dtype is dtype and x.ndim == 1:
        return x
    return np.asarray(x, dtype=dtype).reshape(-1)


@dataclass
class StepResult:
    """One behavior's agents after a step, batched: row ``i`` of every array is agent ``agent_ids[i]``.

    ``observations`` holds one float32 array ``[n, *shape]`` per entry of the spec's
    ``observation_shapes``. ``action_mask`` (discrete only) is ``[n, sum(branches)]`` with
    1 = allowed, 0 = masked; ``None`` means everything is allowed.

    Groups (ML-Agents' ``SimpleMultiAgentGroup``): ``group_id`` (int32 ``[n]``, 0 = the agent is
    in no group) and ``group_reward`` (float32 ``[n]``, the reward its group earned since its last
    step, apart from ``rewards``) are ``None`` when the environment reports no groups;
    :attr:`has_groups`, :attr:`group_id_or_zeros` and :attr:`group_reward_or_zeros` read them
    either way.
    """

    agent_ids: np.ndarray
    observations: list[np.ndarray]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    action_mask: Optional[np.ndarray] = None
    previous_actions: Optional[np.ndarray] = None
    group_id: Optional[np.ndarray] = None
    group_reward: Optional[np.ndarray] = None
    _index: Optional[dict[int, int]] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Every step of every environment builds one: arrays that already have their dtype and
        # rank (what the adapters pass) are kept as they are, checked with a few comparisons.
        ids = self.agent_ids
        if type(ids) is not _NDARRAY or ids.dtype is not _INT64 or ids.ndim != 1:
            ids = self.agent_ids = _as_1d(ids, _INT64)
        n = len(ids)
        rewards, terminated, truncated = self.rewards, self.terminated, self.truncated
        if type(rewards) is not _NDARRAY or rewards.dtype is not _FLOAT32 or rewards.ndim != 1:
            rewards = self.rewards = _as_1d(rewards, _FLOAT32)
        if type(terminated) is not _NDARRAY or terminated.dtype is not _BOOL or terminated.ndim != 1:
            terminated = self.terminated = _as_1d(terminated, _BOOL)
        if type(truncated) is not _NDARRAY or truncated.dtype is not _BOOL or truncated.ndim != 1:
            truncated = self.truncated = _as_1d(truncated, _BOOL)
        if not (len(rewards) == len(terminated) == len(truncated) == n):
            for name in ("rewards", "terminated", "truncated"):
                if getattr(self, name).shape[0] != n:
                    raise EnvironmentException(
                        f"StepResult.{name} has {getattr(self, name).shape[0]} rows for {n} agents."
                    )
        observations = self.observations = list(self.observations)
        for i, o in enumerate(observations):
            if type(o) is not _NDARRAY or o.dtype is not _FLOAT32:
                o = observations[i] = np.asarray(o, dtype=np.float32)
            if o.ndim == 0 or o.shape[0] != n:
                raise EnvironmentException(f"StepResult.observations[{i}] has shape {o.shape} for {n} agents.")
        if self.action_mask is not None:
            self.action_mask = np.asarray(self.action_mask, dtype=np.float32)
            if self.action_mask.ndim != 2 or self.action_mask.shape[0] != n:
                raise EnvironmentException(
                    f"StepResult.action_mask has shape {self.action_mask.shape} for {n} agents."
                )
        if self.group_id is not None or self.group_reward is not None:
            self._check_groups(n)

    def _check_groups(self, n: int) -> None:
        """Both group fields as 1-D arrays of ``n`` rows (a missing one: zeros)."""
        self.group_id = _as_1d(np.zeros(n, np.int32) if self.group_id is None else self.group_id, _INT32)
        reward = np.zeros(n, np.float32) if self.group_reward is None else self.group_reward
        self.group_reward = _as_1d(reward, _FLOAT32)
        for name in ("group_id", "group_reward"):
            if getattr(self, name).shape[0] != n:
                raise EnvironmentException(f"StepResult.{name} has {getattr(self, name).shape[0]} rows for {n} agents.")

    def __len__(self) -> int:
        return len(self.agent_ids)  # a 1-D array (``__post_init__``): its rows

    @property
    def done(self) -> np.ndarray:
        """``terminated | truncated`` (ML-Agents' ``local_done``)."""
        return self.terminated | self.truncated

    @property
    def has_groups(self) -> bool:
        """Whether the environment reported groups (``group_id`` and ``group_reward`` are set)."""
        return self.group_id is not None

    @property
    def group_id_or_zeros(self) -> np.ndarray:
        """``group_id``, or int32 zeros (no agent in a group) when the environment reports no groups."""
        return np.zeros(len(self), np.int32) if self.group_id is None else self.group_id

    @property
    def group_reward_or_zeros(self) -> np.ndarray:
        """``group_reward``, or float32 zeros when the environment reports no groups."""
        return np.zeros(len(self), np.float32) if self.group_reward is None else self.group_reward

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
        if self.group_reward is not None and not np.isfinite(self.group_reward).all():
            raise EnvironmentException(f"Group rewards{label} contain NaN or inf.")
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


class ActionInfo(NamedTuple):
    """What a policy decided for one behavior's agents (rows in the step result's agent order).

    ``value``: each reward signal's value estimates; ``outputs`` is the dict the trainer stores
    as experience (actions, log-probs, values, ...).
    """

    action: np.ndarray
    memory: Optional[np.ndarray]
    value: Optional[dict[str, np.ndarray]]
    outputs: Optional[dict[str, Any]]
