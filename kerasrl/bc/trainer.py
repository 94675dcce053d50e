"""The stand-alone behavioral cloning trainers ``offline_bc`` and ``online_bc``.

Both train a policy (an ``ActorCritic`` whose value heads go unused, one stream) to imitate
expert actions, and both run that policy in the environment to measure it (``Environment/
Cumulative Reward``, ``Environment/Episode Length``). The policy samples discrete actions and
acts deterministically (``squash(μ)``) for continuous ones, as ML-Agents 0.9's BC model does.

* ``offline_bc`` imitates the demonstration at ``demo_path`` (whose spec must be the
  behavior's); it is ready to update at every step.
* ``online_bc`` imitates, live, the behavior ``brain_to_imitate`` of the same environment: the
  teacher's actions are read from its step results' ``previous_actions`` (the actions it
  took to get there, as ML-Agents reads ``previous_vector_actions``). The teacher gets no
  trainer (see ``create_trainers``); its policy is whatever the env manager has set for it.
  Its trajectories are kept up to ``time_horizon`` steps or an episode's end, then join the
  imitation buffer (the newest ``buffer_size`` rows are kept). ML-Agents' text-observation
  protocol ("record,reset") has no counterpart: every teacher step is recorded.

An update draws ``min(rows // n_sequences, batches_per_epoch)`` mini-batches of ``n_sequences =
max(batch_size // sequence_length, 1)`` whole sequences, in one compiled call.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Mapping, Optional

import numpy as np
import tensorflow as tf

from kerasrl.bc.actor_critic import ActorCriticImitator
from kerasrl.bc.learner import BCLearner, as_tensors, imitation_batch
from kerasrl.buffer import AgentBuffer, Buffer
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.demos import DemoError, describe_spec, load_demo
from kerasrl.distribute import learner_strategy
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec, StepResult
from kerasrl.timers import hierarchical_timer
from kerasrl.trainers.agent_processor import AgentProcessor
from kerasrl.trainers.checkpoint import CheckpointSaver
from kerasrl.trainers.rl_trainer import RLTrainer
from kerasrl.trainers.trajectory import TrajectoryQueue, append_episode

logger = logging.getLogger("kerasrl.trainers")

LOSS_STAT = "Losses/Cloning Loss"


class BCPolicy(ActorCriticPolicy):
    """A PPO policy that samples discrete actions and acts deterministically (``squash(μ)``)
    for continuous ones, as ML-Agents 0.9's BC model does."""

    def __init__(self, spec: BehaviorSpec, model: ActorCritic, seed: int = 0, inference: str = "auto") -> None:
        super().__init__(spec, model, seed, inference, deterministic=spec.is_continuous)



def bc_model(behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, seed: int) -> tuple[ActorCritic, BCLearner]:
    """The policy's model (one stream, built in the learners' strategy) and its learner, as a BC
    trainer makes them; ``kerasrl export`` rebuilds them the same way from a behavior's record."""
    network = dataclasses.replace(settings.network, separate_value_network=False, critic_memory=True)  # BC has no critic
    tf.random.set_seed(seed)
    try:
        with learner_strategy().scope():  # only the learner enters the strategy; acting stays on one device
            model = ActorCritic(spec, list(settings.reward_signals), network, seed=seed, name="actor_critic")
    except ModelConfigError as e:
        raise UnityTrainerException(f"Behavior {behavior_name}: {e}") from e
    imitator = ActorCriticImitator(model, sample_noise=False)
    return model, BCLearner(imitator, settings.hyperparameters.learning_rate, name="cloning")


def bc_checkpoint_objects(model: ActorCritic, learner: BCLearner) -> dict[str, Any]:
    """What a BC trainer's checkpoints hold (besides the step and update count)."""
    return {"model": model, "optimizer": learner.optimizer}


class BCTrainer(RLTrainer):
    """What both BC trainers share: the policy, its learner, measuring it, checkpoints."""

    @classmethod
    def checkpointed_model(cls, behavior: str, spec: BehaviorSpec, settings: TrainerSettings,
                           seed: int) -> tuple[Any, dict[str, Any]]:
        """The policy's model and what its checkpoints hold (``kerasrl export``)."""
        model, learner = bc_model(behavior, spec, settings, seed)
        return model, bc_checkpoint_objects(model, learner)

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        if settings.threaded is True:  # (auto: unthreaded)
            raise TrainerConfigError(f"Behavior {behavior_name}: threaded: true is for the ppo trainer (the "
                                     f"{settings.trainer} trainer's updates are short); set threaded: false.")
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        self.seed = context.seed
        model, self.learner = bc_model(behavior_name, spec, settings, self.seed)
        self.model = model
        self.sequence_length = model.sequence_length
        hp = settings.hyperparameters
        self.batch_size = hp.batch_size
        self.batches_per_epoch = int(settings.behavioral_cloning.batches_per_epoch or 1)
        self.n_sequences = max(self.batch_size // self.sequence_length, 1)
        self.learner.check_batch_size(self.n_sequences * self.sequence_length, f"Behavior {behavior_name}: batch_size: ")
        self._policy = BCPolicy(spec, model, seed=self.seed, inference=settings.inference)
        self.processor = self.make_processor(self._policy.experience_fields)
        self.update_count = 0
        self.saver = CheckpointSaver(self.model_path, context.keep_checkpoints, self.behavior_record(),
                                     **bc_checkpoint_objects(model, self.learner))
        if context.load_model:
            self.load_model()

    @property
    def policy(self) -> BCPolicy:
        return self._policy

    # -- checkpoints -------------------------------------------------------------------
    def save_model(self) -> str:
        return self.saver.save(self.step, self.update_count)

    def load_model(self) -> None:
        self.step, self.update_count = self.saver.restore()
        self._policy.refresh()
        logger.info("Restored %s at step %d", self.behavior_name, self.step)

    @property
    def trained_model(self) -> ActorCritic:
        return self.model

    # -- measuring the student: its finished episodes go to the statistics (the agent processor
    # reports them), its trajectories are not kept (``process_trajectory`` keeps none) ----------
    def end_episode(self) -> None:
        super().end_episode()
        self._policy.forget_agents()

    # -- updates -----------------------------------------------------------------------
    def imitation_data(self) -> tuple[Any, int]:
        """The rows to imitate (``imitation_batch``'s layout) and how many there are."""
        raise NotImplementedError

    def update_policy(self) -> None:
        """``min(sequences // n_sequences, batches_per_epoch)`` mini-batches in one compiled call."""
        data, n_rows = self.imitation_data()
        n_seq_total = n_rows // self.sequence_length
        n_batches = min(max(n_seq_total // self.n_sequences, 1), self.batches_per_epoch)
        seed = self.seed * 100003 + self.update_count
        rows = self.learner.plan(n_rows, self.n_sequences * self.sequence_length, 1, n_batches, seed)
        with hierarchical_timer("bc.update"):
            try:
                loss = self.learner.update(data, rows, self.settings.hyperparameters.learning_rate, seed)
            except FloatingPointError as e:
                raise UnityTrainerException(f"Behavior {self.behavior_name}: {e}") from e
        self.update_count += 1
        self.stats[LOSS_STAT].append(loss)
        self._policy.refresh()


class OfflineBCTrainer(BCTrainer):
    """Imitates the demonstration at ``demo_path``."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        path = settings.behavioral_cloning.demo_path
        if path is None:  # the settings require it for offline_bc; a hand-built one may lack it
            raise UnityTrainerException(f"Behavior {behavior_name}: offline_bc needs demo_path.")
        if not os.path.exists(path):
            raise DemoError(f"Behavior {behavior_name}: demo_path {path} does not exist (relative paths are read from "
                            f"{os.getcwd()}); record a demonstration with kerasrl-learn ... --resume --record-demo PATH, "
                            "or kerasrl.recording.record.")
        try:
            _, demo = load_demo(path, spec, behavior_name)
        except DemoError as e:
            raise DemoError(f"The provided demonstration is not compatible with the behavior being used for performance "
                            f"evaluation: {e}") from e
        arrays = imitation_batch(spec, demo, self.model)
        self.n_rows = len(arrays[Field.MASKS])
        self.data = as_tensors(arrays)

    def imitation_data(self) -> tuple[Any, int]:
        return self.data, self.n_rows

    def is_ready_update(self) -> bool:
        return self.n_rows // self.sequence_length > 0


class OnlineBCTrainer(BCTrainer):
    """Imitates the behavior ``brain_to_imitate`` of the same environment as it acts."""

    @classmethod
    def teacher_of(cls, settings: TrainerSettings) -> Optional[str]:
        """The behavior this trainer imitates, which gets no trainer of its own."""
        return settings.behavioral_cloning.brain_to_imitate

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        self.teacher = str(settings.behavioral_cloning.brain_to_imitate)
        if self.teacher == behavior_name:
            raise UnityTrainerException(f"Behavior {behavior_name} cannot imitate itself (brain_to_imitate).")
        self.teacher_buffer = Buffer()
        self.teacher_queue = TrajectoryQueue(self.teacher)
        self.teacher_processor = AgentProcessor(spec, {}, [Field.ACTIONS], self.stats, self.teacher_queue,
                                                time_horizon=settings.time_horizon, episode_stats=False)
        self.max_rows = settings.hyperparameters.buffer_size
        self.trajectories = 0

    def _teacher_actions(self, curr: StepResult, nxt: StepResult) -> np.ndarray:
        """The teacher's action in every row of ``curr`` (rows absent from ``nxt`` get zeros)."""
        if nxt.previous_actions is None:
            raise UnityTrainerException(
                f"online_bc for {self.behavior_name} needs the environment to report the actions of behavior "
                f"{self.teacher} (StepResult.previous_actions).")
        taken = np.asarray(nxt.previous_actions).reshape(len(nxt), -1)
        if taken.shape[1] != self.spec.action_size:
            raise UnityTrainerException(
                f"Behavior {self.teacher} reported actions of width {taken.shape[1]}; {self.behavior_name} has "
                f"{describe_spec(self.spec)}.")
        if curr.agent_ids.tobytes() == nxt.agent_ids.tobytes():
            return taken
        out = np.zeros((len(curr), taken.shape[1]), taken.dtype)
        for i, agent_id in enumerate(curr.agent_ids.tolist()):
            try:
                out[i] = taken[nxt.index_of(agent_id)]
            except KeyError:
                continue
        return out

    def add_step(self, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                 outputs: Optional[dict[str, Any]]) -> None:
        """The student's step, and the teacher's with the actions it took."""
        super().add_step(previous, current, outputs)
        curr, nxt = previous.get(self.teacher), current.get(self.teacher)
        if curr is None or nxt is None or len(curr) == 0:
            return
        curr.validate(self.spec, self.teacher)
        actions = self._teacher_actions(curr, nxt)
        if self.spec.is_discrete:
            actions = actions.astype(np.int32)
        else:
            actions = actions.astype(np.float32)
        self.teacher_processor.add_step(curr, nxt, {Field.ACTIONS: actions})

    def process_trajectories(self) -> None:
        """The teacher's closed trajectories join the imitation buffer (its newest ``buffer_size`` rows)."""
        super().process_trajectories()
        for trajectory in self.teacher_queue.take_all():
            if not append_episode(self.teacher_buffer, trajectory, self.trajectories):
                continue
            self.trajectories += 1
            if len(self.teacher_buffer.update_buffer[Field.ACTIONS]) > self.max_rows:
                self.teacher_buffer.truncate_update_buffer(self.max_rows)

    def end_episode(self) -> None:
        super().end_episode()
        self.teacher_processor.end_episode()

    def _teacher_rows(self) -> int:
        update = self.teacher_buffer.update_buffer
        return len(update[Field.ACTIONS]) if Field.ACTIONS in update else 0

    def is_ready_update(self) -> bool:
        return self._teacher_rows() // self.sequence_length > self.n_sequences

    def imitation_data(self) -> tuple[Any, int]:
        update: AgentBuffer = self.teacher_buffer.update_buffer
        arrays = imitation_batch(self.spec, update, self.model)
        return arrays, len(arrays[Field.MASKS])
