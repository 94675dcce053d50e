"""The agent processor: turns one behavior's env steps into trajectories on a queue.

Transitions are appended for all agents of a step at once (one batched buffer call). An
agent's transition runs from the step result its policy acted on to the next result that
reports it; a transition that starts from a done step is never stored (the environment may
have reset the agent in between), so Gymnasium's autoreset step never becomes experience.
A trajectory closes by one rule (its episode ended, it passed ``time_horizon``, or a rollout
is complete) and goes on the behavior's :class:`~kerasrl.trainers.trajectory.TrajectoryQueue`
with its bootstrap values. Per-agent episode returns and lengths are kept in numpy columns,
and finished episodes are reported to the trainer's statistics.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from kerasrl.arrays import shared_ones
from kerasrl.buffer import Buffer
from kerasrl.fields import Field
from kerasrl.rewards import RewardSignal
from kerasrl.rewards.batched import UpdateBatchRewards
from kerasrl.spec import BehaviorSpec, StepResult, concat_vector_observations
from kerasrl.trainers.groupmates import GroupmateStatus
from kerasrl.trainers.trajectory import Trajectory, TrajectoryQueue


class AgentCounters:
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


#: The policy's value estimates (one array per reward signal) at some rows of a step result.
ValueEstimates = Callable[[StepResult, np.ndarray], Mapping[str, np.ndarray]]


class Rollout:
    """Counts agent steps towards a rollout of ``size`` (``flush_on_update``): once more than
    ``size`` have been taken (``scale`` times the local count, on several hosts), every
    unfinished trajectory closes and the trainer updates."""

    def __init__(self, size: int, scale: int = 1) -> None:
        self.size, self.scale, self.steps = int(size), int(scale), 0

    @property
    def done(self) -> bool:
        return self.steps * self.scale > self.size

    def restart(self) -> None:
        self.steps = 0


class AgentProcessor:
    """Appends each step's transitions to the agents' unfinished trajectories, keeps per-agent
    episode counters, and puts each trajectory that closes on ``queue``.

    ``experience_fields``: the policy outputs stored per transition (``Field`` names, e.g.
    actions and their log-probabilities); observations, rewards of every reward signal, value
    estimates, the action mask and the done flags are stored as well. Signals that are not
    ``per_step`` (curiosity, GAIL) get their rewards at update time (``deferred``, one compiled
    call per update); the next observations are stored only when a signal
    ``needs_next_observations``. ``value_estimates`` gives the trajectories' bootstrap values;
    ``time_horizon=None`` closes trajectories only at episode ends (and ``close_all``);
    ``episode_stats=False`` reports no episode (a teacher's experience).

    When the environment reports groups (``StepResult.has_groups``), each transition also stores
    the agent's ``Field.GROUP_ID`` and ``Field.GROUP_REWARD`` of the step its rewards came with
    (for a group trainer such as MA-POCA); PPO and SAC do not train on them, as ML-Agents' do not.
    With groups, each transition also carries its groupmate status and each trajectory its
    groupmates' next observations (:mod:`kerasrl.trainers.groupmates`).
    """

    #: Padding of a field when an agent's trajectory gains a field late (all actions allowed).
    padding_values: dict[str, float] = {Field.ACTION_MASK: 1.0}

    def __init__(self, spec: BehaviorSpec, reward_signals: Mapping[str, RewardSignal], experience_fields: Sequence[str],
                 stats: Any, queue: TrajectoryQueue, time_horizon: Optional[int] = None,
                 value_estimates: Optional[ValueEstimates] = None, reward_buffer: Optional[deque[float]] = None,
                 episode_stats: bool = True) -> None:
        self.spec = spec
        self.reward_signals = reward_signals
        self.experience_fields = list(experience_fields)
        self.buffer = Buffer()
        self.stats = stats
        self.queue = queue
        self.time_horizon = time_horizon
        self.value_estimates = value_estimates
        self.reward_buffer = reward_buffer
        self.episode_stats = episode_stats
        #: With ``flush_on_update``: the rollout whose end closes every trajectory.
        self.rollout: Optional[Rollout] = None
        #: The version (update count) of the weights acting now, when the trainer counts how old
        #: its data is (threaded trainers); each trajectory carries its first step's version.
        self.policy_version: Optional[int] = None
        self.agents = AgentCounters(["return_environment", *(f"return_{n}" for n in reward_signals),
                                     "episode_steps", "trajectory_length", "policy_version"])
        self._pending: dict[int, tuple[StepResult, int, dict[str, Any]]] = {}
        self.store_next_obs = any(s.needs_next_observations for s in reward_signals.values())
        #: Rewards, GAE and episode statistics of the signals that are not ``per_step``.
        self.deferred = UpdateBatchRewards(reward_signals, self.agents, stats)
        self.recent_returns: deque[float] = deque(maxlen=100)
        #: Lengths (agent steps) of the same finished episodes (``kerasrl.PPO.fit``'s logs).
        self.recent_lengths: deque[float] = deque(maxlen=100)
        self.episodes_completed = 0
        #: Transitions appended so far.
        self.transitions = 0
        #: The groupmate status of the transitions (used only when the environment reports groups).
        self.groupmates = GroupmateStatus(spec)
        #: Whether each step's mean value estimates go to the statistics (a trainer whose critic is
        #: not the acting policy's, MA-POCA's, reports its own).
        self.record_value_estimates = True

    def _match(self, curr: StepResult, nxt: StepResult,
               outputs: dict[str, Any]) -> list[tuple[StepResult, Any, dict[str, Any], Any]]:
        """Groups of (source result, source rows, source outputs, next rows) to append.

        Rows are a ``slice`` when every agent of an unchanged agent set continues (the common case).
        """
        a, b = curr.agent_ids, nxt.agent_ids
        if a is b or a.tobytes() == b.tobytes():  # int64 arrays: equal bytes ⇔ equal ids
            if not (np.count_nonzero(curr.terminated) or np.count_nonzero(curr.truncated)):
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

    def _observation_fields(self, fields: dict[str, np.ndarray], result: StepResult, rows: Any, nxt: bool,
                            vector: Optional[np.ndarray] = None) -> None:
        """The observations of ``rows``; ``vector``: their vector observations as the policy
        already concatenated them to act (else concatenated here)."""
        spec = self.spec
        visual = spec.visual_observation_indices
        if vector is not None and not visual:  # the policy's vector observations are all there is (hot path)
            fields[Field.NEXT_VECTOR_OBS if nxt else Field.VECTOR_OBS] = vector
            return
        obs = [o[rows] for o in result.observations]
        if spec.vector_observation_size:
            key = Field.NEXT_VECTOR_OBS if nxt else Field.VECTOR_OBS
            fields[key] = concat_vector_observations(spec, obs) if vector is None else vector
        for j, i in enumerate(visual):
            fields[Field.next_visual_obs(j) if nxt else Field.visual_obs(j)] = obs[i]

    def transition_fields(self, curr: StepResult, rows: Any, outputs: dict[str, Any], nxt: StepResult,
                          next_rows: Any) -> dict[str, np.ndarray]:
        """Every field stored for the transitions from ``rows`` of ``curr`` to ``next_rows`` of ``nxt``."""
        fields: dict[str, np.ndarray] = {}
        acted_on = outputs.get(Field.VECTOR_OBS)
        self._observation_fields(fields, curr, rows, nxt=False, vector=None if acted_on is None else acted_on[rows])
        if self.store_next_obs:
            self._observation_fields(fields, nxt, next_rows, nxt=True)
        for key in self.experience_fields:
            fields[key] = outputs[key][rows]
        n = len(nxt.rewards[next_rows])
        if self.spec.has_action_mask:
            masks = curr.action_mask
            fields[Field.ACTION_MASK] = masks[rows] if masks is not None else shared_ones(n, self.spec.action_mask_size)
        fields[Field.MASKS] = shared_ones(n)
        fields[Field.DONE] = nxt.done[next_rows].astype(np.float32)
        fields[Field.TERMINATED] = nxt.terminated[next_rows].astype(np.float32)
        fields[Field.TRUNCATED] = nxt.truncated[next_rows].astype(np.float32)
        fields[Field.ENVIRONMENT_REWARDS] = nxt.rewards[next_rows]
        if nxt.group_id is not None:  # only environments that report groups (ML-Agents' group rewards)
            fields[Field.GROUP_ID] = nxt.group_id[next_rows]
            fields[Field.GROUP_REWARD] = nxt.group_reward_or_zeros[next_rows]
        return fields

    def _record_step_stats(self, outputs: dict[str, Any]) -> None:
        entropy = outputs.get(Field.ENTROPY)
        if entropy is None:
            return
        n = entropy.shape[0] or 1
        self.stats["Policy/Entropy"].append(float(np.add.reduce(entropy)) / n)
        if not self.record_value_estimates:
            return
        for name, signal in self.reward_signals.items():
            self.stats[signal.value_name].append(float(np.add.reduce(outputs[Field.value_estimates(name)])) / n)

    def add_step(self, curr: Optional[StepResult], nxt: Optional[StepResult], outputs: Optional[dict[str, Any]]) -> None:
        """One env step of the behavior: the transitions from ``curr`` (which the policy acted on,
        giving ``outputs``) to ``nxt``, then every trajectory that closes goes on the queue."""
        if nxt is None or len(nxt) == 0:
            if curr is not None and outputs is not None and len(curr):
                # none of them reported this step (a Unity scene's agents may not): they wait
                for i, a in enumerate(curr.agent_ids.tolist()):
                    self._pending[a] = (curr, i, outputs)
            return
        if curr is not None and outputs is not None and len(curr):
            self.add_transitions(curr, nxt, outputs)
        elif self._pending:  # agents that acted before a step without them report now
            self.add_transitions(StepResult.empty(self.spec), nxt, {})
        if self.rollout is not None:
            self.rollout.steps += len(nxt)
        rows = self.ready_rows(nxt)
        if len(rows):
            self.close(nxt, rows)

    def ready_rows(self, nxt: StepResult) -> np.ndarray:
        """Rows of ``nxt`` whose trajectory closes now: non-empty, and its episode ended, it is
        longer than ``time_horizon``, or the rollout is complete."""
        lengths = self.trajectory_lengths(nxt.agent_ids)  # 1-D: ``nonzero()[0]`` is flatnonzero without its ravel
        if self.rollout is not None and self.rollout.done:
            return (lengths > 0).nonzero()[0]
        if self.time_horizon is None:
            return ((lengths > 0) & nxt.done).nonzero()[0]
        return ((lengths > 0) & (nxt.done | (lengths > self.time_horizon))).nonzero()[0]

    def close(self, nxt: StepResult, rows: np.ndarray) -> None:
        """Close the trajectories of ``rows`` of ``nxt``: bootstrap values of all of them in one
        call, then each, with its steps, on the queue; finished episodes to the statistics."""
        values = self.value_estimates(nxt, rows) if self.value_estimates is not None else {}
        ids = nxt.agent_ids[rows].tolist()
        terminated = nxt.terminated[rows].tolist()
        ended = nxt.done[rows].tolist()
        observations = [obs[rows] for obs in nxt.observations]
        mates: Optional[tuple[list[np.ndarray], np.ndarray]] = None
        if nxt.group_id is not None:
            mates = self.groupmates.next_observations(nxt, rows)
        for k, agent_id in enumerate(ids):
            bootstrap = {name: float(v[k]) for name, v in values.items()}
            group = None if mates is None else ([obs[k] for obs in mates[0]], mates[1][k])
            self._put(agent_id, bool(terminated[k]), bool(ended[k]), bootstrap, [obs[k] for obs in observations], group)

    def close_all(self) -> None:
        """Close every unfinished trajectory (cut short, no bootstrap values)."""
        for agent_id, length in self.agents.as_dict("trajectory_length").items():
            if length > 0:
                self._put(agent_id, False, False, {})

    def _put(self, agent_id: int, terminated: bool, ended: bool, bootstrap: dict[str, float],
             next_observations: Optional[list[np.ndarray]] = None,
             groupmates: Optional[tuple[list[np.ndarray], np.ndarray]] = None) -> None:
        """The agent's trajectory, its steps moved out of the agent's buffer, on the queue;
        ``groupmates``: its groupmates' next observations and their mask (groups only)."""
        steps = self.buffer[agent_id].take()
        self.agents.set("trajectory_length", agent_id, 0.0)
        version = int(self.agents.get("policy_version", agent_id))
        mates, mask = (None, None) if groupmates is None else groupmates
        self.queue.put(Trajectory(agent_id, steps, terminated, ended, bootstrap, policy_version=version,
                                  next_observations=next_observations, next_groupmate_observations=mates,
                                  next_groupmate_mask=mask))
        if ended and self.episode_stats:
            self.record_episode_end(agent_id)

    def add_transitions(self, curr: StepResult, nxt: StepResult, outputs: dict[str, Any]) -> None:
        """Append the transitions from ``curr`` (which the policy acted on, giving ``outputs``) to ``nxt``."""
        self._record_step_stats(outputs)
        cols = self.agents.columns
        all_slots = self.agents.slots(nxt.agent_ids)
        for src, rows, outs, next_rows in self._match(curr, nxt, outputs):
            ids = nxt.agent_ids[next_rows]
            if len(ids) == 0:
                continue
            slots = all_slots[next_rows]
            fields = self.transition_fields(src, rows, outs, nxt, next_rows)
            if nxt.group_id is not None:
                self.groupmates.add(fields, nxt, next_rows, self.buffer)
            for name, signal in self.reward_signals.items():
                fields[Field.value_estimates(name)] = np.asarray(outs[Field.value_estimates(name)], np.float32)[rows]
                if not signal.per_step:
                    continue
                result = signal.evaluate(src, nxt, next_rows)
                fields[Field.rewards(name)] = np.asarray(result.scaled_reward, np.float32)
                cols[f"return_{name}"][slots] += result.scaled_reward
            cols["return_environment"][slots] += fields[Field.ENVIRONMENT_REWARDS]
            cols["episode_steps"][slots] += 1.0
            if self.policy_version is not None:  # the version of each trajectory's first step
                starts = slots[cols["trajectory_length"][slots] == 0]
                cols["policy_version"][starts] = self.policy_version
            cols["trajectory_length"][slots] += 1.0
            self.buffer.append_batch(ids, fields, padding_values=self.padding_values)
            self.transitions += len(ids)

    def trajectory_lengths(self, agent_ids: np.ndarray) -> np.ndarray:
        """Steps in each agent's unfinished trajectory."""
        return self.agents.columns["trajectory_length"][self.agents.slots(agent_ids)]

    def end_episode(self) -> None:
        """An environment reset: drop unfinished trajectories and episode counters."""
        self.buffer.reset_local_buffers()
        self._pending.clear()
        self.agents.clear()

    def record_episode_end(self, agent_id: int) -> float:
        """Move an agent's finished-episode statistics into ``stats``; returns its environment return."""
        agents = self.agents
        self.stats["Environment/Episode Length"].append(agents.get("episode_steps", agent_id))
        self.recent_lengths.append(agents.get("episode_steps", agent_id))
        agents.set("episode_steps", agent_id, 0.0)
        value = agents.get("return_environment", agent_id)
        agents.set("return_environment", agent_id, 0.0)
        self.stats["Environment/Cumulative Reward"].append(value)
        self.recent_returns.append(value)
        if self.reward_buffer is not None:
            self.reward_buffer.appendleft(value)
        self.episodes_completed += 1
        for name, signal in self.reward_signals.items():
            if signal.per_step:  # the others' returns are complete at the next update (``deferred``)
                self.stats[signal.stat_name].append(agents.get(f"return_{name}", agent_id))
                agents.set(f"return_{name}", agent_id, 0.0)
        return value
