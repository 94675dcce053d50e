"""Checkpoints of a trainer's TensorFlow state: weights, optimizer slots, normalizer, counters."""
from __future__ import annotations

import logging
import os
from typing import Any, Optional

import tensorflow as tf

from kerasrl.exception import UnityTrainerException

logger = logging.getLogger("kerasrl.trainers")


class CheckpointSaver:
    """Saves and restores ``objects`` (trackable TF/Keras objects) plus the trainer's step and
    update count in ``model_path``, keeping the newest ``keep`` checkpoints."""

    def __init__(self, model_path: str, keep: int, **objects: Any) -> None:
        self.model_path = model_path
        self.keep = max(int(keep), 1)
        self._step = tf.Variable(0, dtype=tf.int64)
        self._updates = tf.Variable(0, dtype=tf.int64)
        self._checkpoint = tf.train.Checkpoint(**objects, step=self._step, updates=self._updates)
        self._manager: Optional[tf.train.CheckpointManager] = None

    def _checkpoint_manager(self) -> tf.train.CheckpointManager:
        if self._manager is None:
            os.makedirs(self.model_path, exist_ok=True)
            self._manager = tf.train.CheckpointManager(self._checkpoint, self.model_path, max_to_keep=self.keep,
                                                       checkpoint_name="model")
        return self._manager

    def save(self, step: int, updates: int) -> str:
        """A new checkpoint numbered ``step`` (the index file is updated last)."""
        self._step.assign(step)
        self._updates.assign(updates)
        return self._checkpoint_manager().save(checkpoint_number=step)

    def restore(self) -> tuple[int, int]:
        """Restore the newest checkpoint; returns its ``(step, updates)``."""
        latest = tf.train.latest_checkpoint(self.model_path)
        if latest is None:
            raise UnityTrainerException(
                f"The model {self.model_path} could not be found. Make sure you specified the right --run-id."
            )
        self._checkpoint.restore(latest).assert_existing_objects_matched()
        logger.info("Restored %s", latest)
        return int(self._step.numpy()), int(self._updates.numpy())


def export_weights(model: Any, path: str) -> None:
    """Write ``model``'s weights to ``path`` (``.weights.h5``) atomically."""
    tmp = path + ".tmp.weights.h5"
    model.save_weights(tmp)
    os.replace(tmp, path)
