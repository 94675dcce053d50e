"""The stand-in player's simulation cost per step and its report of where its wall time went
(benchmarks/bench_player_busy.py reads it): simulating, its own messages, waiting for the trainer."""
from __future__ import annotations

import json

import numpy as np

from tests.test_unity_env import BEHAVIOR, _env, _log


def test_the_player_simulates_for_its_step_cost_and_reports_its_busy_share(tmp_path):
    report = tmp_path / "report.json"
    env = _env(tmp_path, "--agents", "2", "--step-cost-ms", "2", "--report", str(report), "--report-after", "3")
    try:
        result = env.reset()[BEHAVIOR]
        for _ in range(20):
            result = env.step({BEHAVIOR: np.ones((len(result), 1), np.int32)})[BEHAVIOR]
    finally:
        env.close()
    log = _log(tmp_path)
    assert "busy share" in log and log.rstrip().endswith("quit")
    figures = json.loads(report.read_text())
    # each step answered once (a step of agents held back after an episode end needs no exchange);
    # the first 3 exchanges (start-up) left out of the report
    assert figures["steps"] == figures["exchanges"] and 10 <= figures["steps"] <= 17
    assert figures["simulating_ms"] >= 2.0  # every step costs at least its simulation
    assert 0.0 < figures["busy_share"] < 1.0 and figures["waiting_ms"] > 0.0
    parts = figures["simulating_ms"] + figures["waiting_ms"] + figures["own_messages_ms"]
    assert abs(parts * figures["exchanges"] / 1e3 - figures["wall_s"]) < 1e-6
