"""SubprocessEnvManager: environments stepped in parallel worker processes, one policy call per step.

Each of ``num_workers`` processes hosts one kerasrl ``Environment`` built by
``env_factory(worker_index)``. A step (as ML-Agents 0.9's, made synchronous):

1. in this process, the registered policy of each behavior acts ONCE on the previous results of
   that behavior from all workers, concatenated in worker order;
2. the action rows are split back per worker and sent, one message per worker; every worker
   steps its environment (checking its results as ``SimpleEnvManager`` does) at the same time;
3. the replies (one message per worker: the step results as plain arrays) are gathered in
   whichever order they come and concatenated again.

The trainers thus see one behavior with the agents of all workers, as with one in-process
``GymnasiumEnv`` of ``num_envs = N``. Agent ids are made unique with a table ``(worker, local
id) → id``, filled in order of first appearance (worker 0's agents first), so they are stable
across steps and resets; N Gymnasium copies split over W workers get the ids 0..N-1, as in
one process.

Start method: ``spawn`` (the default; ``mp_context="forkserver"`` also works). TensorFlow in
this process runs thread pools and holds locks that a ``fork`` would copy in an unusable
state; a spawned worker is a fresh interpreter that imports only what its environment needs
(numpy, gymnasium, ``kerasrl.envs``: no TensorFlow), at a start-up cost per worker
(``benchmarks/README.md``).
The factory must be picklable with the standard ``pickle`` (a module-level function or
class instance, a ``functools.partial`` of one; ``GymnasiumEnvFactory`` for Gymnasium ids),
and the main module must not start training on import (``if __name__ == "__main__":``).
Workers are started with ``OPENBLAS_NUM_THREADS=1`` and the other ``WORKER_ENV_VARS`` (set in
their environment, so before they import numpy): the workers are the parallelism, and BLAS
threads competing for the same cores make small matrix products far slower.

Failures: a worker that raises, dies (its exit code, e.g. killed by SIGKILL) or does not
answer within ``step_timeout_s`` (``start_timeout_s`` while it builds its environment) gives
an ``EnvironmentException`` naming the worker and its environment (one line, with the
worker's exception type and message). Before it is raised, every worker is stopped and
``on_failure(error)`` is called, if given (the ``TrainerController`` itself checkpoints the
trainers when an environment error reaches it).

Shutdown: ``close()`` (idempotent) asks every worker to close its environment, waits
``close_timeout_s``, then kills what is left. It also runs at
interpreter exit (a ``multiprocessing.util.Finalize``, which multiprocessing runs before it
joins child processes) and when the manager is garbage collected. Workers ignore SIGINT,
SIGTERM and SIGHUP (a Ctrl-C in the terminal, ``timeout``, Docker or Kubernetes signal the
whole process group; the main process decides what happens: ``kerasrl-learn``'s trainer
controller saves, then closes the manager), so a worker that does not close is killed
(SIGKILL), and a worker whose main process has died exits when its pipe
reports the end of file.

Timers: every worker times ``env.step`` / ``env.reset`` on its own timer stack and sends the
tree (gauges included) with a step reply every ``timer_sync_s`` seconds, then starts afresh;
the main process merges these under ``workers`` → ``worker_root`` (``is_parallel``) of its
root, as ML-Agents does. ``merge_worker_timers()`` and ``close()`` bring in the rest.

What runs inside a worker process is in :mod:`kerasrl.envs.worker`.
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.util import Finalize
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np

from kerasrl.envs.base import BehaviorSpec, Environment, EnvironmentException, StepResult
from kerasrl.envs.env_manager import ActionInfo, EnvManager, StepInfo
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.worker import IGNORED_SIGNALS, STATS_KEY, Packed, _worker_main
from kerasrl.exception import describe
from kerasrl.interrupts import STOP_POLL_SECONDS, raise_if_stopping
from kerasrl.timers import get_timer_stack, hierarchical_timer, merge_worker_tree

__all__ = ["GymnasiumEnvFactory", "SubprocessEnvManager", "WORKER_ENV_VARS"]

logger = logging.getLogger("kerasrl")

EnvFactory = Callable[[int], Environment]

#: Set in the environment workers start with: one thread each (see the module doc).
WORKER_ENV_VARS: dict[str, str] = {name: "1" for name in (
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")}


@dataclass
class GymnasiumEnvFactory:
    """Builds worker ``i``'s environment: ``GymnasiumEnv(env_id, num_envs)`` seeded ``seed + i * num_envs``.

    Gymnasium's ``SyncVectorEnv`` seeds copy ``j`` with ``seed + j``, so with
    ``vectorization_mode="sync"`` N copies split over W workers are exactly the copies of one
    ``GymnasiumEnv(env_id, N, seed, vectorization_mode="sync")``. (A native vector env, as
    CartPole's default, draws all its copies from one generator: seeded alike, but not equal.)
    """

    env_id: str
    num_envs: int = 1
    seed: Optional[int] = None
    vectorization_mode: Optional[str] = None
    make_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, index: int) -> Environment:
        seed = None if self.seed is None else self.seed + index * self.num_envs
        return GymnasiumEnv(self.env_id, num_envs=self.num_envs, seed=seed,
                            vectorization_mode=self.vectorization_mode, **dict(self.make_kwargs))


def _factory_label(factory: Any) -> str:
    """A name for the environment a factory builds, for errors raised before it is built."""
    for attr in ("env_id", "label", "__name__"):
        value = getattr(factory, attr, None)
        if isinstance(value, str):
            return value
    func = getattr(factory, "func", None)  # functools.partial
    return _factory_label(func) if func is not None else type(factory).__name__


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class _WorkerFailure(Exception):
    """A worker raised, died or did not answer; ``hung`` lists those that did not answer."""

    def __init__(self, message: str, hung: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.hung = list(hung)


@contextlib.contextmanager
def _worker_start_environment() -> Iterator[None]:
    """While a worker starts: ``WORKER_ENV_VARS`` set and SIGINT, SIGTERM and SIGHUP blocked in
    this thread, both inherited by the new interpreter before its first import; the worker
    ignores them, then unblocks them (``kerasrl.envs.worker``), so a signal to the process
    group can never end a worker or print its traceback. Here a signal that comes meanwhile is
    only delayed until the worker has started."""
    saved = {name: os.environ.get(name) for name in WORKER_ENV_VARS}
    os.environ.update(WORKER_ENV_VARS)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, IGNORED_SIGNALS)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _shutdown_workers(procs: list[BaseProcess], conns: list[Connection], timeout_s: float) -> None:
    """Ask every worker to close, wait up to ``timeout_s`` for all, then kill those left (they
    ignore SIGTERM). That runs even if the wait is interrupted (a second Ctrl-C): no worker survives."""
    started = [p for p in procs if p.pid is not None]
    try:
        for conn in conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("close", None))
        deadline = time.monotonic() + timeout_s
        for proc in started:
            proc.join(max(0.0, deadline - time.monotonic()))
    finally:
        for proc in started:
            if proc.exitcode is None:
                proc.kill()
                proc.join(1.0)
        for conn in conns:
            conn.close()


class SubprocessEnvManager(EnvManager):
    """Steps ``num_workers`` environments built by ``env_factory(i)`` in worker processes (see the module doc).

    ``step_timeout_s``: how long a step, reset or timer request may take (a hang is an error);
    ``start_timeout_s``: how long building the environments may take; ``close_timeout_s``: how
    long ``close`` waits for workers to close their environments before killing them.
    ``validate``: check every result against the specs (default: unless the environment checks
    its own results). ``on_failure(error)``: called after a worker failure has stopped every
    worker, before ``error`` is raised.
    """

    def __init__(self, env_factory: EnvFactory, num_workers: int, step_timeout_s: float = 60.0,
                 start_timeout_s: float = 120.0, close_timeout_s: float = 5.0, validate: Optional[bool] = None,
                 timer_sync_s: float = 1.0, mp_context: str = "spawn",
                 on_failure: Optional[Callable[[EnvironmentException], None]] = None) -> None:
        super().__init__()
        if int(num_workers) < 1:
            raise EnvironmentException(f"num_workers must be at least 1, got {num_workers}.")
        for name, value in (("step_timeout_s", step_timeout_s), ("start_timeout_s", start_timeout_s),
                            ("close_timeout_s", close_timeout_s)):
            if not value > 0:
                raise EnvironmentException(f"{name} must be > 0, got {value}.")
        self.num_workers = int(num_workers)
        self.step_timeout_s, self.start_timeout_s = float(step_timeout_s), float(start_timeout_s)
        self.close_timeout_s = float(close_timeout_s)
        self.on_failure = on_failure
        self.previous_step: StepInfo = StepInfo(None, {}, None)
        self._environment_stats: dict[str, list[float]] = {}
        self._labels = [_factory_label(env_factory)] * self.num_workers
        self._procs: list[BaseProcess] = []
        self._conns: list[Connection] = []
        self._awaiting: set[int] = set()
        self._rows: dict[str, list[tuple[int, int, int]]] = {}
        self._id_tables: list[dict[int, int]] = [{} for _ in range(self.num_workers)]
        self._id_cache: dict[str, tuple[Any, np.ndarray]] = {}
        self._next_id = 0
        self._specs: dict[str, BehaviorSpec] = {}
        self._reset_parameters: dict[str, float] = {}
        self._closed = self._failed = False
        self._finalizer = Finalize(self, _shutdown_workers, args=(self._procs, self._conns, self.close_timeout_s),
                                   exitpriority=100)
        try:
            self._start(env_factory, mp_context, validate, float(timer_sync_s))
        except _WorkerFailure as e:
            raise self._failure(e) from None
        except BaseException:
            self.close()
            raise

    # -- start-up ---------------------------------------------------------------------------

    def _start(self, env_factory: EnvFactory, mp_context: str, validate: Optional[bool], timer_sync_s: float) -> None:
        """Start the workers (all at once) and read their specs."""
        try:
            factory_bytes = pickle.dumps(env_factory)
        except Exception as e:
            raise EnvironmentException(
                f"env_factory must be picklable (a module-level function or class instance, or a "
                f"functools.partial of one): {describe(e)}") from e
        ctx = multiprocessing.get_context(mp_context)
        for i in range(self.num_workers):
            conn, child_conn = ctx.Pipe()
            # typeshed: get_context(str) -> BaseContext, which lacks Process (every concrete context has it)
            proc = ctx.Process(  # type: ignore[attr-defined]
                target=_worker_main, name=f"kerasrl-env-worker-{i}",
                args=(child_conn, i, factory_bytes, validate, timer_sync_s))
            self._conns.append(conn)
            self._procs.append(proc)
            try:
                with _worker_start_environment():
                    proc.start()
            finally:
                child_conn.close()  # the worker holds the only other end: its death is an EOF here
            self._awaiting.add(i)
        self._read_ready(self._gather(self.start_timeout_s, "start"))

    def _read_ready(self, ready: list[Any]) -> None:
        """Each worker's label, specs and reset parameters; every worker must have the same specs."""
        self._labels = [str(label) for label, _, _ in ready]
        first = ready[0][1]
        for i, (_, specs, _) in enumerate(ready[1:], start=1):
            if specs != first:
                raise _WorkerFailure(
                    f"Environment workers disagree on their behavior specs: {self._name(0)} has {first}, "
                    f"{self._name(i)} has {specs}.")
        self._specs = dict(first)
        self._reset_parameters = dict(ready[0][2])

    # -- talking to workers -----------------------------------------------------------------

    def _name(self, i: int) -> str:
        return f"Environment worker {i} of {self.num_workers} ({self._labels[i]})"

    def _died(self, i: int) -> _WorkerFailure:
        proc = self._procs[i]
        proc.join(1.0)
        code = proc.exitcode
        if code is None:
            return _WorkerFailure(f"{self._name(i)} closed its connection without an answer.", hung=[i])
        how = f"was killed by signal {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        return _WorkerFailure(f"{self._name(i)} died: it {how} (exit code {code}).")

    def _send(self, i: int, message: tuple[str, Any]) -> None:
        try:
            self._conns[i].send(message)
        except OSError:
            raise self._died(i) from None
        self._awaiting.add(i)

    def _receive(self, i: int, what: str) -> Any:
        """Worker ``i``'s reply to a ``what`` (its timers merged on the way)."""
        try:
            status, payload, tree = self._conns[i].recv()
        except (EOFError, OSError):
            self._awaiting.discard(i)
            raise self._died(i) from None
        self._awaiting.discard(i)
        if tree is not None:
            merge_worker_tree(tree, root_name="worker_root", into=get_timer_stack().root.get_child("workers"))
        if status == "error":
            during = "while building its environment" if what == "start" else f"during a {what}"
            raise _WorkerFailure(f"{self._name(i)} raised {payload} ({during}).")
        return payload

    def _gather(self, timeout_s: float, what: str) -> list[Any]:
        """The replies of every worker awaited (indexed by worker), taken as they come."""
        replies: list[Any] = [None] * self.num_workers
        deadline = time.monotonic() + timeout_s
        while self._awaiting:
            pending = {self._conns[i]: i for i in self._awaiting}
            left = deadline - time.monotonic()
            ready = wait(list(pending), timeout=min(max(0.0, left), STOP_POLL_SECONDS))
            raise_if_stopping()
            if not ready and left > STOP_POLL_SECONDS:
                continue
            if not ready:
                hung = sorted(self._awaiting)
                names = ", ".join(self._name(i) for i in hung)
                raise _WorkerFailure(f"{names} did not answer a {what} within {timeout_s:g} s; the workers were "
                                     "stopped.", hung=hung)
            for i in sorted(pending[c] for c in ready):  # type: ignore[index]
                replies[i] = self._receive(i, what)
        return replies

    def _request(self, command: str, payloads: Sequence[Any], timeout_s: float) -> list[Any]:
        """Send ``command`` to every worker (one message each), then gather every reply."""
        if self._awaiting:  # replies to an interrupted request: read and drop them
            self._gather(timeout_s, "earlier request")
        for i, payload in enumerate(payloads):
            self._send(i, (command, payload))
        return self._gather(timeout_s, command)

    def _checked(self, command: str, payloads: Sequence[Any], timeout_s: float) -> list[Any]:
        """``_request`` on an open manager; a worker's failure stops everything and is raised."""
        self._check_open()
        try:
            return self._request(command, payloads, timeout_s)
        except _WorkerFailure as e:
            raise self._failure(e) from None

    def _failure(self, failure: _WorkerFailure) -> EnvironmentException:
        """Stop every worker (the hung ones killed at once: they ignore SIGTERM), call
        ``on_failure``; the error to raise."""
        self._failed = True
        for i in failure.hung:
            with contextlib.suppress(Exception):
                self._procs[i].kill()
        self.close()
        error = EnvironmentException(str(failure))
        if self.on_failure is not None:
            try:
                self.on_failure(error)
            except Exception:
                logger.warning("While handling '%s', on_failure failed too.", error, exc_info=True)
        return error

    def _check_open(self) -> None:
        if self._closed:
            after = " after a worker failed" if self._failed else ""
            raise EnvironmentException(f"The SubprocessEnvManager was closed{after}; make a new one.")

    # -- steps ------------------------------------------------------------------------------

    def _split_actions(self, action_infos: Mapping[str, ActionInfo]) -> list[dict[str, np.ndarray]]:
        """Each worker's rows of every behavior's actions."""
        out: list[dict[str, np.ndarray]] = [{} for _ in range(self.num_workers)]
        for name, info in action_infos.items():
            action = np.asarray(info.action)
            rows = self._rows.get(name, [])
            total = rows[-1][2] if rows else 0
            if action.shape[:1] != (total,):
                raise EnvironmentException(
                    f"Actions for behavior '{name}' have shape {action.shape} for {total} agents.")
            for i, start, stop in rows:
                out[i][name] = action[start:stop]
        return out

    def _global_ids(self, name: str, parts: list[tuple[int, Packed]]) -> np.ndarray:
        """The agents' ids in this process: ``(worker, local id)`` → a unique id, stable over steps."""
        key = [(i, packed[0].tobytes()) for i, packed in parts]
        cached = self._id_cache.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        ids: list[int] = []
        for i, packed in parts:
            table = self._id_tables[i]
            for local in packed[0].tolist():
                if local not in table:
                    table[local] = self._next_id
                    self._next_id += 1
                ids.append(table[local])
        out = np.asarray(ids, np.int64)
        out.flags.writeable = False
        self._id_cache[name] = (key, out)
        return out

    def _concat(self, name: str, parts: list[tuple[int, Packed]]) -> StepResult:
        """One behavior's results of several workers as one ``StepResult``; records their rows."""
        rows, start = [], 0
        for i, packed in parts:
            rows.append((i, start, start + len(packed[0])))
            start += len(packed[0])
        self._rows[name] = rows
        ids = self._global_ids(name, parts)
        if len(parts) == 1:
            return StepResult(ids, *parts[0][1][1:7], *_group_columns(parts[0][1]))
        cols = list(zip(*(packed[:7] for _, packed in parts)))
        obs = [np.concatenate(o) for o in zip(*cols[1])]
        counts = [len(a) for a in cols[0]]
        group_ids, group_rewards = zip(*(_group_columns(packed) for _, packed in parts))
        return StepResult(ids, obs, np.concatenate(cols[2]), np.concatenate(cols[3]), np.concatenate(cols[4]),
                          _concat_optional(cols[5], counts, 1.0), _concat_optional(cols[6], counts, 0.0),
                          _concat_optional(group_ids, counts, 0), _concat_optional(group_rewards, counts, 0.0))

    def _merge(self, replies: list[dict[str, Any]]) -> dict[str, StepResult]:
        for reply in replies:
            for key, values in reply.pop(STATS_KEY, {}).items():
                self._environment_stats.setdefault(key, []).extend(values)
        names = list(dict.fromkeys(name for reply in replies for name in reply))
        self._rows = {}
        return {name: self._concat(name, [(i, r[name]) for i, r in enumerate(replies) if name in r]) for name in names}

    def step(self) -> list[StepInfo]:
        """Every worker steps with the actions of one policy call per behavior (see the module doc)."""
        self._check_open()
        if self._awaiting:
            raise EnvironmentException("A step was interrupted before every worker answered; call reset() first.")
        current = self.previous_step.current
        with hierarchical_timer("SubprocessEnvManager._take_step"):
            action_infos = self.decide_actions(current)
        with hierarchical_timer("SubprocessEnvManager.step_workers"):
            replies = self._checked("step", self._split_actions(action_infos), self.step_timeout_s)
            new_info = self._merge(replies)
        self.previous_step = StepInfo(current, new_info, action_infos)
        return [self.previous_step]

    def reset(self, config: Optional[Mapping[str, float]] = None, train_mode: bool = True) -> list[StepInfo]:
        """Reset every worker's environment (in parallel)."""
        payload = dict(config) if config else None
        with hierarchical_timer("SubprocessEnvManager.reset"):
            replies = self._checked("reset", [payload] * self.num_workers, self.step_timeout_s)
            info = self._merge(replies)
        self.previous_step = StepInfo(None, info, None)
        return [self.previous_step]

    def environment_stats(self) -> dict[str, list[float]]:
        """What the workers' environments recorded since the last call (a Unity scene's statistics)."""
        stats, self._environment_stats = self._environment_stats, {}
        return stats

    def merge_worker_timers(self) -> None:
        """Merge every worker's timers and gauges into this process's tree now (they also come
        with a step reply every ``timer_sync_s``, and at ``close``)."""
        self._checked("timers", [None] * self.num_workers, self.step_timeout_s)

    @property
    def behavior_specs(self) -> dict[str, BehaviorSpec]:
        return dict(self._specs)

    @property
    def reset_parameters(self) -> dict[str, float]:
        return dict(self._reset_parameters)

    @property
    def worker_pids(self) -> list[Optional[int]]:
        return [proc.pid for proc in self._procs]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop every worker (idempotent): their timers are merged, then they close their
        environments; any left after ``close_timeout_s`` are killed."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._failed and self._specs:  # started, and every worker is answering
                with contextlib.suppress(_WorkerFailure, OSError, ValueError):
                    self._request("timers", [None] * self.num_workers, self.close_timeout_s)
        finally:
            self._finalizer()


def _group_columns(packed: Sequence[Any]) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """A packed result's group ids and group rewards (after its previous actions), else ``None``."""
    return (packed[7], packed[8]) if len(packed) > 7 else (None, None)


def _concat_optional(arrays: Sequence[Optional[np.ndarray]], counts: Sequence[int],
                     fill: float) -> Optional[np.ndarray]:
    """Concatenate per-worker optional arrays (action masks, previous actions); a missing part is
    ``fill`` (masks: everything allowed), and all missing stays ``None``."""
    present = [a for a in arrays if a is not None]
    if not present:
        return None
    like = np.asarray(present[0])
    parts = [np.asarray(a) if a is not None else np.full((n,) + like.shape[1:], fill, like.dtype)
             for a, n in zip(arrays, counts)]
    return np.concatenate(parts)
