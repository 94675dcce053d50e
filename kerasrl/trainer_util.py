"""Builds one trainer per behavior from an ML-Agents-style trainer config (behaviour.md §2.1)."""
from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

from kerasrl.envs.base import BehaviorSpec
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.trainer import Trainer


def resolve_trainer_config(trainer_config: Mapping[str, Any], brain_name: str) -> dict[str, Any]:
    """``default`` overlaid (shallowly) with the brain's own section, following string aliases."""
    if "default" not in trainer_config:
        raise TrainerConfigError("The trainer config has no 'default' section.")
    params = dict(copy.deepcopy(trainer_config["default"]))
    if brain_name in trainer_config:
        section: Any = trainer_config[brain_name]
        seen = [brain_name]
        while not isinstance(section, dict):
            if not isinstance(section, str) or section not in trainer_config:
                raise TrainerConfigError(
                    f"The trainer config section for brain {brain_name} aliases '{section}', which is not a section."
                )
            if section in seen:
                raise TrainerConfigError(f"The trainer config aliases loop: {' -> '.join(seen + [section])}.")
            seen.append(section)
            section = trainer_config[section]
        params.update(copy.deepcopy(section))
    return params


def initialize_trainers(
    trainer_config: Mapping[str, Any],
    external_brains: Mapping[str, BehaviorSpec],
    summaries_dir: str,
    run_id: str,
    model_path: str,
    keep_checkpoints: int,
    train_model: bool,
    load_model: bool,
    seed: int,
    meta_curriculum: Optional[Any] = None,
    multi_gpu: bool = False,
) -> dict[str, Trainer]:
    """One trainer per behavior in ``external_brains``; dispatches on the ``trainer`` key."""
    from kerasrl.ppo.trainer import PPOTrainer

    trainers: dict[str, Trainer] = {}
    for brain_name, spec in external_brains.items():
        params = resolve_trainer_config(trainer_config, brain_name)
        params["summary_path"] = f"{summaries_dir}/{run_id}_{brain_name}"
        params["model_path"] = f"{model_path}/{brain_name}"
        params["keep_checkpoints"] = keep_checkpoints
        kind = params.get("trainer")
        if kind == "ppo":
            cap = 1
            if meta_curriculum is not None and brain_name in getattr(meta_curriculum, "brains_to_curriculums", {}):
                cap = meta_curriculum.brains_to_curriculums[brain_name].min_lesson_length
            trainers[brain_name] = PPOTrainer(
                brain_name, spec, cap, params, train_model, load_model, seed, run_id, multi_gpu
            )
        elif kind in ("offline_bc", "online_bc"):
            raise UnityTrainerException(
                f"The trainer type '{kind}' for brain {brain_name} is not available in this version of kerasrl."
            )
        else:
            raise UnityTrainerException(f"The trainer config contains an unknown trainer type for brain {brain_name}")
    return trainers
