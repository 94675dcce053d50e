"""PPOTrainer: trajectories → GAE per reward signal → PPO updates."""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Mapping, Optional

import numpy as np
import tensorflow as tf

from kerasrl.bc.module import BCModule
from kerasrl.buffer import AgentBuffer, Buffer
from kerasrl.common.fast_path import numpy_mirror
from kerasrl.common.gae import segmented_gae_and_returns
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.distribute import learner_strategy
from kerasrl.exception import TrainerConfigError, TrainerError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.ppo.batches import (
    StagedSegment,
    ThreadedData,
    append_trajectories,
    normalized_advantages,
    set_batch_advantages,
    vector_observations,
)
from kerasrl.ppo.learner import PPOLearner
from kerasrl.ppo.multi_host import PPOMultiHostHooks
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec, StepResult
from kerasrl.timers import hierarchical_timer
from kerasrl.trainers.agent_processor import Rollout
from kerasrl.trainers.checkpoint import INITIALIZE_FIX, CheckpointSaver, initialize_from_advice
from kerasrl.trainers.reward_normalization import RewardNormalizer
from kerasrl.trainers.rl_trainer import RLTrainer
from kerasrl.trainers.threaded import acting_snapshot, rebase_log_probs
from kerasrl.trainers.trajectory import Trajectory

logger = logging.getLogger("kerasrl.trainers")


class PPOTrainer(PPOMultiHostHooks, RLTrainer):
    """Proximal Policy Optimization over one behavior's agents.

    The learner owns the model, the optimizer and the schedules; the policy acts with the
    learner's weights; this trainer owns the step counter, the trajectories and the statistics.

    ``threaded: true`` (:mod:`kerasrl.trainers.threaded`, through the hooks below): updates run in
    a thread while the agents act, each on data acted by weights one update older than its start;
    ``run_update`` first recomputes the PPO reference log-probabilities (staged: the advantages too).
    Several hosts (:mod:`kerasrl.trainers.multi_host`): the hooks of :class:`PPOMultiHostHooks`.
    """

    supports_threaded = True  # ``threaded: true`` is allowed (``--threaded`` sets it)
    #: Class names that checkpoints of older runs recorded for this type (``type_of_record``).
    recorded_names = ("MultiHostPPOTrainer",)

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        self.seed = context.seed
        self.hyperparameters = settings.hyperparameters
        self.learner = self._make_learner()
        model = self.learner.actor_critic
        for signal in self.reward_signals.values():
            signal.use_normalizer(model.normalizer)
        self.sequence_length = model.sequence_length
        self._policy = ActorCriticPolicy(spec, model, seed=self.seed, inference=settings.inference)
        self.processor = self.make_processor(self._policy.experience_fields, self._policy.get_value_estimates)
        #: ``"raise"``: a non-finite PPO loss stops training with an error; ``"report"``: it is only
        #: reported in the metrics (``kerasrl.PPO.fit`` with ``TerminateOnNaN``, which stops there).
        self.nonfinite_loss = "raise"
        #: With ``flush_on_update``: agent steps since the last update, counting the steps that
        #: stored no experience (the reset step of Gymnasium's NEXT_STEP autoreset), so that
        #: updates come every ``buffer_size + 1`` agent steps, as Stable-Baselines3's rollouts of
        #: ``n_steps × n_envs``. A rollout may then hold a few fewer transitions than that; the
        #: learner pads a batch shorter than ``batch_size`` with masked rows.
        if self.hyperparameters.flush_on_update:
            self.processor.rollout = Rollout(self.hyperparameters.buffer_size)
        #: Behavioral cloning from ``pretraining``'s demonstration after every PPO update.
        self.bc_module: Optional[BCModule] = None
        if settings.pretraining is not None:
            hp = self.hyperparameters
            self.bc_module = BCModule(model, spec, settings.pretraining, hp.learning_rate, hp.batch_size, hp.num_epoch,
                                      seed=self.seed, behavior=behavior_name)
        #: ``normalize_rewards``: the extrinsic rewards' scaling (None: rewards as they come).
        self.reward_normalizer: Optional[RewardNormalizer] = None
        if self.hyperparameters.normalize_rewards and "extrinsic" in self.reward_signals:
            self.reward_normalizer = RewardNormalizer(self.reward_signals["extrinsic"].gamma)
        self.init_threading()
        self.saver = self._make_saver()
        self.start_from_checkpoints()
        #: Compile the update ahead at the first step of training (``PPOLearner.start_warm_up``),
        #: not before: by then every restore of the optimizer's state (checkpoints, callbacks) is done.
        self._warm_up_pending = context.train_model

    # -- threaded updates: the hooks of kerasrl.trainers.threaded ---------------------------
    def prepare_threaded(self) -> None:
        """Threaded: act with the numpy mirror (which takes the weights of each update whole);
        without deferred reward signals, stage each update's buffer in the acting thread."""
        if self._policy.numpy_model is None:
            if numpy_mirror(self._policy.model).supports(self._policy.model):  # only inference: tf keeps it from numpy
                why, fix = "inference: tf makes this policy act with TensorFlow", "set inference: auto or threaded: false"
            else:
                why, fix = "no numpy mirror exists for this network (a recurrent visual or resnet one)", "set threaded: false"
            raise TrainerConfigError(
                f"Behavior {self.behavior_name}: threaded: true acts with the numpy mirror of the policy, and {why}; {fix}.")
        self.processor.deferred.stats = self.threaded_updates.stats
        self._log_prob_fn: Optional[Any] = None  # the learner's log-probabilities and values, traced at first use
        self._values_fn: Optional[Any] = None
        # Without deferred reward signals the acting thread stages each update's buffer (GAE, appends) while
        # the XLA update runs, which leaves Python's GIL free: the update thread's Python then delays no update.
        self._next = ThreadedData(None if self.processor.deferred else Buffer())

    def take_for_update(self, trajectory: Trajectory) -> None:
        """Stage the trajectory into the next update's buffer, or (deferred reward signals, whose
        rewards the update computes) keep it for the update thread to process."""
        data, seq = self._next, self.sequence_length
        if data.staged is not None:
            self._stage(trajectory, data)
        else:
            data.trajectories.append(trajectory)
        data.versions.append(trajectory.policy_version)
        data.rows += -(-len(trajectory) // seq) * seq  # update-buffer rows (recurrent: whole padded sequences)

    def threaded_update_due(self) -> bool:
        return self._due(self._next.rows)

    def cut_update(self) -> tuple[ThreadedData, list[int]]:
        """The data gathered since the last hand-over, and a new rollout."""
        data = self._next
        self._next = ThreadedData(None if data.staged is None else Buffer())
        if self.processor.rollout is not None:
            self.processor.rollout.restart()
        return data, data.versions

    def run_update(self, data: ThreadedData, step: int,
                   stats: defaultdict[str, list[float]]) -> tuple[Any, dict[str, float]]:
        """One update from ``data``; the new weights (and the normalizer's statistics) as numpy."""
        if data.staged is not None:
            self._update_normalizer(data.observations)
            self.training_buffer.update_buffer = data.staged.update_buffer
        self.process_trajectory_batch(data.trajectories)
        if self.learner.replicas == 1:
            refresh = data.staged is not None and self.sequence_length == 1
            self._rebase_on_learner(data.segments if refresh else None)
        weights, metrics = self._update(step, stats)
        return acting_snapshot(self.learner.actor_critic, weights), metrics

    def apply_update(self, snapshot: Any) -> None:
        self._policy.refresh(*snapshot)  # the weights and the normalizer's statistics

    def updates_stopped(self) -> None:
        self._policy.refresh()

    def _rebase_on_learner(self, segments: Optional[list[StagedSegment]]) -> None:
        """Threaded: the update buffer's PPO reference log-probabilities from the learner's weights
        at the update's start, so that the clipped ratio starts at 1 as an unthreaded update's
        does (the acting weights are one update older: with their log-probabilities many rows
        start outside the clip range and teach nothing). With ``segments`` (the staged
        trajectories), their value estimates, advantages and returns too, from the learner's
        critic: the rows' values in the same call, each trajectory's bootstrap value in one more."""
        update = self.training_buffer.update_buffer
        batch = {k: update[k].get_batch() for k in self.learner.batch_fields}
        log_prob, values = self._learner_outputs(batch)
        rebase_log_probs(update, log_prob)
        if segments is not None:
            self._refresh_advantages(update, values, segments)

    def _refresh_advantages(self, update: AgentBuffer, values: Mapping[str, np.ndarray],
                            segments: list[StagedSegment]) -> None:
        """GAE of every staged trajectory again (they fill the update buffer in order), with the
        learner's value estimates ``values`` and bootstrap values: one Cython call per reward signal."""
        advantages, returns = [], []
        ends = [seg.end for seg in segments]
        bootstrap = self._learner_bootstrap(segments)
        for name, signal in self.reward_signals.items():
            rewards, v = update[Field.rewards(name)].get_batch(), values[name]
            values_next = [0.0 if (seg.terminated and signal.use_terminal_states) else float(bootstrap[name][k])
                           for k, seg in enumerate(segments)]
            adv, ret = segmented_gae_and_returns(rewards, v, ends, values_next, signal.gamma, self.hyperparameters.lambd)
            update[Field.value_estimates(name)].set(v)
            update[Field.advantage(name)].set(adv)
            update[Field.returns(name)].set(ret)
            advantages.append(adv)
            returns.append(ret)
        update[Field.ADVANTAGES].set(np.mean(advantages, axis=0).astype(np.float32))
        update[Field.DISCOUNTED_RETURNS].set(np.mean(returns, axis=0).astype(np.float32))

    def _learner_bootstrap(self, segments: list[StagedSegment]) -> dict[str, np.ndarray]:
        """Each segment's bootstrap value of every reward signal from the learner's critic (one
        call), or the acting policy's where the trajectory kept no next observations."""
        acting = {name: np.array([seg.bootstrap.get(name, 0.0) for seg in segments], np.float32)
                  for name in self.reward_signals}
        kept = [k for k, seg in enumerate(segments) if seg.next_observations is not None]
        rows = [seg.next_observations for seg in segments if seg.next_observations is not None]
        if not rows:
            return acting
        model = self.learner.actor_critic
        if self._values_fn is None:
            signature = {k: v for k, v in model.input_signature().items() if k != Field.ACTION_MASK}
            self._values_fn = tf.function(model.values, input_signature=[signature], autograph=False)
        stacked = [np.stack([obs[i] for obs in rows]) for i in range(len(rows[0]))]
        inputs = {k: np.asarray(v, np.float32) for k, v in model.acting_inputs(stacked).items() if k != Field.ACTION_MASK}
        with hierarchical_timer("learner_bootstrap"):
            out = self._values_fn(inputs)
        for name in self.reward_signals:
            acting[name][kept] = out[Field.value_estimates(name)].numpy().reshape(-1)
        return acting

    def _learner_outputs(self, batch: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The learner's log-probabilities of ``batch``'s actions and its value estimates (one call)."""
        signature = self.learner.batch_signature()
        if self._log_prob_fn is None:
            model, seq = self.learner.actor_critic, self.sequence_length

            def outputs(inputs: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
                actions = inputs[Field.ACTIONS] if model.is_discrete else inputs[Field.ACTIONS_PRE]
                log_prob, _, values = model.evaluate_actions(inputs, actions, sequence_length=seq)
                return log_prob, values

            self._log_prob_fn = tf.function(outputs, input_signature=[signature], autograph=False)
        with hierarchical_timer("learner_outputs"):
            # (recurrent: the memory each sequence starts from, as the learner's mini-batches hold it)
            inputs = {k: tf.convert_to_tensor(batch[k][:: self.sequence_length] if k == Field.MEMORY else batch[k],
                                              spec.dtype) for k, spec in signature.items()}
            log_prob, values = self._log_prob_fn(inputs)
        return log_prob.numpy(), {k: np.asarray(v.numpy(), np.float32).reshape(-1) for k, v in values.items()}

    @classmethod
    def checkpointed_model(cls, behavior: str, spec: BehaviorSpec, settings: TrainerSettings,
                           seed: int) -> tuple[Any, dict[str, Any]]:
        """The actor-critic and what its checkpoints hold (``kerasrl export``)."""
        learner = PPOLearner.for_behavior(spec, list(settings.reward_signals), settings, seed, settings.max_steps)
        return learner.actor_critic, {"model": learner.actor_critic, "optimizer": learner.optimizer, "learner": learner}

    def _make_learner(self) -> PPOLearner:
        """The learner, built under the learners' strategy (acting stays on one device); a bad
        network or a batch_size that the replicas cannot share is an error naming the behavior."""
        try:
            with learner_strategy().scope():
                return PPOLearner.for_behavior(self.spec, list(self.reward_signals), self.settings, self.seed,
                                               self.max_steps)
        except ModelConfigError as e:
            raise UnityTrainerException(f"Behavior {self.behavior_name}: {e}") from e
        except TrainerError as e:
            if isinstance(e, UnityTrainerException):
                raise
            raise UnityTrainerException(f"Behavior {self.behavior_name}: {e}") from e

    def _make_saver(self) -> CheckpointSaver:
        """Checkpoints of the model, the optimizers (PPO's, BC's) and the reward signals' state."""
        bc_state = {} if self.bc_module is None else {"bc_optimizer": self.bc_module.optimizer}
        return CheckpointSaver(self.model_path, self.context.keep_checkpoints, self.behavior_record(),
                               model=self.learner.actor_critic, optimizer=self.learner.optimizer, learner=self.learner,
                               **bc_state, **self.reward_state())

    def expected_update_rows(self, agents: int) -> int:
        """Rows of a large update buffer, the size the update is compiled for ahead of time:
        ``buffer_size + 1`` in whole sequences, plus (recurrent) one padded sequence per agent
        for the episodes that end within a rollout (smaller buffers reuse that compilation)."""
        seq = self.sequence_length
        rows = -(-(self.hyperparameters.buffer_size + 1) // seq) * seq
        return rows + (agents * seq if seq > 1 else 0)

    @property
    def policy(self) -> ActorCriticPolicy:
        return self._policy

    # -- checkpoints -------------------------------------------------------------------
    def save_model(self) -> str:
        """Checkpoint weights, optimizer slots, normalizer, step and update count (threaded:
        between two updates, with the learner's update count)."""
        with self.learner_lock:
            self.learner.wait_warm_up()  # its optimizer state is the warm-up's until it puts it back
            if self.reward_normalizer is not None:
                self.reward_normalizer.write_variables()
            return self.saver.save(self.step, self.update_count)

    def load_model(self) -> None:
        self.step, self.update_count = self.saver.restore()
        if self.reward_normalizer is not None:
            self.reward_normalizer.read_variables()
        self.learner.set_schedules(self.step)
        self._policy.refresh()
        self.threaded_updates.sync()
        logger.info("Restored %s at step %d", self.behavior_name, self.step)

    def initialize_from(self, model_path: str) -> None:
        """Start from another run's newest intact checkpoint (weights, normalizer, optimizer)
        with the step and update count back at 0."""
        learner = self.learner
        CheckpointSaver(model_path, 1, model=learner.actor_critic, optimizer=learner.optimizer,
                        learner=learner).restore(initialize_from_advice(model_path), INITIALIZE_FIX)
        self.step, self.update_count = 0, 0
        learner.set_schedules(0)
        self._policy.refresh()
        self.threaded_updates.sync()
        logger.info("Initialized %s from %s", self.behavior_name, model_path)

    @property
    def trained_model(self) -> ActorCritic:
        return self.learner.actor_critic

    # -- trajectories ------------------------------------------------------------------
    def add_step(self, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                 outputs: Optional[dict[str, Any]]) -> None:
        """Also start compiling the update ahead, at the first step of training."""
        if self._warm_up_pending:
            nxt = current.get(self.behavior_name)
            self.learner.start_warm_up(self.expected_update_rows(0 if nxt is None else len(nxt)))
            self._warm_up_pending = False
        super().add_step(previous, current, outputs)

    def process_trajectory(self, trajectory: Trajectory) -> None:
        """One closed trajectory: ``process_trajectory_batch`` of it alone."""
        self.process_trajectory_batch([trajectory])

    def process_trajectory_batch(self, trajectories: list[Trajectory]) -> None:
        """GAE of the ``per_step`` signals now (one call per signal for all the trajectories);
        the others' (curiosity, GAIL) at the update (``processor.deferred``), all their rewards
        in one call. Then each, in order, into the update buffer: the same rows as one by one."""
        if not trajectories:
            return
        deferred = self.processor.deferred
        spans = self._advantages_into(trajectories, self.training_buffer)
        if self.learner.actor_critic.normalizer is not None:
            self._update_normalizer(vector_observations(trajectories))
        if deferred:
            for t, (start, end) in zip(trajectories, spans):
                deferred.add(t.agent_id, start, end, t.bootstrap, t.terminated, t.episode_ended)

    def _stage(self, trajectory: Trajectory, data: ThreadedData) -> None:
        """Threaded: ``trajectory`` into the next update's buffer (in the acting thread); its
        observations are kept for the normalizer, which the update thread feeds."""
        assert data.staged is not None
        [(start, end)] = self._advantages_into([trajectory], data.staged)
        data.segments.append(StagedSegment(start, end, trajectory.bootstrap, trajectory.terminated,
                                           trajectory.next_observations))
        if self.learner.actor_critic.normalizer is not None:
            data.observations.extend(vector_observations([trajectory]))

    def _advantages_into(self, trajectories: list[Trajectory], buffer: Buffer) -> list[tuple[int, int]]:
        """The trajectories' advantages and returns (placeholders for the deferred signals), then
        their steps appended to ``buffer``'s update buffer, in order; returns their rows there."""
        if self.reward_normalizer is not None:  # (in order: its statistics move with each trajectory)
            key = Field.rewards("extrinsic")
            for t in trajectories:
                t.steps[key].set(self.reward_normalizer(t.agent_id, t.steps[key].get_batch(), t.episode_ended))
        set_batch_advantages(trajectories, self.reward_signals, self.processor.deferred, self.hyperparameters.lambd)
        return append_trajectories(buffer, trajectories, self.sequence_length)

    def _update_normalizer(self, observations: list[np.ndarray]) -> None:
        """Feed closed trajectories' observations to the normalizer, one merge per trajectory as
        they came (on several hosts: keep them for the update, where every host's are gathered);
        the acting policy then takes the statistics once."""
        for vector_obs in observations:
            if self.multi_host is not None:
                self.pending_observations.append(np.asarray(vector_obs, np.float32))
            else:
                self.learner.update_normalization(vector_obs)
        if observations and not self.threaded and self.multi_host is None:  # threaded: with the weights
            self._policy.refresh_normalizer()

    def end_episode(self) -> None:
        """An environment reset: also start every agent's recurrent memory afresh."""
        super().end_episode()
        self._policy.forget_agents()

    # -- updates -----------------------------------------------------------------------
    def _update_buffer_rows(self) -> int:
        """Rows in the update buffer, sequence padding included."""
        update = self.training_buffer.update_buffer
        return len(update[Field.MASKS]) if Field.MASKS in update else 0

    def _update_buffer_length(self) -> int:
        update = self.training_buffer.update_buffer
        return len(update[Field.ACTIONS]) if Field.ACTIONS in update else 0

    def is_ready_update(self) -> bool:
        if self.multi_host is not None:
            return self.multi_host.ready()
        return self.threaded_updates.ready() if self.threaded else self._due(self._update_buffer_length())

    def _due(self, rows: int) -> bool:
        """With ``rows`` collected: the rollout is done, else ``buffer_size`` is passed."""
        rollout = self.processor.rollout
        if rollout is not None:
            return rollout.done and rows > 0
        return rows > self.hyperparameters.buffer_size

    def learning_batch(self) -> dict[str, np.ndarray]:
        """The learner's fields of the update buffer (several hosts: every host's, in worker order),
        advantages normalised over the real rows."""
        ub, fields = self.training_buffer.update_buffer, self.learner.batch_fields
        batch = self.multi_host.learning_batch() if self.multi_host else {key: ub[key].get_batch() for key in fields}
        batch[Field.ADVANTAGES] = normalized_advantages(batch[Field.ADVANTAGES], batch[Field.MASKS])
        return batch

    def update_policy(self) -> None:
        """A PPO update over the update buffer, the reward signals' own updates, then clear it
        (fully on-policy). Threaded: hand the update over to the update thread."""
        if self.threaded:
            self.threaded_updates.hand_over()
            return
        with self.collectives():
            weights, self.last_update_metrics = self._update(self.step, self.stats)
            if self.processor.rollout is not None:
                self.processor.rollout.restart()
            self._policy.refresh(weights)

    def _update(self, step: int,
                stats: defaultdict[str, list[float]]) -> tuple[Optional[list[np.ndarray]], dict[str, float]]:
        """The update at trainer step ``step``, its statistics into ``stats``; returns the new
        weights when the learner has them as numpy (else None: read them from the model) and
        the update's metrics."""
        with hierarchical_timer("reward_signals.evaluate"):
            self.processor.deferred.finish(self.training_buffer.update_buffer, self.hyperparameters.lambd)
        batch = self.learning_batch()
        if not np.isfinite(batch[Field.ADVANTAGES]).all():
            raise UnityTrainerException(f"Behavior {self.behavior_name}: non-finite advantages in the update buffer.")
        with hierarchical_timer("ppo.update"):
            metrics = self.learner.update(batch, step, seed=self.seed * 100003 + self.update_count)
        self.update_count += 1
        if not np.isfinite(metrics["loss"]) and self.nonfinite_loss == "raise":
            raise UnityTrainerException(f"Behavior {self.behavior_name}: the PPO loss became {metrics['loss']}.")
        stats["Losses/Value Loss"].append(metrics["value_loss"])
        stats["Losses/Policy Loss"].append(abs(metrics["policy_loss"]))
        stats["Policy/Learning Rate"].append(metrics["learning_rate"])
        n_sequences = max(self.hyperparameters.batch_size // self.sequence_length, 1)
        with hierarchical_timer("reward_signals.update"):
            for signal in self.reward_signals.values():
                for key, value in signal.update(self.training_buffer.update_buffer, n_sequences).items():
                    stats[key].append(value)
        weights = self.learner.latest_weights
        if self.bc_module is not None:
            with hierarchical_timer("bc.update"):
                for key, value in self.bc_module.update(step).items():
                    stats[key].append(value)
            weights = None  # BC moved the weights after the PPO update: the policy re-reads them
        self.training_buffer.reset_update_buffer()
        return weights, metrics
