"""What a ``fit`` callback sees as ``callback.model``: an agent's Keras objects plus its training
position (:class:`PolicyModel` for ``kerasrl.PPO``, :class:`SACModel` for ``kerasrl.SAC``)."""
from __future__ import annotations

import os
from typing import Any, Protocol

import keras


class TrainingAgent(Protocol):
    """What a callback model uses of its agent (``kerasrl.PPO``, ``kerasrl.SAC``)."""

    def save(self, path: str, overwrite: bool = True) -> str: ...

    def _active_trainer(self) -> Any: ...

    def _position(self) -> tuple[int, int]: ...

    def _sync_from_weights(self, step: int, updates: int) -> None: ...


class _TrainingModel(keras.Model):
    """The model a ``fit`` callback sees: an agent's Keras objects plus a ``counters`` weight
    (its step and update count), so that ``save_weights``/``load_weights`` carry the training
    position, ``set_weights`` keeps it and ``save`` writes the agent's archive."""

    def __init__(self, agent: TrainingAgent, name: str) -> None:
        super().__init__(name=name)
        self._agent = agent
        self.counters = self.add_weight(name="counters", shape=(2,), initializer="zeros", trainable=False,
                                        dtype="int64")

    def position(self) -> tuple[int, int]:
        """The trainer's step and update count."""
        return self._agent._position()

    def save(self, filepath: str, overwrite: bool = True, **kwargs: Any) -> None:
        self._agent.save(filepath, overwrite=overwrite)

    def save_weights(self, filepath: str, overwrite: bool = True, **kwargs: Any) -> None:
        self.counters.assign(list(self.position()))
        tmp = f"{filepath}.tmp{os.getpid()}.weights.h5"
        super().save_weights(tmp, overwrite=True)
        os.replace(tmp, filepath)

    def load_weights(self, filepath: str, **kwargs: Any) -> None:
        super().load_weights(filepath, **kwargs)
        self._agent._sync_from_weights(*(int(v) for v in self.counters.numpy()))

    def set_weights(self, weights: Any) -> None:
        """New weights (``EarlyStopping(restore_best_weights=True)``); the trainer keeps its step."""
        step, updates = self.position()
        super().set_weights(weights)
        self._agent._sync_from_weights(step, updates)


class PolicyModel(_TrainingModel):
    """What ``callback.model`` is during ``fit``: the learner (weights and optimizer) plus the
    trainer's step and update count, so that ``save_weights``/``load_weights`` (``BackupAndRestore``,
    ``ModelCheckpoint(save_weights_only=True)``) carry the training position, ``get_weights``/
    ``set_weights`` serve ``EarlyStopping(restore_best_weights=True)`` and ``save`` writes an
    archive that :func:`load` reads (``ModelCheckpoint``)."""

    def __init__(self, agent: TrainingAgent) -> None:
        super().__init__(agent, "kerasrl_ppo")
        self.learner = agent._active_trainer().learner
        self.optimizer = self.learner.optimizer
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        return self.learner.actor_critic(inputs)


class SACModel(_TrainingModel):
    """What ``callback.model`` is during :meth:`SAC.fit`: the SAC networks (actor, critics,
    targets, entropy coefficients, normalizer) plus the trainer's step and gradient-step count,
    so that ``save_weights``/``load_weights`` carry the training position and ``save`` writes an
    archive that :func:`load` reads."""

    def __init__(self, agent: TrainingAgent) -> None:
        super().__init__(agent, "kerasrl_sac")
        self.networks = agent._active_trainer().networks
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        return self.networks(inputs)

