"""RLTrainer: collects experiences from step results into the agent buffers (behaviour.md §6.2).

Transitions are appended for all agents of a step at once (one batched buffer call). An
agent's transition runs from the step result its policy acted on to the next result that
reports it; a transition that starts from a done step is never stored (the environment may
have reset the agent in between), so Gymnasium's autoreset step never becomes experience.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Optional

import numpy as np

from kerasrl.buffer import Buffer
from kerasrl.envs.base import BehaviorSpec, StepResult, concat_vector_observations, shared_ones
from kerasrl.exception import UnityTrainerException
from kerasrl.rewards import RewardSignal, create_reward_signal
from kerasrl.trainer import Trainer


class AgentTable:
    """Per-agent counters (episode return per signal, episode length, trajectory length) as numpy
    columns indexed by a dense slot per agent id, so one step updates every agent in a few array
    operations. ``slots(ids)`` is cached for an unchanged id array (the common case)."""

    def __init__(self, columns: list[str]) -> None:
        self.slot_of: dict[int, int] = {}
        self.columns: dict[str, np.ndarray] = {c: np.zeros(16, np.float64) for c in columns}
        self._last_key: Optional[bytes] = None
        self._last_slots = np.zeros(0, np.int64)

    def slots(self, ids: np.ndarray) -> np.ndarray:
        """Slot of every id of ``ids`` (int64 array), new ids getting new slots."""
        key = ids.tobytes()
        if key == self._last_key:
            return self._last_slots
        out = np.empty(len(ids), np.int64)
        for i, a in enumerate(ids.tolist()):
            slot = self.slot_of.get(a)
            if slot is None:
                slot = self.slot_of[a] = len(self.slot_of)
            out[i] = slot
        size = len(self.slot_of)
        capacity = len(next(iter(self.columns.values())))
        if size > capacity:
            for name, col in self.columns.items():
                grown = np.zeros(max(size, 2 * capacity), np.float64)
                grown[:capacity] = col
                self.columns[name] = grown
        self._last_key, self._last_slots = key, out
        return out

    def get(self, column: str, agent_id: int) -> float:
        slot = self.slot_of.get(int(agent_id))
        return 0.0 if slot is None else float(self.columns[column][slot])

    def set(self, column: str, agent_id: int, value: float) -> None:
        slot = self.slot_of.get(int(agent_id))
        if slot is not None:
            self.columns[column][slot] = value

    def as_dict(self, column: str) -> dict[int, float]:
        col = self.columns[column]
        return {a: float(col[s]) for a, s in self.slot_of.items()}

    def clear(self) -> None:
        for col in self.columns.values():
            col[:] = 0.0


class RLTrainer(Trainer):
    """Trainer with reward signals, per-agent episode statistics and an experience buffer."""

    def __init__(self, brain_name: str, spec: BehaviorSpec, trainer_parameters: dict[str, Any], training: bool,
                 run_id: str, reward_buff_cap: int = 1) -> None:
        super().__init__(brain_name, spec, trainer_parameters, training, run_id, reward_buff_cap)
        signals_cfg = trainer_parameters.get("reward_signals")
        if not signals_cfg:
            raise UnityTrainerException(
                f"No reward signals were defined. At least one must be used with {type(self).__name__}."
            )
        if not isinstance(signals_cfg, dict):
            raise UnityTrainerException(
                f"reward_signals for brain {brain_name} must be a mapping of signal name to parameters."
            )
        self.reward_signals: dict[str, RewardSignal] = {
            name: create_reward_signal(name, dict(cfg or {})) for name, cfg in signals_cfg.items()
        }
        self.training_buffer = Buffer()
        self.agents = AgentTable(["return_environment", *(f"return_{n}" for n in self.reward_signals),
                                  "episode_steps", "trajectory_length"])
        self._pending: dict[int, tuple[StepResult, int, dict[str, Any]]] = {}
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.episodes_completed = 0
        self.store_next_obs = any(s.needs_next_observations for s in self.reward_signals.values())

    @property
    def trajectory_lengths(self) -> dict[int, int]:
        """Agent id → steps in its unfinished trajectory."""
        return {a: int(v) for a, v in self.agents.as_dict("trajectory_length").items()}

    @property
    def episode_steps(self) -> dict[int, int]:
        """Agent id → steps in its current episode."""
        return {a: int(v) for a, v in self.agents.as_dict("episode_steps").items()}

    # -- experience collection -------------------------------------------------------------
    def _match(self, curr: StepResult, nxt: StepResult, outputs: dict[str, Any]) -> list[tuple[StepResult, Any, dict[str, Any], Any]]:
        """Groups of (source result, source rows, source outputs, next rows) to append.

        Rows are a ``slice`` when every agent of an unchanged agent set continues (the common case).
        """
        a, b = curr.agent_ids, nxt.agent_ids
        if a is b or a.tobytes() == b.tobytes():  # int64 arrays: equal bytes ⇔ equal ids
            if not (curr.terminated.any() or curr.truncated.any()):
                everyone = slice(None)
                return [(curr, everyone, outputs, everyone)]
            rows = np.flatnonzero(~curr.done)
            return [(curr, rows, outputs, rows)]
        for i, a in enumerate(curr.agent_ids.tolist()):
            self._pending[a] = (curr, i, outputs)
        groups: dict[int, tuple[StepResult, list[int], dict[str, Any], list[int]]] = {}
        for j, a in enumerate(nxt.agent_ids.tolist()):
            src = self._pending.pop(a, None)
            if src is None:
                continue
            res, i, outs = src
            if res.done[i]:
                continue
            g = groups.setdefault(id(res), (res, [], outs, []))
            g[1].append(i)
            g[3].append(j)
        return [(r, np.asarray(ci, np.int64), o, np.asarray(ni, np.int64)) for r, ci, o, ni in groups.values()]

    def experience_fields(self, curr: StepResult, rows: np.ndarray, outputs: dict[str, Any],
                          nxt: StepResult, next_rows: np.ndarray) -> dict[str, np.ndarray]:
        """The per-transition fields stored for ``rows`` of ``curr`` (subclasses add theirs)."""
        spec = self.spec
        fields: dict[str, np.ndarray] = {}
        obs = [o[rows] for o in curr.observations]
        if spec.vector_observation_size:
            fields["vector_obs"] = concat_vector_observations(spec, obs)
        for j, i in enumerate(spec.visual_observation_indices):
            fields[f"visual_obs{j}"] = obs[i]
        if self.store_next_obs:
            nobs = [o[next_rows] for o in nxt.observations]
            if spec.vector_observation_size:
                fields["next_vector_in"] = concat_vector_observations(spec, nobs)
            for j, i in enumerate(spec.visual_observation_indices):
                fields[f"next_visual_obs{j}"] = nobs[i]
        n = len(nxt.rewards[next_rows])
        fields["masks"] = shared_ones(n)
        fields["done"] = nxt.done[next_rows].astype(np.float32)
        fields["terminated"] = nxt.terminated[next_rows].astype(np.float32)
        fields["truncated"] = nxt.truncated[next_rows].astype(np.float32)
        fields["environment_rewards"] = nxt.rewards[next_rows]
        return fields

    def add_experiences(self, curr_all: dict[str, StepResult], next_all: dict[str, StepResult],
                        take_action_outputs: Optional[dict[str, Any]]) -> None:
        curr = curr_all.get(self.brain_name) if curr_all else None
        nxt = next_all.get(self.brain_name) if next_all else None
        if curr is None or nxt is None or take_action_outputs is None or len(curr) == 0:
            return
        outputs = take_action_outputs
        stats = self.stats
        if "entropy" in outputs:
            entropy = outputs["entropy"]
            n = entropy.shape[0] or 1
            stats["Policy/Entropy"].append(float(np.add.reduce(entropy)) / n)
            stats["Policy/Learning Rate"].append(float(outputs.get("learning_rate", 0.0)))
            for name, signal in self.reward_signals.items():
                stats[signal.value_name].append(float(np.add.reduce(outputs[f"value_{name}"])) / n)
        agents = self.agents
        cols = agents.columns
        all_slots = agents.slots(nxt.agent_ids)
        for src, rows, outs, next_rows in self._match(curr, nxt, outputs):
            ids = nxt.agent_ids[next_rows]
            if len(ids) == 0:
                continue
            slots = all_slots[next_rows]
            fields = self.experience_fields(src, rows, outs, nxt, next_rows)
            for name, signal in self.reward_signals.items():
                result = signal.evaluate(src, nxt, next_rows)
                fields[f"{name}_rewards"] = np.asarray(result.scaled_reward, np.float32)
                fields[f"{name}_value_estimates"] = np.asarray(outs[f"value_{name}"], np.float32)[rows]
                cols[f"return_{name}"][slots] += result.scaled_reward
            cols["return_environment"][slots] += fields["environment_rewards"]
            cols["episode_steps"][slots] += 1.0
            cols["trajectory_length"][slots] += 1.0
            self.training_buffer.append_batch(ids, fields, padding_values=self.padding_values)

    padding_values: dict[str, float] = {"action_mask": 1.0}

    def end_episode(self) -> None:
        """An environment reset: drop unfinished trajectories and episode statistics."""
        self.training_buffer.reset_local_buffers()
        self._pending.clear()
        self.agents.clear()

    def record_episode_end(self, agent_id: int) -> None:
        """Move an agent's finished-episode statistics into ``stats`` and the reward buffer."""
        agents = self.agents
        self.stats["Environment/Episode Length"].append(agents.get("episode_steps", agent_id))
        agents.set("episode_steps", agent_id, 0.0)
        value = agents.get("return_environment", agent_id)
        agents.set("return_environment", agent_id, 0.0)
        self.cumulative_returns_since_policy_update.append(value)
        self.stats["Environment/Cumulative Reward"].append(value)
        self.reward_buffer.appendleft(value)
        self.recent_returns.append(value)
        self.episodes_completed += 1
        for name, signal in self.reward_signals.items():
            self.stats[signal.stat_name].append(agents.get(f"return_{name}", agent_id))
            agents.set(f"return_{name}", agent_id, 0.0)
