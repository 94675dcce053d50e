"""TensorBoard output of a trainer's statistics (the trainer layer's only use of TensorFlow)."""
from __future__ import annotations

import os
from typing import Any, Mapping


class StatsWriter:
    """Writes scalars and text to one TensorBoard folder; the writer is created on first use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: Any = None

    def _file_writer(self) -> Any:
        if self._writer is None:
            import tensorflow as tf

            os.makedirs(self.path, exist_ok=True)
            self._writer = tf.summary.create_file_writer(self.path)
        return self._writer

    def write_scalars(self, step: int, values: Mapping[str, float]) -> None:
        import tensorflow as tf

        with self._file_writer().as_default():
            for key, value in values.items():
                tf.summary.scalar(key, value, step=step)
        self._writer.flush()

    def write_text(self, tag: str, text: str, step: int = 0) -> None:
        import tensorflow as tf

        with self._file_writer().as_default():
            tf.summary.text(tag, text, step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
