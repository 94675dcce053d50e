"""Environments by id: the built-in ones (one agent each) and Gymnasium ids (``num_envs`` copies
as agents of one behavior), and the env manager that steps them in this process, in worker
processes or in Ray actors. The command line, ``kerasrl.PPO`` and the export command share it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import gymnasium

from kerasrl.envs.base import Environment
from kerasrl.envs.env_manager import EnvManager, SimpleEnvManager
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.ray_env_manager import RayEnvManager
from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment, VisualSimple1DEnvironment
from kerasrl.envs.slow import SLOW_CARTPOLE  # noqa: F401 - registers SlowCartPole-v1 with Gymnasium
from kerasrl.envs.subprocess_env_manager import SubprocessEnvManager
from kerasrl.exception import TrainerError, one_line

BUILTIN_ENVS = ("Simple1D", "Simple1DContinuous", "MultiBranchMasked", "VisualSimple1D")
#: Gymnasium copies when ``num_envs`` is not given.
DEFAULT_NUM_ENVS = 8


def _builtin(env_id: str, seed: Optional[int]) -> Environment:
    if env_id == "Simple1D":
        return Simple1DEnvironment(use_discrete=True, seed=seed)
    if env_id == "Simple1DContinuous":
        return Simple1DEnvironment(use_discrete=False, seed=seed)
    if env_id == "MultiBranchMasked":
        return MultiBranchMaskedEnvironment(seed=seed)
    return VisualSimple1DEnvironment(use_discrete=True, seed=seed)


def make_env(env_id: str, num_envs: Optional[int], seed: Optional[int],
             names: tuple[str, str] = ("--env", "--num-envs")) -> Union[Environment, GymnasiumEnv]:
    """A built-in environment by name (one agent), else a Gymnasium id with ``num_envs`` copies
    (default 8) as agents of one behavior. Gymnasium's errors (an unknown id, with its
    suggestion; a missing optional dependency, with its pip command) become one-line errors
    naming ``names``: the caller's words for the id and the copies (flags, or Python arguments)."""
    env_name, copies_name = names
    if env_id in BUILTIN_ENVS:
        if num_envs not in (None, 1):
            raise TrainerError(f"The built-in environment {env_id} has one agent; {copies_name} must be 1.")
        return _builtin(env_id, seed)
    try:
        return GymnasiumEnv(env_id, num_envs=DEFAULT_NUM_ENVS if num_envs is None else num_envs, seed=seed)
    except gymnasium.error.Error as e:
        raise TrainerError(f"{env_name} {env_id}: {one_line(e)}") from e


@dataclass(frozen=True)
class WorkerEnvFactory:
    """Builds worker ``i``'s environment: ``num_envs`` copies of ``env_id`` (``make_env``), seeded
    ``seed + i * num_envs`` (Gymnasium seeds copy ``j`` of a vector env ``seed + j``). Module
    level, so a spawned worker can unpickle it."""

    env_id: str
    num_envs: int
    seed: int

    def __call__(self, index: int) -> Union[Environment, GymnasiumEnv]:
        return make_env(self.env_id, self.num_envs, self.seed + index * self.num_envs)


def copies_per_worker(env_id: str, num_envs: Optional[int], workers: int) -> int:
    """How many environment copies each of ``workers`` worker processes hosts: ``num_envs``
    (default 8) split evenly; a built-in (one-agent) environment has one copy per worker."""
    if env_id in BUILTIN_ENVS:
        if num_envs not in (None, workers):
            raise TrainerError(f"The built-in environment {env_id} has one agent: with --workers {workers} there is "
                               f"one copy per worker, so --num-envs must be {workers} or left out.")
        return 1
    n = DEFAULT_NUM_ENVS if num_envs is None else num_envs
    if workers > n or n % workers:
        raise TrainerError(f"--num-envs {n} copies cannot be split evenly over --workers {workers}; "
                           "choose a number of copies that the number of workers divides.")
    return n // workers


def check_env_id(env_id: str) -> None:
    """An unknown Gymnasium id is the same one-line error with ``--workers`` as without."""
    if env_id in BUILTIN_ENVS:
        return
    try:
        gymnasium.spec(env_id)
    except gymnasium.error.Error as e:
        raise TrainerError(f"--env {env_id}: {one_line(e)}") from e


def make_env_manager(env_id: str, num_envs: Optional[int], seed: int, workers: int, env_manager: str = "subprocess",
                     ray_address: Optional[str] = None, ray_restart_workers: bool = False) -> tuple[EnvManager, int]:
    """The env manager and its number of agents: ``SimpleEnvManager`` in this process for
    ``workers == 1``, else a ``SubprocessEnvManager`` over ``workers`` processes; with
    ``env_manager="ray"`` a ``RayEnvManager`` over ``workers`` Ray actors (one is allowed)."""
    if workers == 1 and env_manager != "ray":
        env = make_env(env_id, num_envs, seed)
        return SimpleEnvManager(env), int(getattr(env, "num_envs", 1))
    per_worker = copies_per_worker(env_id, num_envs, workers)
    check_env_id(env_id)
    factory = WorkerEnvFactory(env_id, per_worker, seed)
    if env_manager == "ray":
        manager: EnvManager = RayEnvManager(factory, workers, address=ray_address, restart_workers=ray_restart_workers)
    else:
        manager = SubprocessEnvManager(factory, workers)
    return manager, per_worker * workers
