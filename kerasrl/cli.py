"""Command line: ``kerasrl-learn <trainer-config> --env CartPole-v1 ...`` (ML-Agents' ``mlagents-learn``)."""
from __future__ import annotations

import argparse
import logging
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence

from kerasrl import xla_cache
from kerasrl.exception import TrainerError, one_line

BUILTIN_ENVS = ("Simple1D", "Simple1DContinuous", "MultiBranchMasked", "VisualSimple1D")
DEFAULT_NUM_ENVS = 8
#: Exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130


def make_env(env_id: str, num_envs: Optional[int], seed: Optional[int]) -> Any:
    """A built-in environment by name (one agent), else a Gymnasium id with ``num_envs`` copies
    (default 8) as agents of one behavior. Gymnasium's errors (an unknown id, with its
    suggestion; a missing optional dependency, with its pip command) become one-line errors."""
    from kerasrl.envs import GymnasiumEnv
    from kerasrl.envs.simple import MultiBranchMaskedEnvironment, Simple1DEnvironment, VisualSimple1DEnvironment

    if env_id in BUILTIN_ENVS:
        if num_envs not in (None, 1):
            raise TrainerError(f"The built-in environment {env_id} has one agent; --num-envs must be 1.")
        if env_id == "Simple1D":
            return Simple1DEnvironment(use_discrete=True, seed=seed)
        if env_id == "Simple1DContinuous":
            return Simple1DEnvironment(use_discrete=False, seed=seed)
        if env_id == "MultiBranchMasked":
            return MultiBranchMaskedEnvironment(seed=seed)
        return VisualSimple1DEnvironment(use_discrete=True, seed=seed)
    import gymnasium

    try:
        return GymnasiumEnv(env_id, num_envs=DEFAULT_NUM_ENVS if num_envs is None else num_envs, seed=seed)
    except gymnasium.error.Error as e:
        raise TrainerError(f"--env {env_id}: {one_line(e)}") from e


@dataclass(frozen=True)
class WorkerEnvFactory:
    """Builds worker ``i``'s environment for ``--workers``: ``num_envs`` copies of ``env_id``
    (``make_env``), seeded ``seed + i * num_envs`` (Gymnasium seeds copy ``j`` of a vector env
    ``seed + j``). Module level, so a spawned worker can unpickle it."""

    env_id: str
    num_envs: int
    seed: int

    def __call__(self, index: int) -> Any:
        return make_env(self.env_id, self.num_envs, self.seed + index * self.num_envs)


def copies_per_worker(env_id: str, num_envs: Optional[int], workers: int) -> int:
    """How many environment copies each of ``workers`` worker processes hosts: N = ``--num-envs``
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
    import gymnasium

    import kerasrl.envs  # noqa: F401 - registers SlowCartPole-v1

    try:
        gymnasium.spec(env_id)
    except gymnasium.error.Error as e:
        raise TrainerError(f"--env {env_id}: {one_line(e)}") from e


def make_env_manager(env_id: str, num_envs: Optional[int], seed: int, workers: int, env_manager: str = "subprocess",
                     ray_address: Optional[str] = None, ray_restart_workers: bool = False) -> tuple[Any, int]:
    """The env manager and its number of agents: ``SimpleEnvManager`` in this process for
    ``workers == 1``, else a ``SubprocessEnvManager`` over ``workers`` processes; with
    ``env_manager="ray"`` a ``RayEnvManager`` over ``workers`` Ray actors (one is allowed)."""
    from kerasrl.envs import SimpleEnvManager, SubprocessEnvManager

    if workers == 1 and env_manager != "ray":
        env = make_env(env_id, num_envs, seed)
        return SimpleEnvManager(env), int(getattr(env, "num_envs", 1))
    per_worker = copies_per_worker(env_id, num_envs, workers)
    check_env_id(env_id)
    factory = WorkerEnvFactory(env_id, per_worker, seed)
    if env_manager == "ray":
        from kerasrl.envs.ray_env_manager import RayEnvManager

        return RayEnvManager(factory, workers, address=ray_address, restart_workers=ray_restart_workers), \
            per_worker * workers
    return SubprocessEnvManager(factory, workers), per_worker * workers


def set_tf_threads(threads: int) -> bool:
    """Limit TensorFlow's thread pools (must run before TensorFlow executes anything).

    Small models spend their time in per-op overhead that a 2-thread pool only adds to.
    Returns False (and leaves the pools alone) if TensorFlow is already running.
    """
    import tensorflow as tf

    if threads <= 0:
        return False
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        logging.getLogger("kerasrl").warning("TensorFlow is already initialized; --tf-threads %d ignored.", threads)
        return False
    return True


def build_parser(prog: str = "kerasrl-learn", config_required: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Train PPO with kerasrl on a built-in or Gymnasium environment.")
    if config_required:
        p.add_argument("trainer_config_path",
                       help="ML-Agents-style trainer config (YAML: default + per-behavior sections), or the name of a "
                            "shipped one: cartpole_zoo, trainer_config")
    else:
        p.add_argument("--config", dest="trainer_config_path", default=None, help="trainer config YAML")
    p.add_argument("--env", default="CartPole-v1", help=f"Gymnasium id or one of {', '.join(BUILTIN_ENVS)}")
    p.add_argument("--num-envs", type=int, default=None,
                   help=f"parallel copies of a Gymnasium env (agents of one behavior; default {DEFAULT_NUM_ENVS}); "
                        "the built-in environments have one agent")
    p.add_argument("--workers", type=int, default=1,
                   help="processes stepping the environment copies (default 1: in this process); the --num-envs "
                        "copies are split evenly over them, and a built-in environment gets one copy per worker")
    p.add_argument("--env-manager", choices=("subprocess", "ray"), default="subprocess",
                   help="where the --workers step: worker processes on this machine (default), or Ray actors on "
                        "this machine or a Ray cluster (pip install \"kerasrl[ray]\")")
    p.add_argument("--ray-address", default=None,
                   help="the Ray cluster to join (ray.init(address=...); 'auto': the one this machine is in); "
                        "default: a local Ray started on demand")
    p.add_argument("--ray-restart-workers", action="store_true",
                   help="replace a Ray actor that dies and continue (its agents' unfinished trajectories are "
                        "dropped); default: save and stop with an error naming the actor and its node")
    p.add_argument("--steps", type=int, default=None,
                   help="environment steps to train for (all copies counted); overrides max_steps")
    p.add_argument("--seed", type=int, default=-1, help="random seed; -1 draws one")
    p.add_argument("--run-id", default="ppo", help="name of the run's folder under --results-dir")
    p.add_argument("--results-dir", default="results", help="where models and summaries go")
    p.add_argument("--save-freq", type=int, default=100_000,
                   help="checkpoint every n environment steps (all copies counted, from the run's start)")
    p.add_argument("--save-every-minutes", type=float, default=10.0,
                   help="also checkpoint after this many minutes without one (0: off)")
    p.add_argument("--keep-checkpoints", type=int, default=5, help="checkpoints kept")
    p.add_argument("--resume", "--load", dest="load", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--force", action="store_true", help="start afresh in an existing run folder, deleting it first")
    p.add_argument("--initialize-from", metavar="RUN_ID", default=None,
                   help="start this new run from the newest checkpoint of run RUN_ID (in --results-dir), step 0")
    p.add_argument("--train", action="store_true",
                   help="accepted for ML-Agents' command lines: training is the default (see --inference)")
    p.add_argument("--inference", action="store_true",
                   help="run the trained policy of --run-id without training (for --steps steps, else until Ctrl-C)")
    p.add_argument("--record-demo", metavar="PATH", default=None,
                   help="with --resume and --steps N: run the trained policy of --run-id for N steps and write them "
                        "as a demonstration file (no training)")
    p.add_argument("--progress-every", type=int, default=10000, help="print progress every n environment steps")
    p.add_argument("--tf-threads", type=int, default=1,
                   help="TensorFlow intra-op threads (1 is fastest for small MLPs; 0 = TensorFlow's default)")
    p.add_argument("--xla-cache", metavar="DIR", default=None,
                   help="keep the XLA-compiled update in DIR, so that the next run of the same command loads it "
                        "instead of compiling (default: $KERASRL_XLA_CACHE, else ~/.cache/kerasrl/xla; 'off': no "
                        "cache)")
    p.add_argument("--curriculum", metavar="DIR", default=None,
                   help="folder of per-behavior curriculum JSON files (lessons of environment parameters)")
    p.add_argument("--lesson", type=int, default=None,
                   help="start every curriculum at this lesson (default: 0, or the saved lesson with --resume)")
    p.add_argument("--sampler", metavar="FILE", default=None,
                   help="YAML file of environment-parameter samplers with their resampling-interval")
    p.add_argument("--gpus", type=int, default=None,
                   help="train the learner on N GPUs (MirroredStrategy; 1: one GPU); acting stays on one device")
    p.add_argument("--cpu-replicas", type=int, default=None,
                   help="train the learner on N logical CPU devices (MirroredStrategy; for testing data parallelism "
                        "without GPUs)")
    p.add_argument("--worker-hosts", metavar="HOST:PORT,...", default=None,
                   help="train on several hosts (MultiWorkerMirroredStrategy): the same list on every host, each "
                        "with its own --task-index; each host steps its own --num-envs copies and every update "
                        "trains on all of them (default: TF_CONFIG if set, else one host)")
    p.add_argument("--task-index", type=int, default=None,
                   help="this host's index in --worker-hosts (0: the chief, which writes the results)")
    p.add_argument("--debug", action="store_true", help="debug logging")
    return p


@dataclass
class EnvParameters:
    """What ``--curriculum`` and ``--sampler`` give: lessons, sampler entries and interval."""

    meta_curriculum: Any = None
    sampler_config: Optional[dict[str, Any]] = None
    resampling_interval: Optional[int] = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "EnvParameters":
        """Read and check the files (before the run folder is touched)."""
        from kerasrl.curriculum import MetaCurriculum
        from kerasrl.samplers import load_sampler_file

        if getattr(args, "lesson", None) is not None and (args.lesson < 0 or not args.curriculum):
            raise TrainerError(f"--lesson {args.lesson}: needs --curriculum and a lesson >= 0.")
        meta = MetaCurriculum(args.curriculum) if getattr(args, "curriculum", None) else None
        if getattr(args, "sampler", None) is None:
            return cls(meta)
        sampler, interval = load_sampler_file(args.sampler)
        return cls(meta, sampler.reset_param_dict, interval)

    def reward_buff_caps(self) -> dict[str, int]:
        """Each curriculum's behavior keeps the returns of its last ``min_lesson_length`` episodes."""
        curricula = self.meta_curriculum.brains_to_curriculums if self.meta_curriculum is not None else {}
        return {name: c.min_lesson_length for name, c in curricula.items()}

    def controller_kwargs(self, args: argparse.Namespace, model_path: str, seed: int) -> dict[str, Any]:
        """The controller's curriculum and sampler arguments; the lessons start at ``--lesson``,
        else (with ``--resume``) where the run's last checkpoint left them."""
        from kerasrl.curriculum import load_lessons
        from kerasrl.samplers import SamplerManager

        meta = self.meta_curriculum
        if meta is not None:
            if args.lesson is not None:
                meta.set_all_curriculums_to_lesson_num(args.lesson)
            elif args.load and load_lessons(meta, model_path):
                print(f"Resumed the curricula at lessons {meta.lesson_nums}.", flush=True)
        sampler = SamplerManager(self.sampler_config, seed) if self.sampler_config is not None else None
        return {"meta_curriculum": meta, "sampler_manager": sampler,
                "resampling_interval": self.resampling_interval if sampler is not None else None}


def config_source(path_or_name: Optional[str]) -> Optional[str]:
    """A config file path, or the name of a shipped sample config (``cartpole_zoo``,
    ``trainer_config``) when no such file exists."""
    from kerasrl.configs import available_configs, config_path

    if path_or_name and not os.path.exists(path_or_name) and path_or_name in available_configs():
        return config_path(path_or_name)
    return path_or_name


def record_run(args: argparse.Namespace, context: Any, trainers: dict[str, Any]) -> None:
    """Save what this start of the run used in its folder: ``configuration.yaml`` (the command
    line, seed, versions and every behavior's resolved settings, rewritten atomically at each
    start) and one line per start in ``commands.log``."""
    import yaml

    from kerasrl import __version__

    run_dir = os.path.join(args.results_dir, args.run_id)
    argv = getattr(args, "argv", None)
    words = [os.path.basename(sys.argv[0]) or "kerasrl-learn", *sys.argv[1:]] if argv is None else argv
    command = " ".join(map(shlex.quote, words))
    record = {"command_line": command, "seed": context.seed, "kerasrl_version": __version__,
              "run_context": asdict(context),
              "behaviors": {name: t.parameters for name, t in trainers.items()}}
    tmp = os.path.join(run_dir, "configuration.yaml.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        yaml.safe_dump(record, f, sort_keys=False)
    os.replace(tmp, os.path.join(run_dir, "configuration.yaml"))
    with open(os.path.join(run_dir, "commands.log"), "a", encoding="utf-8") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {command}\n")


def _check_args(args: argparse.Namespace) -> None:
    for flag, value, low in (("--num-envs", args.num_envs, 1), ("--workers", getattr(args, "workers", 1), 1),
                             ("--steps", args.steps, 1), ("--save-freq", args.save_freq, 1),
                             ("--save-every-minutes", args.save_every_minutes, 0)):
        if value is not None and value < low:
            raise TrainerError(f"{flag} must be >= {low}, got {value}.")
    if args.force and (args.load or args.inference):
        raise TrainerError("--force starts a run afresh; it cannot be combined with --resume or --inference.")
    if args.train and args.inference:
        raise TrainerError("--train and --inference contradict each other.")
    if args.initialize_from is not None and (args.load or args.inference):
        raise TrainerError("--initialize-from starts a new run; use it without --resume and --inference.")


def _check_ray_args(args: argparse.Namespace) -> None:
    """Ray flags need ``--env-manager ray`` and Ray itself, before the run folder is touched."""
    if getattr(args, "env_manager", "subprocess") != "ray":
        flag = "--ray-address" if getattr(args, "ray_address", None) else "--ray-restart-workers"
        raise TrainerError(f"{flag} needs --env-manager ray.")
    from kerasrl.envs.ray_env_manager import ray_available

    if not ray_available():
        raise TrainerError('--env-manager ray needs Ray, which is not installed: pip install "kerasrl[ray]".')


def prepare_run_dir(args: argparse.Namespace) -> str:
    """The run's folder, checked: an existing run is continued only with ``--resume`` (or run
    with ``--inference``) and replaced only with ``--force``; it must be writable."""
    run_dir = os.path.join(args.results_dir, args.run_id)
    exists = os.path.isdir(run_dir) and bool(os.listdir(run_dir))
    if args.inference and not exists:
        raise TrainerError(f"--inference: there is no trained model in {run_dir}; train run {args.run_id} first.")
    if exists and not (args.load or args.inference or args.force):
        raise TrainerError(f"The run folder {run_dir} already exists: continue it with --resume, or start it "
                           "afresh with --force (which deletes it).")
    try:
        if args.force and os.path.exists(run_dir):
            shutil.rmtree(run_dir)
        os.makedirs(run_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=run_dir):
            pass
    except OSError as e:
        raise TrainerError(f"The run folder {run_dir} cannot be written: {e.strerror or e}.") from e
    return run_dir


def initial_models(args: argparse.Namespace) -> Optional[str]:
    """The models folder of the run named by ``--initialize-from`` (which must exist)."""
    if args.initialize_from is None:
        return None
    if args.initialize_from == args.run_id:
        raise TrainerError("--initialize-from names this run; continue it with --resume instead.")
    models = os.path.join(args.results_dir, args.initialize_from, "models")
    if not os.path.isdir(models):
        raise TrainerError(f"--initialize-from {args.initialize_from}: there is no run folder {models}.")
    return models


def _setup(args: argparse.Namespace, default_config: Optional[str],
           env_params: Optional[EnvParameters] = None) -> tuple[Any, Any, dict[str, Any], int]:
    """The run context, the env manager, the trainers and the number of agents that ``args`` describe."""
    from kerasrl.settings import RunContext, load_trainer_config
    from kerasrl.trainers import create_trainers

    config = load_trainer_config(config_source(args.trainer_config_path or default_config))
    workers = getattr(args, "workers", 1)
    env_manager = getattr(args, "env_manager", "subprocess")
    if env_manager != "subprocess" or getattr(args, "ray_address", None) or getattr(args, "ray_restart_workers", False):
        _check_ray_args(args)
    if workers > 1 or env_manager == "ray":
        copies_per_worker(args.env, args.num_envs, workers)  # a layout error before the run folder is touched
    init = initial_models(args)
    prepare_run_dir(args)
    seed = args.seed if args.seed >= 0 else random.randrange(10000)
    env_seed = seed + host_seed_offset(args)
    manager, n_agents = make_env_manager(args.env, args.num_envs, env_seed, workers, env_manager,
                                         getattr(args, "ray_address", None), getattr(args, "ray_restart_workers", False))
    context = RunContext.in_results_dir(args.results_dir, args.run_id, keep_checkpoints=args.keep_checkpoints,
                                        train_model=not args.inference, load_model=args.load or args.inference,
                                        seed=seed, max_steps=args.steps, initialize_from=init)
    env_params = env_params or EnvParameters()
    try:
        if env_params.meta_curriculum is not None:
            env_params.meta_curriculum.check_behaviors(manager.external_brains)
        trainers = create_trainers(config, manager.external_brains, context, env_params.reward_buff_caps())
        return context, manager, trainers, n_agents
    except BaseException:
        manager.close()
        raise


def host_seed_offset(args: argparse.Namespace) -> int:
    """On several hosts, host ``i``'s copies are seeded after those of hosts ``0..i-1``, so that
    the hosts see different episodes."""
    from kerasrl.distribute import cluster

    hosts = cluster() if "kerasrl.distribute" in sys.modules else None
    return 0 if hosts is None else hosts.task_index * copies_per_host(args)


class _Report:
    """Progress and the final summary. Steps are environment steps (all copies counted) since
    the run's start, across resumes; steps/s covers this session, without tracing. Progress is
    a bar (Keras's ``Progbar``) when stdout is a terminal, else one plain line each time."""

    def __init__(self, trainers: dict[str, Any], n_agents: int, inference: bool, target: Optional[int],
                 bar: Optional[bool] = None) -> None:
        self.trainers, self.n_agents, self.inference = trainers, n_agents, inference
        self.first_step = {name: t.get_step for name, t in trainers.items()}
        self.start = time.perf_counter()
        self.controller: Any = None
        self.target = target
        self.bar: Any = None
        if sys.stdout.isatty() if bar is None else bar:
            import keras

            self.bar = keras.utils.Progbar(target, unit_name="step", stateful_metrics=["mean_return", "steps/s"])

    def trace_seconds(self) -> float:
        return sum(t.policy.trace_seconds + t.learner.trace_seconds for t in self.trainers.values())

    def summary(self) -> dict[str, float]:
        import numpy as np

        wall = time.perf_counter() - self.start
        if self.inference:
            steps = session = self.controller.global_step * self.n_agents
        else:
            steps = max(t.get_step for t in self.trainers.values())
            session = max(t.get_step - self.first_step[n] for n, t in self.trainers.items())
        returns = [r for t in self.trainers.values() for r in t.recent_returns]
        return {"steps": float(steps), "mean_return": float(np.mean(returns)) if returns else float("nan"),
                "steps_per_sec": session / max(wall - self.trace_seconds(), 1e-9), "wall_s": wall}

    def progress(self, controller: Any) -> None:
        s = self.summary()
        if self.bar is not None:
            self.bar.update(int(s["steps"]), [("mean_return", s["mean_return"]), ("steps/s", s["steps_per_sec"])])
            return
        print(f"steps={int(s['steps'])} mean_return={s['mean_return']:.2f} steps_per_sec={s['steps_per_sec']:.0f}",
              flush=True)

    def close(self) -> None:
        """End the bar's line before the summary lines."""
        if self.bar is not None:
            print(flush=True)

    def resumed(self) -> None:
        for name, t in self.trainers.items():
            if t.get_step:
                done = " (already at its max_steps: nothing left to train)" if t.get_step > t.get_max_steps else ""
                print(f"Resumed {name} at step {t.get_step}{done}.", flush=True)


#: Why each flag cannot join a multi-host run.
MULTI_HOST_CONFLICTS = {
    "gpus": "each host trains on all its local GPUs (else its CPU)",
    "cpu_replicas": "each host trains on all its local GPUs (else its CPU)",
    "inference": "run the trained policy on one host",
    "record_demo": "record on one host",
    "initialize_from": "start it on one host",
    "curriculum": "lessons would advance on each host's own returns",
}


def check_multi_host_args(args: argparse.Namespace) -> bool:
    """Whether this is a multi-host run (``--worker-hosts`` with ``--task-index``, written to
    ``TF_CONFIG``, or ``TF_CONFIG`` already set), its flags checked before TensorFlow starts."""
    from kerasrl.distribute import set_cluster, tf_config

    hosts, index = getattr(args, "worker_hosts", None), getattr(args, "task_index", None)
    if (hosts is None) != (index is None):
        raise TrainerError("--worker-hosts and --task-index go together: every host gets the same --worker-hosts "
                           "and its own --task-index.")
    several = len([h for h in hosts.split(",") if h.strip()]) > 1 if hosts is not None else tf_config() is not None
    if not several:  # one host named: a plain run (a malformed entry is still an error)
        if hosts is not None:
            set_cluster(hosts.split(","), index)
        return False
    for key, why in MULTI_HOST_CONFLICTS.items():
        value = getattr(args, key, None)
        if value not in (None, False):
            flag = "--resume" if key == "load" else "--" + key.replace("_", "-")
            raise TrainerError(f"{flag} cannot be combined with a multi-host run (--worker-hosts or TF_CONFIG): {why}.")
    if hosts is not None:
        set_cluster(hosts.split(","), index)
    return True


def copies_per_host(args: argparse.Namespace) -> int:
    """Environment copies (agents) that one host steps: ``--num-envs`` (default 8), or one per
    ``--workers`` process for a built-in environment."""
    if args.env in BUILTIN_ENVS:
        return getattr(args, "workers", 1)
    return DEFAULT_NUM_ENVS if args.num_envs is None else args.num_envs


def join_cluster(args: argparse.Namespace, default_config: Optional[str]) -> Optional[str]:
    """Once the multi-host strategy stands: check that every host starts the same run, take the
    chief's seed (drawn there for ``--seed -1``), and send a non-chief host's results to a
    temporary folder (returned; removed at the end), so that only the chief writes (and, with
    ``--resume``, restores)."""
    import zlib

    from kerasrl.distribute import cluster

    hosts = cluster()
    if hosts is None:
        return None
    path = config_source(args.trainer_config_path or default_config)
    try:
        with open(path or "", "rb") as f:
            config = zlib.crc32(f.read())
    except OSError:
        config = 0  # loading the config names the missing file
    env = zlib.crc32(args.env.encode())
    hosts.check_same({"the trainer config file": config & 0x7FFFFFFF, "--env": env & 0x7FFFFFFF,
                      "the environment copies per host (--num-envs, --workers)": copies_per_host(args),
                      "--steps": args.steps or 0, "--seed": args.seed, "--resume": int(args.load)})
    args.seed = hosts.chief_value(args.seed if args.seed >= 0 else random.randrange(10000))
    if hosts.chief:
        return None
    args.results_dir = tempfile.mkdtemp(prefix=f"kerasrl-worker{hosts.task_index}-")
    args.load = False  # with --resume the chief restores, and every host takes its state (sync_from_chief)
    return args.results_dir


def choose_strategy(args: argparse.Namespace, multi_host: bool = False) -> None:
    """``--gpus`` / ``--cpu-replicas`` / several hosts: the learners' strategy, chosen before TensorFlow starts."""
    gpus, cpu_replicas = getattr(args, "gpus", None), getattr(args, "cpu_replicas", None)
    if gpus is not None or cpu_replicas is not None or multi_host:
        from kerasrl.distribute import get_strategy

        get_strategy(gpus=gpus, cpu_replicas=cpu_replicas)


def warn_small_policies(args: argparse.Namespace, trainers: dict[str, Any]) -> None:
    """Several GPUs for a small MLP policy: a warning that environment stepping dominates."""
    gpus = getattr(args, "gpus", None)
    if gpus and gpus > 1:
        from kerasrl.distribute import warn_if_small

        for trainer in trainers.values():
            net = trainer.settings.network
            warn_if_small(net.hidden_units, net.num_layers, bool(trainer.spec.visual_observation_shapes), gpus)


def run_training(args: argparse.Namespace, default_config: Optional[str] = None) -> dict[str, float]:
    """Train as ``args`` say; print progress and the final machine-readable summary line."""
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(message)s")
    _check_args(args)
    multi_host = check_multi_host_args(args)
    set_tf_threads(args.tf_threads)
    xla_cache.enable(args.xla_cache)
    choose_strategy(args, multi_host)
    start = time.perf_counter()
    env_params = EnvParameters.from_args(args)
    resume = args.load
    scratch = join_cluster(args, default_config) if multi_host else None
    try:
        context, manager, trainers, n_agents = _setup(args, default_config, env_params)
        warn_small_policies(args, trainers)
        try:
            for trainer in trainers.values() if multi_host and resume else ():
                trainer.sync_from_chief()
            return _train(args, context, manager, trainers, n_agents, start, env_params)
        finally:
            if getattr(manager, "closed", True) is False:  # worker processes never outlive a failed set-up
                manager.close()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _train(args: argparse.Namespace, context: Any, manager: Any, trainers: dict[str, Any], n_agents: int,
           start: float, env_params: Optional[EnvParameters] = None) -> dict[str, float]:
    """The training (or inference) run itself, once everything is set up."""
    from kerasrl.exception import EnvironmentException
    from kerasrl.trainers import TrainerController

    target = args.steps if args.inference else max(t.get_max_steps for t in trainers.values())
    report = _Report(trainers, n_agents, args.inference, target)
    minutes = args.save_every_minutes
    tc = report.controller = TrainerController(
        trainers, context.model_path, context.summaries_dir, f"{args.run_id}-0", args.save_freq,
        train=not args.inference, training_seed=context.seed, progress=report.progress,
        progress_freq=max(args.progress_every // n_agents, 1), save_every_seconds=60.0 * minutes if minutes else None,
        inference_steps=max(args.steps // n_agents, 1) if args.inference and args.steps else None,
        timers_path=os.path.join(args.results_dir, args.run_id, "timers.json"),
        **(env_params or EnvParameters()).controller_kwargs(args, context.model_path, context.seed))
    record_run(args, context, trainers)
    workers = getattr(args, "workers", 1)
    where = f" in {workers} worker processes" if workers > 1 else ""
    if getattr(args, "env_manager", "subprocess") == "ray":
        where = f" in {workers} Ray actor{'s' if workers > 1 else ''}"
    results = os.path.join(args.results_dir, args.run_id)
    hosts = getattr(next(iter(trainers.values()), None), "cluster", None)
    if hosts is not None:
        where += f", {hosts}"
        results = results if hosts.chief else "the chief's folder"
    print(f"kerasrl: PPO on {args.env} x{n_agents}{where}, seed {context.seed}, results in "
          f"{results} (set-up {report.start - start:.1f} s)", flush=True)
    report.resumed()
    try:
        tc.start_learning(manager)
    except EnvironmentException as e:
        if tc.train_model and tc.saved_steps:  # the controller checkpoints before an env error propagates
            step = max(tc.saved_steps.values())
            raise EnvironmentException(f"{e} The model was saved at step {step}; continue with --resume.") from e
        raise
    finally:
        report.close()
    result = {**report.summary(), "trace_s": report.trace_seconds(), "interrupted": float(tc.interrupted)}
    if tc.interrupted:
        print("Interrupted: the model was saved; continue with --resume.", flush=True)
    print(f"final steps={int(result['steps'])} mean_return={result['mean_return']:.3f} "
          f"steps_per_sec={result['steps_per_sec']:.1f} wall_s={result['wall_s']:.2f}", flush=True)
    for trainer in trainers.values():
        if hasattr(trainer, "summary_line"):
            print(f"kerasrl: {trainer.summary_line()}", flush=True)
    return result


def record_demo(args: argparse.Namespace, default_config: Optional[str] = None) -> dict[str, float]:
    """``--record-demo PATH --steps N --resume``: the run's restored policy acts for N steps (of
    its one behavior) and ``kerasrl.demos.record`` writes them to PATH; nothing is trained."""
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(message)s")
    _check_args(args)
    if not args.load:
        raise TrainerError("--record-demo records the policy of a trained run: add --resume (with its --run-id).")
    if args.steps is None:
        raise TrainerError("--record-demo needs --steps N, the number of steps to record.")
    check_multi_host_args(args)
    set_tf_threads(args.tf_threads)
    from kerasrl.demos import record

    context, manager, trainers, _ = _setup(argparse.Namespace(**{**vars(args), "inference": True}), default_config)
    try:
        if len(trainers) != 1:
            raise TrainerError(f"--record-demo records one behavior; the environment has {sorted(trainers)}.")
        name, trainer = next(iter(trainers.items()))
        record(manager, trainer.policy, args.steps, args.record_demo, behavior=name, seed=context.seed)
    finally:
        manager.close()
    print(f"Recorded {args.steps} steps of {name} (run {args.run_id}, step {trainer.get_step}) to {args.record_demo}.",
          flush=True)
    return {"interrupted": 0.0}


def quiet_tensorflow(debug: bool) -> None:
    """TensorFlow's C++ logs off unless ``--debug`` (before TF loads): errors that matter reach
    us as exceptions, and loading an XLA cache entry logs two spurious ones (``kerasrl.xla_cache``).
    oneDNN stays on (TensorFlow's default; its one-line banner is the price): it speeds up a CNN
    policy's update on CPU (benchmarks/README.md)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if debug else "3")


def main(argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None,
         default_config: Optional[str] = None) -> int:
    """Parse ``argv`` and train. A ``TrainerError`` or an environment's error is one line on
    stderr and exit status 2 (``--debug`` shows the traceback); Ctrl-C exits with 130."""
    from kerasrl.exception import EnvironmentException

    parser = parser or build_parser()
    args = parser.parse_args(argv)
    args.argv = [parser.prog, *(sys.argv[1:] if argv is None else argv)]
    quiet_tensorflow(args.debug)
    try:
        if args.record_demo is not None:
            result = record_demo(args, default_config=default_config)
        else:
            result = run_training(args, default_config=default_config)
    except (TrainerError, EnvironmentException) as e:
        if args.debug:
            raise
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted before training started; nothing was saved.", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_INTERRUPTED if result["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
