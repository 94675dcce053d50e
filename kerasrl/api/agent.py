"""What ``kerasrl.PPO`` and ``kerasrl.SAC`` share (``_Agent``): building the environment, settings,
run folder and trainer; ``fit``, which a :class:`~kerasrl.api.fit_controller._FitController` drives;
the epoch logs; ``close``; the observation checks of ``predict``; ``save`` and reading an archive
(:mod:`kerasrl.api.saving`)."""
from __future__ import annotations

import contextlib
import math
import os
import random
import sys
import time
import weakref
import zipfile
from typing import Any, ClassVar, Iterator, Mapping, Optional, Sequence, TypeVar, Union

import keras
import numpy as np

from kerasrl import distribute
from kerasrl.api.arguments import (
    ConfigArg,
    as_env_manager,
    behavior_settings,
    callback_list,
    check_run_dir_is_new,
    checked_int,
    config_name,
    flat_config,
    raw_config,
    temporary_run_dir,
)
from kerasrl.api.fit_controller import _FitController
from kerasrl.api.models import _TrainingModel
from kerasrl.api.saving import agent_from_archive, save_archive
from kerasrl.callbacks import FitProgress
from kerasrl.exception import TrainerError
from kerasrl.interrupts import stop_signal_interrupts
from kerasrl.settings import RunContext
from kerasrl.settings.run_context import check_seed
from kerasrl.spec import pick_behavior
from kerasrl.trainers.factory import create_trainer
from kerasrl.trainers.rl_trainer import RLTrainer


class _Agent:
    """What ``PPO`` and ``SAC`` share: building the environment, settings, run folder and
    trainer; ``fit``; the epoch logs; ``close``; the observation checks of ``predict``; ``save``
    and reading an archive. A subclass names its algorithm in the class attributes and fills in
    the hooks (``_attach``, ``_build_networks``, ``_counters``, ``_continue_at``)."""

    #: The algorithm's name (the config's ``trainer`` value, upper-cased) and its trainer class.
    ALGORITHM: ClassVar[str]
    TRAINER: ClassVar[type[RLTrainer]]
    #: The archive's format tag and the name of the weights file in it.
    FORMAT: ClassVar[str]
    WEIGHTS: ClassVar[str]
    #: The update's losses every epoch's logs hold.
    UPDATE_KEYS: ClassVar[tuple[str, ...]]
    #: Copies of a Gymnasium id's env when ``num_envs`` is not given (None: the registry's default).
    DEFAULT_NUM_ENVS: ClassVar[Optional[int]] = None

    #: The step and update count of a model loaded without an environment (it has no trainer to hold them).
    _step: int
    _updates: int
    #: ``None``, as ``model``, for a model that ``load`` read without an environment.
    trainer: Optional[Any]
    model: Optional[_TrainingModel]
    #: Set by ``close``: the agent can still ``predict`` and ``save``, not ``fit``.
    _closed: bool
    #: Set once a ``fit`` began: until then the run folder is checked again (another agent may have trained in it).
    _run_started: bool

    def __init__(self, env: Any, config: ConfigArg = None, behavior: Optional[str] = None, seed: Optional[int] = None,
                 gpus: Optional[int] = None, cpu_replicas: Optional[int] = None, *, num_envs: Optional[int] = None,
                 run_dir: Optional[str] = None, **hyperparameters: Any) -> None:
        if gpus is not None or cpu_replicas is not None:
            self.strategy = distribute.get_strategy(gpus=gpus, cpu_replicas=cpu_replicas)
        else:
            self.strategy = distribute.learner_strategy()
        seed, num_envs = checked_int("seed", seed), checked_int("num_envs", num_envs)
        if seed is not None:
            check_seed(seed, "seed")
        self.seed = seed if seed is not None else random.randrange(10000)
        #: Removes the temporary run folder (``run_dir`` not given) when called, at ``close``, or
        #: when the agent is garbage-collected or Python exits; detached once a Ctrl-C, SIGTERM or SIGHUP saved into it.
        self._remove_run_dir: Optional[weakref.finalize] = None
        self._closed = self._run_started = False
        self.env_manager = as_env_manager(env, self.DEFAULT_NUM_ENVS if num_envs is None else num_envs, self.seed)
        try:
            trainer = self._make_trainer(config, behavior, hyperparameters, run_dir, gpus)
        except BaseException:
            if self.env_manager is not env:  # made here: nothing else will close it
                self.env_manager.close()
            if self._remove_run_dir is not None:
                self._remove_run_dir()
            raise
        self.trainer = trainer
        self._attach(trainer)

    def _make_trainer(self, config: ConfigArg, behavior: Optional[str], hyperparameters: Mapping[str, Any],
                      run_dir: Optional[str], gpus: Optional[int]) -> Any:
        specs = self.env_manager.behavior_specs
        self.behavior = pick_behavior(specs, behavior, TrainerError)
        self.spec = specs[self.behavior]
        source = config_name(config, self.ALGORITHM)
        raw = flat_config(raw_config(config), self.ALGORITHM.lower(), source)  # the algorithm's trainer by default
        self.settings = behavior_settings(raw, self.behavior, hyperparameters, source)
        if self.settings.self_play is not None:
            raise TrainerError(f"kerasrl.{self.ALGORITHM} trains one behavior, and {source} gives {self.behavior} a "
                               "self_play block, which trains a behavior's teams together: train it with kerasrl-learn "
                               "(or kerasrl.trainers.create_trainers and a TrainerController), or remove the block.")
        if gpus:
            net = self.settings.network
            distribute.warn_if_small(net.hidden_units, net.num_layers, bool(self.spec.visual_observation_shapes), gpus)
        self.run_dir = run_dir or temporary_run_dir(self)
        self.context = RunContext.in_results_dir(os.path.dirname(os.path.abspath(self.run_dir)),
                                                 os.path.basename(os.path.abspath(self.run_dir)), seed=self.seed,
                                                 keep_checkpoints=2)
        check_run_dir_is_new(self.run_dir, self.context, self.behavior, self.ALGORITHM)
        trainer = create_trainer(self.behavior, self.spec, self.settings, self.context)
        if not isinstance(trainer, self.TRAINER):
            trainer.close()
            raise TrainerError(f"kerasrl.{self.ALGORITHM} trains with {self.ALGORITHM}; the config's trainer for "
                               f"{self.behavior} is {self.settings.trainer}.")
        return trainer

    # -- hooks ---------------------------------------------------------------------------
    def _attach(self, trainer: Any) -> None:
        """Keep the trainer's networks and make the callback model (``model``)."""
        raise NotImplementedError

    def _build_networks(self) -> None:
        """New networks for ``spec`` and ``settings`` (a model loaded without an environment)."""
        raise NotImplementedError

    @property
    def _networks(self) -> keras.Model:
        """The Keras object whose weights an archive holds."""
        raise NotImplementedError

    def _counters(self, trainer: Any) -> tuple[int, int]:
        """The trainer's step and update count, as checkpoints and archives keep them."""
        return trainer.step, trainer.update_count

    def _continue_at(self, trainer: Any, step: int, updates: int) -> None:
        """The trainer continues at ``step`` and ``updates`` with the weights just loaded."""
        raise NotImplementedError

    def _steps_per_epoch(self) -> int:
        """About how many environment steps an epoch (one update) takes (Keras' ``epochs`` estimate)."""
        raise NotImplementedError

    def _extra_logs(self, trainer: Any) -> dict[str, float]:
        """Logs an epoch holds besides the common ones and ``UPDATE_KEYS``."""
        return {}

    @contextlib.contextmanager
    def _fitting(self, callbacks: keras.callbacks.CallbackList) -> Iterator[None]:
        """Around one ``fit``'s training loop."""
        yield

    def _settle(self, trainer: Any) -> None:
        """Before callbacks that may change the learner's state run: nothing in the background may still change it."""

    # -- training ------------------------------------------------------------------------
    def fit(self, total_steps: int, callbacks: Optional[Sequence[keras.callbacks.Callback]] = None,
            verbose: Union[int, str] = 1) -> keras.callbacks.History:
        """Train for ``total_steps`` more environment steps (all copies counted; training stops
        earlier at the config's ``max_steps`` or when a callback sets ``model.stop_training``).
        One epoch per update. ``verbose``: 1 (or ``"auto"``) one progress bar over ``total_steps``
        on a terminal, else a line per summary period (``summary_freq`` steps); 2: a line per
        summary period; 0: silent (:class:`kerasrl.callbacks.FitProgress`). Ctrl-C, SIGTERM or SIGHUP saves
        a checkpoint in the run folder, says where on stderr, and raises ``KeyboardInterrupt``."""
        trainer, model = self._active_trainer(), self.model
        assert model is not None  # a model with a trainer has its callback model
        if self._closed:
            raise TrainerError(f"This kerasrl.{self.ALGORITHM} agent is closed (its environment and temporary run folder "
                               "are gone): make a new agent to train again.")
        if isinstance(total_steps, bool) or not isinstance(total_steps, (int, np.integer)) or total_steps < 1:
            raise TrainerError(f"total_steps must be a whole number >= 1, got {total_steps!r}.")
        verbose = 1 if verbose == "auto" else verbose
        if verbose not in (0, 1, 2):
            raise TrainerError(f"verbose must be 0, 1, 2 or 'auto', got {verbose!r}.")
        if not self._run_started:
            check_run_dir_is_new(self.run_dir, self.context, self.behavior, self.ALGORITHM)
            self._run_started = True
        epochs = max(1, math.ceil(int(total_steps) / max(self._steps_per_epoch(), 1)))
        progress = [FitProgress(int(total_steps), self.settings.summary_freq, int(verbose))] if verbose else []
        cbs = keras.callbacks.CallbackList([*callback_list(callbacks), *progress], add_history=True, add_progbar=False,
                                           model=model, verbose=verbose, epochs=epochs, steps=1)
        for p in progress:
            p.start(trainer.step)
        model.stop_training = False
        model._initial_epoch = None
        start = (time.perf_counter(), trainer.step)
        with stop_signal_interrupts() as stop_signal, self._fitting(cbs):
            self._settle(trainer)
            cbs.on_train_begin()
            first_epoch = model._initial_epoch or trainer.update_count
            controller = _FitController(self, trainer, model, cbs, trainer.step + int(total_steps), first_epoch)
            controller.start_learning(self.env_manager)
        if controller.interrupted:  # Ctrl-C, SIGTERM, SIGHUP: the controller saved a checkpoint; the caller sees it, as in Keras
            if self._remove_run_dir is not None:
                self._remove_run_dir.detach()  # a temporary run folder now holds the checkpoint: it stays
            stopped = f"stopped by {stop_signal.received}" if stop_signal.received else "interrupted"
            print(f"kerasrl: {stopped} at step {trainer.step}; the checkpoint is in {self.context.model_path} "
                  f"(run_dir={self.run_dir!r}, kept)", file=sys.stderr, flush=True)
            raise KeyboardInterrupt
        cbs.on_train_end(self._epoch_logs(*start))  # where training stopped; fps over the whole call
        return model.history

    def _active_trainer(self) -> Any:
        """The trainer (a model loaded without an environment has none: it cannot train)."""
        if self.trainer is None:
            raise TrainerError("This model was loaded without an environment: kerasrl.load(path, env=...) to train it.")
        return self.trainer

    def _position(self) -> tuple[int, int]:
        return self._counters(self._active_trainer())

    def _epoch_logs(self, start_time: float, start_step: int) -> dict[str, float]:
        trainer = self._active_trainer()
        metrics = trainer.last_update_metrics
        returns, lengths = trainer.recent_returns, trainer.processor.recent_lengths
        return {
            "episode_reward_mean": float(np.mean(returns)) if returns else float("nan"),
            "episode_length_mean": float(np.mean(lengths)) if lengths else float("nan"),
            "fps": (trainer.step - start_step) / max(time.perf_counter() - start_time, 1e-9),
            **{k: float(metrics[k]) for k in self.UPDATE_KEYS if k in metrics},
            "step": float(trainer.step),
            "episodes": float(trainer.episodes_completed),
            **self._extra_logs(trainer),
        }

    def _sync_from_weights(self, step: int, updates: int) -> None:
        """After weights (and counters) were loaded into the model: the trainer continues there."""
        if self.trainer is not None:
            self._continue_at(self.trainer, step, updates)

    def close(self) -> None:
        """Close the environment and the trainer's summary writers, and remove the temporary run
        folder (one kerasrl made because no ``run_dir`` was given, unless a Ctrl-C, SIGTERM or SIGHUP saved into it).
        The agent can still ``predict`` and ``save``; ``fit`` raises an error."""
        self._closed = True
        if self.trainer is not None:
            self.env_manager.close()
            self.trainer.close()
        if self._remove_run_dir is not None:
            self._remove_run_dir()

    # -- acting --------------------------------------------------------------------------
    def _checked_mask(self, action_mask: Optional[np.ndarray], n: int) -> Optional[np.ndarray]:
        """``action_mask`` as float32 ``[n, Σ branches]`` (discrete; ``None``: all allowed)."""
        if action_mask is None or not self.spec.has_action_mask:
            return None
        mask = np.asarray(action_mask, np.float32)
        width = self.spec.action_mask_size
        if mask.shape != (n, width):
            raise TrainerError(f"predict: action_mask has shape {mask.shape}; expected ({n}, {width}).")
        return mask

    def _checked_observations(self, observations: Any) -> list[np.ndarray]:
        """``observations`` as float32 arrays, one per observation of the behavior, shapes and values
        checked. For a behavior with one observation, a list that is not one array of it is read
        as numpy reads it (rows such as ``[[0., 0., 0., 0.]]``): the two readings never both fit."""
        shapes = self.spec.observation_shapes
        obs = list(observations) if isinstance(observations, (list, tuple)) else [observations]
        if len(shapes) == 1 and isinstance(observations, (list, tuple)) and not _one_array_of(obs, shapes[0]):
            try:
                rows = np.asarray(observations, np.float32)
            except (ValueError, TypeError):  # ragged or not numbers: reported as one array per observation
                rows = None
            if rows is not None and rows.shape[1:] == shapes[0]:
                obs = [rows]
            elif rows is not None:
                expected = ", ".join(map(str, shapes[0]))
                raise TrainerError(f"predict: the observations have shape {rows.shape}; expected (n, {expected}) "
                                   "(or a list holding one such array).")
        if len(obs) != len(shapes):
            raise TrainerError(f"predict: the behavior has {len(shapes)} observation(s), got {len(obs)}.")
        obs = [_float32_observation(i, o) for i, o in enumerate(obs)]
        for i, (o, shape) in enumerate(zip(obs, shapes)):
            if o.shape[1:] != shape:
                expected = ", ".join(map(str, shape))
                raise TrainerError(f"predict: observation {i} has shape {o.shape}; expected (n, {expected}).")
            if not np.isfinite(o).all():
                raise TrainerError(f"predict: observation {i} holds NaN, inf or a value beyond float32's range.")
        return obs

    # -- saving --------------------------------------------------------------------------
    def save(self, path: str, overwrite: bool = True) -> str:
        """Write a self-contained archive (settings, behavior spec, counters, the networks' weights
        with the normalizer, and the reward signals' models and the reward normalizer, which
        ``fit`` after :func:`load` goes on with) to ``path`` atomically; :func:`load` reads it. Returns ``path``. A
        folder at ``path`` or a failed write (a full disk) is one ``TrainerError`` line, leaving no
        temporary file and any earlier archive at ``path`` whole."""
        return save_archive(self, path, overwrite)

    @classmethod
    def _from_archive(cls: type[AgentT], meta: Mapping[str, Any], archive: zipfile.ZipFile, env: Any,
                      num_envs: Optional[int], run_dir: Optional[str]) -> AgentT:
        return agent_from_archive(cls, meta, archive, env, num_envs, run_dir)


AgentT = TypeVar("AgentT", bound=_Agent)


def _float32_observation(i: int, observation: Any) -> np.ndarray:
    """Observation ``i`` of ``predict`` as float32, else one ``TrainerError`` line (strings, objects)."""
    try:
        with np.errstate(over="ignore"):  # a value beyond float32's range becomes inf: reported as such
            return np.asarray(observation, np.float32)
    except (ValueError, TypeError) as e:
        raise TrainerError(f"predict: observation {i} is not numbers: {e}.") from e


def _one_array_of(obs: list[Any], shape: tuple[int, ...]) -> bool:
    """Whether ``obs`` is one array ``[n, *shape]`` (a list read as one array per observation)."""
    try:
        return len(obs) == 1 and np.shape(obs[0])[1:] == tuple(shape)
    except ValueError:  # ragged
        return False

