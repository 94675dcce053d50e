"""TrainerController: runs trainers over an env manager until ``max_steps`` (behaviour.md §4)."""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Optional

import numpy as np

from kerasrl.envs.env_manager import EnvManager, StepInfo
from kerasrl.exception import TrainerError, UnityTrainerException
from kerasrl.timers import hierarchical_timer, timed, write_timer_tree
from kerasrl.trainers.trainer import Trainer

logger = logging.getLogger("kerasrl")


class TrainerController:
    """Steps the environment, feeds every trainer, updates and saves them.

    ``fast_simulation`` is passed to the env manager's reset as ``train_mode``. Curricula and
    parameter samplers are not part of this version: passing one is an error, not ignored.
    """

    def __init__(
        self,
        trainers: dict[str, Trainer],
        model_path: str,
        summaries_dir: str,
        run_id: str,
        save_freq: int,
        meta_curriculum: Optional[Any] = None,
        train: bool = True,
        training_seed: int = 0,
        fast_simulation: bool = True,
        sampler_manager: Optional[Any] = None,
        resampling_interval: Optional[int] = None,
        progress: Optional[Callable[["TrainerController"], None]] = None,
        progress_freq: int = 0,
        inference_steps: Optional[int] = None,
    ) -> None:
        for name, value in (("meta_curriculum", meta_curriculum), ("sampler_manager", sampler_manager),
                            ("resampling_interval", resampling_interval)):
            if value is not None:
                raise TrainerError(f"TrainerController: {name} is not available in this version of kerasrl.")
        if int(save_freq) < 1:
            raise TrainerError(f"save_freq must be >= 1, got {save_freq}.")
        self.trainers = trainers
        self.model_path = model_path
        self.summaries_dir = summaries_dir
        self.run_id = run_id
        self.save_freq = int(save_freq)
        self.train_model = train
        self.training_seed = training_seed
        self.fast_simulation = fast_simulation
        self.progress = progress
        self.progress_freq = int(progress_freq)
        self.inference_steps = inference_steps
        self.global_step = 0
        self.interrupted = False
        self.training_start_time = time.time()
        np.random.seed(training_seed)

    def _get_measure_vals(self) -> dict[str, float]:
        """Per behavior: the mean of the trainer's reward buffer (NaN before any episode ends)."""
        return {
            name: float(np.mean(trainer.reward_buffer)) if len(trainer.reward_buffer) else float("nan")
            for name, trainer in self.trainers.items()
        }

    def _save_models(self) -> None:
        for trainer in self.trainers.values():
            trainer.save_model()
        logger.info("Saved models at step %d.", self.global_step)

    def _export_models(self) -> None:
        for trainer in self.trainers.values():
            trainer.export_model()

    def _reset_env(self, env: EnvManager) -> list[StepInfo]:
        return env.reset(config=None, train_mode=self.fast_simulation)

    def _should_continue(self) -> bool:
        """Train until every trainer passes ``max_steps``; without training, run ``inference_steps``
        steps (forever when None, as ML-Agents does)."""
        if not self.train_model:
            return self.inference_steps is None or self.global_step < self.inference_steps
        return any(t.get_step <= t.get_max_steps for t in self.trainers.values())

    @timed
    def advance(self, env: EnvManager) -> int:
        with hierarchical_timer("env_step"):
            new_step_infos = env.step()
        with hierarchical_timer("process_step"):
            for step_info in new_step_infos:
                for name, trainer in self.trainers.items():
                    infos = step_info.brain_name_to_action_info or {}
                    action_info = infos.get(name)
                    trainer.add_experiences(step_info.previous_all_brain_info or {}, step_info.current_all_brain_info,
                                            action_info.outputs if action_info is not None else None)
                    trainer.process_experiences(step_info.previous_all_brain_info or {}, step_info.current_all_brain_info)
        for name, trainer in self.trainers.items():
            if self.train_model and trainer.get_step <= trainer.get_max_steps:
                trainer.increment_step(len(new_step_infos))
                if trainer.is_ready_update():
                    with hierarchical_timer("update_policy"):
                        trainer.update_policy()
                    env.set_policy(name, trainer.policy)
        return len(new_step_infos)

    def write_to_tensorboard(self, global_step: int) -> None:
        for trainer in self.trainers.values():
            trainer.write_summary(global_step, time.time() - self.training_start_time)

    def start_learning(self, env_manager: EnvManager) -> None:
        """Train until every trainer reaches ``max_steps``; Ctrl-C saves and exits cleanly."""
        try:
            os.makedirs(self.model_path, exist_ok=True)
        except OSError as e:
            raise UnityTrainerException(
                f"The folder {self.model_path} containing the generated model could not be accessed. "
                "Please make sure the permissions are set correctly."
            ) from e
        for trainer in self.trainers.values():
            logger.info("%s", trainer)
            if self.train_model:
                trainer.write_hyperparameters()
        self.training_start_time = time.time()
        self.global_step = 0
        try:
            for name, trainer in self.trainers.items():
                env_manager.set_policy(name, trainer.policy)
            self._reset_env(env_manager)
            while self._should_continue():
                n_steps = self.advance(env_manager)
                for _ in range(n_steps):
                    self.global_step += 1
                    if self.train_model and self.global_step % self.save_freq == 0 and self.global_step != 0:
                        self._save_models()
                    self.write_to_tensorboard(self.global_step)
                    if self.progress is not None and self.progress_freq and self.global_step % self.progress_freq == 0:
                        self.progress(self)
            if self.global_step != 0 and self.train_model:
                self._save_models()
        except KeyboardInterrupt:
            self.interrupted = True
            if self.train_model:
                logger.info("Learning was interrupted. Please wait while the graph is generated.")
                self._save_models()
        finally:
            if self.train_model and self.global_step != 0:
                self._export_models()
            self._write_timing_tree()
            for trainer in self.trainers.values():
                trainer.close()
            env_manager.close()

    def _write_timing_tree(self) -> None:
        path = os.path.join(self.summaries_dir, f"{self.run_id}_timers.json")
        try:
            os.makedirs(self.summaries_dir, exist_ok=True)
            write_timer_tree(path)
        except (FileNotFoundError, OSError):
            logger.warning("Unable to save to %s. Make sure the directory exists", path)
