"""SACTrainer: trajectories → replay buffer → SAC updates of many gradient steps per call."""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
from collections import defaultdict
from typing import Any, Optional

import numpy as np

from kerasrl.bc.module import Pretraining
from kerasrl.buffer import AgentBuffer, BufferException
from kerasrl.distribute import learner_strategy
from kerasrl.exception import TrainerConfigError, TrainerError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.sac.bc import sac_pretraining
from kerasrl.sac.learner import NEXT_NOISE, NOISE, REWARDS, STEPS_PER_CALL, SACLearner
from kerasrl.sac.networks import SACConfigError, SACNetworks
from kerasrl.sac.policy import SACPolicy
from kerasrl.sac.replay import ReplayBuffer
from kerasrl.settings import RunContext, SACSettings, TrainerSettings
from kerasrl.spec import BehaviorSpec
from kerasrl.timers import hierarchical_timer
from kerasrl.trainers.checkpoint import (
    CHECKPOINT_NAME,
    INITIALIZE_FIX,
    CheckpointSaver,
    CheckpointWriteError,
    LateState,
    initialize_from_advice,
    write_failure,
)
from kerasrl.trainers.rl_trainer import RLTrainer
from kerasrl.trainers.trajectory import Trajectory

logger = logging.getLogger("kerasrl.trainers")

#: Reward signals SAC can learn from: the environment's, computed as the agents step, and the
#: model signals, whose rewards are computed on each sampled mini-batch with their current model.
SAC_REWARD_SIGNALS = ("extrinsic", "curiosity", "gail", "rnd")
REPLAY_SUFFIX = ".replay.h5"


#: The most bytes of observations one compiled call's mini-batches may hold (with cameras).
CALL_BYTES = 64 * 2**20


def steps_per_call(spec: BehaviorSpec, batch_size: int, burn_in: float = 0.0) -> int:
    """Mini-batches per compiled call: ``STEPS_PER_CALL``, fewer when the cameras' observations and
    next observations of that many would pass ``CALL_BYTES`` (``burn_in``: the burn-in's
    observations per step of a sequence, recurrent)."""
    if not spec.visual_observation_shapes:
        return STEPS_PER_CALL
    pixels = sum(int(np.prod(shape)) for shape in spec.visual_observation_shapes)
    row = (2 + burn_in) * 4 * (pixels + spec.vector_observation_size)
    return int(np.clip(CALL_BYTES // (row * batch_size), 1, STEPS_PER_CALL))


def actor_snapshot(networks: SACNetworks) -> tuple[Any, Any, Any]:
    """A copy of what ``SACPolicy.refresh`` reads: the actor's layers and heads, the normalizer's statistics."""
    actor = networks.actor
    assert actor.body is not None  # the numpy mirror acts on vector observations only
    heads = [actor.logits] if actor.is_discrete else [actor.mu, actor.log_std]
    stats = networks.normalizer.numpy_stats() if networks.normalizer is not None else None
    return ([(d.kernel.numpy(), d.bias.numpy()) for d in actor.body.dense],
            [(h.kernel.numpy(), h.bias.numpy()) for h in heads], stats)


def power_of_two_parts(n: int) -> list[int]:
    """``n`` as a sum of distinct powers of two, largest first (13 -> [8, 4, 1])."""
    return [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]


class SACTrainer(RLTrainer):
    """Soft Actor-Critic over one behavior's agents.

    Every closed trajectory goes into the replay buffer. Once ``buffer_init_steps`` agent
    steps are taken (with uniformly random actions) and the replay holds a mini-batch, each
    time new transitions arrive an update runs the gradient steps due (one per
    ``steps_per_update`` agent steps) in as few compiled calls as ``steps_per_call`` allows.
    With ``save_replay_buffer`` the replay is checkpointed with the model (``model-N.replay.h5``,
    written before ``model-N``), and ``--resume`` reloads it.

    Recurrent (``use_recurrent``): every step is stored with the actor's memory at it, and each
    mini-batch is ``batch_size // sequence_length`` sequences of ``sequence_length`` steps
    (``ReplayBuffer.sample_sequences``), each with the ``sequence_length`` steps before it as the
    critics' burn-in.

    ``threaded: true`` (:mod:`kerasrl.trainers.threaded`): each update (the trajectories since the last
    into the replay, then the gradient steps due) runs in the update thread while the agents act
    with the weights of the update before (``--threaded`` leaves SAC sections alone: set the key).
    """

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        if spec.is_hybrid:
            raise TrainerError(f"Behavior {behavior_name} has hybrid actions (continuous and discrete at once), which the "
                               f"{settings.trainer} trainer does not take; train it with trainer: ppo.")
        unsupported = [s for s in settings.reward_signals if s not in SAC_REWARD_SIGNALS]
        if unsupported:
            raise UnityTrainerException(f"Behavior {behavior_name}: reward signal {unsupported[0]} is not available "
                                        f"with the sac trainer (available: {', '.join(SAC_REWARD_SIGNALS)}).")
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        self.seed = context.seed
        self.hyperparameters: SACSettings = settings.hyperparameters
        self.learner = self._make_learner()
        #: The fraction of a reward-signal mini-batch owed (``reward_signal_steps_per_update``).
        self._signal_carry = 0.0
        self.networks: SACNetworks = self.learner.networks
        #: Behavioral cloning from ``pretraining``'s demonstration after every SAC update.
        self.bc_module: Optional[Pretraining] = None
        if settings.pretraining is not None:
            self.bc_module = sac_pretraining(self.networks, settings.pretraining, self.hyperparameters.learning_rate,
                                             self.hyperparameters.batch_size, self.seed, behavior_name)
        self._policy = SACPolicy(self.networks, seed=self.seed)
        self.processor = self.make_processor(self._policy.experience_fields)
        self.processor.store_next_obs = True  # SAC's targets need every transition's next observation
        #: Each camera's next observations are the following replay row's (stored once).
        self.next_of = {Field.next_visual_obs(j): Field.visual_obs(j) for j in range(len(spec.visual_observation_shapes))}
        self.recurrent = self.networks.recurrent
        self.replay = ReplayBuffer(self.hyperparameters.buffer_size, self.next_of, sequences=self.recurrent)
        #: Mini-batches sampled for one compiled call (fewer with cameras, to bound its memory).
        self.steps_per_call = steps_per_call(spec, self.hyperparameters.batch_size, 1.0 if self.recurrent else 0.0)
        self.rng = np.random.default_rng([self.seed, 1])
        #: Gradient steps taken, and updates (calls of ``update_policy``: ``fit``'s epochs).
        self.update_steps = 0
        self.update_count = 0
        self.last_update_metrics: dict[str, float] = {}
        #: Transitions added to the replay since the last update.
        self.new_transitions = 0
        self.init_threading()
        bc_state = {} if self.bc_module is None else {"bc_optimizer": self.bc_module.optimizer}
        self.saver = CheckpointSaver(self.model_path, context.keep_checkpoints, self.behavior_record(),
                                     model=self.networks, **self.learner.optimizers, **self.reward_state(), **bc_state)
        self.saver.late_state = (self._targets_before_they_were_saved(),)
        self.start_from_checkpoints()
        self._policy.uniform = self.step < self.hyperparameters.buffer_init_steps

    @classmethod
    def checkpointed_model(cls, behavior: str, spec: BehaviorSpec, settings: TrainerSettings,
                           seed: int) -> tuple[Any, dict[str, Any]]:
        """SAC's networks and what their checkpoints hold (``kerasrl export``)."""
        sac = SACLearner.for_behavior(spec, settings, seed, settings.max_steps)
        return sac.networks, {"model": sac.networks, **sac.optimizers}

    def _make_learner(self) -> SACLearner:
        try:
            with learner_strategy().scope():
                return SACLearner.for_behavior(self.spec, self.settings, self.seed, self.max_steps)
        except (SACConfigError, TrainerError) as e:
            raise UnityTrainerException(f"Behavior {self.behavior_name}: {e}") from e

    @property
    def policy(self) -> SACPolicy:
        return self._policy

    @property
    def trained_model(self) -> SACNetworks:
        return self.networks

    def increment_step(self, n_steps: int) -> None:
        super().increment_step(n_steps)
        self._policy.uniform = self.step < self.hyperparameters.buffer_init_steps

    # -- trajectories ------------------------------------------------------------------
    def process_trajectory(self, trajectory: Trajectory) -> None:
        """The trajectory's transitions into the replay buffer (and its observations into the normalizer)."""
        n = self._into_replay(trajectory)
        self.new_transitions += n
        if n and self.networks.normalizer is not None:
            self._policy.refresh_normalizer()

    @staticmethod
    def _transitions(trajectory: Trajectory) -> int:
        steps = trajectory.steps
        return len(steps[Field.ACTIONS]) if Field.ACTIONS in steps else 0

    def _into_replay(self, trajectory: Trajectory) -> int:
        """The trajectory's transitions into the replay (its observations into the normalizer); returns how many."""
        steps, n = trajectory.steps, self._transitions(trajectory)
        if n == 0:
            return 0
        rows = {
            Field.ACTIONS: steps[Field.ACTIONS].get_batch(),
            # The model signals' rewards are computed when the transitions are sampled (zeros here).
            REWARDS: np.stack([steps[Field.rewards(name)].get_batch() if signal.per_step else np.zeros(n, np.float32)
                               for name, signal in self.reward_signals.items()], axis=-1),
            Field.TERMINATED: steps[Field.TERMINATED].get_batch(),
            Field.DONE: steps[Field.DONE].get_batch(),
        }
        if self.spec.vector_observation_size:
            rows[Field.VECTOR_OBS] = steps[Field.VECTOR_OBS].get_batch()
            rows[Field.NEXT_VECTOR_OBS] = steps[Field.NEXT_VECTOR_OBS].get_batch()
        for next_field, field in self.next_of.items():
            rows[field] = steps[field].get_batch()
            rows[next_field] = steps[next_field].get_batch()
        if self.spec.is_discrete:
            mask = np.asarray(steps[Field.ACTION_MASK].get_batch(), np.float32)
            rows[Field.ACTION_MASK] = mask
            # The next step's mask, where the trajectory holds it; all actions at its last step.
            rows[Field.NEXT_ACTION_MASK] = np.concatenate([mask[1:], np.ones_like(mask[:1])])
        if self.recurrent:
            rows[Field.MEMORY] = steps[Field.MEMORY].get_batch()
        if self.networks.normalizer is not None:
            self.networks.normalizer.update(rows[Field.VECTOR_OBS])
        self.replay.add(rows, agent=trajectory.agent_id)
        return n

    def end_episode(self) -> None:
        super().end_episode()
        self._policy.forget_agents()
        self.replay.close_episodes()

    # -- updates -----------------------------------------------------------------------
    def due_gradient_steps(self) -> int:
        """Gradient steps owed: one per ``steps_per_update`` agent steps after ``buffer_init_steps``
        (threaded: less those handed over, which the update thread may not have taken yet)."""
        hp = self.hyperparameters
        taken = self._steps_handed if self.threaded else self.update_steps
        return int((self.step - hp.buffer_init_steps) / hp.agent_steps_per_update) - taken

    def is_ready_update(self) -> bool:
        """When new transitions reached the replay (a trajectory closed) and gradient steps are
        due: the steps due since the last update then run together, on the replay as it is now."""
        if self.threaded:
            return self.threaded_updates.ready()
        return (self.new_transitions > 0 and len(self.replay) >= self.hyperparameters.batch_size
                and self.due_gradient_steps() >= 1)

    def learning_batches(self, count: int) -> dict[str, np.ndarray]:
        """``count`` uniform mini-batches, with the noise of the policy's samples (continuous),
        zero-padded to one compiled call's ``steps_per_call`` (the call reads the first ``count``):
        sampling only what the call uses keeps a short update from paying for a full stack."""
        hp = self.hyperparameters
        shape: tuple[int, ...] = (count, hp.batch_size)
        if self.recurrent:
            stacked = self._sequences(count)
            shape = stacked[Field.MASKS].shape
        else:
            stacked = self.replay.sample(self.rng, shape)
        if self.spec.is_continuous:
            noise_shape = (*shape, self.spec.action_size)
            stacked[NOISE] = self.rng.standard_normal(noise_shape, dtype=np.float32)
            stacked[NEXT_NOISE] = self.rng.standard_normal(noise_shape, dtype=np.float32)
        return {k: self._padded(v) for k, v in stacked.items()}

    def _padded(self, stack: np.ndarray) -> np.ndarray:
        if len(stack) == self.steps_per_call:
            return stack
        out = np.zeros((self.steps_per_call, *stack.shape[1:]), stack.dtype)
        out[: len(stack)] = stack
        return out

    def _sequences(self, count: int) -> dict[str, np.ndarray]:
        """``count`` mini-batches of ``batch_size // sequence_length`` sequences (fields
        ``[count, N, L, ...]``), the actor's memory at their first steps and the burn-in's observations."""
        nets = self.networks
        observations = [Field.visual_obs(j) for j in range(nets.num_visual)]
        if nets.vector_size:
            observations.append(Field.VECTOR_OBS)
        sequences = max(1, self.hyperparameters.batch_size // nets.sequence_length)
        return self.replay.sample_sequences(self.rng, (count, sequences), nets.sequence_length,
                                            nets.burn_in, first_only=(Field.MEMORY,), burn_in_fields=tuple(observations))

    def update_policy(self) -> None:
        """Every due gradient step, in calls of at most ``steps_per_call`` (threaded: hand them over)."""
        if self.threaded:
            self.threaded_updates.hand_over()
            return
        self.new_transitions = 0
        self.last_update_metrics = self._gradient_steps(self.due_gradient_steps(), self.step, self.stats)
        self._policy.refresh()

    def _gradient_steps(self, due: int, step: int, stats: defaultdict[str, list[float]]) -> dict[str, float]:
        """``due`` gradient steps with the schedules at trainer step ``step``, then the model
        signals' and BC's updates; their statistics into ``stats``; returns the update's metrics."""
        totals: dict[str, float] = {}
        learning_rate = self.learner.learning_rate(step)
        done = 0
        with hierarchical_timer("sac.update"):
            while done < due:
                count = min(due - done, self.steps_per_call)
                stacked = self.learning_batches(count)
                self._model_signal_rewards(stacked, count, stats)
                metrics = self.learner.update(stacked, count, learning_rate)
                for k, v in metrics.items():
                    totals[k] = totals.get(k, 0.0) + v * count
                done += count
        self.update_steps += due
        self.update_count += 1
        metrics = {k: v / due for k, v in totals.items()}
        if not np.isfinite(metrics["critic_loss"]):
            raise UnityTrainerException(f"Behavior {self.behavior_name}: the SAC critic loss became "
                                        f"{metrics['critic_loss']}.")
        self._update_model_signals(self._due_signal_steps(due), stats)
        if self.bc_module is not None:
            with hierarchical_timer("bc.update"):
                for key, value in self.bc_module.update(step).items():
                    stats[key].append(value)
        stats["Losses/Value Loss"].append(metrics["critic_loss"])
        stats["Losses/Policy Loss"].append(abs(metrics["actor_loss"]))
        stats["Losses/Entropy Coefficient Loss"].append(metrics["ent_coef_loss"])
        stats["Policy/Entropy Coefficient"].append(metrics["ent_coef"])
        stats["Policy/Q Estimate"].append(metrics["q_value"])
        stats["Policy/Learning Rate"].append(learning_rate)
        return {**metrics, "learning_rate": learning_rate}

    def _model_signal_rewards(self, stacked: dict[str, np.ndarray], count: int,
                              stats: Optional[defaultdict[str, list[float]]] = None) -> None:
        """The model signals' rewards of the mini-batches the update uses, from their current models."""
        for k, signal in enumerate(self.reward_signals.values()):
            if signal.per_step:
                continue
            shape = stacked[REWARDS].shape[1:-1]  # rows of a mini-batch: [B] or [N, L] (sequences)
            rows = int(np.prod(shape))
            # a power-of-two number of the (padded) mini-batches: a few shapes, so a few traces
            size = min(len(stacked[REWARDS]), 1 << (count - 1).bit_length())
            flat = {f: stacked[f][:size].reshape(size * rows, *stacked[f].shape[1 + len(shape):])
                    for f in signal.batch_fields}
            rewards = signal.evaluate_batch(flat).scaled_reward.reshape(size, *shape)[:count]
            stacked[REWARDS][:count, ..., k] = rewards
            (self.stats if stats is None else stats)[signal.stat_name].append(float(np.mean(rewards)))

    def _due_signal_steps(self, gradient_steps: int) -> int:
        """The reward signals' mini-batches owed after ``gradient_steps`` SAC steps: one per
        ``reward_signal_steps_per_update`` agent steps (a fraction carries over to the next update)."""
        hp = self.hyperparameters
        owed = gradient_steps * hp.agent_steps_per_update / hp.agent_steps_per_signal_update + self._signal_carry
        self._signal_carry = owed - int(owed)
        return int(owed)

    def _update_model_signals(self, gradient_steps: int,
                              stats: Optional[defaultdict[str, list[float]]] = None) -> None:
        """Train the model signals on ``gradient_steps`` uniform mini-batches of the replay (at most
        as many as it holds; each signal makes its ``num_epoch`` passes over them), in chunks of a
        power-of-two number of mini-batches (13 = 8 + 4 + 1): every new chunk size is one more trace
        and compilation of a signal's update, so there are only a few. Their losses go to ``stats``
        (default: the trainer's; a threaded update's own)."""
        stats = self.stats if stats is None else stats
        signals = [s for s in self.reward_signals.values() if not s.per_step]
        if not signals or gradient_steps < 1:
            return
        batch_size = self.hyperparameters.batch_size
        total = max(min(gradient_steps, len(self.replay) // batch_size), 1)
        with hierarchical_timer("reward_signals.update"):
            for chunk in power_of_two_parts(total):
                rows = chunk * batch_size
                sample = self.replay.sample(self.rng, (rows,))
                buffer = AgentBuffer()
                for field in {f for s in signals for f in s.batch_fields}:
                    buffer[field] = sample[field]
                buffer[Field.MASKS] = np.ones(rows, np.float32)
                for signal in signals:
                    for key, value in signal.update(buffer, batch_size).items():
                        stats[key].append(value)

    # -- threaded updates: the hooks of kerasrl.trainers.threaded ---------------------------
    def prepare_threaded(self) -> None:
        """Threaded: act with the actor's numpy mirror, which takes the weights of each update whole."""
        if self.networks.num_visual or self.recurrent:
            raise TrainerConfigError(f"Behavior {self.behavior_name}: threaded: true acts with the numpy mirror of the "
                                     "policy, and a sac network with cameras or memory acts with TensorFlow; "
                                     "set threaded: false.")
        self._pending: list[Trajectory] = []  # closed since the last hand-over; the update thread stores them
        self._sync_threaded()

    def _sync_threaded(self) -> None:
        """After a restore or the update thread's end: what was handed over is what was done."""
        self.threaded_updates.sync()
        self._steps_handed, self._replay_rows = self.update_steps, len(self.replay)

    def take_for_update(self, trajectory: Trajectory) -> None:
        n = self._transitions(trajectory)
        self._pending.append(trajectory)
        self.new_transitions += n
        # the rows the replay will hold (vector observations, no sequences: one per transition)
        self._replay_rows = min(self._replay_rows + n, self.replay.capacity)

    def threaded_update_due(self) -> bool:
        return (self.new_transitions > 0 and self._replay_rows >= self.hyperparameters.batch_size
                and self.due_gradient_steps() >= 1)

    def cut_update(self) -> tuple[tuple[list[Trajectory], int], list[int]]:
        """The trajectories closed since the last hand-over and the gradient steps due."""
        due, trajectories = self.due_gradient_steps(), self._pending
        self._pending, self.new_transitions = [], 0
        self._steps_handed += due
        return (trajectories, due), [t.policy_version for t in trajectories]

    def run_update(self, data: tuple[list[Trajectory], int], step: int,
                   stats: defaultdict[str, list[float]]) -> tuple[Any, dict[str, float]]:
        """The trajectories into the replay, then the gradient steps; the actor's new weights as numpy."""
        trajectories, due = data
        for trajectory in trajectories:
            self._into_replay(trajectory)
        metrics = self._gradient_steps(due, step, stats)
        return actor_snapshot(self.networks), metrics

    def apply_update(self, snapshot: Any) -> None:
        self._policy.layers, self._policy.heads, self._policy.stats = snapshot

    def updates_stopped(self) -> None:
        """Also the trajectories closed since the last hand-over into the replay (checkpoints hold them)."""
        for trajectory in self._pending:
            self._into_replay(trajectory)
        self._pending = []
        self._policy.refresh()
        self._sync_threaded()

    # -- checkpoints -------------------------------------------------------------------
    def _replay_path(self, step: int) -> str:
        return os.path.join(self.model_path, f"{CHECKPOINT_NAME}-{step}{REPLAY_SUFFIX}")

    def save_model(self) -> str:
        """Checkpoint the networks, the optimizers, the step and the gradient steps taken; with
        ``save_replay_buffer`` the replay first (a checkpoint never lacks its replay). A replay that
        cannot be written (a full disk) is a :class:`CheckpointWriteError`, as a checkpoint that
        cannot be written is, and leaves no replay file. A save that fails before its checkpoint is
        written removes the replay file it created, as the saver removes its own files, so no replay
        without a checkpoint is left."""
        with self.learner_lock:  # threaded: between two updates
            replay = self._replay_path(self.step)
            created_replay = False
            if self.hyperparameters.save_replay_buffer:
                os.makedirs(self.model_path, exist_ok=True)
                created_replay = not os.path.exists(replay)
                try:
                    self.replay.save(replay)
                except OSError as e:
                    raise CheckpointWriteError(
                        f"Replay buffer {os.path.basename(replay)} could not be written in {self.model_path}: "
                        f"{write_failure(e)}. The checkpoints written before it are intact: free some space or make the "
                        "folder writable, then continue with --resume.") from e
            try:
                path = self.saver.save(self.step, self.update_steps)
            except BaseException:
                index = os.path.join(self.model_path, f"{CHECKPOINT_NAME}-{self.step}.index")
                if created_replay and not os.path.exists(index):
                    with contextlib.suppress(OSError):  # what stays is removed after the next save (orphan replays)
                        os.remove(replay)
                raise
            if self.hyperparameters.save_replay_buffer:
                self._remove_orphan_replays()
            return path

    def _remove_orphan_replays(self) -> None:
        """Replays whose checkpoint the saver has deleted (beyond ``keep_checkpoints``)."""
        pattern = re.compile(rf"^{CHECKPOINT_NAME}-(\d+){re.escape(REPLAY_SUFFIX)}$")
        for path in glob.glob(os.path.join(self.model_path, f"{CHECKPOINT_NAME}-*{REPLAY_SUFFIX}")):
            match = pattern.match(os.path.basename(path))
            if match and not os.path.exists(os.path.join(self.model_path, f"{CHECKPOINT_NAME}-{match.group(1)}.index")):
                os.unlink(path)

    def _targets_before_they_were_saved(self) -> LateState:
        """Checkpoints written before kerasrl saved the target critics by name hold none: such a
        run resumes with targets copied from its critics (where a fresh run starts them)."""
        nets = self.networks

        def copy_critics() -> None:
            for target, critic in zip(nets.target_variables, nets.critic_variables):
                target.assign(critic)

        return LateState("the target critics", nets.target_variables, copy_critics, "copies of the critics")

    def load_model(self) -> None:
        self.step, self.update_steps = self.saver.restore()
        self._policy.refresh()
        if self.hyperparameters.save_replay_buffer:
            self._load_replay(self._replay_path(self.step))
        self._sync_threaded()
        logger.info("Restored %s at step %d", self.behavior_name, self.step)

    def _load_replay(self, path: str) -> None:
        if not os.path.exists(path):
            logger.warning("%s: no replay buffer saved with the checkpoint of step %d (%s): training resumes with an "
                           "empty one.", self.behavior_name, self.step, path)
            return
        try:
            self.replay = ReplayBuffer.load(path, self.hyperparameters.buffer_size)
        except BufferException as e:
            raise UnityTrainerException(f"Behavior {self.behavior_name}: {e}") from e
        if self.recurrent and not self.replay.sequences:
            raise UnityTrainerException(f"Behavior {self.behavior_name}: the replay buffer {path} was saved without "
                                        "memories (use_recurrent: false): resume with use_recurrent: false.")
        logger.info("%s: replay buffer of %d transitions restored from %s", self.behavior_name, len(self.replay), path)

    def initialize_from(self, model_path: str) -> None:
        """Start from another run's newest intact checkpoint with the step counters back at 0."""
        saver = CheckpointSaver(model_path, 1, model=self.networks, **self.learner.optimizers)
        saver.late_state = self.saver.late_state
        saver.restore(initialize_from_advice(model_path), INITIALIZE_FIX)
        self.step, self.update_steps = 0, 0
        self._policy.refresh()
        self._sync_threaded()
        logger.info("Initialized %s from %s", self.behavior_name, model_path)
