"""Stop signals (Ctrl-C, SIGTERM, SIGHUP) during training: taken where a run can stop cleanly.

Python's Ctrl-C raises ``KeyboardInterrupt`` wherever the main thread happens to be. Inside
TensorFlow code that calls back into Python (tracing a function, flattening nested structures)
that exception does not come out whole: it turns into a ``RuntimeError`` or ``SystemError`` and
the run dies without saving. So while a run trains, :func:`stops_at_safe_points` only records a
stop signal, and the run takes it at the next safe point (:func:`raise_if_stopping`): between two
environment steps, or every few milliseconds while it waits for an environment or an update.
:func:`sigint_deferred` holds the signals back for a whole block (a checkpoint save).

Only handlers installed from Python are wrapped: a signal left to its default action (SIGTERM
outside ``kerasrl-learn`` and ``fit``) or ignored (SIGHUP under ``nohup``) is left alone; ``fit``
first makes a default SIGTERM or SIGHUP a Ctrl-C (:func:`stop_signal_interrupts`). Other threads than the main
one never see signals, so there everything here does nothing.
"""
from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from typing import Any, Callable, Iterator, Optional

logger = logging.getLogger("kerasrl")

#: How often (seconds) a wait (for workers, a player, an update) looks whether the run was asked to stop.
STOP_POLL_SECONDS = 0.05
#: The signals that stop a run (Ctrl-C; ``timeout``, Docker, Kubernetes, Slurm; a closed terminal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class SafePoints:
    """The stop signal a training run received and whether the run has taken it. The first
    signal is handed to its own handler (which raises ``KeyboardInterrupt``) at the next safe
    point; later ones only say that the run is already stopping."""

    def __init__(self, previous: dict[int, Callable[..., Any]]) -> None:
        self.previous = previous
        self.pending: Optional[int] = None
        self.taken = False

    def record(self, signum: int, frame: Any) -> None:
        if self.pending is None and not self.taken:
            self.pending = signum
            return
        print(f"kerasrl: {_name(signum)}: already stopping (the run saves and exits once the step in progress "
              "is done).", file=sys.stderr, flush=True)

    def take(self) -> None:
        """Hand the recorded signal to its handler now (it raises ``KeyboardInterrupt``)."""
        signum, self.pending = self.pending, None
        self.taken = True
        if signum is not None:
            self.previous[signum](signum, None)

    def take_quietly(self) -> bool:
        """Take a signal that came too late for any safe point (during the final save or export),
        so that its handler still records it; True if there was one."""
        if self.pending is None:
            return False
        try:
            self.take()
        except KeyboardInterrupt:
            pass
        return True


_active: Optional[SafePoints] = None


@contextlib.contextmanager
def stops_at_safe_points() -> Iterator[SafePoints]:
    """While the block runs in the main thread, stop signals wait for :func:`raise_if_stopping`.
    Inside another such block it is that block's record (one signal is taken once)."""
    global _active
    if threading.current_thread() is not threading.main_thread():
        yield SafePoints({})
        return
    if _active is not None:
        yield _active
        return
    previous: dict[int, Callable[..., Any]] = {s: h for s in STOP_SIGNALS if callable(h := signal.getsignal(s))}
    _active = points = SafePoints(previous)
    try:
        for signum in previous:
            signal.signal(signum, points.record)
        yield points
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _active = None


def raise_if_stopping() -> None:
    """A safe point: raise the stop signal recorded since training began, if any and not yet
    raised (in the main thread only)."""
    points = _active
    if points is not None and points.pending is not None and threading.current_thread() is threading.main_thread():
        points.take()


class StopSignalRecord:
    """Which stop signal (``"SIGTERM"``, ``"SIGHUP"``) came while :func:`stop_signal_interrupts` was installed."""

    def __init__(self) -> None:
        self.received: Optional[str] = None

    def handle(self, signum: int, frame: Any) -> None:
        """The first signal raises ``KeyboardInterrupt`` (the run saves and stops); later ones only say so."""
        if self.received is not None:
            print(f"kerasrl: {_name(signum)}: already stopping.", file=sys.stderr, flush=True)
            return
        self.received = _name(signum)
        raise KeyboardInterrupt


#: The signals :func:`stop_signal_interrupts` takes over: what ``timeout``, Docker and Slurm send, and a closed terminal.
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def stop_signal_interrupts() -> Iterator[StopSignalRecord]:
    """While the block runs in the main thread, SIGTERM and SIGHUP left to their default action
    (which ends the process without saving) raise ``KeyboardInterrupt`` as Ctrl-C does, so a
    library's training run (``fit``) saves and stops on them too; the defaults come back after. A
    signal that the program handles or ignores (SIGHUP under ``nohup``), and any other thread,
    are left alone."""
    record = StopSignalRecord()
    main = threading.current_thread() is threading.main_thread()
    taken = [s for s in _STOP_SIGNALS if main and signal.getsignal(s) == signal.SIG_DFL]
    for signum in taken:
        signal.signal(signum, record.handle)
    try:
        yield record
    finally:
        for signum in taken:
            signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def sigint_deferred(what: str) -> Iterator[None]:
    """Hold SIGINT (Ctrl-C), SIGTERM and SIGHUP back while the block runs in the main thread,
    then deliver each that arrived once, in order of arrival, to its previous handler after the
    block completes (Python's SIGINT handler raises ``KeyboardInterrupt``; the default action
    of SIGTERM/SIGHUP is raised again and ends the process), however many arrived: a second
    signal can then never cut a save short. Elsewhere (another thread) the block just runs, and
    a signal that is ignored or whose handler was not installed from Python is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: h for s in STOP_SIGNALS if (h := signal.getsignal(s)) is not None and h != signal.SIG_IGN}
    received: list[int] = []

    def record(signum: int, frame: Any) -> None:
        if not received:
            logger.warning("%s during %s; stopping once it is complete.",
                           "Interrupted" if signum == signal.SIGINT else signal.Signals(signum).name, what)
        if signum not in received:
            received.append(signum)

    try:
        for signum in previous:
            signal.signal(signum, record)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for number in received:
        _deliver(previous[signal.Signals(number)], number)


def _deliver(handler: Callable[..., Any] | int, signum: int) -> None:
    """Hand a held-back signal to ``handler`` as the signal itself would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)
