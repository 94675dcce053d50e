"""PPOTrainer: trajectories → GAE per reward signal → PPO updates."""
from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from kerasrl.bc.module import BCModule
from kerasrl.buffer import AgentBuffer, Buffer
from kerasrl.common.fast_path import numpy_mirror
from kerasrl.common.gae import gae_and_returns, segmented_gae_and_returns
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.distribute import learner_strategy
from kerasrl.exception import TrainerConfigError, TrainerError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.ppo.learner import PPOLearner
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec, StepResult
from kerasrl.timers import get_timer_root, get_timer_stack, hierarchical_timer, merge_worker_tree, set_gauge
from kerasrl.trainers.agent_processor import Rollout
from kerasrl.trainers.checkpoint import INITIALIZE_FIX, CheckpointSaver, initialize_from_advice
from kerasrl.trainers.reward_normalization import RewardNormalizer
from kerasrl.trainers.rl_trainer import RLTrainer
from kerasrl.trainers.trajectory import Trajectory
from kerasrl.trainers.update_thread import UpdateResult, UpdateThread, UpdateWork

logger = logging.getLogger("kerasrl.trainers")


class StagedSegment(NamedTuple):
    """A trajectory staged for a threaded update: its rows ``[start, end)`` of the update buffer,
    the acting policy's bootstrap values, whether it terminated, and the observations those
    values were estimated from (None: cut short without them)."""

    start: int
    end: int
    bootstrap: dict[str, float]
    terminated: bool
    next_observations: Optional[list[np.ndarray]]


def normalized_advantages(advantages: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Advantages shifted and scaled to mean 0, std 1 over the real rows (``masks`` 1); the
    padding rows of recurrent sequences stay 0 and are left out of the statistics, so that the
    real rows' advantages are centred whatever share of the batch the padding is (counting its
    zeros gave the real rows a mean of up to 1 and a std of ~1.3 on the ``lstm`` bench task)."""
    adv = np.asarray(advantages, np.float32)
    real = np.asarray(masks) > 0
    if real.all():
        return (adv - adv.mean()) / (adv.std() + 1e-10)
    if not real.any():
        return np.zeros_like(adv)
    kept = adv[real]
    return np.where(real, (adv - kept.mean()) / (kept.std() + 1e-10), 0.0).astype(np.float32)


class PPOTrainer(RLTrainer):
    """Proximal Policy Optimization over one behavior's agents.

    The learner owns the model, the optimizer and the schedules; the policy acts with the
    learner's weights; this trainer owns the step counter, the trajectories and the statistics.

    ``threaded: true``: the updates run in an :class:`~kerasrl.trainers.update_thread.UpdateThread`
    while the agents act. The acting thread cuts the trajectories into updates where an
    unthreaded trainer would update, hands each over, and then takes the weights of the update
    before it: an update's data was acted by weights one update older than its own start.
    """

    #: Whether ``threaded: true`` is allowed (not where an update gathers from several hosts).
    supports_threaded = True
    #: The class that trains this type on several hosts (``kerasrl.trainers.factory``).
    MULTI_HOST_TRAINER = "kerasrl.ppo.multi_host:MultiHostPPOTrainer"

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
        self.update_count = 0
        self.last_update_metrics: dict[str, float] = {}
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
        self._init_threading()
        self.saver = self._make_saver()
        if context.load_model:
            self.load_model()
        elif context.initial_model_path(behavior_name, settings) is not None:
            self.initialize_from(str(context.initial_model_path(behavior_name, settings)))
        #: Compile the update ahead at the first step of training (``PPOLearner.start_warm_up``),
        #: not before: by then every restore of the optimizer's state (checkpoints, callbacks) is done.
        self._warm_up_pending = context.train_model

    # -- threaded updates ----------------------------------------------------------------
    def _init_threading(self) -> None:
        """``threaded``: the update thread's state (started at the first update)."""
        self.threaded = bool(self.settings.threaded and self.context.train_model)
        self._update_thread: Optional[UpdateThread] = None
        #: Held while the learner's state changes (an update, the normalizer) or is read whole
        #: (a checkpoint, ``kerasrl.PPO.fit``'s callbacks).
        self.learner_lock = threading.RLock()
        #: Trajectories taken from the queue since the last hand-over, and their update rows.
        self._pending: list[Trajectory] = []
        self._pending_rows = 0
        #: Threaded without deferred reward signals: the acting thread builds the next update's
        #: buffer (GAE, appends) while the update thread runs the XLA update, which leaves
        #: Python's GIL free: the update thread's own Python then delays no update.
        self._staging: Optional[Buffer] = None
        self._staged_obs: list[np.ndarray] = []
        self._staged_versions: list[int] = []
        self._staged_segments: list[StagedSegment] = []
        self._log_prob_fn: Optional[Any] = None
        self._values_fn: Optional[Any] = None
        #: The update count whose weights the policy acts with, and the last one handed over.
        self._applied = self._handed = self.update_count
        #: The statistics the update thread records, moved into each result.
        self._thread_stats: defaultdict[str, list[float]] = defaultdict(list)
        #: Seconds acting waited for the first update of this session (threaded), None before it.
        self.first_wait_seconds: Optional[float] = None
        if not self.threaded:
            return
        if not self.supports_threaded:
            raise TrainerConfigError(f"Behavior {self.behavior_name}: threaded: true is not available when "
                                     "training on several hosts; set threaded: false.")
        if self._policy.numpy_model is None:
            if numpy_mirror(self._policy.model).supports(self._policy.model):  # only inference: tf keeps it from numpy
                why, fix = "inference: tf makes this policy act with TensorFlow", "set inference: auto or threaded: false"
            else:
                why, fix = "no numpy mirror exists for this network (a recurrent visual or resnet one)", "set threaded: false"
            raise TrainerConfigError(
                f"Behavior {self.behavior_name}: threaded: true acts with the numpy mirror of the policy, and {why}; {fix}.")
        self.processor.policy_version = self.update_count
        self.processor.deferred.stats = self._thread_stats
        if not self.processor.deferred:
            self._staging = Buffer()

    @property
    def updates_applied(self) -> int:
        """Updates whose weights the policy acts with (threaded: behind ``update_count`` while one runs)."""
        return self._applied if self.threaded else self.update_count

    def _sync_versions(self) -> None:
        """After a restore: the update count is the policy's version."""
        self._applied = self._handed = self.update_count
        if self.threaded:
            self.processor.policy_version = self.update_count

    def _rows(self, trajectory: Trajectory) -> int:
        """Update-buffer rows of ``trajectory`` (recurrent: whole padded sequences)."""
        n, seq = len(trajectory), self.sequence_length
        return -(-n // seq) * seq if seq > 1 else n

    def _threaded_ready(self) -> bool:
        """An unthreaded trainer's update condition, on the trajectories taken since the last hand-over."""
        if self._update_thread is not None:
            self._update_thread.check()
        rollout = self.processor.rollout
        if rollout is not None:
            return rollout.done and self._pending_rows > 0
        return self._pending_rows > self.hyperparameters.buffer_size

    def _hand_over(self) -> None:
        """Give the pending trajectories to the update thread, then act with the weights of the
        update before (waiting for it if it is still running)."""
        if self._update_thread is None:  # (a thread that failed raises its error at submit)
            self._update_thread = UpdateThread(f"Behavior {self.behavior_name}", self._threaded_update)
        if self._staging is not None:
            work = UpdateWork([], self.step, self._handed + 1, prepared=self._staging.update_buffer,
                              observations=self._staged_obs, versions=self._staged_versions,
                              segments=self._staged_segments)
            self._staging.update_buffer = AgentBuffer()
            self._staged_obs, self._staged_versions, self._staged_segments = [], [], []
        else:
            work = UpdateWork(self._pending, self.step, self._handed + 1,
                              versions=[t.policy_version for t in self._pending])
        self._update_thread.submit(work)
        self._handed += 1
        self._pending, self._pending_rows = [], 0
        if self.processor.rollout is not None:
            self.processor.rollout.restart()
        if self._handed - 1 > self._applied:
            waited = self._update_thread.waited_seconds
            self._apply(self._update_thread.wait_for(self._handed - 1))
            if self.first_wait_seconds is None:  # the first update's: it includes any compile left
                self.first_wait_seconds = self._update_thread.waited_seconds - waited

    def _threaded_update(self, work: UpdateWork) -> UpdateResult:
        """In the update thread: one update from ``work``'s trajectories; the new weights (and
        the normalizer's statistics) as an immutable snapshot."""
        stats = self._thread_stats
        with self.learner_lock:
            oldest = min(work.versions, default=self.update_count)
            stats["Policy/Staleness"].append(float(self.update_count - oldest))
            if work.prepared is not None:
                for vector_obs in work.observations:
                    self._update_normalizer(vector_obs)
                self.training_buffer.update_buffer = work.prepared
            for trajectory in work.trajectories:
                self.process_trajectory(trajectory)
            if self.learner.replicas == 1:
                refresh = work.prepared is not None and self.sequence_length == 1
                self._rebase_on_learner(work.segments if refresh else None)
            weights, metrics = self._update(work.step, stats)
            if weights is None:
                weights = [v.numpy() for v in self.learner.actor_critic.trainable_variables]
            normalizer = self.learner.actor_critic.normalizer
            norm = None if normalizer is None else (*normalizer.numpy_stats(), normalizer.clip)
        # (the hand-over's count, which the acting thread waits for, even if a callback reloaded the learner)
        result = UpdateResult(work.version, (weights, norm), {k: list(v) for k, v in stats.items()}, metrics)
        stats.clear()
        return result

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
        reference = np.zeros(batch[Field.ACTION_LOG_PROBS].shape, np.float32)
        reference[:, 0] = log_prob  # the loss sums the last axis: one column holds it
        update[Field.ACTION_LOG_PROBS].set(reference)
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

    def _apply(self, result: UpdateResult) -> None:
        """In the acting thread: act with ``result``'s weights from the next step on."""
        weights, norm = result.weights
        self._policy.refresh(weights, norm)
        for key, values in result.stats.items():
            self.stats[key].extend(values)
        self.last_update_metrics = result.metrics
        self._applied = result.version
        self.processor.policy_version = result.version

    def finish_updates(self, drain: bool) -> None:
        """Stop the update thread: after every handed-over update (``drain``, the end of
        training), else after the one in progress; the policy then acts with the learner's
        weights, and the thread's timers join the run's (``update_thread:{behavior}``)."""
        thread = self._update_thread
        if thread is None:
            return
        thread.stop(drain and thread.error is None)
        self._update_thread = None
        for result in thread.finished():
            self._apply(result)
        with self.learner_lock:
            self._policy.refresh()
            self._sync_versions()
        merge_worker_tree(thread.timers, root_name=f"update_thread:{self.behavior_name}", into=get_timer_root())
        overlap = max(thread.busy_seconds - thread.waited_seconds, 0.0)
        for name, value in (("update_seconds", thread.busy_seconds), ("acting_waited_seconds", thread.waited_seconds),
                            ("overlap_seconds", overlap)):
            set_gauge(f"{self.behavior_name}.threaded.{name}", value, get_timer_stack())
        if drain:
            thread.check()

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
        self._sync_versions()
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
        self._sync_versions()
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
        """GAE of the ``per_step`` signals now; the others' (curiosity, GAIL) at the update
        (``processor.deferred``), all their rewards in one call. Then into the update buffer."""
        deferred = self.processor.deferred
        start = self._update_buffer_rows()
        steps = self._advantages_into(trajectory, self.training_buffer)
        if self.learner.actor_critic.normalizer is not None and Field.VECTOR_OBS in steps:
            self._update_normalizer(steps[Field.VECTOR_OBS].get_batch())
        if deferred:
            deferred.add(trajectory.agent_id, start, self._update_buffer_rows(), trajectory.bootstrap,
                         trajectory.terminated, trajectory.episode_ended)

    def _stage(self, trajectory: Trajectory, staging: Buffer) -> None:
        """Threaded: ``trajectory`` into the next update's buffer (in the acting thread); its
        observations are kept for the normalizer, which the update thread feeds."""
        start = len(staging.update_buffer[Field.MASKS]) if Field.MASKS in staging.update_buffer else 0
        steps = self._advantages_into(trajectory, staging)
        self._staged_segments.append(StagedSegment(start, len(staging.update_buffer[Field.MASKS]), trajectory.bootstrap,
                                                   trajectory.terminated, trajectory.next_observations))
        if self.learner.actor_critic.normalizer is not None and Field.VECTOR_OBS in steps:
            self._staged_obs.append(steps[Field.VECTOR_OBS].get_batch())
        self._staged_versions.append(trajectory.policy_version)

    def _advantages_into(self, trajectory: Trajectory, buffer: Buffer) -> AgentBuffer:
        """The trajectory's advantages and returns (placeholders for the deferred signals), then
        its steps appended to ``buffer``'s update buffer; returns the steps."""
        steps = trajectory.steps
        deferred = self.processor.deferred
        if self.reward_normalizer is not None:
            key = Field.rewards("extrinsic")
            steps[key].set(self.reward_normalizer(trajectory.agent_id, steps[key].get_batch(), trajectory.episode_ended))
        advantages, returns = [], []
        for name, signal in self.reward_signals.items():
            if name in deferred.signals:
                continue
            v_next = 0.0 if (trajectory.terminated and signal.use_terminal_states) else trajectory.bootstrap[name]
            adv, ret = gae_and_returns(steps[Field.rewards(name)].get_batch(), steps[Field.value_estimates(name)].get_batch(),
                                       value_next=v_next, gamma=signal.gamma, lambd=self.hyperparameters.lambd)
            steps[Field.advantage(name)].set(adv)
            steps[Field.returns(name)].set(ret)
            advantages.append(adv)
            returns.append(ret)
        if deferred:
            deferred.placeholders(steps)
        else:
            several = len(advantages) > 1
            steps[Field.ADVANTAGES].set(np.mean(advantages, axis=0).astype(np.float32) if several else advantages[0])
            steps[Field.DISCOUNTED_RETURNS].set(np.mean(returns, axis=0).astype(np.float32) if several else returns[0])
        # Sequences are padded at their end (as later ML-Agents; 0.9 prepended the padding): each
        # then starts at a real row, whose stored memory is the state the policy acted from.
        buffer.append_agent_buffer(steps, training_length=self.sequence_length, pad_end=True,
                                   agent_id=trajectory.agent_id)
        return steps

    def _update_normalizer(self, vector_obs: np.ndarray) -> None:
        """Feed a closed trajectory's observations to the normalizer (the multi-host trainer
        defers them to the update, where every host's are gathered)."""
        self.learner.update_normalization(vector_obs)
        if not self.threaded:  # threaded: the acting policy takes the statistics with the weights
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

    def process_trajectories(self) -> None:
        """Threaded: only take the queued trajectories (the update thread processes them)."""
        if not self.threaded:
            return super().process_trajectories()
        staging = self._staging
        for trajectory in self.trajectory_queue.take_all():
            if staging is not None:
                self._stage(trajectory, staging)
            else:
                self._pending.append(trajectory)
            self._pending_rows += self._rows(trajectory)

    def is_ready_update(self) -> bool:
        if self.threaded:
            return self._threaded_ready()
        rollout = self.processor.rollout
        if rollout is not None:
            return rollout.done and self._update_buffer_length() > 0
        return self._update_buffer_length() > self.hyperparameters.buffer_size

    def learning_batch(self) -> dict[str, np.ndarray]:
        """The update buffer's fields that the learner takes, advantages normalised over the real rows."""
        ub = self.training_buffer.update_buffer
        batch = {key: ub[key].get_batch() for key in self.learner.batch_fields}
        batch[Field.ADVANTAGES] = normalized_advantages(batch[Field.ADVANTAGES], batch[Field.MASKS])
        return batch

    def update_policy(self) -> None:
        """A PPO update over the update buffer, the reward signals' own updates, then clear it
        (fully on-policy). Threaded: hand the update over to the update thread."""
        if self.threaded:
            self._hand_over()
            return
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
