"""Tiny deterministic test environments (ML-Agents 0.9's Simple1D and variants).

``Simple1DEnvironment`` is the acceptance environment of ML-Agents 0.9's ``test_simple_rl.py``: one
agent on a line walks towards a goal at −1 or +1 that it observes. ``MultiBranchMaskedEnvironment``
adds two discrete branches and action masks; ``VisualSimple1DEnvironment`` shows the goal as an
image. All of them have one behavior with one agent (id 0).

Episode protocol shared by all three: the step that ends an episode reports the observation
the agent acted on (the *old* goal), its reward and ``terminated`` (goal reached) or
``truncated`` (the optional ``max_steps`` was reached first); the agent is then reset at once,
so the next action already acts in the new episode. The trainer never stores the transition
that follows a done step, so nothing is lost.
"""
from __future__ import annotations

import abc
import random
from typing import Mapping, Optional

import numpy as np

from kerasrl.envs.base import (
    ActionType,
    BehaviorSpec,
    Environment,
    EnvironmentException,
    StepResult,
    check_actions,
)
from kerasrl.envs.parameters import check_reset_parameters

OBS_SIZE = 1
STEP_SIZE = 0.1
TIME_PENALTY = 0.001
MIN_STEPS = int(1.0 / STEP_SIZE) + 1
SUCCESS_REWARD = 1.0 + MIN_STEPS * TIME_PENALTY

__all__ = [
    "MIN_STEPS", "MultiBranchMaskedEnvironment", "OBS_SIZE", "STEP_SIZE", "SUCCESS_REWARD",
    "Simple1DEnvironment", "TIME_PENALTY", "VisualSimple1DEnvironment",
]


def _clamp(x: float, low: float, high: float) -> float:
    return min(max(x, low), high)


class _OneAgentEnvironment(Environment):
    """One behavior, one agent (id 0), goal ±1 drawn from a seeded ``random.Random``.

    Subclasses implement ``_reset_position()``, ``_move(action_row) -> bool`` (apply one action,
    return whether the goal was reached), ``_observe()`` (the observation of the current goal),
    ``_final_reward()`` and, for masked actions, ``_action_mask()`` (for the next decision).
    """

    def __init__(self, behavior_name: str, spec: BehaviorSpec, seed: Optional[int], max_steps: Optional[int]) -> None:
        if max_steps is not None and max_steps <= 0:
            raise EnvironmentException(f"max_steps of behavior '{behavior_name}' must be positive, got {max_steps}.")
        self.behavior_name = behavior_name
        self._spec = spec
        self._specs = {behavior_name: spec}
        self.random = random.Random(seed)
        self.max_steps = max_steps
        self.goal = 0
        self.step_count = 0
        self.episode_count = 0
        self._ids = np.zeros(1, np.int64)
        self._reset_agent()

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def _reset_agent(self) -> None:
        self.goal = self.random.choice([-1, 1])
        self.step_count = 0
        self._reset_position()

    @abc.abstractmethod
    def _reset_position(self) -> None:
        """See the class docstring."""

    @abc.abstractmethod
    def _move(self, action: np.ndarray) -> bool:
        """See the class docstring."""

    @abc.abstractmethod
    def _observe(self) -> list[np.ndarray]:
        """See the class docstring."""

    @abc.abstractmethod
    def _final_reward(self) -> float:
        """See the class docstring."""

    def _action_mask(self) -> Optional[np.ndarray]:
        return None

    def _result(self, reward: float, terminated: bool, truncated: bool, obs: list[np.ndarray]) -> dict[str, StepResult]:
        return {
            self.behavior_name: StepResult(
                agent_ids=self._ids,
                observations=obs,
                rewards=np.array([reward], np.float32),
                terminated=np.array([terminated]),
                truncated=np.array([truncated]),
                action_mask=self._action_mask(),
            )
        }

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        check_reset_parameters(config, self.reset_parameters, f"the built-in environment {type(self).__name__}")
        self._reset_agent()
        return self._result(0.0, False, False, self._observe())

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        if self.behavior_name not in actions:
            raise EnvironmentException(
                f"No actions for behavior '{self.behavior_name}' (got {sorted(actions)})."
            )
        action = check_actions(self._spec, actions[self.behavior_name], 1, self.behavior_name)
        obs = self._observe()
        reached = self._move(action[0])
        self.step_count += 1
        truncated = not reached and self.max_steps is not None and self.step_count >= self.max_steps
        reward = self._final_reward() if reached else -TIME_PENALTY
        if reached or truncated:
            self.episode_count += 1
            self._reset_agent()
        return self._result(reward, reached, truncated, obs)


class Simple1DEnvironment(_OneAgentEnvironment):
    """Walk from 0 to the observed goal (−1 or +1) in steps of at most 0.1 (ML-Agents 0.9's test task).

    Observation ``[goal]``, or ``[goal, position]`` with ``observe_position`` (where the states
    of an agent walking the right way differ from those of one walking the wrong way, which a
    state-only GAIL discriminator needs); a step returns the observation from before its move.
    Discrete actions ``[2]``: 1 moves +0.1, 0 moves −0.1; continuous ``[1]``: the action,
    clamped to ±0.1. The episode terminates when ``|position| ≥ 1`` with reward
    ``SUCCESS_REWARD × position × goal`` (±1.011); every other step costs ``TIME_PENALTY``. Ten
    steps of +0.1 sum to 0.9999999999999999, so the optimum takes ``MIN_STEPS`` = 11 steps and
    returns 1.001. ``max_steps`` optionally truncates episodes.
    """

    def __init__(
        self,
        use_discrete: bool,
        seed: Optional[int] = None,
        behavior_name: str = "Simple1D",
        max_steps: Optional[int] = None,
        observe_position: bool = False,
    ) -> None:
        self.use_discrete = use_discrete
        self.observe_position = observe_position
        self.position = 0.0
        spec = BehaviorSpec(
            observation_shapes=self._observation_shapes(),
            action_type=ActionType.DISCRETE if use_discrete else ActionType.CONTINUOUS,
            action_shape=(2,) if use_discrete else (1,),
        )
        super().__init__(behavior_name, spec, seed, max_steps)

    def _observation_shapes(self) -> tuple[tuple[int, ...], ...]:
        return ((OBS_SIZE + 1 if self.observe_position else OBS_SIZE,),)

    def _reset_position(self) -> None:
        self.position = 0.0

    def _move(self, action: np.ndarray) -> bool:
        if self.use_discrete:
            delta = 1.0 if int(action[0]) else -1.0
        else:
            delta = float(action[0])
        delta = _clamp(delta, -STEP_SIZE, STEP_SIZE)
        self.position = _clamp(self.position + delta, -1.0, 1.0)
        return abs(self.position) >= 1.0

    def _final_reward(self) -> float:
        return SUCCESS_REWARD * self.position * self.goal

    def _observe(self) -> list[np.ndarray]:
        values = [self.goal, self.position] if self.observe_position else [self.goal]
        return [np.array([values], np.float32)]


class VisualSimple1DEnvironment(Simple1DEnvironment):
    """``Simple1DEnvironment`` whose only observation is an image of the goal.

    Goal −1 lights the left half of the image, goal +1 the right half (all channels). Pixel
    values follow the kerasrl convention for visual observations, [0, 1] (``bright`` sets the
    lit value). The default 36×36×1
    is the smallest image that fits ``nature_cnn`` (8×8/4, 4×4/2, 3×3/1).
    """

    def __init__(
        self,
        use_discrete: bool,
        seed: Optional[int] = None,
        behavior_name: str = "VisualSimple1D",
        image_shape: tuple[int, int, int] = (36, 36, 1),
        max_steps: Optional[int] = None,
        bright: float = 1.0,
    ) -> None:
        h, w, c = (int(d) for d in image_shape)
        if h <= 0 or c <= 0 or w < 2:
            raise EnvironmentException(f"image_shape {image_shape} of behavior '{behavior_name}' is too small.")
        self.image_shape = (h, w, c)
        half = w // 2
        left = np.zeros((1, h, w, c), np.float32)
        left[:, :, :half, :] = bright
        right = np.zeros((1, h, w, c), np.float32)
        right[:, :, w - half:, :] = bright
        self._images = {-1: left, 1: right}
        super().__init__(use_discrete, seed, behavior_name, max_steps)

    def _observation_shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.image_shape,)

    def _observe(self) -> list[np.ndarray]:
        return [self._images[self.goal].copy()]


class MultiBranchMaskedEnvironment(_OneAgentEnvironment):
    """Simple1D with two discrete branches and action masks, for testing masked multi-branch policies.

    Positions are counted in integer units of 0.1 (the goal is 10 units away), so no float
    rounding decides when an episode ends. Observation ``[goal]``. Branches ``[3, 2]``:

    * branch 0, direction: 0 → −1, 1 → stay, 2 → +1. "stay" (index 1) is **always masked**.
    * branch 1, step size: 0 → small (1 unit = 0.1), 1 → large (2 units = 0.2). "large"
      (index 1) is **masked on every 4th step** of an episode (``step_count % 4 == 3``).

    The mask in a step result is for the agent's *next* decision (after a done step, the first
    decision of the new episode). Taking a masked option counts in ``masked_actions_taken``
    (raises ``EnvironmentException`` when ``strict``) and wastes the step: the agent stays put.
    The episode terminates at ``|position| ≥ 1`` with reward ``SUCCESS_REWARD × sign × goal``
    and otherwise costs ``TIME_PENALTY`` per step. The optimal policy (towards the goal, large
    whenever allowed: 2+2+2+1+2+2 units) needs ``OPTIMAL_STEPS`` = 6 steps and returns
    ``OPTIMAL_RETURN`` = 1.006, close to Simple1D's 1.001; a uniformly random (mask-respecting)
    policy random-walks ~50 steps and ends on the wrong side half the time (mean return ≈ −0.05).
    """

    UNITS_TO_GOAL = 10
    STEP_UNITS = (1, 2)
    LARGE_MASK_PERIOD = 4
    OPTIMAL_STEPS = 6
    OPTIMAL_RETURN = SUCCESS_REWARD - (OPTIMAL_STEPS - 1) * TIME_PENALTY

    def __init__(
        self,
        seed: Optional[int] = None,
        behavior_name: str = "MultiBranchMasked",
        max_steps: Optional[int] = None,
        strict: bool = False,
    ) -> None:
        self.strict = strict
        self.units = 0
        self.masked_actions_taken = 0
        spec = BehaviorSpec(observation_shapes=((OBS_SIZE,),), action_type=ActionType.DISCRETE, action_shape=(3, 2))
        super().__init__(behavior_name, spec, seed, max_steps)

    @property
    def position(self) -> float:
        return self.units / self.UNITS_TO_GOAL

    def _reset_position(self) -> None:
        self.units = 0

    def _action_mask(self) -> np.ndarray:
        large_allowed = 0.0 if self.step_count % self.LARGE_MASK_PERIOD == self.LARGE_MASK_PERIOD - 1 else 1.0
        return np.array([[1.0, 0.0, 1.0, 1.0, large_allowed]], np.float32)

    def _move(self, action: np.ndarray) -> bool:
        mask = self._action_mask()[0]
        direction, size = int(action[0]), int(action[1])
        if mask[direction] == 0.0 or mask[3 + size] == 0.0:
            self.masked_actions_taken += 1
            if self.strict:
                raise EnvironmentException(
                    f"Behavior '{self.behavior_name}' took masked action {[direction, size]} at step "
                    f"{self.step_count} (mask {mask.tolist()})."
                )
            return False
        self.units += (direction - 1) * self.STEP_UNITS[size]
        self.units = max(-self.UNITS_TO_GOAL, min(self.UNITS_TO_GOAL, self.units))
        return abs(self.units) >= self.UNITS_TO_GOAL

    def _final_reward(self) -> float:
        return SUCCESS_REWARD * (1.0 if self.units > 0 else -1.0) * self.goal

    def _observe(self) -> list[np.ndarray]:
        return [np.array([[self.goal]], np.float32)]
