"""``kerasrl.load``: an agent (``kerasrl.PPO``, ``kerasrl.SAC`` or ``kerasrl.POCA``) from the archive its ``save`` wrote."""
from __future__ import annotations

import json
import zipfile
from typing import Any, Optional

from kerasrl.api.agent import _Agent
from kerasrl.api.poca import POCA
from kerasrl.api.ppo import PPO
from kerasrl.api.sac import SAC
from kerasrl.exception import TrainerError

#: The agent class of each archive format.
_AGENTS: dict[str, type[_Agent]] = {PPO.FORMAT: PPO, SAC.FORMAT: SAC, POCA.FORMAT: POCA}


def load(path: str, env: Any = None, num_envs: Optional[int] = None,
         run_dir: Optional[str] = None) -> "PPO | SAC | POCA":
    """A model that :meth:`PPO.save` or :meth:`SAC.save` (or ``ModelCheckpoint``) wrote. Without ``env`` it can
    ``predict`` (and ``save``); with one it can also ``fit`` on, from the saved step (the
    optimizer's moments start afresh: ``BackupAndRestore`` or the run's checkpoints keep them), in
    ``run_dir`` (as :class:`PPO`'s: a new or empty folder, never one that holds a run)."""
    try:
        with zipfile.ZipFile(path) as z:
            meta = json.loads(z.read("kerasrl.json"))
            agent = _AGENTS.get(meta.get("format"))
            if agent is None:
                raise TrainerError(f"{path} is not a kerasrl PPO, SAC or POCA model (format {meta.get('format')!r}).")
            return agent._from_archive(meta, z, env, num_envs, run_dir)  # type: ignore[return-value]
    except (OSError, zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
        raise TrainerError(f"Cannot load a kerasrl model from {path}: {type(e).__name__}: {e}") from e
