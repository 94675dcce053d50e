"""The ``self_play`` block: training against snapshots of the behavior's own past policies
(ML-Agents' keys and defaults; 0.14's ``play_against_current_self_ratio`` is read as
``play_against_latest_model_ratio``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kerasrl.settings.checks import _Checked, at_least, positive, setting, unit_interval


@dataclass(frozen=True, kw_only=True)
class SelfPlaySettings(_Checked):
    """Self-play: one team learns while the others act with snapshots of its past policies."""

    save_steps: int = setting(20_000, at_least(1), "trainer steps between snapshots of the learning policy")
    team_change: Optional[int] = setting(None, at_least(1), "trainer steps before the learning team changes "
                                                            "(default: 5 × save_steps)")
    swap_steps: int = setting(2_000, at_least(1), "ghost steps between swaps of the opponents' snapshot")
    window: int = setting(10, at_least(1), "past snapshots the opponents are drawn from")
    play_against_latest_model_ratio: float = setting(0.5, unit_interval,
                                                     "chance that an opponent plays the latest policy")
    initial_elo: float = setting(1200.0, positive, "the ELO rating a run starts from")

    def _check(self) -> None:
        if self.team_change is None:
            object.__setattr__(self, "team_change", 5 * self.save_steps)


#: Keys of older ML-Agents releases → today's names.
SELF_PLAY_RENAMED = {"play_against_current_self_ratio": "play_against_latest_model_ratio"}
