"""RLTrainer: a trainer with reward signals, an experience buffer and an agent processor."""
from __future__ import annotations

import contextlib
import threading
from collections import defaultdict, deque
from itertools import accumulate
from typing import Any, ContextManager, Mapping, Optional

import numpy as np

from kerasrl.buffer import Buffer
from kerasrl.common.fast_path import signal_jit_compile
from kerasrl.distribute import check_batch_size, learner_strategy, replicas
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.rewards import RewardSignal, create_reward_signal
from kerasrl.settings import Hyperparameters, RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec, StepResult
from kerasrl.trainers.agent_processor import AgentProcessor, ValueEstimates
from kerasrl.trainers.multi_host import MultiHostUpdates
from kerasrl.trainers.reward_normalization import RewardNormalizer
from kerasrl.trainers.threaded import ThreadedUpdates
from kerasrl.trainers.trainer import Trainer
from kerasrl.trainers.trajectory import Trajectory, TrajectoryQueue


def trajectory_ends(trajectories: list[Trajectory]) -> list[int]:
    """Where each trajectory's steps end in their concatenation (cumulative step counts), for
    the batched calls of ``process_trajectory_batch``."""
    return list(accumulate(len(t.steps[Field.MASKS]) for t in trajectories))


def concatenated(trajectories: list[Trajectory], key: str) -> np.ndarray:
    """Field ``key`` of every trajectory's steps, one after the other."""
    if len(trajectories) == 1:
        return np.asarray(trajectories[0].steps[key].get_batch())
    return np.concatenate([t.steps[key].get_batch() for t in trajectories])


def set_split(trajectories: list[Trajectory], key: str, rows: np.ndarray, ends: list[int]) -> None:
    """Field ``key`` of each trajectory's steps set to its part of ``rows`` (split at ``ends``)."""
    for trajectory, start, end in zip(trajectories, [0, *ends[:-1]], ends):
        trajectory.steps[key].set(rows[start:end])


class RLTrainer(Trainer):
    """Trainer with reward signals, per-agent episode statistics and an experience buffer.

    Subclasses create their policy and then ``self.processor = self.make_processor(fields)``
    with the policy outputs that are stored as experience.

    ``threaded: true``: a subclass that implements the hooks of
    :class:`~kerasrl.trainers.threaded.ThreadedTrainer` calls ``init_threading`` once its policy
    and processor exist, and delegates ``is_ready_update`` and ``update_policy`` to
    ``threaded_updates`` while ``threaded``; the rest (taking trajectories, stopping the thread,
    the applied update count) is here.

    Several hosts: a subclass that implements the hooks of
    :class:`~kerasrl.trainers.multi_host.MultiHostTrainer` is given ``multi_host`` by the factory,
    and delegates its update's cadence, data and collectives to it while set; the cluster-wide
    step, the chief-only writing, ``--resume``'s sync and the summary line are here.
    """

    #: The extrinsic rewards' normalizer (PPO's ``normalize_rewards``), or None.
    reward_normalizer: Optional[RewardNormalizer] = None

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        super().__init__(behavior_name, spec, settings, context, reward_buff_cap)
        strategy = learner_strategy()
        sequence_length = settings.network.sequence_length if settings.network.use_recurrent else 1
        hyperparameters: Hyperparameters = settings.hyperparameters  # the trainer type's own (PPO's, SAC's, ...)
        for name in settings.reward_signals:
            if name != "extrinsic":  # the model signals' mini-batches are the trainer's batch_size, split as its own
                check_batch_size(hyperparameters.batch_size, sequence_length, replicas(strategy),
                                 where=f"Behavior {behavior_name}: reward signal {name}: ")
        with strategy.scope():  # the signals' models and optimizers (acting and rewards stay on one device)
            self.reward_signals: dict[str, RewardSignal] = {
                name: create_reward_signal(name, signal, spec, settings.network, seed=context.seed,
                                           jit_compile=signal_jit_compile(getattr(hyperparameters, "jit_compile", None)))
                for name, signal in settings.reward_signals.items()
            }
        self.training_buffer = Buffer()
        #: The trajectories that the agent processor closed, until ``process_trajectories`` takes them.
        self.trajectory_queue = TrajectoryQueue(behavior_name)
        self.processor: AgentProcessor
        #: Policy updates made (restored from checkpoints on resume).
        self.update_count = 0
        #: The latest update's losses and learning rate.
        self.last_update_metrics: dict[str, float] = {}
        #: Held while the learner's state changes or is read whole (a trainer that updates in its
        #: own thread, ``threaded``, needs it; for the others it is never contended).
        self.learner_lock = threading.RLock()
        #: The update thread's part (``threaded``; idle unless ``init_threading`` starts it).
        self.threaded_updates = ThreadedUpdates(self)
        #: The multi-host part (``kerasrl.trainers.multi_host.create_on_hosts``); None on one host.
        self.multi_host: Optional[MultiHostUpdates] = None

    def init_threading(self) -> None:
        """``threaded: true`` while training: update in a thread from now on (one that this
        trainer cannot run raises ``TrainerConfigError``, from ``prepare_threaded``); ``threaded:
        auto``: the same where the environment steps in other processes and this trainer can."""
        if not (self.settings.threaded and self.context.train_model):
            return
        if self.settings.threaded == "auto":
            self.threaded_updates.start_auto(self.context.environment_in_other_processes)
        else:
            self.threaded_updates.start()

    @property
    def threaded(self) -> bool:
        """Whether updates run in a thread of their own while acting goes on."""
        return self.threaded_updates.active

    @property
    def first_wait_seconds(self) -> Optional[float]:
        """Threaded: seconds acting waited for the first update of this session (None before it)."""
        return self.threaded_updates.first_wait_seconds

    def increment_step(self, n_steps: int) -> None:
        super().increment_step(n_steps if self.multi_host is None else self.multi_host.steps(n_steps))

    @property
    def writes_results(self) -> bool:
        return super().writes_results if self.multi_host is None else self.multi_host.writes_results

    def collectives(self) -> ContextManager[None]:
        """Around an update: on several hosts, a worker lost in its collectives is a one-line error."""
        return contextlib.nullcontext() if self.multi_host is None else self.multi_host.collectives()

    def sync_from_chief(self) -> None:
        """Several hosts, ``--resume``: take the chief's restored state (called by every host)."""
        if self.multi_host is not None:
            self.multi_host.sync_from_chief()

    def summary_line(self) -> Optional[str]:
        """Several hosts: what this host trained and a digest of its weights; None on one host."""
        return None if self.multi_host is None else self.multi_host.summary_line()

    def start_from_checkpoints(self) -> None:
        """Restore this run's latest checkpoint (``--resume``), or start from another run's
        (``init_path``, ``--initialize-from``), as the run's context says; else nothing."""
        if self.context.load_model:
            self.load_model()
            return
        path = self.context.initial_model_path(self.behavior_name, self.settings)
        if path is not None:
            self.initialize_from(str(path))

    def load_model(self) -> None:
        """Restore the latest checkpoint of this run (a trainer type with checkpoints implements it)."""
        raise UnityTrainerException(f"{type(self).__name__} cannot restore a checkpoint.")

    def initialize_from(self, model_path: str) -> None:
        """Start from another run's checkpoint folder (a trainer type with checkpoints implements it)."""
        raise UnityTrainerException(f"{type(self).__name__} cannot start from another run's checkpoints.")

    def finish_updates(self, drain: bool) -> None:
        self.threaded_updates.finish(drain)

    def reward_state(self) -> dict[str, Any]:
        """What the rewards depend on besides the policy, as checkpointable objects: each model
        signal's model, optimizer and update count, and the reward normalizer's statistics (call
        its ``write_variables`` first). The trainer's checkpoints hold it, and so do the archives
        of ``kerasrl.PPO.save`` and ``kerasrl.SAC.save``."""
        state = {f"reward_signal_{name}": signal.checkpoint_state() for name, signal in self.reward_signals.items()}
        state = {key: value for key, value in state.items() if value is not None}
        if self.reward_normalizer is not None:
            state["reward_normalizer"] = self.reward_normalizer.statistics
        return state

    def make_processor(self, experience_fields: list[str],
                       value_estimates: Optional[ValueEstimates] = None) -> AgentProcessor:
        """The agent processor of this behavior, storing the policy's ``experience_fields``."""
        return AgentProcessor(self.spec, self.reward_signals, experience_fields, self.stats, self.trajectory_queue,
                              time_horizon=self.settings.time_horizon, value_estimates=value_estimates,
                              reward_buffer=self.reward_buffer)

    @property
    def updates_applied(self) -> int:
        """Updates whose weights the policy acts with (threaded: behind ``update_count`` while one runs)."""
        return self.threaded_updates.updates_applied

    @property
    def recent_returns(self) -> deque[float]:
        """Environment returns of the last (up to 100) finished episodes."""
        return self.processor.recent_returns

    @property
    def episodes_completed(self) -> int:
        return self.processor.episodes_completed

    @property
    def trajectory_lengths(self) -> dict[int, int]:
        """Agent id → steps in its unfinished trajectory."""
        return {a: int(v) for a, v in self.processor.agents.as_dict("trajectory_length").items()}

    @property
    def episode_steps(self) -> dict[int, int]:
        """Agent id → steps in its current episode."""
        return {a: int(v) for a, v in self.processor.agents.as_dict("episode_steps").items()}

    def add_step(self, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                 outputs: Optional[dict[str, Any]]) -> None:
        self.processor.add_step(previous.get(self.behavior_name), current.get(self.behavior_name), outputs)

    def process_trajectories(self) -> None:
        """The queued trajectories, all together, into ``process_trajectory_batch``; threaded,
        into ``take_for_update_batch`` (kept for the next hand-over: the update thread processes them)."""
        trajectories = self.trajectory_queue.take_all()
        if not trajectories:
            return
        if self.threaded:
            self.take_for_update_batch(trajectories)
        else:
            self.process_trajectory_batch(trajectories)

    def process_trajectory_batch(self, trajectories: list[Trajectory]) -> None:
        """Take the trajectories that closed together, in order. The default takes each in
        ``process_trajectory``; a trainer overrides it to batch its per-trajectory model calls
        (many agents often end their trajectories in the same step)."""
        for trajectory in trajectories:
            self.process_trajectory(trajectory)

    def process_trajectory(self, trajectory: Trajectory) -> None:
        """Take one closed trajectory (the default keeps none of its steps)."""

    def end_episode(self) -> None:
        """An environment reset: drop unfinished trajectories and episode statistics."""
        self.processor.end_episode()

    # -- threaded updates: the hooks of kerasrl.trainers.threaded.ThreadedTrainer (documented there) ----
    def prepare_threaded(self) -> None:
        """A trainer type that has not implemented the hooks refuses ``threaded: true``."""
        raise TrainerConfigError(f"Behavior {self.behavior_name}: the {self.settings.trainer} trainer cannot update in a "
                                 "thread of its own; set threaded: false.")

    def take_for_update(self, trajectory: Trajectory) -> None:
        raise NotImplementedError

    def take_for_update_batch(self, trajectories: list[Trajectory]) -> None:
        """Threaded: the trajectories that closed together, each into ``take_for_update``."""
        for trajectory in trajectories:
            self.take_for_update(trajectory)

    def threaded_update_due(self) -> bool:
        raise NotImplementedError

    def cut_update(self) -> tuple[Any, list[int]]:
        raise NotImplementedError

    def run_update(self, data: Any, step: int, stats: defaultdict[str, list[float]]) -> tuple[Any, dict[str, float]]:
        raise NotImplementedError

    def apply_update(self, snapshot: Any) -> None:
        raise NotImplementedError

    def updates_stopped(self) -> None:
        raise NotImplementedError
