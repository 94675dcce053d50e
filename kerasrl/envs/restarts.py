"""Restarting Unity players that crash or hang, within limits (``mlagents-learn``'s
``--max-lifetime-restarts``, ``--restarts-rate-limit-n`` and ``--restarts-rate-limit-period-s``).

A :class:`RestartingEnvManager` wraps the env manager of a run's players. When a step fails (a
player exited, stopped answering or sent what cannot be read), the trainer controller asks it
:meth:`~RestartingEnvManager.restart_after` the error: within the limits it closes every player,
starts them again (the same factory, ports and seeds), hands them the policies, and resets them
with the latest parameters; the controller then ends every agent's unfinished episode (their
trajectories are dropped, as at a curriculum's reset) and training goes on. Beyond the limits the
error stands, and the run saves and ends as without restarts. The limits count restarts of the
run's players together: at most ``max_lifetime_restarts`` in the run (−1: no limit), and at most
``rate_limit_n`` within any ``rate_limit_period_s`` seconds (−1: no rate limit).
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from kerasrl.envs.base import BehaviorSpec, EnvironmentException
from kerasrl.envs.env_manager import EnvManager, Policy, StepInfo

__all__ = ["RestartLimits", "RestartingEnvManager"]

logger = logging.getLogger("kerasrl")


@dataclass
class RestartLimits:
    """How often the players may be restarted, and when they were."""

    max_lifetime_restarts: int = 10
    rate_limit_n: int = 1
    rate_limit_period_s: float = 60.0
    restarts: int = 0
    recent: deque[float] = field(default_factory=deque)

    def why_not(self, now: float) -> Optional[str]:
        """Why no restart is allowed at ``now`` (None: one is)."""
        if 0 <= self.max_lifetime_restarts <= self.restarts:
            return f"it was restarted {self.restarts} times, --max-lifetime-restarts {self.max_lifetime_restarts}"
        while self.recent and now - self.recent[0] > self.rate_limit_period_s:
            self.recent.popleft()
        if 0 <= self.rate_limit_n <= len(self.recent):
            return (f"{len(self.recent)} restarts within --restarts-rate-limit-period-s {self.rate_limit_period_s:g} s, "
                    f"--restarts-rate-limit-n {self.rate_limit_n}")
        return None

    def record(self, now: float) -> None:
        self.restarts += 1
        self.recent.append(now)


class RestartingEnvManager(EnvManager):
    """The env manager that ``make`` builds, built again after a failed step when ``limits`` allow."""

    def __init__(self, make: Callable[[], EnvManager], limits: RestartLimits) -> None:
        super().__init__()
        self.make, self.limits = make, limits
        self.inner = make()
        self._reset_args: tuple[Optional[Mapping[str, float]], bool] = (None, True)
        self._failure: Optional[EnvironmentException] = None

    def set_policy(self, behavior_name: str, policy: Policy) -> None:
        super().set_policy(behavior_name, policy)
        self.inner.set_policy(behavior_name, policy)

    def step(self) -> list[StepInfo]:
        try:
            return self.inner.step()
        except EnvironmentException as e:
            self._failure = e
            raise

    def reset(self, config: Optional[Mapping[str, float]] = None, train_mode: bool = True) -> list[StepInfo]:
        self._reset_args = (config, train_mode)
        return self.inner.reset(config, train_mode)

    def restart_after(self, error: BaseException) -> bool:
        """Restart the players after ``error``, a step's failure, if the limits allow; whether it did.
        A failure of the restart itself is raised (one line, naming the players)."""
        if error is not self._failure:
            return False
        self._failure = None
        why = self.limits.why_not(time.monotonic())
        if why is not None:
            logger.warning("The environment failed and is not restarted (%s).", why)
            return False
        self.limits.record(time.monotonic())
        logger.warning("The environment failed (%s); restarting it (restart %d%s).", error, self.limits.restarts,
                       "" if self.limits.max_lifetime_restarts < 0 else f" of at most {self.limits.max_lifetime_restarts}")
        with contextlib.suppress(Exception):
            self.inner.close()
        try:
            self.inner = self.make()
        except EnvironmentException as e:
            raise EnvironmentException(f"Restarting the environment after it failed ({error}) failed too: {e}") from e
        for name, policy in self.policies.items():
            self.inner.set_policy(name, policy)
        self.inner.reset(*self._reset_args)
        return True

    def __getattr__(self, name: str) -> object:
        """What else the wrapped manager offers (its workers' timers, its agents' count, ...)."""
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def behavior_specs(self) -> dict[str, BehaviorSpec]:
        return self.inner.behavior_specs

    @property
    def reset_parameters(self) -> dict[str, float]:
        return self.inner.reset_parameters

    def environment_stats(self) -> dict[str, list[float]]:
        return self.inner.environment_stats()

    def close(self) -> None:
        self.inner.close()
