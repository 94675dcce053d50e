"""A trainer's statistics: TensorBoard (the trainer layer's only use of TensorFlow) and CSV."""
from __future__ import annotations

import csv
import math
import os
from typing import Any, Mapping, Optional, Sequence

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

    def drop_after(self, step: int) -> int:
        """Remove the events past ``step`` from the folder's event files (a run resumed there
        replays those steps, so that TensorBoard shows no step twice); returns how many were
        removed. A file is rewritten (atomically) only if it held any."""
        self.close()
        if not os.path.isdir(self.path):
            return 0
        return sum(_drop_events_after(os.path.join(self.path, name), step)
                   for name in sorted(os.listdir(self.path)) if ".tfevents." in name and not name.endswith(".tmp"))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _drop_events_after(path: str, step: int) -> int:
    records = [bytes(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    kept = [r for r in records if tf.compat.v1.Event.FromString(r).step <= step]
    if len(kept) == len(records):
        return 0
    tmp = f"{path}.tmp"
    with tf.io.TFRecordWriter(tmp) as writer:
        for record in kept:
            writer.write(record)
    os.replace(tmp, path)
    return len(records) - len(kept)


class CsvStats:
    """One row per summary in a CSV file (``Step`` and one column per statistic), beside
    TensorBoard. A statistic that appears later (a loss written only after the first update)
    widens the header: the file is then rewritten with the new column, atomically. An existing
    file (a resumed run) is continued, after :meth:`drop_after` removed the rows of the steps
    that the run replays."""

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

    def _rows(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    def _rewrite(self, header: list[str], row: Mapping[str, Any]) -> None:
        self._write(header, [*self._rows(), row])

    def _write(self, header: list[str], rows: Sequence[Mapping[str, Any]]) -> None:
        """Replace the file with ``header`` and ``rows``, atomically (a temporary file renamed)."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, header, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self.path)

    @classmethod
    def _step_of(cls, row: Mapping[str, Any]) -> float:
        try:
            return float(row.get(cls.STEP) or "nan")
        except ValueError:
            return float("nan")

    def drop_after(self, step: int) -> int:
        """Remove the rows past ``step`` (a run resumed there replays those steps, so that no step
        appears twice); returns how many were removed. The file is rewritten only if any were."""
        rows = self._rows()
        kept = [row for row in rows if not self._step_of(row) > step]
        if len(kept) < len(rows):
            self._write(self._header(), kept)
        return len(rows) - len(kept)

    def last_value(self, key: str) -> Optional[float]:
        """The newest row's ``key`` that holds a number, else None."""
        for row in reversed(self._rows()):
            try:
                value = float(row.get(key) or "nan")
            except ValueError:
                continue
            if math.isfinite(value):
                return value
        return None
