"""ELO ratings of self-play (as ML-Agents' ghost trainer): a game's result moves the learning
policy's rating and its opponent's by the same amount in opposite directions."""
from __future__ import annotations

#: How far one game moves a rating at most (ML-Agents' K).
K_FACTOR = 16.0


def expected_score(rating: float, opponent: float) -> float:
    """The share of games a player of ``rating`` is expected to win against ``opponent``."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def game_result(final_reward: float) -> float:
    """A game's result from its final reward (ML-Agents' convention): > 0 a win (1), 0 a draw (0.5), < 0 a loss (0)."""
    return 1.0 if final_reward > 0 else 0.5 if final_reward == 0 else 0.0


def rating_change(rating: float, opponent: float, result: float, k: float = K_FACTOR) -> float:
    """What a game of ``result`` adds to ``rating`` (and takes from ``opponent``'s)."""
    return k * (result - expected_score(rating, opponent))
