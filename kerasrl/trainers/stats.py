"""A trainer's statistics: TensorBoard (the trainer layer's only use of TensorFlow) and CSV."""
from __future__ import annotations

import csv
import os
from typing import Any, Mapping

import tensorflow as tf


class StatsWriter:
    """Writes scalars and text to one TensorBoard folder; the writer is created on first use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: Any = None

    def _file_writer(self) -> Any:
        if self._writer is None:
            os.makedirs(self.path, exist_ok=True)
            self._writer = tf.summary.create_file_writer(self.path)
        return self._writer

    def write_scalars(self, step: int, values: Mapping[str, float]) -> None:
        with self._file_writer().as_default():
            for key, value in values.items():
                tf.summary.scalar(key, value, step=step)
        self._writer.flush()

    def write_text(self, tag: str, text: str, step: int = 0) -> None:
        with self._file_writer().as_default():
            tf.summary.text(tag, text, step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class CsvStats:
    """One row per summary in a CSV file (``Step`` and one column per statistic), beside
    TensorBoard. A statistic that appears later (a loss written only after the first update)
    widens the header: the file is then rewritten with the new column, atomically. An existing
    file (a resumed run) is continued."""

    STEP = "Step"

    def __init__(self, path: str) -> None:
        self.path = path

    def _header(self) -> list[str]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, newline="", encoding="utf-8") as f:
            return next(csv.reader(f), [])

    def write_row(self, step: int, values: Mapping[str, float]) -> None:
        row = {self.STEP: step, **values}
        header = self._header()
        missing = [key for key in row if key not in header]
        if not missing:
            with open(self.path, "a", newline="", encoding="utf-8") as f:
                csv.DictWriter(f, header).writerow(row)
            return
        self._rewrite([*header, *missing] if header else [self.STEP, *sorted(values)], row)

    def _rewrite(self, header: list[str], row: Mapping[str, Any]) -> None:
        rows: list[Mapping[str, Any]] = []
        if os.path.exists(self.path):
            with open(self.path, newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, header)
            writer.writeheader()
            writer.writerows([*rows, row])
        os.replace(tmp, self.path)
