"""Progress while a run trains, and its summary at the end."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional

import keras
import numpy as np

#: The CSV column of a summary's mean episode return.
RETURN_KEY = "Environment/Cumulative Reward"


def earlier_return(trainer: Any, recorded: Optional[tuple[int, list[float]]]) -> Optional[float]:
    """A resumed behavior's mean return before this session: the last summary's in its CSV, else
    that of the episodes a previous session ended with (``recorded``: its step and returns, from
    the run folder's ``returns.json``; not past the step resumed from); None when neither is known."""
    metrics = getattr(trainer, "metrics", None)
    summarized = metrics.last_value(RETURN_KEY) if metrics is not None else None
    if summarized is not None:
        return float(summarized)
    if recorded is not None and recorded[1] and recorded[0] <= trainer.get_step:
        return float(np.mean(recorded[1]))
    return None


class ProgressReport:
    """Progress and the final summary. Steps are environment steps (all copies counted) since
    the run's start, across resumes; steps/s covers this session, without tracing. The mean
    return is that of this session's episodes, else (a resumed run with none yet, or already at
    its target) each behavior's earlier one (:func:`earlier_return`). Progress is a bar (Keras's
    ``Progbar``) when stdout is a terminal, else one plain line each time."""

    def __init__(self, trainers: dict[str, Any], n_agents: int, inference: bool, target: Optional[int],
                 bar: Optional[bool] = None, recorded: Optional[dict[str, tuple[int, list[float]]]] = None) -> None:
        self.trainers, self.n_agents, self.inference = trainers, n_agents, inference
        self.first_step = {name: t.get_step for name, t in trainers.items()}
        earlier = [earlier_return(t, (recorded or {}).get(name)) for name, t in trainers.items() if t.get_step]
        self.earlier_returns = [v for v in earlier if v is not None]
        self.start = time.perf_counter()
        self.controller: Any = None
        self.target = target
        self.bar: Any = None
        if sys.stdout.isatty() if bar is None else bar:
            self.bar = keras.utils.Progbar(target, unit_name="step", stateful_metrics=["mean_return", "steps/s"])

    def trace_seconds(self) -> float:
        return sum(t.policy.trace_seconds + t.learner.trace_seconds for t in self.trainers.values())

    def summary(self) -> dict[str, float]:
        wall = time.perf_counter() - self.start
        if self.inference:
            steps = session = self.controller.global_step * self.n_agents
        else:
            steps = max(t.get_step for t in self.trainers.values())
            session = max(t.get_step - self.first_step[n] for n, t in self.trainers.items())
        returns = [r for t in self.trainers.values() for r in t.recent_returns] or self.earlier_returns
        return {"steps": float(steps), "mean_return": float(np.mean(returns)) if returns else float("nan"),
                "steps_per_sec": session / max(wall - self.trace_seconds(), 1e-9), "wall_s": wall}

    def progress(self, controller: Any) -> None:
        s = self.summary()
        if self.bar is not None:
            self.bar.update(int(s["steps"]), [("mean_return", s["mean_return"]), ("steps/s", s["steps_per_sec"])])
            return
        print(f"steps={int(s['steps'])} mean_return={s['mean_return']:.2f} steps_per_sec={s['steps_per_sec']:.0f}",
              flush=True)

    def close(self) -> None:
        """End the bar's line before the summary lines."""
        if self.bar is not None:
            print(flush=True)

    def resumed(self, seed: int) -> None:
        """One line per resumed behavior: its step, and the target and seed it continues with."""
        for name, t in self.trainers.items():
            if not t.get_step:
                continue
            if self.inference:
                print(f"Loaded {name}'s policy of step {t.get_step}: acting with it, not training (seed {seed}).",
                      flush=True)
            elif t.get_step > t.get_max_steps:
                print(f"Resumed {name} at step {t.get_step}: already at its target of {t.get_max_steps} steps: "
                      "nothing left to train.", flush=True)
            else:
                print(f"Resumed {name} at step {t.get_step}: continuing to its target of {t.get_max_steps} steps "
                      f"with seed {seed}.", flush=True)
