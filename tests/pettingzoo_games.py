"""PettingZoo games for the tests (tests/test_pettingzoo.py), also as ``--env pettingzoo:tests.pettingzoo_games``."""
from __future__ import annotations

import numpy as np
import pettingzoo
from gymnasium import spaces

from kerasrl.envs.competitive import Duel1DEnvironment, team_behavior


class Chase(pettingzoo.ParallelEnv):
    """Two runners and a chaser on a line. Runners observe ``[position, step]`` and move by
    Discrete(3) - 1; the chaser observes a Dict (``observation`` and an ``action_mask`` that
    forbids its move 2). Each agent's reward is its new position; ``runner_1`` terminates at
    step 2; everyone else is truncated at step 4."""

    metadata = {"name": "chase_v0"}
    render_mode = None

    def __init__(self) -> None:
        self.possible_agents = ["runner_0", "runner_1", "chaser_0"]
        self.agents: list[str] = []
        self.seen_actions: list[dict] = []

    def observation_space(self, agent):
        box = spaces.Box(-10, 10, (2,), np.float32)
        if agent.startswith("chaser"):
            return spaces.Dict({"observation": box, "action_mask": spaces.Box(0, 1, (3,), np.int8)})
        return box

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self, agent):
        o = np.array([self.pos[agent], self.t], np.float32)
        return {"observation": o, "action_mask": np.array([1, 1, 0], np.int8)} if agent.startswith("chaser") else o

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.pos = {a: 0.0 for a in self.agents}
        self.t = 0
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.seen_actions.append(dict(actions))
        self.t += 1
        for a in self.agents:
            self.pos[a] += actions[a] - 1
        obs = {a: self._obs(a) for a in self.agents}
        rewards = {a: float(self.pos[a]) for a in self.agents}
        term = {a: a == "runner_1" and self.t == 2 for a in self.agents}
        trunc = {a: self.t == 4 for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos


def parallel_env() -> Chase:
    return Chase()


class DuelGame(pettingzoo.ParallelEnv):
    """kerasrl's Duel1D race (one arena) as a PettingZoo game: ``runner_0`` and ``runner_1`` race;
    the game ends when the race does (PettingZoo's next ``reset`` draws a new course)."""

    metadata = {"name": "duel_v0"}
    render_mode = None

    def __init__(self, seed: int = 0) -> None:
        self.game = Duel1DEnvironment(num_areas=1, seed=seed)
        self.possible_agents = ["runner_0", "runner_1"]
        self.agents: list[str] = []

    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _of(self, results, field):
        if field == "observations":
            return {a: [results[team_behavior(i)].observations[0][0]] for i, a in enumerate(self.possible_agents)}
        return {a: getattr(results[team_behavior(i)], field)[0] for i, a in enumerate(self.possible_agents)}

    def reset(self, seed=None, options=None):
        results = self.game.reset()
        self.agents = list(self.possible_agents)
        return {a: o[0] for a, o in self._of(results, "observations").items()}, {a: {} for a in self.agents}

    def step(self, actions):
        results = self.game.step({team_behavior(i): np.array([[actions[a]]], np.int32)
                                  for i, a in enumerate(self.possible_agents)})
        obs = {a: o[0] for a, o in self._of(results, "observations").items()}
        rewards = {a: float(r) for a, r in self._of(results, "rewards").items()}
        terminated = {a: bool(t) for a, t in self._of(results, "terminated").items()}
        truncated = {a: bool(t) for a, t in self._of(results, "truncated").items()}
        if any(terminated.values()) or any(truncated.values()):
            self.agents = []
        return obs, rewards, terminated, truncated, {a: {} for a in obs}
