"""RayEnvManager: environment copies in Ray actors, on any node of a Ray cluster (``kerasrl[ray]``).

The same synchronous step as ``SubprocessEnvManager`` (whose merging of results, agent-id table
and checks it reuses): the policy of each behavior acts once per step in this process for the
agents of every actor, the action rows go out one call per actor, every actor steps its
environment at the same time, and the replies are concatenated in actor order. Only the
transport differs: Ray actor calls instead of pipes, so the actors may live on other machines
(``ray.init(address=...)``) and Ray does the scheduling, the serialisation and the transport.

Start-up: ``RayEnvManager(env_factory, num_workers, address=None)`` connects to the Ray cluster
at ``address`` (``"auto"``: the one this machine belongs to) or, when Ray is not initialised and
no address is given, starts a local Ray (no dashboard). The factory is pickled by Ray
(cloudpickle), so lambdas work too; each actor builds ``env_factory(i)`` with one BLAS/TF thread
(``WORKER_ENV_VARS``).

Failures: an actor whose environment raises gives an ``EnvironmentException`` naming the worker,
its environment and its node; an actor that dies (its process or its node lost) or does not
answer within ``step_timeout_s`` likewise. Then every actor is stopped and ``on_failure(error)``
is called before the error is raised (the ``TrainerController`` checkpoints the trainers when
an environment error reaches it). With ``restart_workers=True`` a *dead* actor is replaced
instead (up to ``max_restarts`` times in all) and the run continues: its environment starts
afresh with new agent ids, so the unfinished trajectories of its old agents are dropped (a
warning says how many agents); an environment that *raises* is still an error.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from kerasrl.envs.base import Environment, EnvironmentException
from kerasrl.envs.subprocess_env_manager import WORKER_ENV_VARS, SubprocessEnvManager, _WorkerFailure
from kerasrl.envs.worker import _env_label, _handle
from kerasrl.exception import describe
from kerasrl.timers import get_timer_stack, get_timer_tree, merge_worker_tree, reset_timers

__all__ = ["EnvActor", "RayEnvManager", "ray_available"]

logger = logging.getLogger("kerasrl")

EnvFactory = Callable[[int], Environment]


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentException(
            'The Ray env manager needs Ray, which is not installed: pip install "kerasrl[ray]".') from None
    return ray


class EnvActor:
    """Hosts one environment in a Ray actor; answers the manager's commands (see the module doc)."""

    def __init__(self, env_factory: EnvFactory, index: int, validate: Optional[bool], timer_sync_s: float) -> None:
        os.environ.update(WORKER_ENV_VARS)
        self.factory, self.index, self.validate = env_factory, index, validate
        self.env: Optional[Environment] = None
        self.check = False
        self.timer_sync_s = timer_sync_s
        self.last_sync = time.perf_counter()

    def ready(self) -> tuple[str, dict, dict, str]:
        """Build the environment (here, not in ``__init__``, so that its exception reaches the
        manager as itself); its label, specs, reset parameters and this actor's node."""
        import ray

        node = f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
        env = self._environment()
        return _env_label(env), dict(env.behavior_specs), dict(env.reset_parameters), node

    def _environment(self) -> Environment:
        if self.env is None:
            self.env = self.factory(self.index)
            self.check = (not getattr(self.env, "validates_results", False)) if self.validate is None else bool(self.validate)
            reset_timers()
        return self.env

    def handle(self, command: str, payload: Any) -> tuple[Any, Optional[dict]]:
        """The reply to one command, with this actor's timer tree every ``timer_sync_s``."""
        reply = _handle(self._environment(), command, payload, self.check)
        tree, now = None, time.perf_counter()
        if command == "timers" or now - self.last_sync >= self.timer_sync_s:
            tree, self.last_sync = get_timer_tree(), now
            reset_timers()
        return reply, tree

    def close(self) -> None:
        if self.env is not None:
            with contextlib.suppress(Exception):
                self.env.close()


class RayEnvManager(SubprocessEnvManager):
    """Steps ``num_workers`` environments built by ``env_factory(i)`` in Ray actors (see the module doc).

    ``address``: a Ray cluster to join (``ray.init(address=...)``); ``None`` uses the Ray this
    process has initialised, or starts a local one. ``num_cpus_per_worker``: the CPUs Ray reserves
    for each actor (default: Ray's, which reserves none once the actor runs).
    ``restart_workers``/``max_restarts``: replace dead actors and continue. The other arguments
    are ``SubprocessEnvManager``'s.
    """

    def __init__(self, env_factory: EnvFactory, num_workers: int, address: Optional[str] = None,
                 step_timeout_s: float = 60.0, start_timeout_s: float = 300.0, close_timeout_s: float = 5.0,
                 validate: Optional[bool] = None, timer_sync_s: float = 1.0, restart_workers: bool = False,
                 max_restarts: int = 10, num_cpus_per_worker: Optional[float] = None,
                 on_failure: Optional[Callable[[EnvironmentException], None]] = None) -> None:
        self._ray = _import_ray()
        self._address = address
        self._restart = bool(restart_workers)
        self._restarts_left = int(max_restarts)
        self._num_cpus = num_cpus_per_worker
        self._actors: list[Any] = []
        self._nodes: list[str] = []
        self._pending: dict[int, Any] = {}
        self._factory: Optional[EnvFactory] = None
        self._validate_arg = validate
        self._timer_sync_s = float(timer_sync_s)
        self.restarts = 0
        super().__init__(env_factory, num_workers, step_timeout_s=step_timeout_s, start_timeout_s=start_timeout_s,
                         close_timeout_s=close_timeout_s, validate=validate, timer_sync_s=timer_sync_s,
                         on_failure=on_failure)

    # -- start-up ---------------------------------------------------------------------------

    def _start(self, env_factory: EnvFactory, mp_context: str, validate: Optional[bool], timer_sync_s: float) -> None:
        ray = self._ray
        if not ray.is_initialized():
            try:
                ray.init(address=self._address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except Exception as e:  # noqa: BLE001 - Ray raises several types for a bad address
                raise EnvironmentException(f"Could not connect to Ray at {self._address or 'a new local Ray'}: "
                                           f"{describe(e)}") from e
        self._factory = env_factory
        self._actors = [self._new_actor(i) for i in range(self.num_workers)]
        self._nodes = ["?"] * self.num_workers
        refs = {i: actor.ready.remote() for i, actor in enumerate(self._actors)}
        ready = self._wait(refs, self.start_timeout_s, "start")
        self._nodes = [str(node) for _, _, _, node in ready]
        self._read_ready([(label, specs, params) for label, specs, params, _ in ready])

    def _new_actor(self, index: int) -> Any:
        options: dict[str, Any] = {"name": None, "max_restarts": 0, "max_task_retries": 0}
        if self._num_cpus is not None:
            options["num_cpus"] = self._num_cpus
        remote_cls = self._ray.remote(EnvActor).options(**options)
        return remote_cls.remote(self._factory, index, self._validate_arg, self._timer_sync_s)

    # -- talking to actors ------------------------------------------------------------------

    def _name(self, i: int) -> str:
        node = self._nodes[i] if i < len(self._nodes) else "?"
        return f"Environment worker {i} of {self.num_workers} ({self._labels[i]}, Ray actor on node {node})"

    def _wait(self, refs: Mapping[int, Any], timeout_s: float, what: str) -> list[Any]:
        """Every actor's result, in actor order; a failure is raised as ``_WorkerFailure``."""
        ray = self._ray
        self._pending = dict(refs)
        by_ref = {ref: i for i, ref in refs.items()}
        done, hung = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=timeout_s)
        if hung:
            names = ", ".join(self._name(by_ref[r]) for r in hung)
            raise _WorkerFailure(f"{names} did not answer a {what} within {timeout_s:g} s; the workers were stopped.",
                                 hung=sorted(by_ref[r] for r in hung))
        replies: list[Any] = [None] * self.num_workers
        for ref in done:
            replies[by_ref[ref]] = self._result(by_ref[ref], ref, what)
        self._pending = {}
        return replies

    def _result(self, i: int, ref: Any, what: str) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as e:
            raise _ActorDied(i, f"{self._name(i)} died during a {what}: {_actor_error(e)}") from None
        except ray.exceptions.RayTaskError as e:
            during = "while building its environment" if what == "start" else f"during a {what}"
            cause = e.cause if getattr(e, "cause", None) is not None else e
            raise _WorkerFailure(f"{self._name(i)} raised {describe(cause)} ({during}).") from None

    def _request(self, command: str, payloads: Sequence[Any], timeout_s: float) -> list[Any]:
        """One call per actor, every reply gathered; a dead actor is replaced if allowed."""
        refs = {i: actor.handle.remote(command, payload) for i, (actor, payload) in enumerate(zip(self._actors, payloads))}
        while True:
            try:
                replies = self._wait(refs, timeout_s, command)
                break
            except _ActorDied as dead:
                if not (self._restart and self._restarts_left > 0):
                    raise _WorkerFailure(str(dead)) from None
                refs = dict(refs)
                refs[dead.index] = self._replace(dead.index, str(dead))
        out = []
        for reply, tree in replies:
            if tree is not None:
                merge_worker_tree(tree, root_name="worker_root", into=get_timer_stack().root.get_child("workers"))
            out.append(reply)
        return out

    def _replace(self, i: int, reason: str) -> Any:
        """A new actor for worker ``i`` whose environment starts afresh; its reset is its reply."""
        self._restarts_left -= 1
        self.restarts += 1
        dropped = len(self._id_tables[i])
        logger.warning("%s; replacing it (--ray-restart-workers). The unfinished trajectories of its %d agents "
                       "are dropped.", reason, dropped)
        with contextlib.suppress(Exception):
            self._ray.kill(self._actors[i])
        self._actors[i] = self._new_actor(i)
        self._id_tables[i] = {}
        self._id_cache.clear()
        return self._actors[i].handle.remote("reset", None)

    def _failure(self, failure: _WorkerFailure) -> EnvironmentException:
        """As the subprocess manager's (which stops every actor through ``close``); the calls in
        flight are abandoned."""
        self._pending = {}
        return super()._failure(failure)

    # -- state ------------------------------------------------------------------------------

    @property
    def worker_pids(self) -> list[Optional[int]]:
        return [None] * self.num_workers

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles, in worker order."""
        return list(self._actors)

    @property
    def nodes(self) -> list[str]:
        """The node each actor runs on (IP and node id)."""
        return list(self._nodes)

    def close(self) -> None:
        """Merge the actors' timers, close their environments, then kill the actors (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._failed and self._specs and not self._pending:
                with contextlib.suppress(Exception):
                    self._request("timers", [None] * self.num_workers, self.close_timeout_s)
                with contextlib.suppress(Exception):
                    self._ray.wait([a.close.remote() for a in self._actors], num_returns=len(self._actors),
                                   timeout=self.close_timeout_s)
        finally:
            for actor in self._actors:
                with contextlib.suppress(Exception):
                    self._ray.kill(actor)
            self._finalizer()


class _ActorDied(_WorkerFailure):
    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def _actor_error(error: Exception) -> str:
    """Ray's reason for an actor's death, on one line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(getattr(error, "error_msg", None) or error)).strip()
    return (text.splitlines() or [type(error).__name__])[0].strip()
