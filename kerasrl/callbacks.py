"""Callbacks for ``kerasrl.PPO.fit``: Keras's own, plus reinforcement-learning hooks.

``fit`` drives a ``keras.callbacks.CallbackList`` with one epoch per policy update, so stock
callbacks (``EarlyStopping``, ``CSVLogger``, ``TensorBoard``, ``ModelCheckpoint``,
``TerminateOnNaN``, ``BackupAndRestore``) work unchanged. A subclass of :class:`Callback` may
also implement the hooks below. :class:`FitProgress` is ``fit``'s own progress output.
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, Optional

import keras

Logs = Optional[dict[str, Any]]


class Callback(keras.callbacks.Callback):
    """A Keras callback with reinforcement-learning hooks (all optional).

    * ``on_rollout_begin(logs)``: experience collection for the next update starts
      (``logs``: ``step``);
    * ``on_rollout_end(logs)``: the update that this rollout fed is done, before
      ``on_epoch_end`` (``logs``: ``step``, ``episodes``, ``fps``);
    * ``on_episode_end(logs)``: an agent finished an episode (``logs``: ``episode_reward``,
      ``episode_length``, ``step``). Only called when some callback overrides it.
    """

    def on_rollout_begin(self, logs: Logs = None) -> None:
        """Experience collection for the next policy update starts."""

    def on_rollout_end(self, logs: Logs = None) -> None:
        """The policy update fed by the rollout is done (called before ``on_epoch_end``)."""

    def on_episode_end(self, logs: Logs = None) -> None:
        """An agent finished an episode."""


def rl_callbacks(callbacks: Iterable[Any]) -> list[Callback]:
    """The callbacks among ``callbacks`` that take the reinforcement-learning hooks."""
    return [c for c in callbacks if isinstance(c, Callback)]


def wants_episodes(callbacks: Iterable[Callback]) -> bool:
    """True when one of ``callbacks`` overrides ``on_episode_end`` (else it is never called)."""
    return any(type(c).on_episode_end is not Callback.on_episode_end for c in callbacks)


#: What the progress shows of each epoch's logs, when present.
PROGRESS_KEYS = ("episode_reward_mean", "loss", "fps")


class FitProgress(keras.callbacks.Callback):
    """``fit``'s progress, in place of Keras's two lines per epoch (= per policy update).

    ``verbose=1``: one progress bar over the call's steps when stdout is a terminal, else one
    line per summary period; ``verbose=2``: one line per summary period (``period`` steps, the
    config's ``summary_freq``), and one at the end.
    """

    def __init__(self, total_steps: int, period: int, verbose: int, bar: Optional[bool] = None) -> None:
        super().__init__()
        self.total_steps, self.period = int(total_steps), max(int(period), 1)
        self.bar = verbose == 1 and (sys.stdout.isatty() if bar is None else bar)
        self.progbar: Optional[keras.utils.Progbar] = None
        self.first_step: Optional[int] = None
        self.next_line = 0
        self.last_logs: dict[str, Any] = {}
        self.printed = -1

    def start(self, step: int) -> None:
        """Training starts at ``step`` (the trainer's, across calls)."""
        self.first_step = step
        self.next_line = (step // self.period + 1) * self.period
        if self.bar:
            self.progbar = keras.utils.Progbar(self.total_steps, unit_name="step", stateful_metrics=PROGRESS_KEYS)

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        logs = dict(logs or {})
        step = int(logs.get("step", 0))
        if self.first_step is None:
            self.start(step)
        self.last_logs = logs
        if self.progbar is not None:
            shown = [(k, float(logs[k])) for k in PROGRESS_KEYS if k in logs]
            self.progbar.update(min(step - (self.first_step or 0), self.total_steps), shown)
        elif step >= self.next_line:
            self._line(logs)
            self.next_line = (step // self.period + 1) * self.period

    def on_train_end(self, logs: Logs = None) -> None:
        """The bar's end, or the last line (at the step where training stopped)."""
        logs = {**self.last_logs, **(logs or {})}
        if "step" not in logs:
            return
        if self.progbar is not None:
            step = int(logs.get("step", 0)) - (self.first_step or 0)
            self.progbar.update(min(step, self.total_steps), finalize=True)
        elif int(logs.get("step", 0)) != self.printed:
            self._line(logs)

    def _line(self, logs: dict[str, Any]) -> None:
        shown = " ".join(f"{k}={float(logs[k]):.0f}" if k == "fps" else f"{k}={float(logs[k]):.4g}"
                         for k in PROGRESS_KEYS if k in logs)
        self.printed = int(logs.get("step", 0))
        print(f"step={int(logs.get('step', 0))} {shown}", flush=True)
