"""What a self-play run keeps beside its inner trainer's checkpoints: ``self_play.npz`` in the
behavior's folder holds the window's snapshots, the opponents' current weights and, as JSON, the
ratings, the counters, the league's learning team and the generator's state. It is written whole
or not at all (a temporary file replaced), so that ``--resume`` continues the league."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

#: The file in the behavior's model folder.
SELF_PLAY_FILE = "self_play.npz"


@dataclass
class SelfPlayState:
    """The league's numbers: ratings, the snapshot slots and the counters (trainer steps, ghost steps)."""

    #: The learning policy's rating.
    elo: float
    #: The rating of the latest policy the opponents play with (``opponent`` None).
    latest_elo: float
    #: The rating of each snapshot of the window, by slot.
    snapshot_elos: list[float] = field(default_factory=list)
    #: Snapshots saved since the start (the next one takes slot ``saved_snapshots % window``).
    saved_snapshots: int = 0
    #: The window slot the opponents play with; None: the latest policy at the last swap.
    opponent: Optional[int] = None
    #: Steps taken by the teams that do not learn (ML-Agents' ghost steps).
    ghost_step: int = 0
    #: The trainer step of the last snapshot and of the last change of the learning team.
    last_save: int = 0
    last_team_change: int = 0
    #: The ghost step of the last swap.
    last_swap: int = 0
    #: The inner trainer's step when saved.
    step: int = 0
    #: The league's learning team and turn order (``League.state``).
    league: dict[str, Any] = field(default_factory=dict)
    #: The state of the generator that draws the opponents.
    rng: dict[str, Any] = field(default_factory=dict)


def write_self_play(folder: str, state: SelfPlayState, snapshots: list[list[np.ndarray]],
                opponent: list[np.ndarray]) -> None:
    """``state``, the snapshots and the opponents' weights into ``folder/self_play.npz``, atomically."""
    arrays = {f"snapshot_{i}_{j}": w for i, weights in enumerate(snapshots) for j, w in enumerate(weights)}
    arrays.update({f"opponent_{j}": w for j, w in enumerate(opponent)})
    arrays["state"] = np.array(json.dumps(dataclasses.asdict(state)))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, SELF_PLAY_FILE)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def read_self_play(folder: str) -> Optional[tuple[SelfPlayState, list[list[np.ndarray]], list[np.ndarray]]]:
    """What :func:`write_self_play` wrote in ``folder`` (the state, snapshots, opponents' weights); None without it."""
    path = os.path.join(folder, SELF_PLAY_FILE)
    if not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as data:
        state = SelfPlayState(**json.loads(str(data["state"])))
        snapshots = [_weights(data, f"snapshot_{i}_") for i in range(len(state.snapshot_elos))]
        opponent = _weights(data, "opponent_")
    return state, snapshots, opponent


def _weights(data: Any, prefix: str) -> list[np.ndarray]:
    """The arrays ``{prefix}0``, ``{prefix}1``... in order."""
    count = sum(1 for key in data.files if key.startswith(prefix))
    return [np.array(data[f"{prefix}{j}"]) for j in range(count)]
