"""The fit-style Python API: ``kerasrl.PPO(env, ...).fit(total_steps, callbacks=...)``, ``kerasrl.SAC``
(the same for Soft Actor-Critic), ``kerasrl.load``.

Built over the same objects as the command line: an env manager, a ``PPOTrainer`` (whose
learner is built under the chosen ``tf.distribute`` strategy) and a ``TrainerController``
whose loop calls the callbacks — one Keras epoch per policy update::

    import keras, kerasrl

    agent = kerasrl.PPO("CartPole-v1", config="cartpole_zoo", seed=0)
    history = agent.fit(100_000, callbacks=[  # patience counts updates (256 steps each here)
        keras.callbacks.EarlyStopping(monitor="episode_reward_mean", mode="max", patience=40),
        keras.callbacks.CSVLogger("cartpole.csv")])
    agent.save("cartpole.keras")
    actions = kerasrl.load("cartpole.keras").predict(observations)  # observations: [n, 4]
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import weakref
import zipfile
from typing import Any, ClassVar, Iterator, Mapping, Optional, Sequence, TypeVar, Union

import gymnasium
import keras
import numpy as np
import tensorflow as tf

from kerasrl import distribute
from kerasrl.callbacks import FitProgress, rl_callbacks, wants_episodes
from kerasrl.configs import config_source
from kerasrl.envs.base import Environment
from kerasrl.envs.env_manager import EnvManager, SimpleEnvManager
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.registry import make_env
from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.fields import Field
from kerasrl.interrupts import stop_signal_interrupts
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.trainer import PPOTrainer
from kerasrl.sac.networks import SACNetworks
from kerasrl.sac.policy import SACPolicy
from kerasrl.sac.trainer import SACTrainer
from kerasrl.settings import RunContext, TrainerSettings, read_trainer_config, trainer_config_from_dict
from kerasrl.settings.run_context import HIDDEN_PREFIX, check_seed
from kerasrl.spec import BehaviorSpec, pick_behavior
from kerasrl.trainers.controller import TrainerController
from kerasrl.trainers.factory import create_trainer
from kerasrl.trainers.rl_trainer import RLTrainer

PPO_FORMAT = "kerasrl.ppo/1"
#: The archive's TensorFlow checkpoint of the reward state (``RLTrainer.reward_state``), when the agent has one.
REWARD_STATE = "reward_state"
#: The losses every PPO epoch's logs hold (from the learner's update), besides the reward signals'.
PPO_UPDATE_KEYS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "learning_rate")

ConfigArg = Union[str, os.PathLike, Mapping[str, Any], None]


# -- configuration ---------------------------------------------------------------------
def _raw_config(config: ConfigArg) -> dict[str, Any]:
    """The trainer config as a plain dict: a path, a shipped config's name, a dict or None."""
    if config is None:
        return {"default": {}}
    if isinstance(config, Mapping):
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in config.items()}
    raw = read_trainer_config(config_source(os.fspath(config)))
    if not isinstance(raw, Mapping):
        raise TrainerConfigError(f"The trainer config {config} is not a mapping of sections.")
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in raw.items()}


def behavior_settings(config: ConfigArg, behavior: str, overrides: Mapping[str, Any],
                      source: str = "kerasrl.PPO's config") -> TrainerSettings:
    """``behavior``'s settings from ``config`` with ``overrides`` (ML-Agents keys) applied to its
    section (or to ``default`` when it has none), checked as a YAML file is; errors name ``source``."""
    raw = _raw_config(config)
    raw.setdefault("default", {})
    name = behavior if behavior in raw else "default"
    section, seen = raw[name], {name}
    while isinstance(section, str) and section not in seen and isinstance(raw.get(section), (str, dict)):
        seen.add(section)
        section = raw[section]  # an alias section: ``Behavior: OtherSection``
    if isinstance(section, dict):
        raw[name] = {**section, **overrides}
    elif overrides:  # an alias that does not resolve: the config's own error names it
        trainer_config_from_dict(raw, source)
        raise TrainerConfigError(f"Section {name} of the config is not a mapping; cannot apply {sorted(overrides)}.")
    return trainer_config_from_dict(raw, source).settings_for(behavior)


# -- environments ----------------------------------------------------------------------
def as_env_manager(env: Any, num_envs: Optional[int], seed: int) -> Any:
    """An env manager for a Gymnasium id or env, a built-in name, a kerasrl environment or manager."""
    if isinstance(env, EnvManager):
        return env
    if isinstance(env, Environment):
        return SimpleEnvManager(env)
    if isinstance(env, str):
        return SimpleEnvManager(make_env(env, num_envs, seed, names=("env", "num_envs")))
    if isinstance(env, (gymnasium.Env, gymnasium.vector.VectorEnv)):
        return SimpleEnvManager(GymnasiumEnv(env, seed=seed))
    raise TrainerError(f"env must be a Gymnasium id or env, or a kerasrl environment or env manager; got {env!r}.")


def _callback_list(callbacks: Any) -> list[keras.callbacks.Callback]:
    """``fit``'s ``callbacks`` as a list: one callback alone is taken as Keras's ``fit`` takes it."""
    if callbacks is None:
        return []
    if isinstance(callbacks, keras.callbacks.Callback):
        return [callbacks]
    return list(callbacks)


def _checked_int(name: str, value: Any, allow_none: bool = True) -> Optional[int]:
    """An integer argument (a Python or NumPy integer), else one ``TrainerError`` line naming it."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TrainerError(f"{name} must be an integer, got {value!r}.")
    return int(value)


def _temporary_run_dir(agent: Any) -> str:
    """A new temporary run folder for ``agent`` (``PPO`` or ``SAC`` without ``run_dir``):
    ``agent._remove_run_dir`` removes it when called (``close``), when the agent is
    garbage-collected or when Python exits; ``fit`` detaches it once a Ctrl-C, SIGTERM or SIGHUP saved into it."""
    path = tempfile.mkdtemp(prefix="kerasrl-")
    agent._remove_run_dir = weakref.finalize(agent, shutil.rmtree, path, ignore_errors=True)
    return path


def _check_run_dir_is_new(run_dir: str, context: RunContext, behavior: str, algorithm: str) -> None:
    """Refuse a ``run_dir`` that already holds a run (a ``fit``'s or ``kerasrl-learn``'s: checkpoints,
    summaries, the metrics CSV, kerasrl's ``.kerasrl-*`` marker and lock): training there would
    delete that run's checkpoints (only the newest two are kept) and mix its summaries and CSV rows
    with the new ones. A missing or empty folder, or one holding only other files, is fine."""
    if not os.path.lexists(run_dir):
        return
    try:
        names = os.listdir(run_dir)
    except OSError as e:
        raise TrainerError(f"kerasrl.{algorithm}: run_dir {run_dir} cannot be used: {e.strerror or e}.") from e
    own = {os.path.basename(p) for p in (context.model_path, context.summaries_dir, context.metrics_path(behavior))}
    found = sorted(n for n in names if n in own or n.startswith(HIDDEN_PREFIX))
    if found:
        raise TrainerError(f"kerasrl.{algorithm}: run_dir {run_dir} already holds a run ({', '.join(found)}); training "
                           "in it would delete that run's checkpoints and mix its summaries with the new ones. Give a "
                           "new or empty run_dir; to train a saved agent on, kerasrl.load(archive, env=..., "
                           "run_dir=<a new folder>). Nothing was changed.")


# -- what the callbacks see as the model -----------------------------------------------
class _TrainingModel(keras.Model):
    """The model a ``fit`` callback sees: an agent's Keras objects plus a ``counters`` weight
    (its step and update count), so that ``save_weights``/``load_weights`` carry the training
    position, ``set_weights`` keeps it and ``save`` writes the agent's archive."""

    def __init__(self, agent: "_Agent", name: str) -> None:
        super().__init__(name=name)
        self._agent = agent
        self.counters = self.add_weight(name="counters", shape=(2,), initializer="zeros", trainable=False,
                                        dtype="int64")

    def position(self) -> tuple[int, int]:
        """The trainer's step and update count."""
        return self._agent._position()

    def save(self, filepath: str, overwrite: bool = True, **kwargs: Any) -> None:
        self._agent.save(filepath, overwrite=overwrite)

    def save_weights(self, filepath: str, overwrite: bool = True, **kwargs: Any) -> None:
        self.counters.assign(list(self.position()))
        tmp = f"{filepath}.tmp{os.getpid()}.weights.h5"
        super().save_weights(tmp, overwrite=True)
        os.replace(tmp, filepath)

    def load_weights(self, filepath: str, **kwargs: Any) -> None:
        super().load_weights(filepath, **kwargs)
        self._agent._sync_from_weights(*(int(v) for v in self.counters.numpy()))

    def set_weights(self, weights: Any) -> None:
        """New weights (``EarlyStopping(restore_best_weights=True)``); the trainer keeps its step."""
        step, updates = self.position()
        super().set_weights(weights)
        self._agent._sync_from_weights(step, updates)


class PolicyModel(_TrainingModel):
    """What ``callback.model`` is during ``fit``: the learner (weights and optimizer) plus the
    trainer's step and update count, so that ``save_weights``/``load_weights`` (``BackupAndRestore``,
    ``ModelCheckpoint(save_weights_only=True)``) carry the training position, ``get_weights``/
    ``set_weights`` serve ``EarlyStopping(restore_best_weights=True)`` and ``save`` writes an
    archive that :func:`load` reads (``ModelCheckpoint``)."""

    def __init__(self, agent: "PPO") -> None:
        super().__init__(agent, "kerasrl_ppo")
        self.learner = agent._active_trainer().learner
        self.optimizer = self.learner.optimizer
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        return self.learner.actor_critic(inputs)


class SACModel(_TrainingModel):
    """What ``callback.model`` is during :meth:`SAC.fit`: the SAC networks (actor, critics,
    targets, entropy coefficients, normalizer) plus the trainer's step and gradient-step count,
    so that ``save_weights``/``load_weights`` carry the training position and ``save`` writes an
    archive that :func:`load` reads."""

    def __init__(self, agent: "SAC") -> None:
        super().__init__(agent, "kerasrl_sac")
        self.networks = agent._active_trainer().networks
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        return self.networks(inputs)


# -- the loop --------------------------------------------------------------------------
class _FitController(TrainerController):
    """``TrainerController`` whose loop also drives the callbacks: an epoch begins right before a
    policy update (threaded: its hand-over) and ends when the policy acts with it, so that no epoch
    begins whose update does not run; a rollout begins at the first step after the last update.
    Training stops at ``target_step`` or when a callback sets ``model.stop_training``."""

    def __init__(self, agent: "_Agent", trainer: Any, model: _TrainingModel,
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

    def _before_update(self, trainer: Any) -> None:
        if not self._epoch_open:
            self._begin_epoch()

    def _should_continue(self) -> bool:
        return (not self.model.stop_training and self.trainer.step < self.target_step
                and super()._should_continue())

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
        return n

    def _finish_updates(self, drain: bool) -> None:
        """Threaded: the updates that finish at the end of training end their epochs too."""
        updates = self.trainer.updates_applied
        super()._finish_updates(drain)
        if drain and self.trainer.updates_applied != updates:
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

    def _save_models(self) -> None:
        """Checkpoint in the run folder, never weights that a non-finite loss produced."""
        if math.isfinite(self.trainer.last_update_metrics.get("loss", 0.0)):
            super()._save_models()

    def _finish(self, env_manager: Any, failed: bool) -> None:
        """Keep the environment and the trainer open for the next ``fit`` (``PPO.close`` ends them)."""


# -- the agents ------------------------------------------------------------------------
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
        seed, num_envs = _checked_int("seed", seed), _checked_int("num_envs", num_envs)
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
        raw = _raw_config(config)
        if isinstance(raw.get("default", {}), Mapping):  # the algorithm's trainer unless the config names one
            raw["default"] = {"trainer": self.ALGORITHM.lower(), **(raw.get("default") or {})}
        self.settings = behavior_settings(raw, self.behavior, hyperparameters, f"kerasrl.{self.ALGORITHM}'s config")
        if gpus:
            net = self.settings.network
            distribute.warn_if_small(net.hidden_units, net.num_layers, bool(self.spec.visual_observation_shapes), gpus)
        self.run_dir = run_dir or _temporary_run_dir(self)
        self.context = RunContext.in_results_dir(os.path.dirname(os.path.abspath(self.run_dir)),
                                                 os.path.basename(os.path.abspath(self.run_dir)), seed=self.seed,
                                                 keep_checkpoints=2)
        _check_run_dir_is_new(self.run_dir, self.context, self.behavior, self.ALGORITHM)
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
            _check_run_dir_is_new(self.run_dir, self.context, self.behavior, self.ALGORITHM)
            self._run_started = True
        epochs = max(1, math.ceil(int(total_steps) / max(self._steps_per_epoch(), 1)))
        progress = [FitProgress(int(total_steps), self.settings.summary_freq, int(verbose))] if verbose else []
        cbs = keras.callbacks.CallbackList([*_callback_list(callbacks), *progress], add_history=True, add_progbar=False,
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
        if os.path.isdir(path):
            raise TrainerError(f"Cannot save the agent to {path}: it is a folder; give a file path such as "
                               f"{os.path.join(path, 'agent.keras')}.")
        if os.path.exists(path) and not overwrite:
            raise TrainerError(f"{path} exists and overwrite=False.")
        step, updates = self._counters(self.trainer) if self.trainer is not None else (self._step, self._updates)
        meta = {"format": self.FORMAT, "behavior": self.behavior, "seed": self.seed, "spec": self.spec.to_dict(),
                "settings": self.settings.to_dict(), "step": step, "update_count": updates}
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with tempfile.TemporaryDirectory() as folder:
                weights = os.path.join(folder, self.WEIGHTS)
                self._networks.save_weights(weights)
                state_files = self._write_reward_state(folder)
                try:
                    with zipfile.ZipFile(tmp, "w") as z:
                        z.writestr("kerasrl.json", json.dumps(meta, indent=1))
                        z.write(weights, self.WEIGHTS)
                        for name in state_files:
                            z.write(os.path.join(folder, name), name)
                    os.replace(tmp, path)
                finally:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(tmp)
        except OSError as e:
            raise TrainerError(f"Cannot save the agent to {path}: {e.strerror or e}.") from e
        return path

    def _write_reward_state(self, folder: str) -> list[str]:
        """Write the trainer's reward state (model signals, reward normalizer) as a TensorFlow
        checkpoint ``REWARD_STATE`` in ``folder``; its file names (none without such state)."""
        trainer = self.trainer
        state = trainer.reward_state() if trainer is not None else {}
        if trainer is None or not state:
            return []
        with trainer.learner_lock:
            if trainer.reward_normalizer is not None:
                trainer.reward_normalizer.write_variables()
            tf.train.Checkpoint(**state).write(os.path.join(folder, REWARD_STATE))
        return sorted(n for n in os.listdir(folder) if n.startswith(REWARD_STATE + "."))

    def _read_reward_state(self, archive: zipfile.ZipFile, folder: str) -> None:
        """Restore the reward state an archive holds (none in an archive of an agent without it,
        or of a kerasrl before it was kept): the signals go on rewarding as they had learned to."""
        names = [n for n in archive.namelist() if n.startswith(REWARD_STATE + ".")]
        trainer = self.trainer
        if not names or trainer is None:
            return
        for name in names:
            archive.extract(name, folder)
        tf.train.Checkpoint(**trainer.reward_state()).read(os.path.join(folder, REWARD_STATE)).expect_partial()
        if trainer.reward_normalizer is not None:
            trainer.reward_normalizer.read_variables()

    @classmethod
    def _from_archive(cls: type[AgentT], meta: Mapping[str, Any], archive: zipfile.ZipFile, env: Any,
                      num_envs: Optional[int], run_dir: Optional[str]) -> AgentT:
        spec = BehaviorSpec.from_dict(meta["spec"])
        with tempfile.TemporaryDirectory() as folder:
            weights = archive.extract(cls.WEIGHTS, folder)
            if env is not None:
                agent = cls(env, config={"default": meta["settings"]}, behavior=meta["behavior"], seed=meta["seed"],
                            num_envs=num_envs, run_dir=run_dir)
                if agent.spec != spec:
                    agent.close()
                    raise TrainerError(f"The environment's behavior {meta['behavior']} is {agent.spec}; the saved "
                                       f"model's is {spec}.")
                agent._networks.load_weights(weights)
                agent._read_reward_state(archive, folder)
                agent._sync_from_weights(int(meta["step"]), int(meta["update_count"]))
                return agent
            agent = cls.__new__(cls)
            agent.behavior, agent.spec, agent.seed = meta["behavior"], spec, int(meta["seed"])
            agent.settings = TrainerSettings.from_dict(meta["settings"], "the saved model's settings")
            agent.trainer, agent.env_manager, agent.model = None, None, None
            agent._remove_run_dir, agent._closed, agent._run_started = None, False, False
            agent._step, agent._updates = int(meta["step"]), int(meta["update_count"])
            agent._build_networks()
            agent._networks.load_weights(weights)
            return agent


AgentT = TypeVar("AgentT", bound=_Agent)


class PPO(_Agent):
    """PPO on one behavior of ``env``, configured like ``kerasrl-learn`` and trained with ``fit``.

    ``env``: a Gymnasium id (``num_envs`` copies, default 8) or env, a built-in environment's
    name (``Simple1D``, ...), a kerasrl ``Environment`` or an env manager. ``config``: a trainer
    config (a YAML path, a shipped config's name or a dict in ML-Agents' form); keyword
    ``hyperparameters`` take ML-Agents' key names (``batch_size=64``, ``reward_signals={...}``)
    and override the behavior's section, checked as the YAML is. ``gpus`` / ``cpu_replicas``
    choose the learner's strategy (:func:`kerasrl.distribute.get_strategy`; logical CPU devices
    must be split before TensorFlow starts). Summaries and checkpoints go to ``run_dir``
    (default: a new temporary folder, removed by ``close``, when the agent is garbage-collected
    or when Python exits; kept, and named on stderr, once a Ctrl-C, SIGTERM or SIGHUP saved a checkpoint in it).
    A ``run_dir`` that already holds a run (checkpoints, summaries, a ``kerasrl-learn`` run's marker)
    is refused: a new run would delete its checkpoints.
    """

    ALGORITHM, TRAINER, FORMAT, WEIGHTS = "PPO", PPOTrainer, PPO_FORMAT, "actor_critic.weights.h5"
    UPDATE_KEYS = PPO_UPDATE_KEYS
    trainer: Optional[PPOTrainer]
    model: Optional[PolicyModel]
    _predict_fns: dict[bool, Any]

    def _attach(self, trainer: PPOTrainer) -> None:
        self.actor_critic = trainer.learner.actor_critic
        self.model = PolicyModel(self)
        self._predict_fns = {}

    def _build_networks(self) -> None:
        self.actor_critic = ActorCritic(self.spec, list(self.settings.reward_signals), self.settings.network,
                                        seed=self.seed, name="actor_critic")
        self._predict_fns = {}

    @property
    def _networks(self) -> keras.Model:
        return self.actor_critic

    def _continue_at(self, trainer: PPOTrainer, step: int, updates: int) -> None:
        trainer.step, trainer.update_count = step, updates
        trainer.learner.set_schedules(step)
        trainer.policy.refresh()
        trainer.policy.refresh_normalizer()

    def _steps_per_epoch(self) -> int:
        return self.settings.hyperparameters.buffer_size

    def _extra_logs(self, trainer: PPOTrainer) -> dict[str, float]:
        """Each reward signal's losses (the last of the update)."""
        logs = {}
        for key, values in trainer.stats.items():
            if key.startswith("Losses/") and key not in ("Losses/Value Loss", "Losses/Policy Loss") and values:
                logs[key[len("Losses/"):].lower().replace(" ", "_")] = float(values[-1])
        return logs

    @contextlib.contextmanager
    def _fitting(self, callbacks: keras.callbacks.CallbackList) -> Iterator[None]:
        """A non-finite loss is reported (not raised) while ``TerminateOnNaN`` watches."""
        trainer = self._active_trainer()
        trainer.nonfinite_loss = "report" if any(
            isinstance(c, keras.callbacks.TerminateOnNaN) for c in callbacks.callbacks) else "raise"
        try:
            yield
        finally:
            trainer.nonfinite_loss = "raise"

    def _settle(self, trainer: PPOTrainer) -> None:
        """The update's compilation ahead (``PPOLearner.start_warm_up``) puts the optimizer's state back when it ends."""
        trainer.learner.wait_warm_up()

    def fit(self, total_steps: int, callbacks: Optional[Sequence[keras.callbacks.Callback]] = None,
            verbose: Union[int, str] = 1) -> keras.callbacks.History:
        """Train for ``total_steps`` more environment steps (all copies counted; training stops
        earlier at the config's ``max_steps``, which also sets the schedules' horizon, or when a
        callback sets ``model.stop_training``). One epoch per policy update; its logs hold
        ``episode_reward_mean``, ``episode_length_mean`` (last 100 episodes), ``fps``, the update's
        losses (``loss``, ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``,
        ``clip_fraction``), ``learning_rate``, each reward signal's losses, ``step`` and ``episodes``.
        ``verbose``: 1 (or ``"auto"``) one progress bar over ``total_steps`` on a terminal, else a
        line per summary period (``summary_freq`` steps); 2: a line per summary period; 0: silent
        (:class:`kerasrl.callbacks.FitProgress`). Ctrl-C, SIGTERM or SIGHUP saves a checkpoint in the run folder,
        says where on stderr, and raises ``KeyboardInterrupt``. Once a callback sets ``model.optimizer.learning_rate``
        (``LearningRateScheduler``, ``ReduceLROnPlateau``), the updates use that rate from then on, not the schedule's."""
        return super().fit(total_steps, callbacks, verbose)

    def predict(self, observations: Any, action_mask: Optional[np.ndarray] = None,
                deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations (an array ``[n, ...]``, or a list with one array per
        observation of the behavior; with one observation, nested lists of rows too). Deterministic:
        the most probable allowed action per branch (discrete) or the clipped mean (continuous);
        else a sample. Recurrent policies start each call from zero memory."""
        obs = self._checked_observations(observations)
        model, n = self.actor_critic, len(obs[0])
        inputs = model.acting_inputs(obs, self._checked_mask(action_mask, n))
        deterministic = bool(deterministic)
        if deterministic:
            noise = np.zeros((n, self.spec.action_size), np.float32)
        else:
            noise = model.draw_noise(np.random.default_rng(), n)
        if deterministic not in self._predict_fns:
            self._predict_fns[deterministic] = model.act_function(deterministic)
        return self._predict_fns[deterministic](inputs, noise)[Field.ACTIONS].numpy()


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


# -- SAC -------------------------------------------------------------------------------
SAC_FORMAT = "kerasrl.sac/1"
#: The losses every SAC epoch's logs hold (from the update's gradient steps, averaged).
SAC_UPDATE_KEYS = ("critic_loss", "actor_loss", "ent_coef_loss", "ent_coef", "q_value", "learning_rate")
#: The stock callbacks that set ``model.optimizer.learning_rate``, which ``SAC.fit`` refuses.
LEARNING_RATE_CALLBACKS = (keras.callbacks.LearningRateScheduler, keras.callbacks.ReduceLROnPlateau)


class SAC(_Agent):
    """Soft Actor-Critic on one behavior of ``env``, configured like ``kerasrl-learn`` (``trainer:
    sac`` and ML-Agents' SAC keys) and trained with ``fit``.

    ``env``: a Gymnasium id (``num_envs`` copies, default 1) or env, a built-in environment's
    name, a kerasrl ``Environment`` or an env manager. ``config``: a trainer config (a YAML path,
    a shipped config's name such as ``"sac_pendulum"``, or a dict in ML-Agents' form; ``trainer:
    sac`` is implied); keyword ``hyperparameters`` take ML-Agents' key names and override the
    behavior's section. ``gpus`` / ``cpu_replicas`` choose the learner's strategy, as for
    :class:`PPO`. Summaries and checkpoints go to ``run_dir`` (default: a new temporary folder,
    as :class:`PPO`'s). An epoch of ``fit`` is one update (the gradient steps due when
    trajectories reach the replay buffer).
    """

    ALGORITHM, TRAINER, FORMAT, WEIGHTS = "SAC", SACTrainer, SAC_FORMAT, "sac.weights.h5"
    UPDATE_KEYS = SAC_UPDATE_KEYS
    DEFAULT_NUM_ENVS = 1
    trainer: Optional[SACTrainer]
    model: Optional[SACModel]

    def _attach(self, trainer: SACTrainer) -> None:
        self.networks = trainer.networks
        self.model = SACModel(self)

    def _build_networks(self) -> None:
        self.networks = SACNetworks(self.spec, list(self.settings.reward_signals), self.settings.network,
                                    self.settings.hyperparameters, seed=self.seed, name="sac")

    @property
    def _networks(self) -> keras.Model:
        return self.networks

    def _counters(self, trainer: SACTrainer) -> tuple[int, int]:
        return trainer.step, trainer.update_steps

    def _continue_at(self, trainer: SACTrainer, step: int, updates: int) -> None:
        trainer.step, trainer.update_steps = step, updates
        trainer.policy.refresh()

    def _steps_per_epoch(self) -> int:
        return self.settings.time_horizon + 1

    def fit(self, total_steps: int, callbacks: Optional[Sequence[keras.callbacks.Callback]] = None,
            verbose: Union[int, str] = 1) -> keras.callbacks.History:
        """Train for ``total_steps`` more environment steps (all copies counted; training stops
        earlier at the config's ``max_steps`` or when a callback sets ``model.stop_training``).
        One epoch per update; its logs hold ``episode_reward_mean``, ``episode_length_mean`` (last
        100 episodes), ``fps``, the update's mean ``critic_loss``, ``actor_loss``, ``ent_coef_loss``,
        ``ent_coef``, ``q_value``, ``learning_rate``, ``step`` and ``episodes``. ``verbose`` as
        :meth:`PPO.fit`. Ctrl-C, SIGTERM or SIGHUP saves a checkpoint in the run folder and raises ``KeyboardInterrupt``.
        Callbacks cannot set the learning rate (``LearningRateScheduler``, ``ReduceLROnPlateau``): SAC
        has three optimizers; the config's ``learning_rate`` and ``learning_rate_schedule`` set it."""
        for c in _callback_list(callbacks):
            if isinstance(c, LEARNING_RATE_CALLBACKS):
                raise TrainerError(f"kerasrl.SAC.fit: {type(c).__name__} cannot set SAC's learning rate (it has three "
                                   "optimizers: actor, critics, entropy coefficient); set learning_rate and "
                                   "learning_rate_schedule in the config instead.")
        return super().fit(total_steps, callbacks, verbose)

    def predict(self, observations: Any, action_mask: Optional[np.ndarray] = None,
                deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of vector observations ``[n, size]`` (or a list of one array per
        observation, cameras ``[n, h, w, c]`` included; with one observation, nested lists of rows
        too): continuous ones in [-1, 1] (``tanh(μ)`` when deterministic, which the
        environment maps onto its bounds), discrete ones the most probable allowed action of every
        branch (or samples)."""
        obs = self._checked_observations(observations)
        mask = self._checked_mask(action_mask, len(obs[0]))
        policy = SACPolicy(self.networks, seed=random.randrange(2**31), deterministic=bool(deterministic))
        return policy.actions(policy.inputs(obs), mask)


#: The agent class of each archive format.
_AGENTS: dict[str, type[_Agent]] = {PPO.FORMAT: PPO, SAC.FORMAT: SAC}


def load(path: str, env: Any = None, num_envs: Optional[int] = None, run_dir: Optional[str] = None) -> "PPO | SAC":
    """A model that :meth:`PPO.save` or :meth:`SAC.save` (or ``ModelCheckpoint``) wrote. Without ``env`` it can
    ``predict`` (and ``save``); with one it can also ``fit`` on, from the saved step (the
    optimizer's moments start afresh: ``BackupAndRestore`` or the run's checkpoints keep them), in
    ``run_dir`` (as :class:`PPO`'s: a new or empty folder, never one that holds a run)."""
    try:
        with zipfile.ZipFile(path) as z:
            meta = json.loads(z.read("kerasrl.json"))
            agent = _AGENTS.get(meta.get("format"))
            if agent is None:
                raise TrainerError(f"{path} is not a kerasrl PPO or SAC model (format {meta.get('format')!r}).")
            return agent._from_archive(meta, z, env, num_envs, run_dir)  # type: ignore[return-value]
    except (OSError, zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
        raise TrainerError(f"Cannot load a kerasrl model from {path}: {type(e).__name__}: {e}") from e
