"""POCATrainer: trajectories with their groupmate status → λ-returns and counterfactual advantages
per reward signal → MA-POCA updates (ML-Agents' ``poca/trainer.py``).

For the trajectories that close together (``process_trajectory_batch``), in one call of the
centralised critic: the group value ``V`` of every step (the agent's and its groupmates'
observations), the agent's baseline ``B`` (its observations, its groupmates' observations and
actions) and each trajectory's bootstrap value: ``V`` of the agent's next
observations with its groupmates' next ones. The extrinsic rewards are the individual rewards plus
the group reward (times the signal's strength). Returns are TD(λ) returns over ``V``; the advantage
is ``G^λ − B``. A trajectory cut by ``time_horizon`` is bootstrapped from that group value; one whose
agent left the group early (its episode ended, its group goes on) from the value of the remaining
groupmates' next observations, so that what the group earns after it left still reaches its last
actions; only when the whole group terminated is the bootstrap 0.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from functools import partial
from typing import Any, Optional

import numpy as np

from kerasrl.bc.module import BCModule
from kerasrl.common.gae import gae_and_returns, segmented_gae_and_returns
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.poca.learner import POCALearner
from kerasrl.poca.numpy_critic import NumpyCritic, chunked_estimates
from kerasrl.rewards import RewardSignal
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec, concat_vector_observations
from kerasrl.timers import hierarchical_timer
from kerasrl.trainers.checkpoint import INITIALIZE_FIX, CheckpointSaver, initialize_from_advice
from kerasrl.trainers.groupmates import groupmate_keys, widen_groupmates
from kerasrl.trainers.rl_trainer import RLTrainer, concatenated, set_split, trajectory_ends
from kerasrl.trainers.threaded import TakenTrajectories, acting_snapshot, rebase_log_probs
from kerasrl.trainers.trajectory import Trajectory

logger = logging.getLogger("kerasrl.trainers")

GROUP_REWARD_STAT = "Environment/Group Cumulative Reward"
BASELINE_LOSS_STAT = "Losses/Baseline Loss"


def normalized(advantages: np.ndarray) -> np.ndarray:
    """Advantages shifted and scaled to mean 0, std 1 over the update buffer (ML-Agents)."""
    adv = np.asarray(advantages, np.float32)
    return ((adv - adv.mean()) / (adv.std() + 1e-10)).astype(np.float32)


def lambda_returns_and_advantages(rewards: np.ndarray, values: np.ndarray, baselines: np.ndarray, value_next: float,
                                  gamma: float, lambd: float) -> tuple[np.ndarray, np.ndarray]:
    """``(G^λ, G^λ − B)``: ML-Agents' ``lambda_return`` over the group values (the returns of GAE
    over them, the same recurrence ``G_t = r_t + γ((1 − λ)V_{t+1} + λG_{t+1})``) and the
    counterfactual advantages against the baselines."""
    _, returns = gae_and_returns(rewards, values, value_next=value_next, gamma=gamma, lambd=lambd)
    return returns, (returns - np.asarray(baselines, np.float32)).astype(np.float32)


class POCATrainer(RLTrainer):
    """MA-POCA over one behavior's agents: the actor acts per agent (the ordinary batched policy);
    the centralised critic learns the group's value and each agent's counterfactual baseline.

    ``threaded: true`` (:mod:`kerasrl.trainers.threaded`, through the hooks below): acting keeps
    the closed trajectories; the update thread estimates them with the critic of the update
    before (one call of the critic for all of them), then updates, with the PPO reference
    log-probabilities taken from the learner's actor at the update's start. Several hosts are
    refused (one clear line).
    """

    supports_threaded = True  # ``threaded: true`` is allowed (``--threaded`` sets it)

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        self.seed = context.seed
        self.hyperparameters = settings.hyperparameters
        try:
            self.learner = POCALearner.for_behavior(spec, list(self.reward_signals), settings, self.seed, self.max_steps)
        except ModelConfigError as e:
            raise UnityTrainerException(f"Behavior {behavior_name}: {e}") from e
        model = self.learner.actor
        for signal in self.reward_signals.values():
            signal.use_normalizer(model.normalizer)
        self._policy = ActorCriticPolicy(spec, model, seed=self.seed, inference=settings.inference)
        self.processor = self.make_processor(self._policy.experience_fields)
        self.processor.record_value_estimates = False  # the actor's value heads are not POCA's: see process_trajectory
        #: The critic's per-trajectory estimates: its numpy mirror, unless ``inference: tf``.
        self._numpy_critic = (None if settings.inference == "tf"
                              else NumpyCritic(self.learner.critic, settings.network.activation))
        self._estimates = (self._numpy_critic.estimates if self._numpy_critic is not None
                           else partial(chunked_estimates, self.learner.estimate_fn(),
                                        self.learner.critic.self_attention.attention.num_heads))
        self._keys = groupmate_keys(spec)
        #: Groupmates per row of the update buffer (the widest trajectory's).
        self.groupmate_width = 0
        #: Per agent: its episode's group rewards, and the deferred signals' rewards, so far.
        self._episode_returns: defaultdict[int, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
        #: Where processing trajectories records its statistics (threaded: the update thread's).
        self._trajectory_stats = self.stats
        self._next = TakenTrajectories()
        self.bc_module: Optional[BCModule] = None
        if settings.pretraining is not None:
            hp = self.hyperparameters
            self.bc_module = BCModule(model, spec, settings.pretraining, hp.learning_rate, hp.batch_size, hp.num_epoch,
                                      seed=self.seed, behavior=behavior_name)
        self.init_threading()
        self.saver = self._make_saver()
        self.start_from_checkpoints()

    @classmethod
    def checkpointed_model(cls, behavior: str, spec: BehaviorSpec, settings: TrainerSettings,
                           seed: int) -> tuple[Any, dict[str, Any]]:
        """The actor and what its checkpoints hold (``kerasrl export``)."""
        learner = POCALearner.for_behavior(spec, list(settings.reward_signals), settings, seed, settings.max_steps)
        return learner.actor, cls._checkpointed(learner)

    @staticmethod
    def _checkpointed(learner: POCALearner) -> dict[str, Any]:
        return {"model": learner.actor, "critic": learner.critic, "optimizer": learner.optimizer}

    def _make_saver(self) -> CheckpointSaver:
        """Checkpoints of the actor, the critic, the optimizers (POCA's, BC's) and the reward signals' state."""
        bc_state = {} if self.bc_module is None else {"bc_optimizer": self.bc_module.optimizer}
        return CheckpointSaver(self.model_path, self.context.keep_checkpoints, self.behavior_record(),
                               **self._checkpointed(self.learner), **bc_state, **self.reward_state())

    @property
    def policy(self) -> ActorCriticPolicy:
        return self._policy

    @property
    def trained_model(self) -> ActorCritic:
        return self.learner.actor

    # -- checkpoints -------------------------------------------------------------------
    def save_model(self) -> str:
        with self.learner_lock:
            self.learner.wait_warm_up()  # no compilation left running when a short run ends here
            return self.saver.save(self.step, self.update_count)

    def load_model(self) -> None:
        self.step, self.update_count = self.saver.restore()
        self._refresh()
        self.threaded_updates.sync()
        logger.info("Restored %s at step %d", self.behavior_name, self.step)

    def initialize_from(self, model_path: str) -> None:
        """Start from another run's newest intact checkpoint with the step and update count at 0."""
        CheckpointSaver(model_path, 1, **self._checkpointed(self.learner)).restore(initialize_from_advice(model_path),
                                                                                  INITIALIZE_FIX)
        self.step, self.update_count = 0, 0
        self._refresh()
        self.threaded_updates.sync()
        logger.info("Initialized %s from %s", self.behavior_name, model_path)

    # -- trajectories ------------------------------------------------------------------
    def process_trajectory(self, trajectory: Trajectory) -> None:
        """One closed trajectory: ``process_trajectory_batch`` of it alone."""
        self.process_trajectory_batch([trajectory])

    def process_trajectory_batch(self, trajectories: list[Trajectory]) -> None:
        """Rewards, the critic's estimates (one call for all the trajectories), λ-returns and
        advantages (one segmented call per signal), then each, in order, into the update buffer.
        The same as one by one (the estimates to float32 round-off), except that with
        ``normalize: true`` every trajectory is estimated and rewarded with the normalizer's
        statistics of before the batch (one by one, each saw the earlier ones' observations), and
        the critic's member-count scale is the batch's widest group from the first of them on."""
        if not trajectories:
            return
        ends = trajectory_ends(trajectories)
        self._fit_groupmates(trajectories)
        self._rewards(trajectories, ends)
        values, baselines, value_next = self._batch_estimates(trajectories)
        advantages, returns = [], []
        for name, signal in self.reward_signals.items():
            v_next = [0.0 if (t.group_done and signal.use_terminal_states) else v
                      for t, v in zip(trajectories, value_next[name].tolist())]
            _, ret = segmented_gae_and_returns(concatenated(trajectories, Field.rewards(name)), values[name], ends,
                                               v_next, signal.gamma, self.hyperparameters.lambd)
            adv = (ret - baselines[name]).astype(np.float32)
            for key, rows in ((Field.value_estimates(name), values[name]), (Field.returns(name), ret),
                              (Field.baseline_estimates(name), baselines[name]), (Field.advantage(name), adv)):
                set_split(trajectories, key, rows, ends)
            advantages.append(adv)
            returns.append(ret)
            self._estimate_stats(signal, values[name], baselines[name], ends)
        set_split(trajectories, Field.ADVANTAGES, np.mean(advantages, axis=0).astype(np.float32), ends)
        set_split(trajectories, Field.DISCOUNTED_RETURNS, np.mean(returns, axis=0).astype(np.float32), ends)
        self._append(trajectories)

    def _estimate_stats(self, signal: RewardSignal, values: np.ndarray, baselines: np.ndarray, ends: list[int]) -> None:
        """Each trajectory's mean value and baseline estimate, to the statistics."""
        for part_v, part_b in zip(np.split(values, ends[:-1]), np.split(baselines, ends[:-1])):
            self._trajectory_stats[signal.value_name].append(float(np.mean(part_v)))
            self._trajectory_stats[f"Policy/{signal.short_name} Baseline Estimate"].append(float(np.mean(part_b)))

    def _append(self, trajectories: list[Trajectory]) -> None:
        """The trajectories' observations into the normalizer (one merge each, as they came) and
        their steps into the update buffer; the first time, the update starts compiling."""
        if self.learner.actor.normalizer is not None:
            for t in trajectories:
                self.learner.update_normalization(t.steps[Field.VECTOR_OBS].get_batch())
            if not self.threaded:  # (threaded: acting takes the statistics with the next weights)
                self._policy.refresh_normalizer()
        for t in trajectories:
            self.training_buffer.append_agent_buffer(t.steps, training_length=1, agent_id=t.agent_id)
        if self.update_count == 0 and self.learner.wants_warm_up:  # compile the update while acting
            update = self.training_buffer.update_buffer
            self.learner.start_warm_up({k: update[k].get_batch()[:1] for k in self.learner.batch_fields},
                                       self.hyperparameters.buffer_size + 1)

    def _fit_groupmates(self, trajectories: list[Trajectory]) -> None:
        """The trajectories' groupmate fields as wide as the update buffer's (widening that one
        when a trajectory is wider); zero groupmates where the environment reports no groups."""
        for steps in (t.steps for t in trajectories):
            if Field.GROUPMATE_MASK not in steps:
                n = len(steps[Field.MASKS])
                steps[Field.GROUPMATE_MASK].set(np.zeros((n, 0), np.float32))
                steps[Field.GROUPMATE_VECTOR_OBS].set(np.zeros((n, 0, self.spec.vector_observation_size), np.float32))
                actions = steps[Field.ACTIONS].get_batch()
                steps[Field.GROUPMATE_ACTIONS].set(np.zeros((n, 0, *actions.shape[1:]), actions.dtype))
        width = max(np.asarray(t.steps[Field.GROUPMATE_MASK].get_batch()).shape[1] for t in trajectories)
        if width > self.groupmate_width:
            widen_groupmates(self.training_buffer.update_buffer, self._keys, width)
            self.groupmate_width = width
            if self.learner.critic.note_group_size(width + 1) and self._numpy_critic is not None:
                self._numpy_critic.refresh()
        for t in trajectories:
            widen_groupmates(t.steps, self._keys, self.groupmate_width)

    def _rewards(self, trajectories: list[Trajectory], ends: list[int]) -> None:
        """The group reward added to the extrinsic rewards (times its strength); the deferred
        signals' (curiosity, GAIL, RND) rewards of the trajectories (one call per signal for all
        of them); their episode statistics."""
        for name, signal in self.reward_signals.items():
            if not signal.per_step:
                batch = {k: np.asarray(concatenated(trajectories, k)) for k in signal.batch_fields}
                set_split(trajectories, Field.rewards(name),
                          np.asarray(signal.evaluate_batch(batch).scaled_reward, np.float32), ends)
        for trajectory in trajectories:
            self._group_rewards(trajectory)

    def _group_rewards(self, trajectory: Trajectory) -> None:
        """One trajectory's group reward into its extrinsic rewards, and its episode statistics."""
        steps, returns = trajectory.steps, self._episode_returns[trajectory.agent_id]
        group_reward = steps[Field.GROUP_REWARD].get_batch() if Field.GROUP_REWARD in steps else None
        for name, signal in self.reward_signals.items():
            if not signal.per_step:
                returns[signal.stat_name] += float(steps[Field.rewards(name)].get_batch().sum())
            elif name == "extrinsic" and group_reward is not None:
                extrinsic = steps[Field.rewards(name)].get_batch() + np.float32(signal.strength) * group_reward
                steps[Field.rewards(name)].set(extrinsic.astype(np.float32))
        if group_reward is not None:
            returns[GROUP_REWARD_STAT] += float(np.sum(group_reward))
        if trajectory.episode_ended:
            for key, value in self._episode_returns.pop(trajectory.agent_id).items():
                self._trajectory_stats[key].append(value)

    def estimates(self, trajectory: Trajectory) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float]]:
        """Per reward signal: the group value of every step, the agent's baseline of every step and
        the bootstrap value (the group value of the next observations: its own and its groupmates'),
        in one call of the critic."""
        values, baselines, value_next = self._batch_estimates([trajectory])
        return values, baselines, {name: float(v[0]) for name, v in value_next.items()}

    def _batch_estimates(self, trajectories: list[Trajectory]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                                          dict[str, np.ndarray]]:
        """Per reward signal: the group values and baselines of every step of the trajectories (one
        after the other) and each trajectory's bootstrap value, in one call of the critic: the
        bootstrap rows (one per trajectory) ride after the steps."""
        own = np.asarray(concatenated(trajectories, Field.VECTOR_OBS), np.float32)
        mates = np.asarray(concatenated(trajectories, Field.GROUPMATE_VECTOR_OBS), np.float32)
        actions = np.asarray(concatenated(trajectories, Field.GROUPMATE_ACTIONS),
                             np.int32 if self.spec.is_discrete else np.float32)
        mask = np.asarray(concatenated(trajectories, Field.GROUPMATE_MASK), np.float32)
        ends = trajectory_ends(trajectories)
        nxt = [self._next_group(t, own[end - 1], mates.shape[1]) for t, end in zip(trajectories, ends)]
        with hierarchical_timer("poca.estimates"):
            values, baselines = self._estimates(
                np.concatenate([own, np.stack([g[0] for g in nxt])]), np.concatenate([mates, np.stack([g[1] for g in nxt])]),
                np.concatenate([actions, np.zeros((len(nxt), *actions.shape[1:]), actions.dtype)]),
                np.concatenate([mask, np.stack([g[2] for g in nxt])]))
        n = len(own)
        out_v = {name: np.asarray(v, np.float32).reshape(-1) for name, v in values.items()}
        out_b = {name: np.asarray(b, np.float32).reshape(-1)[:n] for name, b in baselines.items()}
        # cut short without next observations: bootstrap from its last step
        rows = np.array([n + k if t.next_observations is not None else end - 1
                         for k, (t, end) in enumerate(zip(trajectories, ends))])
        return {name: v[:n] for name, v in out_v.items()}, out_b, {name: v[rows] for name, v in out_v.items()}

    def _next_group(self, trajectory: Trajectory, last: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entities of the bootstrap value: the agent's next vector observations, its
        groupmates' ``[width, V]`` and their mask ``[width]``. An agent whose episode terminated while
        its groupmates go on (it left the group) keeps its final observation among them, as
        ML-Agents' POCA does: the bootstrap is the value of the group it left, whose reward is still to come."""
        size = self.spec.vector_observation_size
        own = last if trajectory.next_observations is None else \
            concat_vector_observations(self.spec, [o[None] for o in trajectory.next_observations])[0]
        mates, mask = np.zeros((width, size), np.float32), np.zeros(width, np.float32)
        if trajectory.next_groupmate_observations is not None and trajectory.next_groupmate_mask is not None:
            got = concat_vector_observations(self.spec, trajectory.next_groupmate_observations)
            k = min(len(got), width)
            mates[:k], mask[:k] = got[:k], trajectory.next_groupmate_mask[:k]
        return np.asarray(own, np.float32), mates, mask

    # -- updates -----------------------------------------------------------------------
    def _update_buffer_length(self) -> int:
        update = self.training_buffer.update_buffer
        return len(update[Field.ACTIONS]) if Field.ACTIONS in update else 0

    def is_ready_update(self) -> bool:
        if self.threaded:
            return self.threaded_updates.ready()
        return self._update_buffer_length() > self.hyperparameters.buffer_size

    def update_policy(self) -> None:
        """An MA-POCA update over the update buffer, the reward signals' and BC's updates, then
        clear it. Threaded: hand the update over to the update thread."""
        if self.threaded:
            self.threaded_updates.hand_over()
            return
        self.last_update_metrics = self._update(self.step, self.stats)
        self._refresh()

    def _update(self, step: int, stats: defaultdict[str, list[float]]) -> dict[str, float]:
        """The update at trainer step ``step``, its statistics into ``stats``; its metrics."""
        update = self.training_buffer.update_buffer
        batch = {key: update[key].get_batch() for key in self.learner.batch_fields}
        batch[Field.ADVANTAGES] = normalized(batch[Field.ADVANTAGES])
        if not np.isfinite(batch[Field.ADVANTAGES]).all():
            raise UnityTrainerException(f"Behavior {self.behavior_name}: non-finite advantages in the update buffer.")
        with hierarchical_timer("poca.update"):
            metrics = self.learner.update(batch, step, seed=self.seed * 100003 + self.update_count)
        self.update_count += 1
        if not np.isfinite(metrics["loss"]):
            raise UnityTrainerException(f"Behavior {self.behavior_name}: the POCA loss became {metrics['loss']}.")
        for key, stat in (("value_loss", "Losses/Value Loss"), ("baseline_loss", BASELINE_LOSS_STAT),
                          ("policy_loss", "Losses/Policy Loss"), ("learning_rate", "Policy/Learning Rate"),
                          ("epsilon", "Policy/Epsilon"), ("beta", "Policy/Beta")):
            stats[stat].append(abs(metrics[key]) if key == "policy_loss" else metrics[key])
        n_sequences = max(self.hyperparameters.batch_size, 1)
        with hierarchical_timer("reward_signals.update"):
            for signal in self.reward_signals.values():
                for key, value in signal.update(update, n_sequences).items():
                    stats[key].append(value)
        if self.bc_module is not None:
            with hierarchical_timer("bc.update"):
                for key, value in self.bc_module.update(step).items():
                    stats[key].append(value)
        self.training_buffer.reset_update_buffer()
        return metrics

    # -- threaded updates: the hooks of kerasrl.trainers.threaded ---------------------------
    def prepare_threaded(self) -> None:
        """Threaded: act with the numpy mirror of the actor (which takes the weights of each update
        whole); processing the trajectories (their estimates and statistics) moves to the update thread."""
        if self._policy.numpy_model is None:
            raise TrainerConfigError(f"Behavior {self.behavior_name}: threaded: true acts with the numpy mirror of the "
                                     "policy, which this network or inference: tf rules out; set threaded: false.")
        self._trajectory_stats = self.threaded_updates.stats
        self._next = TakenTrajectories()

    def take_for_update(self, trajectory: Trajectory) -> None:
        if self.update_count == 0 and self.learner.wants_warm_up:
            self._warm_up_from(trajectory)
        self._next.take(trajectory)

    def _warm_up_from(self, trajectory: Trajectory) -> None:
        """Threaded: compile the update while the first rollout is acted, shaped as the update
        buffer will be from this first trajectory's fields (the estimates' and advantages' one
        number per row); without groupmate fields (no groups reported yet) the first update compiles it."""
        steps = trajectory.steps
        if Field.GROUPMATE_MASK not in steps:
            return
        template = {k: (steps[k].get_batch()[:1] if k in steps else np.zeros(1, np.float32))
                    for k in self.learner.batch_fields}
        self.learner.start_warm_up(template, self.hyperparameters.buffer_size + 1)

    def threaded_update_due(self) -> bool:
        return self._next.rows > self.hyperparameters.buffer_size

    def cut_update(self) -> tuple[TakenTrajectories, list[int]]:
        data, self._next = self._next, TakenTrajectories()
        return data, data.versions

    def run_update(self, data: TakenTrajectories, step: int,
                   stats: defaultdict[str, list[float]]) -> tuple[Any, dict[str, float]]:
        """The handed-over trajectories estimated by the critic now (one batch between each two
        resets), the reference log-probabilities from the learner's actor, one update; the new
        weights and the normalizer's statistics as numpy."""
        for k, trajectories in enumerate(data.between_resets()):
            if k:
                self._episode_returns.clear()
            self.process_trajectory_batch(trajectories)
        update = self.training_buffer.update_buffer
        rebase_log_probs(update, self.learner.log_probs({k: update[k].get_batch() for k in self.learner.batch_fields}))
        metrics = self._update(step, stats)
        if self._numpy_critic is not None:
            self._numpy_critic.refresh()
        return acting_snapshot(self.learner.actor), metrics

    def apply_update(self, snapshot: Any) -> None:
        self._policy.refresh(*snapshot)  # the weights and the normalizer's statistics

    def updates_stopped(self) -> None:
        self._refresh()

    def _refresh(self) -> None:
        """The acting policy and the critic's numpy mirror re-read the weights."""
        self._policy.refresh()
        if self._numpy_critic is not None:
            self._numpy_critic.refresh()

    def end_episode(self) -> None:
        """An environment reset: also drop the unfinished episodes' group rewards."""
        super().end_episode()
        if self.threaded:  # (the update thread drops them where it reaches this reset)
            self._next.mark_reset()
        else:
            self._episode_returns.clear()
        self._policy.forget_agents()
