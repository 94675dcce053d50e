"""TrainerController: runs trainers over an env manager until ``max_steps`` (as ML-Agents 0.9's)."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from typing import Any, Callable, Iterator, Optional

import numpy as np

from kerasrl.curriculum import LESSONS_FILE, save_lessons
from kerasrl.envs.env_manager import EnvManager, StepInfo
from kerasrl.exception import EnvironmentException, TrainerError, UnityTrainerException
from kerasrl.interrupts import raise_if_stopping, sigint_deferred, stops_at_safe_points
from kerasrl.samplers import SAMPLER_FILE, save_draws
from kerasrl.timers import hierarchical_timer, timed, write_timer_tree
from kerasrl.trainers.checkpoint import WRITE_ERRORS, CheckpointWriteError, write_failure
from kerasrl.trainers.trainer import Trainer, own_behavior_only

logger = logging.getLogger("kerasrl")


def _check_arguments(save_freq: int, resampling_interval: Optional[int], save_every_seconds: Optional[float]) -> None:
    """``TrainerController``'s arguments that must be positive, checked before anything is set."""
    if resampling_interval is not None and (isinstance(resampling_interval, bool)
                                            or not isinstance(resampling_interval, int) or resampling_interval < 1):
        raise TrainerError(f"resampling_interval must be a positive integer, got {resampling_interval!r}.")
    if int(save_freq) < 1:
        raise TrainerError(f"save_freq must be >= 1, got {save_freq}.")
    if save_every_seconds is not None and not save_every_seconds > 0:
        raise TrainerError(f"save_every_seconds must be > 0, got {save_every_seconds}.")


def _check_elo_curricula(meta_curriculum: Optional[Any], trainers: dict[str, Trainer]) -> None:
    """A curriculum that measures ``Elo`` is for a behavior trained by self-play (one line otherwise)."""
    for name, curriculum in getattr(meta_curriculum, "curricula", {}).items():
        trainer = trainers.get(name)
        if curriculum.measure == "Elo" and trainer is not None and not hasattr(trainer, "elo"):
            raise TrainerError(f"The curriculum {curriculum.location} measures Elo, the rating of self-play, and "
                               f"behavior {name} does not train by self-play; add a self_play block to its section "
                               "or measure progress or reward.")


@contextlib.contextmanager
def _saving(what: str, leftover: Optional[str] = None) -> Iterator[None]:
    """A write error of the block (the OS's, TensorFlow's) as one-line :class:`CheckpointWriteError`
    naming ``what`` and the cause; ``leftover``, the block's temporary file, is removed."""
    try:
        yield
    except WRITE_ERRORS as e:
        if leftover is not None:
            with contextlib.suppress(OSError):
                os.remove(leftover)
        raise CheckpointWriteError(f"{what} failed: {write_failure(e)}. The checkpoints written before are intact: "
                                   "free some space or make the folder writable, then continue with --resume.") from e


class TrainerController:
    """Steps the environment, feeds every trainer, updates and saves them.

    A trainer's step counts its agents' steps (so ``max_steps``, ``summary_freq`` and
    ``save_freq`` are environment steps with every copy counted); ``global_step`` counts calls
    of the env manager. Checkpoints are written whenever a trainer's step crosses a multiple of
    ``save_freq`` (counted from the run's start, across resumes), every ``save_every_seconds`` when given, at the end
    and on Ctrl-C. ``fast_simulation`` is passed to the env manager's reset as ``train_mode``.

    ``meta_curriculum`` (:class:`kerasrl.curriculum.MetaCurriculum`) is tried after every step
    of the env manager; ``sampler_manager`` (:class:`kerasrl.samplers.SamplerManager`) draws new
    parameters whenever the environment steps taken in this session (every agent counted) pass
    a multiple of ``resampling_interval``. Either resets the environment with the sampled
    parameters overlaid by the lessons'. Each checkpoint also writes the lessons atomically to
    ``{model_path}/lessons.json`` (restored by ``kerasrl.curriculum.load_lessons``).

    A subclass (``kerasrl.PPO.fit``'s controller) adapts the loop through public hooks:
    ``before_update``, ``stop_requested``, ``checkpoint_allowed``, ``updates_finished`` and
    ``close_at_end``.
    """

    #: Whether the end of ``start_learning`` exports, writes the timers and closes the env manager
    #: and the trainers; a subclass that trains on with them later (``fit``) sets it to False.
    close_at_end: bool = True

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
        save_every_seconds: Optional[float] = None,
        timers_path: Optional[str] = None,
        export: Optional[Callable[[dict[str, Trainer]], None]] = None,
    ) -> None:
        _check_arguments(save_freq, resampling_interval, save_every_seconds)
        _check_elo_curricula(meta_curriculum, trainers)
        self._init_parameters(meta_curriculum, sampler_manager, resampling_interval)
        self._init_checkpoints(save_freq, save_every_seconds)
        self.trainers = trainers
        self.env_steps = sum(int(t.get_step) for t in trainers.values())
        #: Called with the trainers once training ends well (the command line and ``fit`` pass
        #: ``kerasrl.export.export_trainers``); trainers themselves know nothing of export.
        self.export = export
        self.model_path = model_path
        self.summaries_dir = summaries_dir
        self.run_id = run_id
        self.train_model = train
        self.training_seed = training_seed
        self.fast_simulation = fast_simulation
        self.progress = progress
        self.progress_freq = int(progress_freq)
        self.inference_steps = inference_steps
        #: The timer tree (with gauges) is written here at the end; default: ML-Agents'
        #: ``{summaries_dir}/{run_id}_timers.json``.
        self.timers_path = timers_path
        self.global_step = 0
        self._last_step_infos: list[StepInfo] = []
        self.interrupted = False
        #: Whether the latest ``start_learning`` ran to its end, the final checkpoint included: an
        #: error it raises then is the end-of-run export's or clean-up's, and the run's results stand.
        self.finished = False
        self._environment_ready = False
        self.training_start_time = time.time()
        np.random.seed(training_seed)

    def _init_parameters(self, meta_curriculum: Optional[Any], sampler_manager: Optional[Any],
                         resampling_interval: Optional[int]) -> None:
        """The curriculum and the sampler that choose the environment's reset parameters."""
        self.meta_curriculum = meta_curriculum
        self.sampler_manager = sampler_manager
        self.resampling_interval = resampling_interval
        #: The reset parameters of the latest reset (sampled, overlaid by the lessons).
        self.reset_params: dict[str, float] = {}
        #: Environment steps (every agent of every behavior) taken in this run, from the restored
        #: trainers' steps on a resume, so that resampling falls on the same steps as in a run never stopped.
        self.env_steps = 0

    def _init_checkpoints(self, save_freq: int, save_every_seconds: Optional[float]) -> None:
        """When checkpoints are due, and which ones this run holds."""
        self.save_freq = int(save_freq)
        self.save_every_seconds = save_every_seconds
        self._saved_at: dict[str, int] = {}
        #: Per trainer, the step of the newest checkpoint this run holds (restored or written).
        self.saved_steps: dict[str, int] = {}
        self._last_save_time = time.monotonic()

    def _get_measure_vals(self) -> dict[str, float]:
        """Per behavior: its curriculum's measure (``progress``: step / max_steps; ``Elo``: the
        self-play trainer's rating), else the mean of the trainer's reward buffer (NaN before any
        episode ends)."""
        curricula = self.meta_curriculum.curricula if self.meta_curriculum is not None else {}
        values = {}
        for name, trainer in self.trainers.items():
            curriculum = curricula.get(name)
            if curriculum is not None and curriculum.measure == "progress":
                values[name] = trainer.get_step / max(trainer.get_max_steps, 1)
            elif curriculum is not None and curriculum.measure == "Elo":
                values[name] = float(getattr(trainer, "elo", float("nan")))
            else:  # a plain sum: np.mean of a deque is slower, and this runs every step
                buffer = trainer.reward_buffer
                values[name] = sum(buffer) / len(buffer) if len(buffer) else float("nan")
        return values

    def _steps(self) -> dict[str, int]:
        return {name: t.get_step for name, t in self.trainers.items()}

    def checkpoint_allowed(self) -> bool:
        """A subclass's hook: whether the trainers may be checkpointed now (when False, a
        checkpoint that is due is skipped). Default: always."""
        return True

    def _save_models(self) -> None:
        """Checkpoint every trainer, unless :meth:`checkpoint_allowed` says no or the newest
        checkpoints already hold these steps (saving a step again would overwrite its checkpoint
        in place). A stop signal that comes meanwhile is held until all are written and recorded,
        so the save that follows it (:meth:`start_learning`) finds nothing left to write."""
        if not self.checkpoint_allowed() or self._steps() == self.saved_steps:
            return
        with sigint_deferred("the checkpoint save"):
            for name, trainer in self.trainers.items():
                with _saving(f"Saving {name} in {trainer.model_path}"):  # the saver's own errors are one line already
                    trainer.save_model()
            if self.meta_curriculum is not None:
                with _saving(f"Saving the lessons in {self.model_path}", os.path.join(self.model_path, LESSONS_FILE + ".tmp")):
                    save_lessons(self.meta_curriculum, self.model_path, self._steps())
            if self.sampler_manager is not None and not self.sampler_manager.is_empty():
                with _saving(f"Saving the samplers' draws in {self.model_path}",
                             os.path.join(self.model_path, SAMPLER_FILE + ".tmp")):
                    save_draws(self.sampler_manager, self.model_path, self._steps())
            self.saved_steps = self._steps()
        self._saved_at = self._save_marks()
        self._last_save_time = time.monotonic()
        logger.info("Saved models at step %d.", self.global_step)

    def _export_models(self) -> None:
        if self.export is not None:
            self.export(self.trainers)

    def _reset_env(self, env: EnvManager) -> list[StepInfo]:
        """Reset with freshly sampled parameters overlaid by the current lessons'."""
        params: dict[str, float] = {}
        if self.sampler_manager is not None and not self.sampler_manager.is_empty():
            params.update(self.sampler_manager.sample_all())
        if self.meta_curriculum is not None:
            params.update(self.meta_curriculum.get_config())
        self.reset_params = params
        return env.reset(config=params or None, train_mode=self.fast_simulation)

    def reset_env_if_ready(self, env: EnvManager, steps_before: int) -> None:
        """Advance the lessons; reset the environment if a lesson changed or the environment
        steps passed a multiple of ``resampling_interval`` since ``steps_before``. A reset ends
        every trainer's episodes; a behavior whose lesson changed starts its reward buffer afresh."""
        changed: dict[str, bool] = {}
        if self.meta_curriculum is not None:
            sizes = {name: len(t.reward_buffer) for name, t in self.trainers.items()}
            changed = self.meta_curriculum.increment_lessons(self._get_measure_vals(), reward_buff_sizes=sizes)
        interval = self.resampling_interval
        resample = (self.sampler_manager is not None and not self.sampler_manager.is_empty() and interval is not None
                    and self.env_steps // interval > steps_before // interval)
        if not (resample or any(changed.values())):
            return
        self._reset_env(env)
        for trainer in self.trainers.values():
            trainer.end_episode()
        for name, advanced in changed.items():
            if advanced and name in self.trainers:
                self.trainers[name].reward_buffer.clear()

    def stop_requested(self) -> bool:
        """A subclass's hook, asked before every step: True ends training early (as reaching
        ``max_steps`` does). Default: never."""
        return False

    def _should_continue(self) -> bool:
        """Train until every trainer passes ``max_steps`` (or :meth:`stop_requested`); without
        training, run ``inference_steps`` steps (forever when None, as ML-Agents does)."""
        if self.stop_requested():
            return False
        if not self.train_model:
            return self.inference_steps is None or self.global_step < self.inference_steps
        return any(t.get_step <= t.get_max_steps for t in self.trainers.values())

    @timed
    def advance(self, env: EnvManager) -> int:
        with hierarchical_timer("env_step"):
            new_step_infos = env.step()
        self._last_step_infos = new_step_infos
        trainers = self.trainers.values()
        with hierarchical_timer("process_step"):
            for step_info in new_step_infos:
                previous, current = step_info.previous or {}, step_info.current
                infos = step_info.action_infos or {}
                for trainer in trainers:
                    own = own_behavior_only(type(trainer))  # then add_step as add_behavior_step's default calls it
                    for behavior in (trainer.behavior_name,) if own else trainer.behaviors:
                        action_info = infos.get(behavior)
                        outputs = action_info.outputs if action_info is not None else None
                        (trainer.add_step(previous, current, outputs) if own
                         else trainer.add_behavior_step(behavior, previous, current, outputs))
                    trainer.process_trajectories()
            # What the scene itself recorded (a Unity StatsRecorder) goes to every behavior's summary.
            recorded: dict[str, list[float]] = getattr(env, "environment_stats", dict)()
            for key, values in recorded.items():
                for trainer in trainers:
                    trainer.stats[key].extend(values)
        for trainer in trainers if self.train_model else ():
            if trainer.get_step <= trainer.get_max_steps:
                if own_behavior_only(type(trainer)):  # increment_behavior_steps' default, without the dict
                    trainer.increment_step(self._agent_steps(new_step_infos, trainer.behavior_name))
                else:
                    trainer.increment_behavior_steps({b: self._agent_steps(new_step_infos, b) for b in trainer.behaviors})
                updated = trainer.is_ready_update()
                if updated:
                    self.before_update(trainer)
                    with hierarchical_timer("update_policy"):
                        trainer.update_policy()
                if trainer.take_policy_change() or updated:
                    self._hand_policies(env, trainer)
        return len(new_step_infos)

    @staticmethod
    def _hand_policies(env: EnvManager, trainer: Trainer) -> None:
        """The policy of each of the trainer's behaviors to the env manager."""
        for behavior in trainer.behaviors:
            env.set_policy(behavior, trainer.policy_for(behavior))

    def before_update(self, trainer: Any) -> None:
        """A subclass's hook, called right before ``trainer`` starts an update (threaded: before it
        hands the update over), for example to begin ``fit``'s epoch callbacks. Default: nothing."""

    @staticmethod
    def _agent_steps(step_infos: list[StepInfo], behavior: str) -> int:
        """How many of ``behavior``'s agents acted in ``step_infos``: the unit of every step count
        (an env with 8 copies takes 8 steps per step of all of them)."""
        count = 0
        for info in step_infos:
            action_info = (info.action_infos or {}).get(behavior)
            count += len(action_info.action) if action_info is not None else 0
        return count

    def write_to_tensorboard(self) -> None:
        """Each trainer's summary, with its lesson (``Environment/Lesson``, when it has a
        curriculum) and the current reset parameters (``Environment/Parameter/{name}``)."""
        lessons = self.meta_curriculum.lesson_nums if self.meta_curriculum is not None else {}
        for name, trainer in self.trainers.items():
            for param, value in self.reset_params.items():
                trainer.stats[f"Environment/Parameter/{param}"] = [value]
            trainer.write_summary(trainer.get_step, time.time() - self.training_start_time, lesson_num=lessons.get(name))

    def start_learning(self, env_manager: EnvManager) -> None:
        """Train until every trainer reaches ``max_steps``; Ctrl-C (``KeyboardInterrupt``, which
        ``kerasrl-learn`` also raises on SIGTERM and SIGHUP) saves and exits cleanly. The signal
        is taken between two steps or while waiting for the environment, never inside TensorFlow
        (see :mod:`kerasrl.interrupts`); one that comes during the final save or export still
        marks the run as interrupted.

        An error raised while training propagates as it is: the end-of-run export and clean-up
        never replace it (their own failures are logged instead). One that fails after training
        ended (the export on a full disk) is raised with :attr:`finished` set.
        """
        self.finished = False
        self._prepare()
        with stops_at_safe_points() as stops:
            self._learn(env_manager)
            if stops.take_quietly():
                self.interrupted = True

    def _learn(self, env_manager: EnvManager) -> None:
        try:
            if not self._environment_ready:
                self.reset_environment(env_manager)
            self._run(env_manager)
            self._finish_updates(drain=True)
            if self.global_step != 0 and self.train_model:
                self._save_models()
        except KeyboardInterrupt:
            self.interrupted = True
            self._finish_updates(drain=False)
            if self.train_model:
                logger.info("Learning was interrupted. Please wait while the model is saved.")
                self._save_models()
        except EnvironmentException:
            self._finish_updates(drain=False)
            self._save_after_environment_failure()
            raise
        finally:
            failed = sys.exc_info()[0] is not None
            if failed:
                self._finish_updates(drain=False)
            self.finished = not failed
            self._finish(env_manager, failed=failed)

    def _finish_updates(self, drain: bool) -> None:
        """Stop the trainers' update threads (``threaded``): after all their updates at the end
        of training, else after the one in progress. After an error, a failure here is logged."""
        for trainer in self.trainers.values():
            try:
                trainer.finish_updates(drain)
            except Exception:
                if drain:
                    raise
                logger.warning("Stopping the update thread of %s failed.", trainer.behavior_name, exc_info=True)
        self.updates_finished(drain)

    def updates_finished(self, drain: bool) -> None:
        """A subclass's hook, called once every trainer's update thread stopped (``drain``: at the
        end of training, after all their updates). Default: nothing."""

    def reset_environment(self, env_manager: EnvManager) -> None:
        """Hand each trainer's policy to the env manager and reset it with the first parameters
        (the lessons' and the sampler's). ``start_learning`` does it unless it was done: the
        command line does it first, so that a parameter the environment rejects stops the run
        before its folder is written."""
        for trainer in self.trainers.values():
            trainer.take_policy_change()
            self._hand_policies(env_manager, trainer)
        self._reset_env(env_manager)
        self._environment_ready = True

    def _save_after_environment_failure(self) -> None:
        """The environment failed (its bad data is caught before any trainer sees it), so the
        trainers' state is sound: checkpoint it, logging rather than raising a failure to save."""
        if not self.train_model:
            return
        try:
            self._save_models()
        except TrainerError as e:  # one line already
            logger.warning("Saving the models after the environment failed did not work either: %s", e)
        except Exception:
            logger.warning("Saving the models after the environment failed did not work either.", exc_info=True)

    def _prepare(self) -> None:
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
        self._last_save_time = time.monotonic()
        self._saved_at = self._save_marks()
        self.saved_steps = self._steps() if any(t.get_step for t in self.trainers.values()) else {}

    def _save_marks(self) -> dict[str, int]:
        """Per trainer, the number of whole ``save_freq`` intervals of its step (which survives
        resumes, so the interval is counted from the run's start)."""
        return {name: t.get_step // self.save_freq for name, t in self.trainers.items()}

    def _save_due(self) -> bool:
        if not self.train_model:
            return False
        if self._save_marks() != self._saved_at:
            return True
        return self.save_every_seconds is not None and time.monotonic() - self._last_save_time >= self.save_every_seconds

    def _run(self, env_manager: EnvManager) -> None:
        while self._should_continue():
            raise_if_stopping()
            steps_before = self.env_steps
            try:
                n_steps = self.advance(env_manager)
            except EnvironmentException as e:
                if not self._restarted(env_manager, e):
                    raise
                continue
            if self.meta_curriculum is not None or self.sampler_manager is not None:
                behaviors = [b for t in self.trainers.values() for b in t.behaviors]
                self.env_steps += sum(self._agent_steps(self._last_step_infos, b) for b in behaviors)
                self.reset_env_if_ready(env_manager, steps_before)
            if self._save_due():
                self._save_models()
            self.write_to_tensorboard()
            for _ in range(n_steps):
                self.global_step += 1
                if self.progress is not None and self.progress_freq and self.global_step % self.progress_freq == 0:
                    self.progress(self)

    def _restarted(self, env_manager: EnvManager, error: EnvironmentException) -> bool:
        """Whether the env manager restarted its environments after ``error`` (one that can:
        ``kerasrl.envs.restarts``); then every agent's unfinished episode ends, as at a reset."""
        restart = getattr(env_manager, "restart_after", None)
        if restart is None or not restart(error):
            return False
        for trainer in self.trainers.values():
            trainer.end_episode()
        return True

    def _finish(self, env_manager: EnvManager, failed: bool) -> None:
        """Export the trained weights (not after a failure: the checkpoints hold the last good
        state), write the timers and close everything; while an error propagates, problems here
        are logged so that they cannot hide it. The first step that fails otherwise (the export on
        a full disk) is raised once the others have run, so that the summaries are still closed.
        Nothing happens when :attr:`close_at_end` is False."""
        if not self.close_at_end:
            return
        error: Optional[Exception] = None
        steps = [("export", self._export_models)] if self.train_model and self.global_step != 0 and not failed else []
        steps += [("close the environment", env_manager.close)]  # first: worker processes hand over their timers
        steps += [("timers", lambda: self._write_timing_tree(quiet=failed or error is not None))]
        steps += [(f"close {name}", trainer.close) for name, trainer in self.trainers.items()]
        for what, step in steps:
            try:
                step()
            except Exception as e:
                if not failed and error is None:
                    error = e
                    continue
                logger.warning("While stopping after an error, %s failed too.", what, exc_info=True)
        if error is not None:
            raise error

    def _write_timing_tree(self, quiet: bool = False) -> None:
        """Write the timers (atomically). They are diagnostics, so a failed write does not fail the
        run: it is one warning naming the file and the OS's cause, or with ``quiet`` (the run ends
        with an error of its own, on a full disk the same cause) a debug message, so that the run's
        error stays its one line."""
        path = self.timers_path or os.path.join(self.summaries_dir, f"{self.run_id}_timers.json")
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            write_timer_tree(path)
        except OSError as e:
            logger.log(logging.DEBUG if quiet else logging.WARNING, "The timers could not be written to %s: %s.", path,
                       write_failure(e))
