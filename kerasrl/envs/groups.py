"""A cooperative built-in environment: agents in a group (ML-Agents' ``SimpleMultiAgentGroup``)
whose only reward is their group's.

``GroupSimple1DEnvironment`` (``--env GroupSimple1D``) puts ``num_agents`` Simple1D walkers in one
group. It reports ``StepResult.group_id`` and ``StepResult.group_reward``: a trainer of groups
(MA-POCA) can learn it; PPO and SAC, which do not train on group rewards, see no reward at all.
It is meant for tests and examples of the group API.
"""
from __future__ import annotations

import random
from typing import Mapping, Optional

import numpy as np

from kerasrl.envs.base import ActionType, BehaviorSpec, Environment, EnvironmentException, StepResult, check_actions
from kerasrl.envs.parameters import check_reset_parameters

__all__ = ["GROUP_ID", "GROUP_SUCCESS_REWARD", "GroupSimple1DEnvironment", "HOME", "LEFT", "WALKING"]

#: The group every agent of the environment is in (0 would mean no group).
GROUP_ID = 1
#: The group reward when every agent reached its goal; each agent that left costs a share.
GROUP_SUCCESS_REWARD = 1.0
STEP_SIZE = 0.1
#: An agent's state in the group's episode.
WALKING, HOME, LEFT = 0, 1, 2


class GroupSimple1DEnvironment(Environment):
    """``num_agents`` walkers (ids ``0 .. num_agents - 1``), each on its own Simple1D line, all in
    group ``GROUP_ID``.

    Each agent observes ``[goal, position]`` (its goal −1 or +1, drawn from the seed at each
    group episode; position from 0) after its move. Discrete actions ``[2]``: 1 moves +0.1,
    0 moves −0.1; continuous ``[1]``: the action, clamped to ±0.1. The rules:

    * ``rewards`` are always 0: the group reward is the only reward.
    * An agent that reaches its goal (``position × goal ≥ 1``) is *home*: it stays there, keeps
      deciding (its actions are ignored) and waits for the others.
    * An agent that reaches the other end *leaves the group early*: its episode terminates at
      once (group reward 0) and it reports no step until the group's episode ends.
    * The group's episode ends once no agent is walking: the agents still in the group terminate,
      those at home with group reward ``GROUP_SUCCESS_REWARD × home / num_agents`` (1.0 when all
      reached their goals). ``max_steps`` (optional) truncates the group's episode instead
      (group reward 0).

    When the group's episode ends, every agent starts the next one at once: the step that ends
    it reports, in id order, the agents that were still in the group with their final
    observation (done) and the agents that left earlier with their first observation of the new
    episode (not done). As in Simple1D, the next actions of all of them act in the new episode
    (the trainer never stores a transition from a done step).
    """

    def __init__(self, num_agents: int = 3, seed: Optional[int] = None, behavior_name: str = "GroupSimple1D",
                 max_steps: Optional[int] = None, use_discrete: bool = True) -> None:
        if num_agents < 1:
            raise EnvironmentException(f"num_agents of behavior '{behavior_name}' must be at least 1, got {num_agents}.")
        if max_steps is not None and max_steps <= 0:
            raise EnvironmentException(f"max_steps of behavior '{behavior_name}' must be positive, got {max_steps}.")
        self.behavior_name = behavior_name
        self.num_agents = int(num_agents)
        self.max_steps = max_steps
        self.use_discrete = use_discrete
        self._spec = BehaviorSpec(observation_shapes=((2,),),
                                  action_type=ActionType.DISCRETE if use_discrete else ActionType.CONTINUOUS,
                                  action_shape=(2,) if use_discrete else (1,))
        self._specs = {behavior_name: self._spec}
        self.random = random.Random(seed)
        self._ids = np.arange(self.num_agents, dtype=np.int64)
        self._group = np.full(self.num_agents, GROUP_ID, np.int32)
        self.goals = np.zeros(self.num_agents, np.float32)
        self.positions = np.zeros(self.num_agents, np.float64)
        #: Each agent's ``WALKING``, ``HOME`` or ``LEFT``.
        self.state = np.zeros(self.num_agents, np.int8)
        self.step_count = 0
        #: Group episodes ended so far.
        self.episode_count = 0
        self._reporting = self._ids.copy()
        self._new_episode()

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def _new_episode(self) -> None:
        self.goals[:] = [self.random.choice([-1, 1]) for _ in range(self.num_agents)]
        self.positions[:] = 0.0
        self.state[:] = WALKING
        self.step_count = 0

    def _observe(self, rows: np.ndarray) -> np.ndarray:
        return np.stack([self.goals[rows], self.positions[rows]], axis=1).astype(np.float32)

    def _result(self, rows: np.ndarray, obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                group_reward: np.ndarray) -> dict[str, StepResult]:
        return {self.behavior_name: StepResult(
            agent_ids=self._ids[rows], observations=[obs], rewards=np.zeros(len(rows), np.float32),
            terminated=terminated, truncated=truncated, group_id=self._group[rows], group_reward=group_reward)}

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        check_reset_parameters(config, self.reset_parameters, f"the built-in environment {type(self).__name__}")
        self._new_episode()
        rows = self._reporting = self._ids.copy()
        none = np.zeros(len(rows), bool)
        return self._result(rows, self._observe(rows), none, none, np.zeros(len(rows), np.float32))

    def _move(self, actions: np.ndarray) -> np.ndarray:
        """Move the walking agents of the last result; the agents that left the group now."""
        left_now = np.zeros(self.num_agents, bool)
        for agent, action in zip(self._reporting.tolist(), actions):
            if self.state[agent] != WALKING:
                continue
            delta = (STEP_SIZE if int(action[0]) else -STEP_SIZE) if self.use_discrete else float(action[0])
            position = min(max(self.positions[agent] + min(max(delta, -STEP_SIZE), STEP_SIZE), -1.0), 1.0)
            self.positions[agent] = position
            if position * self.goals[agent] >= 1.0:
                self.state[agent] = HOME
            elif abs(position) >= 1.0:
                self.state[agent], left_now[agent] = LEFT, True
        return left_now

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        if self.behavior_name not in actions:
            raise EnvironmentException(f"No actions for behavior '{self.behavior_name}' (got {sorted(actions)}).")
        chosen = check_actions(self._spec, actions[self.behavior_name], len(self._reporting), self.behavior_name)
        left_before = self.state == LEFT
        left_now = self._move(chosen)
        self.step_count += 1
        ended = not np.any(self.state == WALKING)
        cut = not ended and self.max_steps is not None and self.step_count >= self.max_steps
        if ended or cut:
            return self._end_group_episode(left_before, left_now, truncate=cut)
        rows = self._reporting = np.flatnonzero(~left_before)
        zeros = np.zeros(len(rows), np.float32)
        return self._result(rows, self._observe(rows), left_now[rows], np.zeros(len(rows), bool), zeros)

    def _end_group_episode(self, left_before: np.ndarray, left_now: np.ndarray,
                           truncate: bool) -> dict[str, StepResult]:
        """Every agent still in the group ends its episode; then all start the next one."""
        rows = self._reporting = self._ids.copy()
        home = self.state == HOME
        in_group = ~left_before
        group_reward = np.zeros(self.num_agents, np.float32)
        if not truncate:
            group_reward[home] = GROUP_SUCCESS_REWARD * np.count_nonzero(home) / self.num_agents
        terminated = in_group & (left_now if truncate else np.ones(self.num_agents, bool))
        truncated = in_group & ~terminated
        final = self._observe(rows)
        self.episode_count += 1
        self._new_episode()
        obs = np.where(left_before[:, None], self._observe(rows), final)
        return self._result(rows, obs, terminated, truncated, group_reward)
