"""Builds one trainer per behavior from a trainer config (ML-Agents 0.9's ``initialize_trainers``)."""
from __future__ import annotations

import logging
import os
from typing import Any, Iterable, Mapping, Optional, Union

import tensorflow as tf

from kerasrl.compat import mlagents_keywords
from kerasrl.distribute import cluster, get_strategy
from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.settings import RunContext, TrainerConfig, TrainerSettings, load_trainer_config, trainer_type
from kerasrl.spec import BehaviorSpec, behavior_file_name
from kerasrl.trainers.multi_host import create_on_hosts
from kerasrl.trainers.self_play import League, SelfPlayTrainer, base_name
from kerasrl.trainers.trainer import Trainer

logger = logging.getLogger("kerasrl")

ConfigLike = Union[TrainerConfig, Mapping[str, Any], str, None]


def create_trainer(behavior: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                   reward_buff_cap: int = 1, behaviors: Optional[list[str]] = None,
                   league: Optional[League] = None) -> Trainer:
    """The trainer of the registered type that ``settings.trainer`` names, for one behavior (under
    a multi-host strategy, taking part in it: ``kerasrl.trainers.multi_host``). With a ``self_play`` block,
    a :class:`SelfPlayTrainer` around it that acts for ``behaviors`` (the teams' behaviors, default
    ``[behavior]``) in ``league`` (shared by the self-play trainers of one run; default: its own)."""
    trainer = _trainer_of_type(behavior, spec, settings, context, reward_buff_cap)
    if settings.self_play is None:
        return trainer
    return SelfPlayTrainer(trainer, behaviors or [behavior], league or League(), settings.self_play)


def _trainer_of_type(behavior: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                     reward_buff_cap: int) -> Trainer:
    trainer_cls = trainer_type(settings.trainer, f"the settings of behavior {behavior}").trainer_cls
    hosts = cluster()
    if hosts is not None:
        trainer = create_on_hosts(trainer_cls, behavior, spec, settings, context, reward_buff_cap, cluster=hosts)
    else:
        trainer = trainer_cls(behavior, spec, settings, context, reward_buff_cap)
    if not isinstance(trainer, Trainer):
        raise TrainerError(f"Trainer type {settings.trainer}: {trainer_cls.__name__} is not a kerasrl.trainers.Trainer.")
    return trainer


def create_trainers(config: ConfigLike, behavior_specs: Mapping[str, BehaviorSpec], context: RunContext,
                    reward_buff_caps: Optional[Mapping[str, int]] = None) -> dict[str, Trainer]:
    """One trainer per behavior; ``config`` is a :class:`TrainerConfig`, a dict in ML-Agents'
    form or a YAML path. Sections that match no behavior are reported first. A behavior that
    another behavior's trainer imitates (its class's ``teacher_of``, e.g. ``online_bc``'s ``brain_to_imitate``)
    gets no trainer: its actions come from the policy set for it on the env manager (a heuristic,
    a person, another run's policy)."""
    trainer_config = load_trainer_config(config)
    trainer_config.check_behaviors(behavior_specs)
    _check_file_names(behavior_specs)
    if context.load_model:
        _adopt_files_named_by_id(behavior_specs, context)
    caps = reward_buff_caps or {}
    teachers = {_teacher(trainer_config.settings_for(name)) for name in behavior_specs} - {None}
    groups = _trained_together(trainer_config, [name for name in behavior_specs if name not in teachers])
    league = League()
    trainers = {}
    for key, names in groups.items():
        spec = behavior_specs[names[0]]
        if any(behavior_specs[name] != spec for name in names):
            raise TrainerConfigError(f"Behaviors {', '.join(names)} play {key} by self-play with one policy, and their "
                                     "specs differ; give their teams the same observations and actions.")
        trainers[key] = create_trainer(key, spec, trainer_config.settings_for(names[0]), context, caps.get(key, 1),
                                       behaviors=names, league=league)
    return trainers


def _trained_together(trainer_config: TrainerConfig, behaviors: list[str]) -> dict[str, list[str]]:
    """Trainer name → the behaviors it acts for: a behavior with ``self_play`` shares the trainer of
    its name without the team suffix (``Name?team=0`` and ``Name?team=1`` -> ``Name``), the
    others have their own (ML-Agents keys its trainers by that name too)."""
    groups: dict[str, list[str]] = {}
    for name in behaviors:
        key = base_name(name) if trainer_config.settings_for(name).self_play is not None else name
        groups.setdefault(key, []).append(name)
    return groups


def _teacher(settings: TrainerSettings) -> Optional[str]:
    """The behavior a trainer of these settings imitates (its class's ``teacher_of``), if any."""
    teacher = getattr(trainer_type(settings.trainer).trainer_cls, "teacher_of", None)
    return teacher(settings) if teacher is not None else None


def _check_file_names(behaviors: Mapping[str, Any]) -> None:
    """Refuse (one line) two behaviors whose files would have one name (``behavior_file_name``)."""
    seen: dict[str, str] = {}
    for name in behaviors:
        other = seen.setdefault(behavior_file_name(name), name)
        if other != name:
            raise TrainerError(f"Behaviors {other!r} and {name!r} would write their checkpoints and metrics under "
                               f"one name, {behavior_file_name(name)!r}; rename one of them.")


def _adopt_files_named_by_id(behaviors: Iterable[str], context: RunContext) -> None:
    """Resuming a run whose files still name a behavior by its id with a team suffix (written
    before kerasrl named them by ``behavior_file_name``): its checkpoint folder, metrics CSV and
    TensorBoard folder are renamed to the names kerasrl now reads, each only where the new one
    does not exist yet, so the run continues where it stopped."""
    for name in behaviors:
        file_name = behavior_file_name(name)
        if file_name == name:
            continue
        for new in (context.behavior_model_path(name), context.metrics_path(name), context.summary_path(name)):
            head, _, tail = os.path.basename(new).rpartition(file_name)
            old = os.path.join(os.path.dirname(new), head + name + tail)
            if not os.path.exists(old):
                continue
            if os.path.exists(new):
                logger.warning("Both %s and %s exist; %s is the one kept on.", old, new, new)
                continue
            os.rename(old, new)
            logger.info("Renamed %s to %s (files no longer hold a team suffix's '?' or '=').", old, new)


@mlagents_keywords
def initialize_trainers(
    trainer_config: ConfigLike,
    behavior_specs: Mapping[str, BehaviorSpec],
    summaries_dir: str,
    run_id: str,
    model_path: str,
    keep_checkpoints: int,
    train_model: bool,
    load_model: bool,
    seed: int,
    meta_curriculum: Optional[Any] = None,
    multi_gpu: bool = False,
    max_steps: Optional[int] = None,
) -> dict[str, Trainer]:
    """ML-Agents 0.9's signature over :func:`create_trainers`. ``max_steps`` overrides every
    section's (as ``--steps`` does). A meta-curriculum sets each behavior's reward-buffer
    length to its ``min_lesson_length``. ``multi_gpu``: the learners train on every visible GPU
    (``kerasrl.distribute.get_strategy(gpus=N)``; ``--gpus N`` on the command line)."""
    if multi_gpu:
        gpus = len(tf.config.list_physical_devices("GPU"))
        if gpus == 0:
            raise TrainerError("multi_gpu=True trains the learners on every visible GPU, and TensorFlow sees none.")
        get_strategy(gpus=gpus)
    context = RunContext(run_id=run_id, summaries_dir=summaries_dir, model_path=model_path,
                         keep_checkpoints=keep_checkpoints, train_model=train_model, load_model=load_model,
                         seed=seed, max_steps=max_steps)
    curricula = getattr(meta_curriculum, "curricula", {}) if meta_curriculum is not None else {}
    caps = {name: curriculum.min_lesson_length for name, curriculum in curricula.items()}
    return create_trainers(trainer_config, behavior_specs, context, caps)
