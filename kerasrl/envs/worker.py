"""The worker-process side of ``SubprocessEnvManager``: what runs in each spawned process.

A worker builds its environment from the pickled factory, reports its label, specs and reset
parameters, then answers the main process's commands (``step``, ``reset``, ``timers``,
``close``) one message each, until ``close`` or the end of its pipe (the main process is gone).
Each reply carries the step results as plain arrays (:data:`Packed`) and, every
``timer_sync_s`` seconds, the worker's timer tree. A worker ignores SIGINT, SIGTERM and SIGHUP
(:data:`IGNORED_SIGNALS`): a terminal's Ctrl-C, ``timeout``, Docker or Kubernetes signal the
whole process group, and the main process decides what happens (it saves, then closes the
workers; it kills one that does not close). ``_worker_main`` is the process
target: spawned workers import it from this module.
"""
from __future__ import annotations

import contextlib
import pickle
import signal
import time
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping, Optional

import numpy as np

from kerasrl.envs.base import Environment, EnvironmentException, StepResult
from kerasrl.exception import describe
from kerasrl.timers import get_timer_tree, hierarchical_timer, reset_timers

#: One step result as sent through the pipe: agent ids, observations, rewards, terminated,
#: truncated, action mask, previous actions, group ids and group rewards (both None without groups).
Packed = tuple[np.ndarray, list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray],
               Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]
#: The key of a step reply that holds the statistics the environment recorded (no behavior's name).
STATS_KEY = "\x00environment_stats"
#: What a worker ignores; the main process starts it with these blocked (so that none can end it
#: while it imports), and it unblocks them once they are ignored.
IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _env_label(env: Environment) -> str:
    return str(getattr(env, "env_name", None) or type(env).__name__)


def _pack(result: StepResult) -> Packed:
    return (result.agent_ids, result.observations, result.rewards, result.terminated, result.truncated,
            result.action_mask, result.previous_actions, result.group_id, result.group_reward)


def _check_results(env: Environment, results: Mapping[str, StepResult]) -> None:
    """Shapes against the specs and NaN/inf, where they enter (as ``SimpleEnvManager._validate``)."""
    specs = env.behavior_specs
    for name, result in results.items():
        spec = specs.get(name)
        if spec is None:
            raise EnvironmentException(f"The environment returned a step for unknown behavior '{name}'.")
        result.validate(spec, name)


def _handle(env: Environment, command: str, payload: Any, check: bool) -> Optional[dict[str, Any]]:
    """Run one command on the worker's environment; the results packed for the pipe."""
    if command == "timers":
        return None
    if command == "step" and not env.global_done:
        with hierarchical_timer("env.step"):
            results = env.step(payload)
    elif command in ("step", "reset"):
        with hierarchical_timer("env.reset"):
            results = env.reset(payload if command == "reset" else None)
    else:
        raise EnvironmentException(f"Unknown worker command {command!r}.")
    if check:
        _check_results(env, results)
    reply: dict[str, Any] = {name: _pack(result) for name, result in results.items()}
    take_stats = getattr(env, "take_environment_stats", None)
    stats = take_stats() if take_stats is not None else None
    if stats:  # what a Unity scene recorded, beside the behaviors' results
        reply[STATS_KEY] = stats
    return reply


def _serve(conn: Connection, env: Environment, check: bool, timer_sync_s: float) -> None:
    """Answer commands until "close" or the end of the pipe (the main process is gone)."""
    last_sync = time.perf_counter()
    while True:
        try:
            command, payload = conn.recv()
        except EOFError:
            return
        if command == "close":
            return
        reply = _handle(env, command, payload, check)
        tree = None
        now = time.perf_counter()
        if command == "timers" or now - last_sync >= timer_sync_s:
            tree, last_sync = get_timer_tree(), now
            reset_timers()
        try:
            conn.send(("ok", reply, tree))
        except OSError:
            return


def _worker_main(conn: Connection, index: int, factory_bytes: bytes, validate: Optional[bool],
                 timer_sync_s: float) -> None:
    """A worker process: build the environment, report its specs, then serve commands.

    An exception is sent to the main process as one line and ends the worker; nothing is
    printed here (no tracebacks on stderr)."""
    for signum in IGNORED_SIGNALS:  # the main process's to handle (see the module doc)
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, IGNORED_SIGNALS)  # one that came meanwhile is dropped
    env: Optional[Environment] = None
    try:
        factory: Callable[[int], Environment] = pickle.loads(factory_bytes)
        env = factory(index)
        check = (not getattr(env, "validates_results", False)) if validate is None else bool(validate)
        ready = (_env_label(env), dict(env.behavior_specs), dict(env.reset_parameters))
        conn.send(("ok", ready, None))
        _serve(conn, env, check, timer_sync_s)
    except Exception as e:  # noqa: BLE001 - reported to the main process, which raises it
        with contextlib.suppress(Exception):
            conn.send(("error", describe(e), None))
    finally:
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()
        conn.close()
