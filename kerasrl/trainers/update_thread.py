"""A trainer's update thread (``threaded: true``): updates run beside acting.

The acting thread hands each update over as :class:`UpdateWork` (the data that makes it, cut
at the same point an unthreaded trainer would update: :mod:`kerasrl.trainers.threaded` does it
for any trainer) and goes on acting; the thread runs the update and publishes an
:class:`UpdateResult` whose weights are an immutable snapshot.
The acting thread takes a result only at fixed points (the next hand-over), so which weights
acted at every step does not depend on how fast either thread ran: seeded runs repeat.

An error in the update thread stops it; the acting thread re-raises it at its next look
(``check``, ``wait_for``), and ``stop`` never waits for work that will not come.

While an update thread runs, Python's GIL switch interval is shortened (``SWITCH_INTERVAL``):
the update thread gives the GIL up at every TensorFlow call and must get it back from the
acting thread, which runs Python all the time; at Python's default of 5 ms each return waits
up to that long, which made threaded updates several times slower than unthreaded ones.
"""
from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kerasrl.exception import UpdateThreadError, describe
from kerasrl.interrupts import raise_if_stopping
from kerasrl.timers import TimerStack, hierarchical_timer, thread_timer_stack

#: How often (seconds) a waiting thread looks again whether the other one stopped or failed.
POLL_SECONDS = 0.05
#: The GIL switch interval (seconds) while any update thread runs (Python's default: 0.005).
SWITCH_INTERVAL = 0.0002

_switching = threading.Lock()
_running = [0, 0.0]  # update threads running, the switch interval before the first


def _thread_started() -> None:
    with _switching:
        if _running[0] == 0:
            _running[1] = sys.getswitchinterval()
            sys.setswitchinterval(min(_running[1], SWITCH_INTERVAL))
        _running[0] += 1


def _thread_ended() -> None:
    with _switching:
        _running[0] -= 1
        if _running[0] == 0:
            sys.setswitchinterval(_running[1])


@dataclass
class UpdateWork:
    """One update's input: ``data``, what the trainer cut for it (its own kind: trajectories, a
    prepared update buffer, gradient steps due), the trainer's step when it became due (the
    schedules' step), ``version``, the update count it produces, and ``versions``, the policy
    version of each trajectory in it (the update's staleness)."""

    data: Any
    step: int
    version: int
    versions: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class UpdateResult:
    """One finished update: ``weights``, what the acting policy swaps to (never changed after);
    ``stats``, the statistics the update recorded; ``metrics``, its losses."""

    version: int
    weights: Any
    stats: dict[str, list[float]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


class UpdateThread:
    """Runs ``update(work)`` for each submitted work in order, in one daemon thread with its own timers."""

    def __init__(self, name: str, update: Callable[[UpdateWork], UpdateResult]) -> None:
        self.name = name
        self._update = update
        self._inbox: queue.Queue[Optional[UpdateWork]] = queue.Queue()
        self._results: dict[int, UpdateResult] = {}
        self._done = threading.Condition()
        self._stopping = threading.Event()
        self.error: Optional[BaseException] = None
        #: The update thread's timer tree (merged into the run's at the end).
        self.timers = TimerStack()
        #: Seconds the update thread spent on updates, and the acting thread spent waiting for them.
        self.busy_seconds = 0.0
        self.waited_seconds = 0.0
        self._thread = threading.Thread(target=self._run, name=f"kerasrl-update-{name}", daemon=True)
        _thread_started()
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, work: UpdateWork) -> None:
        self.check()
        self._inbox.put(work)

    def check(self) -> None:
        """Raise the update thread's failure, if it failed."""
        if self.error is not None:
            raise UpdateThreadError(f"{self.name}: the update failed: {describe(self.error, 500)}") from self.error

    def wait_for(self, version: int) -> UpdateResult:
        """The result of the update that produces ``version`` (waiting for it), and every
        result before it is dropped (each has been taken already)."""
        start = time.perf_counter()
        with hierarchical_timer("wait_for_update"), self._done:
            while version not in self._results:
                self.check()
                raise_if_stopping()
                if not self.alive:
                    raise UpdateThreadError(f"{self.name}: the update thread stopped before update {version}.")
                self._done.wait(POLL_SECONDS)
            result = self._results.pop(version)
            for old in [v for v in self._results if v < version]:
                del self._results[old]
        self.waited_seconds += time.perf_counter() - start
        return result

    def finished(self) -> list[UpdateResult]:
        """Every result not taken yet, oldest first (after ``stop``)."""
        with self._done:
            out = [self._results[v] for v in sorted(self._results)]
            self._results.clear()
        return out

    def stop(self, drain: bool) -> None:
        """Stop the thread: after every submitted update (``drain``), else after the update in
        progress (the others are dropped, as an unthreaded trainer drops its unfinished buffer)."""
        if not drain:
            self._stopping.set()
        self._inbox.put(None)
        while self._thread.is_alive():
            self._thread.join(POLL_SECONDS)

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            _thread_ended()

    def _serve(self) -> None:
        with thread_timer_stack(self.timers):
            while not self._stopping.is_set():
                work = self._inbox.get()
                if work is None or self._stopping.is_set():
                    return
                start = time.perf_counter()
                try:
                    with hierarchical_timer("update"):
                        result = self._update(work)
                except BaseException as e:  # noqa: BLE001 - handed to the acting thread, which raises it
                    with self._done:
                        self.error = e
                        self._done.notify_all()
                    return
                self.busy_seconds += time.perf_counter() - start
                with self._done:
                    self._results[result.version] = result
                    self._done.notify_all()
