"""Callbacks for ``kerasrl.PPO.fit``: Keras's own, plus reinforcement-learning hooks.

``fit`` drives a ``keras.callbacks.CallbackList`` with one epoch per policy update, so stock
callbacks (``EarlyStopping``, ``CSVLogger``, ``TensorBoard``, ``ModelCheckpoint``,
``TerminateOnNaN``, ``ProgbarLogger``, ``BackupAndRestore``) work unchanged. A subclass of
:class:`Callback` may also implement the hooks below.
"""
from __future__ import annotations

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
