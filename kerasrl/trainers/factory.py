"""Builds one trainer per behavior from a trainer config (ML-Agents 0.9's ``initialize_trainers``)."""
from __future__ import annotations

import logging
import os
from typing import Any, Iterable, Mapping, Optional, Union

import tensorflow as tf

from kerasrl.distribute import cluster, get_strategy
from kerasrl.exception import TrainerError
from kerasrl.settings import RunContext, TrainerConfig, TrainerSettings, load_trainer_config
from kerasrl.spec import BehaviorSpec, behavior_file_name
from kerasrl.trainers.bc_trainer import OfflineBCTrainer, OnlineBCTrainer
from kerasrl.trainers.multi_host import MultiHostPPOTrainer
from kerasrl.trainers.ppo_trainer import PPOTrainer
from kerasrl.trainers.sac_trainer import SACTrainer
from kerasrl.trainers.trainer import Trainer

logger = logging.getLogger("kerasrl")

ConfigLike = Union[TrainerConfig, Mapping[str, Any], str, None]


def create_trainer(behavior: str, spec: BehaviorSpec, settings: TrainerSettings, context: RunContext,
                   reward_buff_cap: int = 1) -> Trainer:
    """The trainer that ``settings.trainer`` names, for one behavior (under a multi-host
    strategy, ``kerasrl.trainers.multi_host``'s)."""
    if settings.trainer in ("ppo", "offline_bc", "online_bc"):
        hosts = cluster()
        if hosts is not None:
            return MultiHostPPOTrainer(behavior, spec, settings, context, reward_buff_cap, cluster=hosts)
    if settings.trainer == "ppo":
        return PPOTrainer(behavior, spec, settings, context, reward_buff_cap)
    if settings.trainer == "sac":
        if spec.is_hybrid:
            raise TrainerError(f"Behavior {behavior} has hybrid actions (continuous and discrete at once), which the "
                               "sac trainer does not take; train it with trainer: ppo.")
        return SACTrainer(behavior, spec, settings, context, reward_buff_cap)
    if settings.trainer in ("offline_bc", "online_bc"):
        cls = OfflineBCTrainer if settings.trainer == "offline_bc" else OnlineBCTrainer
        return cls(behavior, spec, settings, context, reward_buff_cap)
    raise TrainerError(f"The trainer config contains an unknown trainer type for behavior {behavior}.")


def create_trainers(config: ConfigLike, behavior_specs: Mapping[str, BehaviorSpec], context: RunContext,
                    reward_buff_caps: Optional[Mapping[str, int]] = None) -> dict[str, Trainer]:
    """One trainer per behavior; ``config`` is a :class:`TrainerConfig`, a dict in ML-Agents'
    form or a YAML path. Sections that match no behavior are reported first. A behavior that an
    ``online_bc`` trainer imitates (its ``brain_to_imitate``) gets no trainer: its actions come
    from the policy set for it on the env manager (a heuristic, a person, another run's policy)."""
    trainer_config = load_trainer_config(config)
    trainer_config.check_behaviors(behavior_specs)
    _check_file_names(behavior_specs)
    if context.load_model:
        _adopt_files_named_by_id(behavior_specs, context)
    caps = reward_buff_caps or {}
    teachers = {trainer_config.settings_for(name).behavioral_cloning.brain_to_imitate for name in behavior_specs
                if trainer_config.settings_for(name).trainer == "online_bc"}
    return {
        name: create_trainer(name, spec, trainer_config.settings_for(name), context, caps.get(name, 1))
        for name, spec in behavior_specs.items() if name not in teachers
    }


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
