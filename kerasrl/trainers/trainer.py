"""Trainer base class: step counting, statistics and summaries.

A trainer owns its step counter and its statistics; TensorBoard output goes through a
``StatsWriter`` and TensorFlow checkpoints through the subclass's saver, so nothing here
needs TensorFlow.
"""
from __future__ import annotations

import logging
from collections import defaultdict, deque
from typing import Any, Mapping, Optional

import numpy as np

from kerasrl.compat import mlagents_names
from kerasrl.exception import UnityTrainerException
from kerasrl.settings import RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec, StepResult
from kerasrl.timers import set_gauge
from kerasrl.trainers.stats import CsvStats, StatsWriter

logger = logging.getLogger("kerasrl.trainers")


@mlagents_names()
class Trainer:
    """Base of every trainer; subclasses implement the experience and update hooks."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                 reward_buff_cap: int = 1) -> None:
        self.behavior_name = behavior_name
        self.spec = spec
        self.settings = settings
        self.context = context
        self.is_training = context.train_model
        self.run_id = context.run_id
        #: The behavior's folder of checkpoints and exported models.
        self.model_path = context.behavior_model_path(behavior_name)
        self.max_steps = context.max_steps_for(settings)
        self.summary_path = context.summary_path(behavior_name)
        self.stats_writer = StatsWriter(self.summary_path)
        self.metrics = CsvStats(context.metrics_path(behavior_name))
        self.stats: defaultdict[str, list[float]] = defaultdict(list)
        self._reward_buffer: deque[float] = deque(maxlen=max(int(reward_buff_cap), 1))
        self.step = 0
        self._last_summary_step: Optional[int] = None
        self.summary_log: list[dict[str, float]] = []

    def __str__(self) -> str:
        def fmt(d: Any, depth: int) -> str:
            if not isinstance(d, dict):
                return str(d)
            pad = "\t" * depth
            return "".join(f"\n{pad}{k}:\t{fmt(v, depth + 1)}" for k, v in d.items())

        return f"Hyperparameters for the {type(self).__name__} of behavior {self.behavior_name}: {fmt(self.parameters, 1)}"

    @property
    def parameters(self) -> dict[str, Any]:
        """The settings in ML-Agents' flat form, ``max_steps`` as this run uses it."""
        return {**self.settings.to_dict(), "max_steps": self.max_steps}

    @classmethod
    def checkpointed_model(cls, behavior: str, spec: BehaviorSpec, settings: TrainerSettings,
                           seed: int) -> tuple[Any, dict[str, Any]]:
        """The model to export and the objects its checkpoints hold, rebuilt without the
        environment from a behavior's record (``kerasrl export``)."""
        raise UnityTrainerException(f"Trainer type {settings.trainer} ({cls.__name__}) cannot rebuild its model from a "
                                    "checkpoint, so kerasrl export cannot export it.")

    def behavior_record(self) -> dict[str, Any]:
        """What rebuilds this behavior's policy without the environment (``kerasrl export``):
        its spec, trainer type (its registered name), settings and seed; checkpoints keep it beside them."""
        return {"behavior": self.behavior_name, "trainer": self.settings.trainer, "spec": self.spec.to_dict(),
                "settings": self.parameters, "seed": int(self.context.seed)}

    @property
    def get_max_steps(self) -> int:
        return self.max_steps

    @property
    def get_step(self) -> int:
        return self.step

    @property
    def reward_buffer(self) -> deque[float]:
        """Returns of the most recent completed episodes (newest first)."""
        return self._reward_buffer

    @property
    def policy(self) -> Any:
        raise UnityTrainerException(f"{type(self).__name__} has no policy.")

    @property
    def behaviors(self) -> list[str]:
        """The behaviors this trainer acts for: its own (a self-play trainer: every team's)."""
        return [self.behavior_name]

    def policy_for(self, behavior: str) -> Any:
        """The policy that acts for ``behavior`` (one of :attr:`behaviors`)."""
        return self.policy

    def add_behavior_step(self, behavior: str, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                          outputs: Optional[dict[str, Any]]) -> None:
        """``add_step`` for one of :attr:`behaviors` (the controller calls it once per behavior)."""
        self.add_step(previous, current, outputs)

    def increment_behavior_steps(self, steps: Mapping[str, int]) -> None:
        """Count the agent steps each of :attr:`behaviors` took (default: all of them as the trainer's)."""
        self.increment_step(sum(steps.values()))

    def take_policy_change(self) -> bool:
        """Whether the policies of :attr:`behaviors` changed since the last call otherwise than by an
        update (a self-play swap), so that the controller hands them to the env manager again."""
        return False

    def increment_step(self, n_steps: int) -> None:
        self.step += int(n_steps)

    def save_model(self) -> str:
        """Write a checkpoint; returns its path prefix."""
        raise UnityTrainerException(f"The save_model method was not implemented for {type(self).__name__}.")

    @property
    def trained_model(self) -> Any:
        """The Keras model that acts for this behavior, which the run exports when training ends."""
        raise UnityTrainerException(f"{type(self).__name__} has no trained model.")

    @property
    def writes_results(self) -> bool:
        """Whether this process writes the behavior's results (on several hosts, only the chief)."""
        return True

    def add_step(self, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                 outputs: Optional[dict[str, Any]]) -> None:
        """One env step (every behavior's results before and after it, and this behavior's policy
        outputs) for this behavior's agent processor, which queues the trajectories that close."""
        raise UnityTrainerException(f"The add_step method was not implemented for {type(self).__name__}.")

    def process_trajectories(self) -> None:
        """Take the queued trajectories into the update buffer."""
        raise UnityTrainerException(f"The process_trajectories method was not implemented for {type(self).__name__}.")

    def end_episode(self) -> None:
        raise UnityTrainerException("The end_episode method was not implemented.")

    def is_ready_update(self) -> bool:
        raise UnityTrainerException("The is_ready_update method was not implemented.")

    def update_policy(self) -> None:
        raise UnityTrainerException("The update_policy method was not implemented.")

    def finish_updates(self, drain: bool) -> None:
        """Stop updating in the background (``threaded``): after every update handed over
        (``drain``) or after the one in progress. Trainers that update in line have nothing to do."""

    def close(self) -> None:
        self.stats_writer.close()

    def drop_results_after(self, step: int) -> None:
        """Remove the CSV rows and TensorBoard events past ``step``: a run resumed from the
        checkpoint at ``step`` trains those steps again, and no step is recorded twice."""
        self.metrics.drop_after(step)
        self.stats_writer.drop_after(step)

    def write_hyperparameters(self) -> None:
        rows = "\n".join(f"| {k} | {v} |" for k, v in self.parameters.items())
        self.stats_writer.write_text("Hyperparameters", "| key | value |\n|---|---|\n" + rows)

    def write_summary(self, global_step: int, delta_train_start: float, lesson_num: Optional[int] = None) -> None:
        """Log and write the mean of every statistic when ``global_step`` (this trainer's step)
        passes a multiple of ``summary_freq``, then clear them."""
        previous, self._last_summary_step = self._last_summary_step, global_step
        freq = self.settings.summary_freq
        if previous is None or global_step // freq <= previous // freq:
            return
        step = min(self.step, self.max_steps)
        self._log_progress(step, delta_train_start)
        record = {key: float(np.mean(values)) for key, values in self.stats.items() if values}
        if lesson_num is not None:
            record["Environment/Lesson"] = float(lesson_num)
        self.stats_writer.write_scalars(step, record)
        self.metrics.write_row(step, record)
        self.summary_log.append({"step": float(step), **record})
        self.stats.clear()

    def _log_progress(self, step: int, delta_train_start: float) -> None:
        status = "Training." if self.is_training and self.step <= self.max_steps else "Not Training."
        rewards = self.stats.get("Environment/Cumulative Reward", [])
        if rewards:
            mean, std = float(np.mean(rewards)), float(np.std(rewards))
            logger.info(
                " %s: %s: Step: %d. Time Elapsed: %.3f s Mean Reward: %.3f. Std of Reward: %.3f. %s",
                self.run_id, self.behavior_name, step, delta_train_start, mean, std, status,
            )
            set_gauge(f"{self.behavior_name}.mean_reward", mean)
        else:
            logger.info(" %s: %s: Step: %d. No episode was completed since last summary. %s",
                        self.run_id, self.behavior_name, step, status)


#: Per trainer class: whether it acts for its own behavior only, through Trainer's default hooks.
_OWN_BEHAVIOR_ONLY: dict[type, bool] = {}


def own_behavior_only(cls: type) -> bool:
    """Whether trainers of ``cls`` keep :class:`Trainer`'s ``behaviors``, ``add_behavior_step``
    and ``increment_behavior_steps``: then the controller calls ``add_step`` and
    ``increment_step`` itself, as those defaults do (the same calls, without theirs, every step)."""
    own = _OWN_BEHAVIOR_ONLY.get(cls)
    if own is None:
        hooks = ("behaviors", "add_behavior_step", "increment_behavior_steps")
        own = _OWN_BEHAVIOR_ONLY[cls] = all(getattr(cls, name, None) is getattr(Trainer, name) for name in hooks)
    return own
