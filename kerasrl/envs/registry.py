"""Environments by id: the built-in ones (one agent each), Gymnasium ids (``num_envs`` copies
as agents of one behavior), PettingZoo games (``pettingzoo:<module>[:<function>]``, one game), and
the env manager that steps them in this process, in worker processes or in Ray actors. The command
line, ``kerasrl.PPO`` and the export command share it.

A Unity player (a path, with or without its extension) or ``editor`` is a Unity scene: one
``UnityEnvironment`` per player (``num_envs`` players on consecutive ports, each in its own
worker process when there are several). The Unity stack (gRPC, TensorFlow's PNG decoder) is
imported only then."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import gymnasium

from kerasrl.envs.base import Environment
from kerasrl.envs.competitive import Duel1DEnvironment
from kerasrl.envs.env_manager import EnvManager, SimpleEnvManager
from kerasrl.envs.groups import GroupSimple1DEnvironment
from kerasrl.envs.gym_adapter import GymnasiumEnv
from kerasrl.envs.lock import COMBINATION_LOCK  # noqa: F401 - registers CombinationLock-v0 with Gymnasium
from kerasrl.envs.ray_env_manager import RayEnvManager
from kerasrl.envs.restarts import RestartingEnvManager, RestartLimits
from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment, VisualSimple1DEnvironment
from kerasrl.envs.slow import SLOW_CARTPOLE  # noqa: F401 - registers SlowCartPole-v1 with Gymnasium
from kerasrl.envs.subprocess_env_manager import SubprocessEnvManager
from kerasrl.exception import TrainerError, one_line

BUILTIN_ENVS = ("Simple1D", "Simple1DContinuous", "MultiBranchMasked", "VisualSimple1D", "GroupSimple1D", "Duel1D",
                "Duel1DScripted")
#: Gymnasium copies when ``num_envs`` is not given.
DEFAULT_NUM_ENVS = 8
#: ``pettingzoo:<module>[:<function>]``: a PettingZoo game (``kerasrl.envs.pettingzoo_env``).
PETTINGZOO_PREFIX = "pettingzoo:"


def is_pettingzoo_env(env_id: str) -> bool:
    return env_id.startswith(PETTINGZOO_PREFIX)


def is_one_environment(env_id: str) -> bool:
    """A built-in environment or a PettingZoo game: one environment whose agents are its own (no copies)."""
    return env_id in BUILTIN_ENVS or is_pettingzoo_env(env_id)


def _pettingzoo(env_id: str, seed: Optional[int]) -> Environment:
    from kerasrl.envs.pettingzoo_env import make_pettingzoo_env  # needs the optional pettingzoo extra

    return make_pettingzoo_env(env_id[len(PETTINGZOO_PREFIX):], seed)


def _builtin(env_id: str, seed: Optional[int]) -> Environment:
    if env_id == "Simple1D":
        return Simple1DEnvironment(use_discrete=True, seed=seed)
    if env_id == "Simple1DContinuous":
        return Simple1DEnvironment(use_discrete=False, seed=seed)
    if env_id == "MultiBranchMasked":
        return MultiBranchMaskedEnvironment(seed=seed)
    if env_id == "GroupSimple1D":  # three agents in one group (kerasrl.envs.groups)
        return GroupSimple1DEnvironment(seed=seed)
    if env_id in ("Duel1D", "Duel1DScripted"):  # two teams racing, 16 matches (kerasrl.envs.competitive)
        return Duel1DEnvironment(seed=seed, opponent="scripted" if env_id == "Duel1DScripted" else "self")
    return VisualSimple1DEnvironment(use_discrete=True, seed=seed)


def make_env(env_id: str, num_envs: Optional[int], seed: Optional[int],
             names: tuple[str, str] = ("--env", "--num-envs")) -> Union[Environment, GymnasiumEnv]:
    """A built-in environment by name (one agent), a Unity player or ``editor`` (one, with
    ``UnityOptions``' defaults), else a Gymnasium id with ``num_envs`` copies (default 8) as
    agents of one behavior. Gymnasium's errors (an unknown id, with its
    suggestion; a missing optional dependency, with its pip command) become one-line errors
    naming ``names``: the caller's words for the id and the copies (flags, or Python arguments)."""
    env_name, copies_name = names
    if is_unity_env(env_id):  # a Unity player (one), with mlagents-learn's settings
        if num_envs not in (None, 1):
            raise TrainerError(f"{env_name} {env_id} is one Unity player here; {copies_name} must be 1.")
        return UnityEnvFactory(env_id, UnityOptions(), 0 if seed is None else seed)(0)
    if is_one_environment(env_id):
        if num_envs not in (None, 1):
            what = "The PettingZoo game" if is_pettingzoo_env(env_id) else "The built-in environment"
            raise TrainerError(f"{what} {env_id} is one environment (its agents are its own); {copies_name} must be 1.")
        return _pettingzoo(env_id, seed) if is_pettingzoo_env(env_id) else _builtin(env_id, seed)
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
    if is_one_environment(env_id):
        if num_envs not in (None, workers):
            raise TrainerError(f"The environment {env_id} is one environment: with --workers {workers} there is "
                               f"one copy per worker, so --num-envs must be {workers} or left out.")
        return 1
    n = DEFAULT_NUM_ENVS if num_envs is None else num_envs
    if workers > n or n % workers:
        raise TrainerError(f"--num-envs {n} copies cannot be split evenly over --workers {workers}; "
                           "choose a number of copies that the number of workers divides.")
    return n // workers


def check_env_id(env_id: str) -> None:
    """An unknown Gymnasium id is the same one-line error with ``--workers`` as without."""
    if is_one_environment(env_id):
        return
    try:
        gymnasium.spec(env_id)
    except gymnasium.error.Error as e:
        raise TrainerError(f"--env {env_id}: {one_line(e)}") from e


#: How Unity builds are named on each platform (``--env`` may leave the extension out).
PLAYER_EXTENSIONS = (".x86_64", ".x86", ".exe", ".app")
#: ``--env editor``: no build; the Unity Editor connects when Play is pressed.
EDITOR = "editor"


def is_unity_env(env_id: str) -> bool:
    """``editor``, a path with a player's extension, or an existing path (with or without one)."""
    if env_id.lower() == EDITOR or env_id.endswith(PLAYER_EXTENSIONS):
        return True
    return any(os.path.exists(env_id + ext) for ext in ("", *PLAYER_EXTENSIONS))


@dataclass(frozen=True)
class UnityOptions:
    """How Unity players are started and configured (``kerasrl-learn``'s Unity flags, with
    ``mlagents-learn``'s defaults). ``log_folder``: where each player writes ``Player-{i}.log``."""

    base_port: Optional[int] = None
    no_graphics: bool = False
    timeout_wait: float = 60.0
    env_args: tuple[str, ...] = ()
    log_folder: Optional[str] = None
    time_scale: float = 20.0
    quality_level: int = 5
    width: int = 84
    height: int = 84
    target_frame_rate: int = -1
    capture_frame_rate: int = 60
    side_channels: tuple[Any, ...] = field(default=())
    #: Training areas per player (``--num-areas``; the scene's ``TrainingAreaReplicator`` makes them).
    num_areas: int = 1
    #: Parameters the scene draws anew each episode: ``(key, sampler kind, values, seed)``.
    samplers: tuple[tuple[str, str, tuple[float, ...], int], ...] = ()
    #: Restarts of players that crash or hang (``kerasrl.envs.restarts``): in the run (−1: no limit;
    #: 0: none), and within a period (−1: no rate limit).
    max_lifetime_restarts: int = 10
    restarts_rate_limit_n: int = 1
    restarts_rate_limit_period_s: float = 60.0


@dataclass(frozen=True)
class UnityEnvFactory:
    """Builds player ``i``'s environment: the build ``path`` (``editor``: the Editor) on port
    ``base_port + i``, seeded ``seed + i``. Module level, so a spawned worker can unpickle it."""

    path: str
    options: UnityOptions
    seed: int

    def __call__(self, index: int) -> Environment:
        from kerasrl.envs.unity import EngineConfig, UnityEnvironment

        o = self.options
        engine = EngineConfig(width=o.width, height=o.height, quality_level=o.quality_level, time_scale=o.time_scale,
                              target_frame_rate=o.target_frame_rate, capture_frame_rate=o.capture_frame_rate)
        return UnityEnvironment(None if self.path.lower() == EDITOR else self.path, worker_id=index,
                                base_port=o.base_port, seed=self.seed + index, no_graphics=o.no_graphics,
                                timeout_wait=o.timeout_wait, additional_args=o.env_args, side_channels=o.side_channels,
                                log_folder=o.log_folder, engine=engine, num_areas=o.num_areas, samplers=o.samplers)


def _unity_env_manager(env_id: str, num_envs: Optional[int], seed: int, workers: int, env_manager: str,
                       unity: Optional[UnityOptions], ray_address: Optional[str],
                       ray_restart_workers: bool) -> tuple[EnvManager, int]:
    """``num_envs`` Unity players (default 1): in this process for one, else one per worker process or Ray actor."""
    players = 1 if num_envs is None else num_envs
    if env_id.lower() == EDITOR and players != 1:
        raise TrainerError(f"--env editor connects to one Unity Editor; --num-envs must be 1, got {players}.")
    if workers not in (1, players):
        raise TrainerError(f"--env {env_id} runs --num-envs {players} Unity players, each in its own worker: "
                           f"leave --workers out or make it {players}.")
    factory = UnityEnvFactory(env_id, unity or UnityOptions(), seed)
    o = factory.options
    timeout = o.timeout_wait

    def build() -> EnvManager:
        if players == 1 and env_manager != "ray":
            return SimpleEnvManager(factory(0))
        if env_manager == "ray":
            return RayEnvManager(factory, players, address=ray_address, restart_workers=ray_restart_workers,
                                 step_timeout_s=timeout + 30.0, start_timeout_s=timeout + 300.0)
        return SubprocessEnvManager(factory, players, step_timeout_s=timeout + 30.0, start_timeout_s=timeout + 120.0)

    if o.max_lifetime_restarts == 0:
        return build(), players
    limits = RestartLimits(o.max_lifetime_restarts, o.restarts_rate_limit_n, o.restarts_rate_limit_period_s)
    return RestartingEnvManager(build, limits), players


def make_env_manager(env_id: str, num_envs: Optional[int], seed: int, workers: int, env_manager: str = "subprocess",
                     ray_address: Optional[str] = None, ray_restart_workers: bool = False,
                     unity: Optional[UnityOptions] = None) -> tuple[EnvManager, int]:
    """The env manager and its number of agents: ``SimpleEnvManager`` in this process for
    ``workers == 1``, else a ``SubprocessEnvManager`` over ``workers`` processes; with
    ``env_manager="ray"`` a ``RayEnvManager`` over ``workers`` Ray actors (one is allowed).
    A Unity scene (:func:`is_unity_env`) runs as ``unity`` says."""
    if is_unity_env(env_id):
        return _unity_env_manager(env_id, num_envs, seed, workers, env_manager, unity, ray_address,
                                  ray_restart_workers)
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
