"""Shared by the example scripts: train one behavior of a Gymnasium env in this process."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Optional

import numpy as np

from kerasrl.configs import config_path
from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
from kerasrl.settings import RunContext, load_trainer_config, read_yaml
from kerasrl.trainers import TrainerController, create_trainers


def zoo_cartpole(**override: Any) -> dict[str, Any]:
    """The CartPole-v1 Zoo section (kerasrl/configs/cartpole_zoo.yaml) with ``override``."""
    return {**read_yaml(config_path("cartpole_zoo"))["default"], "summary_freq": 10**9, **override}


def train(section: dict[str, Any], env_id: str, steps: int, seed: int, workdir: str, num_envs: int = 8,
          target: Optional[float] = None) -> tuple[Any, Optional[int]]:
    """Train ``steps`` steps; returns the trainer and the first step at which the rolling mean
    return (last ≤ 100 episodes) reached ``target`` (None if never)."""
    config = load_trainer_config({"default": section})
    manager = SimpleEnvManager(GymnasiumEnv(env_id, num_envs=num_envs, seed=seed))
    context = RunContext(run_id=os.path.basename(workdir), summaries_dir=os.path.join(workdir, "s"),
                         model_path=os.path.join(workdir, "m"), keep_checkpoints=1, seed=seed, max_steps=steps)
    trainer = create_trainers(config, manager.behavior_specs, context)[env_id]
    reached: list[Optional[int]] = [None]
    seen = [0]

    def progress(tc: TrainerController) -> None:
        if target is not None and reached[0] is None and trainer.episodes_completed != seen[0]:
            seen[0] = trainer.episodes_completed
            if np.mean(trainer.recent_returns) >= target:
                reached[0] = trainer.get_step

    tc = TrainerController({env_id: trainer}, context.model_path, context.summaries_dir, context.run_id,
                           save_freq=10**9, train=True, training_seed=seed, progress=progress, progress_freq=1)
    tc.start_learning(manager)
    return trainer, reached[0]


def mean_return(trainer: Any) -> float:
    returns = list(trainer.recent_returns)
    return float(np.mean(returns)) if returns else float("nan")


def in_workdir(workdir: Optional[str], prefix: str, run: Callable[[str], int]) -> int:
    """``run(workdir)``; without a ``workdir``, in a temporary folder that is removed at the end."""
    if workdir is not None:
        return run(workdir)
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        return run(folder)
