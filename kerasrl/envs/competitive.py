"""``Duel1D``: a built-in two-team competitive game, for self-play (:mod:`kerasrl.trainers.self_play`).

Rules. In each of ``num_areas`` arenas two runners, one per team, race along the same course of
``LENGTH`` cells; each cell after the start holds a hurdle with probability ``HURDLE_CHANCE``
(the course is drawn anew every episode, the same for both runners). A runner sees only the cell
in front of it (the hurdle is hidden until then) and decides each step:

* ``0`` run: a clear cell is passed in one step; a hurdle trips the runner, who lies
  ``TRIP_STEPS`` steps before getting over it;
* ``1`` jump: the runner is in the air for ``JUMP_STEPS`` steps and lands one cell on, hurdle or not.

While a runner lies or flies, its actions are ignored. The first runner past the last cell wins
(final reward +1, the other −1); both at the same step, or neither within ``MAX_STEPS``, is a draw
(0 each). There is no other reward. A runner that always runs takes ``1 + (TRIP_STEPS) h`` steps a
cell on average with hurdle share ``h``, a random one ``1.5 + 1.5 h``: equal at ``h = 1/3``, so
the scripted opponent (``opponent="scripted"``: team 1 always runs and only team 0's behavior is
reported) beats a random runner about half the time, while one that jumps exactly the hurdles
(``1 + h`` steps a cell) wins unless the course has no hurdle at all.

Observation ``[hurdle ahead, lying or flying, own progress, opponent's progress]``; discrete
actions ``[2]``. Behaviors ``Duel1D?team=0`` and ``Duel1D?team=1`` (Unity's team suffix), with the
same spec; arena ``k``'s runners have agent ids ``2k`` (team 0) and ``2k + 1`` (team 1). Both
runners of an arena end their episode at the same step and start the next course at once.
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from kerasrl.envs.base import ActionType, BehaviorSpec, Environment, EnvironmentException, StepResult, check_actions
from kerasrl.envs.parameters import check_reset_parameters

NAME = "Duel1D"
LENGTH = 10
HURDLE_CHANCE = 1 / 3
TRIP_STEPS = 3
JUMP_STEPS = 2
MAX_STEPS = 60
OPPONENTS = ("self", "scripted")
SPEC = BehaviorSpec(observation_shapes=((4,),), action_type=ActionType.DISCRETE, action_shape=(2,))

__all__ = ["Duel1DEnvironment", "LENGTH", "MAX_STEPS", "NAME", "SPEC", "team_behavior"]


def team_behavior(team: int, name: str = NAME) -> str:
    """The behavior of ``team`` as Unity names it (``Duel1D?team=1``)."""
    return f"{name}?team={team}"


class Duel1DEnvironment(Environment):
    """The race of the module docstring, ``num_areas`` matches at once, seeded.

    ``opponent="self"``: both teams are behaviors (a self-play run trains them); ``"scripted"``:
    team 1 always runs and only ``Duel1D?team=0`` is reported (the benchmark of a trained policy).
    ``wins`` counts the finished matches by result from team 0's side (``win``, ``draw``, ``loss``).
    """

    validates_results = True

    def __init__(self, num_areas: int = 16, seed: Optional[int] = None, opponent: str = "self") -> None:
        if num_areas < 1:
            raise EnvironmentException(f"Duel1D needs num_areas >= 1, got {num_areas}.")
        if opponent not in OPPONENTS:
            raise EnvironmentException(f"Duel1D's opponent must be one of {list(OPPONENTS)}, got {opponent!r}.")
        self.num_areas, self.opponent = int(num_areas), opponent
        self.random = np.random.default_rng(seed)
        teams = (0,) if opponent == "scripted" else (0, 1)
        self._specs = {team_behavior(t): SPEC for t in teams}
        n = self.num_areas
        self.hurdles = np.zeros((n, LENGTH + 2), bool)
        self.position = np.zeros((n, 2), np.int64)
        self.busy = np.zeros((n, 2), np.int64)
        self.steps = np.zeros(n, np.int64)
        self.wins = {"win": 0, "draw": 0, "loss": 0}
        self._new_courses(np.ones(n, bool))

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def _new_courses(self, areas: np.ndarray) -> None:
        """Draw a new course for ``areas`` (a bool mask) and put both runners at its start."""
        k = int(areas.sum())
        if k:
            course = self.random.random((k, LENGTH + 2)) < HURDLE_CHANCE
            course[:, 0] = False
            course[:, LENGTH:] = False
            self.hurdles[areas] = course
            self.position[areas] = 0
            self.busy[areas] = 0
            self.steps[areas] = 0

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        check_reset_parameters(config, self.reset_parameters, "the built-in environment Duel1D")
        self._new_courses(np.ones(self.num_areas, bool))
        zeros = np.zeros((self.num_areas, 2))
        return self._results(zeros, np.zeros(self.num_areas, bool), np.zeros(self.num_areas, bool))

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        n = self.num_areas
        moves = np.zeros((n, 2), np.int64)
        for team in range(2):
            name = team_behavior(team)
            if name in self._specs:
                if name not in actions:
                    raise EnvironmentException(f"No actions for behavior '{name}' (got {sorted(actions)}).")
                moves[:, team] = check_actions(SPEC, actions[name], n, name)[:, 0]
        self._move(moves)
        self.steps += 1
        finished = self.position >= LENGTH
        ended = np.any(finished, axis=1)
        truncated = ~ended & (self.steps >= MAX_STEPS)
        score = finished[:, 0].astype(np.float64) - finished[:, 1]
        rewards = np.stack([score, -score], axis=1) * ended[:, None]
        self._count(score[ended])
        results = self._results(rewards, ended, truncated)
        self._new_courses(ended | truncated)
        return results

    def _move(self, moves: np.ndarray) -> None:
        """Advance every runner that is neither lying nor flying by its action (``moves`` 0/1)."""
        free = self.busy == 0
        self.busy[~free] -= 1
        ahead = np.take_along_axis(self.hurdles, np.minimum(self.position + 1, LENGTH + 1), axis=1)
        jump = free & (moves == 1)
        trip = free & (moves == 0) & ahead
        self.busy[jump] = JUMP_STEPS - 1
        self.busy[trip] = TRIP_STEPS
        self.position[free] += 1

    def _count(self, scores: np.ndarray) -> None:
        self.wins["win"] += int((scores > 0).sum())
        self.wins["draw"] += int((scores == 0).sum())
        self.wins["loss"] += int((scores < 0).sum())

    def _observe(self, team: int) -> np.ndarray:
        ahead = np.take_along_axis(self.hurdles, np.minimum(self.position[:, team:team + 1] + 1, LENGTH + 1), axis=1)
        return np.stack([ahead[:, 0], self.busy[:, team] > 0, self.position[:, team] / LENGTH,
                         self.position[:, 1 - team] / LENGTH], axis=1).astype(np.float32)

    def _results(self, rewards: np.ndarray, ended: np.ndarray, truncated: np.ndarray) -> dict[str, StepResult]:
        out = {}
        for team in range(2):
            name = team_behavior(team)
            if name in self._specs:
                ids = 2 * np.arange(self.num_areas, dtype=np.int64) + team
                out[name] = StepResult(ids, [self._observe(team)], rewards[:, team].astype(np.float32), ended.copy(),
                                       truncated.copy())
        return out
