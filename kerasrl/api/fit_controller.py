"""The controller that drives ``fit``: a ``TrainerController`` whose loop also calls the callbacks
(one Keras epoch per policy update), through the controller's public hooks."""
from __future__ import annotations

import math
import time
from typing import Any, Protocol

import keras

from kerasrl.api.models import _TrainingModel
from kerasrl.callbacks import rl_callbacks, wants_episodes
from kerasrl.settings import RunContext
from kerasrl.trainers.controller import TrainerController


class FitAgent(Protocol):
    """What the fit controller uses of its agent (``kerasrl.PPO``, ``kerasrl.SAC``)."""

    @property
    def context(self) -> RunContext: ...

    @property
    def behavior(self) -> str: ...

    @property
    def seed(self) -> int: ...

    def _settle(self, trainer: Any) -> None: ...

    def _epoch_logs(self, start_time: float, start_step: int) -> dict[str, float]: ...


class _FitController(TrainerController):
    """``TrainerController`` whose loop also drives the callbacks: an epoch begins right before a
    policy update (threaded: its hand-over) and ends when the policy acts with it, so that no epoch
    begins whose update does not run; a rollout begins at the first step after the last update.
    Training stops at ``target_step`` or when a callback sets ``model.stop_training``. The
    environment and the trainer stay open for the next ``fit`` (``PPO.close`` ends them)."""

    close_at_end = False

    def __init__(self, agent: FitAgent, trainer: Any, model: _TrainingModel,
                 callbacks: keras.callbacks.CallbackList, target_step: int, first_epoch: int):
        context = agent.context
        super().__init__({agent.behavior: trainer}, context.model_path, context.summaries_dir, context.run_id,
                         save_freq=2**62, training_seed=agent.seed)
        self.agent, self.callbacks, self.target_step = agent, callbacks, target_step
        #: The agent's trainer and callback model (``fit`` checked that it has them).
        self.trainer, self.model = trainer, model
        self.epoch = first_epoch
        self.rl = rl_callbacks(callbacks.callbacks)
        self.episodes = wants_episodes(self.rl)
        self._epoch_open = self._rollout_open = False
        self._epoch_start = (time.perf_counter(), trainer.step)
        #: The trainer's ``updates_applied`` after the latest step: an update that the end of
        #: training applies beyond it ends its epoch too (``updates_finished``).
        self._applied_seen = trainer.updates_applied

    def before_update(self, trainer: Any) -> None:
        if not self._epoch_open:
            self._begin_epoch()

    def stop_requested(self) -> bool:
        return bool(self.model.stop_training) or self.trainer.step >= self.target_step

    def _begin_rollout(self) -> None:
        trainer = self.trainer
        self._rollout_open = True
        self._epoch_start = (time.perf_counter(), trainer.step)
        for c in self.rl:
            c.on_rollout_begin({"step": trainer.step})

    def _begin_epoch(self) -> None:
        self.agent._settle(self.trainer)
        self._epoch_open = True
        self.callbacks.on_epoch_begin(self.epoch)
        self.callbacks.on_train_batch_begin(0)

    def advance(self, env: Any) -> int:
        trainer = self.trainer
        if not self._rollout_open:
            self._begin_rollout()
        updates, episodes = trainer.updates_applied, trainer.episodes_completed
        n = super().advance(env)
        if self.episodes and trainer.episodes_completed != episodes:
            self._episode_ends(trainer.episodes_completed - episodes)
        if trainer.updates_applied != updates:
            self._end_epoch()
        self._applied_seen = trainer.updates_applied
        return n

    def updates_finished(self, drain: bool) -> None:
        """Threaded: the updates that finish at the end of training end their epochs too."""
        if drain and self.trainer.updates_applied != self._applied_seen:
            if not self._rollout_open:
                self._begin_rollout()
            if not self._epoch_open:
                self._begin_epoch()
            self._end_epoch()

    def _episode_ends(self, count: int) -> None:
        trainer = self.trainer
        returns = list(trainer.recent_returns)[-count:]
        lengths = list(trainer.processor.recent_lengths)[-count:]
        for r, length in zip(returns, lengths):
            for c in self.rl:
                c.on_episode_end({"episode_reward": float(r), "episode_length": float(length), "step": trainer.step})

    def _end_epoch(self) -> None:
        logs = self.agent._epoch_logs(*self._epoch_start)
        with self.trainer.learner_lock:  # threaded: the callbacks see the learner between updates
            self.model.counters.assign([self.trainer.step, self.trainer.update_count])
            self.callbacks.on_train_batch_end(0, logs)
            for c in self.rl:
                c.on_rollout_end({"step": logs["step"], "episodes": logs["episodes"], "fps": logs["fps"]})
            self.callbacks.on_epoch_end(self.epoch, logs)
        self.epoch += 1
        self._epoch_open = self._rollout_open = False

    def checkpoint_allowed(self) -> bool:
        """Checkpoint in the run folder, never weights that a non-finite loss produced."""
        return math.isfinite(self.trainer.last_update_metrics.get("loss", 0.0))

