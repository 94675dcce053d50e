"""An agent's archive, which ``PPO.save`` and ``SAC.save`` write and ``kerasrl.load`` reads: a zip
holding ``kerasrl.json`` (format, behavior, seed, spec, settings, step and update count), the
networks' weights and, when the agent has one, its reward state."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from typing import Any, Mapping, Optional

import tensorflow as tf

from kerasrl.exception import TrainerError
from kerasrl.settings import TrainerSettings
from kerasrl.spec import BehaviorSpec

#: The archive's TensorFlow checkpoint of the reward state (``RLTrainer.reward_state``), when the agent has one.
REWARD_STATE = "reward_state"


def save_archive(agent: Any, path: str, overwrite: bool) -> str:
    """Write ``agent``'s archive to ``path`` (``PPO.save``, ``SAC.save``: the behavior, seed, spec,
    settings and counters in ``kerasrl.json``, the networks' weights, the reward state)."""
    if os.path.isdir(path):
        raise TrainerError(f"Cannot save the agent to {path}: it is a folder; give a file path such as "
                           f"{os.path.join(path, 'agent.keras')}.")
    if os.path.exists(path) and not overwrite:
        raise TrainerError(f"{path} exists and overwrite=False.")
    step, updates = agent._counters(agent.trainer) if agent.trainer is not None else (agent._step, agent._updates)
    meta = {"format": agent.FORMAT, "behavior": agent.behavior, "seed": agent.seed, "spec": agent.spec.to_dict(),
            "settings": agent.settings.to_dict(), "step": step, "update_count": updates}
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            weights = os.path.join(folder, agent.WEIGHTS)
            agent._networks.save_weights(weights)
            state_files = write_reward_state(agent.trainer, folder)
            try:
                with zipfile.ZipFile(tmp, "w") as z:
                    z.writestr("kerasrl.json", json.dumps(meta, indent=1))
                    z.write(weights, agent.WEIGHTS)
                    for name in state_files:
                        z.write(os.path.join(folder, name), name)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
    except OSError as e:
        raise TrainerError(f"Cannot save the agent to {path}: {e.strerror or e}.") from e
    return path


def write_reward_state(trainer: Any, folder: str) -> list[str]:
    """Write the trainer's reward state (model signals, reward normalizer) as a TensorFlow
    checkpoint ``REWARD_STATE`` in ``folder``; its file names (none without such state)."""
    state = trainer.reward_state() if trainer is not None else {}
    if trainer is None or not state:
        return []
    with trainer.learner_lock:
        if trainer.reward_normalizer is not None:
            trainer.reward_normalizer.write_variables()
        tf.train.Checkpoint(**state).write(os.path.join(folder, REWARD_STATE))
    return sorted(n for n in os.listdir(folder) if n.startswith(REWARD_STATE + "."))


def read_reward_state(trainer: Any, archive: zipfile.ZipFile, folder: str) -> None:
    """Restore the reward state an archive holds (none in an archive of an agent without it,
    or of a kerasrl before it was kept): the signals go on rewarding as they had learned to."""
    names = [n for n in archive.namelist() if n.startswith(REWARD_STATE + ".")]
    if not names or trainer is None:
        return
    for name in names:
        archive.extract(name, folder)
    tf.train.Checkpoint(**trainer.reward_state()).read(os.path.join(folder, REWARD_STATE)).expect_partial()
    if trainer.reward_normalizer is not None:
        trainer.reward_normalizer.read_variables()


def agent_from_archive(cls: Any, meta: Mapping[str, Any], archive: zipfile.ZipFile, env: Any, num_envs: Optional[int],
                       run_dir: Optional[str]) -> Any:
    """An agent of class ``cls`` (``PPO``, ``SAC``) from an archive whose ``kerasrl.json`` says ``meta``:
    trained on in ``env`` when given, else one that can only ``predict`` and ``save``."""
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
            read_reward_state(agent.trainer, archive, folder)
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
