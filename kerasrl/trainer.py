"""Trainer base class: step counting, statistics, summaries, saving (behaviour.md §6.1)."""
from __future__ import annotations

import logging
import os
from collections import defaultdict, deque
from typing import Any, Optional

import numpy as np

from kerasrl.envs.base import BehaviorSpec, StepResult
from kerasrl.exception import UnityTrainerException
from kerasrl.timers import set_gauge

logger = logging.getLogger("kerasrl.trainers")


class Trainer:
    """Base of every trainer; subclasses implement the experience and update hooks."""

    required_keys: tuple[str, ...] = ()

    def __init__(self, brain_name: str, spec: BehaviorSpec, trainer_parameters: dict[str, Any], training: bool,
                 run_id: str, reward_buff_cap: int = 1) -> None:
        self.brain_name = brain_name
        self.spec = spec
        self.trainer_parameters = trainer_parameters
        self.check_param_keys()
        self.is_training = training
        self.run_id = run_id
        self.summary_path = str(trainer_parameters["summary_path"])
        os.makedirs(self.summary_path, exist_ok=True)
        self.stats: defaultdict[str, list[float]] = defaultdict(list)
        self._reward_buffer: deque[float] = deque(maxlen=max(int(reward_buff_cap), 1))
        self.cumulative_returns_since_policy_update: list[float] = []
        self.step = 0
        self._summary_writer: Any = None
        self.summary_log: list[dict[str, float]] = []

    def check_param_keys(self) -> None:
        for key in self.required_keys:
            if key not in self.trainer_parameters:
                raise UnityTrainerException(
                    f"The hyper-parameter {key} could not be found for the {type(self).__name__} trainer of "
                    f"brain {self.brain_name}."
                )

    def __str__(self) -> str:
        def fmt(d: Any, depth: int) -> str:
            if not isinstance(d, dict):
                return str(d)
            pad = "\t" * depth
            return "".join(f"\n{pad}{k}:\t{fmt(v, depth + 1)}" for k, v in d.items())

        return f"Hyperparameters for the {type(self).__name__} of brain {self.brain_name}: {fmt(self.trainer_parameters, 1)}"

    @property
    def parameters(self) -> dict[str, Any]:
        return self.trainer_parameters

    @property
    def get_max_steps(self) -> float:
        return float(self.trainer_parameters["max_steps"])

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

    def increment_step(self, n_steps: int) -> None:
        self.step = self.policy.increment_step(n_steps)

    def save_model(self) -> None:
        raise UnityTrainerException(f"The save_model method was not implemented for {type(self).__name__}.")

    def export_model(self) -> None:
        raise UnityTrainerException(f"The export_model method was not implemented for {type(self).__name__}.")

    def add_experiences(self, curr_all: dict[str, StepResult], next_all: dict[str, StepResult],
                        take_action_outputs: Optional[dict[str, Any]]) -> None:
        raise UnityTrainerException("The add_experiences method was not implemented.")

    def process_experiences(self, curr_all: dict[str, StepResult], next_all: dict[str, StepResult]) -> None:
        raise UnityTrainerException("The process_experiences method was not implemented.")

    def end_episode(self) -> None:
        raise UnityTrainerException("The end_episode method was not implemented.")

    def is_ready_update(self) -> bool:
        raise UnityTrainerException("The is_ready_update method was not implemented.")

    def update_policy(self) -> None:
        raise UnityTrainerException("The update_policy method was not implemented.")

    def close(self) -> None:
        if self._summary_writer is not None:
            self._summary_writer.close()
            self._summary_writer = None

    def _writer(self) -> Any:
        if self._summary_writer is None:
            import tensorflow as tf

            self._summary_writer = tf.summary.create_file_writer(self.summary_path)
        return self._summary_writer

    def write_hyperparameters(self) -> None:
        import tensorflow as tf

        rows = "\n".join(f"| {k} | {v} |" for k, v in self.trainer_parameters.items())
        with self._writer().as_default():
            tf.summary.text("Hyperparameters", "| key | value |\n|---|---|\n" + rows, step=0)

    def write_summary(self, global_step: int, delta_train_start: float, lesson_num: int = 0) -> None:
        """Log and write the mean of every statistic every ``summary_freq`` steps, then clear them."""
        freq = int(self.trainer_parameters.get("summary_freq", 1000))
        if global_step % freq != 0 or global_step == 0:
            return
        import tensorflow as tf

        step = min(self.get_step, int(self.get_max_steps))
        status = "Training." if self.is_training and self.get_step <= self.get_max_steps else "Not Training."
        rewards = self.stats.get("Environment/Cumulative Reward", [])
        if rewards:
            mean, std = float(np.mean(rewards)), float(np.std(rewards))
            logger.info(
                " %s: %s: Step: %d. Time Elapsed: %.3f s Mean Reward: %.3f. Std of Reward: %.3f. %s",
                self.run_id, self.brain_name, step, delta_train_start, mean, std, status,
            )
            set_gauge(f"{self.brain_name}.mean_reward", mean)
        else:
            logger.info(" %s: %s: Step: %d. No episode was completed since last summary. %s",
                        self.run_id, self.brain_name, step, status)
        record: dict[str, float] = {"step": float(step)}
        with self._writer().as_default():
            for key, values in self.stats.items():
                if values:
                    value = float(np.mean(values))
                    record[key] = value
                    tf.summary.scalar(key, value, step=step)
            tf.summary.scalar("Environment/Lesson", lesson_num, step=step)
        self._writer().flush()
        self.summary_log.append(record)
        self.stats.clear()
