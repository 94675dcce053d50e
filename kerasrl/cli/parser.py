"""``kerasrl-learn``'s flags, and the checks on them that need nothing but the flags."""
from __future__ import annotations

import argparse
import os
import shlex
from typing import NoReturn

from kerasrl import __version__
from kerasrl.cli.run_folder import check_run_name
from kerasrl.configs import available_configs
from kerasrl.envs.registry import BUILTIN_ENVS, DEFAULT_NUM_ENVS, is_unity_env
from kerasrl.exception import TrainerError
from kerasrl.settings.run_context import MAX_SEED, check_seed

#: ``--seed``'s value that draws a seed.
DRAW_SEED = -1
#: ``--save-freq`` and ``--keep-checkpoints`` when neither the command line nor the config sets them.
DEFAULT_SAVE_FREQ = 100_000
DEFAULT_KEEP = 5


def _seed_flag(text: str) -> int:
    """``--seed``'s type: :func:`check_seed`, or -1 (draw one); a bad value is argparse's one line (exit 2)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if seed == DRAW_SEED:
        return seed
    try:
        return check_seed(seed)
    except TrainerError:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_SEED}, or -1 to draw one; got {seed}") from None


def _check_not_blank(flag: str, value: str, what: str) -> None:
    """A blank (empty or whitespace-only) name would write into the working folder or into a
    folder named by spaces: a one-line error instead, asking for ``what``."""
    if not value.strip():
        raise TrainerError(f"{flag} {shlex.quote(value)} is blank: name {what}.")


def _check_parent_exists(flag: str, path: str) -> None:
    """``path``'s folder must exist: kerasrl does not create missing folders for an output file."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        state = "is not a folder" if os.path.lexists(folder) else "does not exist"
        raise TrainerError(f"{flag} {path}: the folder {folder} {state} (kerasrl does not create it).")


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors (an unknown flag, a bad value) are one line on stderr,
    pointing to ``--help`` instead of printing the usage, with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_environment_flags(parser: argparse.ArgumentParser) -> None:
    """The environment, its copies and the workers (processes or Ray actors) that step them."""
    g = parser.add_argument_group("environment")
    g.add_argument("--env", default="CartPole-v1",
                   help=f"Gymnasium id, one of {', '.join(BUILTIN_ENVS)}, a Unity player (path, with or without "
                        "its extension) or 'editor' (press Play in the Unity Editor)")
    g.add_argument("--num-envs", type=int, default=None,
                   help=f"parallel copies of a Gymnasium env (agents of one behavior; default {DEFAULT_NUM_ENVS}); "
                        "the built-in environments have one agent")
    g.add_argument("--workers", type=int, default=1,
                   help="processes stepping the environment copies (default 1: in this process); the --num-envs "
                        "copies are split evenly over them, and a built-in environment gets one copy per worker")
    g.add_argument("--env-manager", choices=("subprocess", "ray"), default="subprocess",
                   help="where the --workers step: worker processes on this machine (default), or Ray actors on "
                        "this machine or a Ray cluster (pip install \"kerasrl[ray]\")")
    g.add_argument("--ray-address", default=None,
                   help="the Ray cluster to join (ray.init(address=...); 'auto': the one this machine is in); "
                        "default: a local Ray started on demand")
    g.add_argument("--ray-restart-workers", action="store_true",
                   help="replace a Ray actor that dies and continue (its agents' unfinished trajectories are "
                        "dropped); default: save and stop with an error naming the actor and its node")


def _add_unity_flags(parser: argparse.ArgumentParser) -> None:
    """Unity scenes: ``--env PATH`` (a player) or ``--env editor``, as ``mlagents-learn`` takes them."""
    g = parser.add_argument_group("Unity scenes (--env PATH_TO_PLAYER or --env editor)")
    g.add_argument("--base-port", type=int, default=None,
                   help="port of the first player (players get consecutive ports; default 5005, the Editor 5004)")
    g.add_argument("--no-graphics", action="store_true", help="start players with -nographics -batchmode")
    g.add_argument("--timeout-wait", type=float, default=60.0,
                   help="seconds to wait for a player to connect, and for each of its steps (default 60)")
    g.add_argument("--time-scale", type=float, default=20.0, help="the players' time scale (default 20)")
    g.add_argument("--quality-level", type=int, default=5, help="the players' quality level (default 5)")
    g.add_argument("--width", type=int, default=84, help="the players' window width (default 84)")
    g.add_argument("--height", type=int, default=84, help="the players' window height (default 84)")
    g.add_argument("--target-frame-rate", type=int, default=-1,
                   help="the players' target frame rate (default -1: unlimited)")
    g.add_argument("--capture-frame-rate", type=int, default=60, help="the players' capture frame rate (default 60)")
    g.add_argument("--num-areas", type=int, default=1,
                   help="training areas per player, made by the scene's TrainingAreaReplicator (default 1)")
    g.add_argument("--max-lifetime-restarts", type=int, default=10,
                   help="restarts of the players that crash or hang, in the whole run (default 10; -1: no limit; "
                        "0: a failure ends the run, saving it)")
    g.add_argument("--restarts-rate-limit-n", type=int, default=1,
                   help="restarts allowed within --restarts-rate-limit-period-s (default 1; -1: no rate limit)")
    g.add_argument("--restarts-rate-limit-period-s", type=int, default=60,
                   help="the period of --restarts-rate-limit-n, in seconds (default 60)")
    g.add_argument("--env-args", nargs=argparse.REMAINDER, default=None,
                   help="everything after it is passed to each player (so it comes last)")


def _add_run_flags(parser: argparse.ArgumentParser) -> None:
    """How long the run trains, where it writes, and how it starts, resumes or only acts."""
    g = parser.add_argument_group("run and checkpoints")
    g.add_argument("--steps", type=int, default=None,
                   help="environment steps to train for (all copies counted); overrides max_steps")
    g.add_argument("--seed", type=_seed_flag, default=DRAW_SEED,
                   help=f"random seed (0 to {MAX_SEED}); -1 draws one")
    g.add_argument("--run-id", default="ppo", help="name of the run's folder under --results-dir")
    g.add_argument("--results-dir", default="results", help="where models and summaries go")
    g.add_argument("--save-freq", type=int, default=None,
                   help="checkpoint every n environment steps (all copies counted, from the run's start; default: the "
                        f"smallest checkpoint_interval the config sets, else {DEFAULT_SAVE_FREQ})")
    g.add_argument("--save-every-minutes", type=float, default=10.0,
                   help="also checkpoint after this many minutes without one (0: off)")
    g.add_argument("--keep-checkpoints", type=int, default=None,
                   help=f"checkpoints kept (default: the largest keep_checkpoints the config sets, else {DEFAULT_KEEP})")
    g.add_argument("--resume", "--load", dest="load", action="store_true", help="continue from the latest checkpoint")
    g.add_argument("--force", action="store_true",
                   help="start afresh in an existing run folder, deleting it first (only a kerasrl run folder); "
                        "with --record-demo: overwrite an existing demo file")
    g.add_argument("--initialize-from", metavar="RUN_ID", default=None,
                   help="start this new run from the newest checkpoint of run RUN_ID (in --results-dir), step 0")
    g.add_argument("--train", action="store_true",
                   help="accepted for ML-Agents' command lines: training is the default (see --inference)")
    g.add_argument("--inference", action="store_true",
                   help="run the trained policy of --run-id without training (for --steps steps, else until Ctrl-C)")
    g.add_argument("--record-demo", metavar="PATH", default=None,
                   help="with --resume and --steps N: run the trained policy of --run-id for N steps and write them "
                        "as a demonstration file (no training)")


def _add_speed_flags(parser: argparse.ArgumentParser) -> None:
    """Progress output, TensorFlow's threads and the XLA cache."""
    g = parser.add_argument_group("progress and speed")
    g.add_argument("--progress-every", type=int, default=10000, help="print progress every n environment steps")
    g.add_argument("--tf-threads", type=int, default=1,
                   help="TensorFlow intra-op threads (1 is fastest for small MLPs; 0 = TensorFlow's default)")
    g.add_argument("--xla-cache", metavar="DIR", default=None,
                   help="keep the XLA-compiled update in DIR, so that the next run of the same command loads it "
                        "instead of compiling (default: $KERASRL_XLA_CACHE, else ~/.cache/kerasrl/xla; 'off': no "
                        "cache)")
    g.add_argument("--threaded", action="store_true",
                   help="every PPO behavior updates in a thread of its own while acting goes on (threaded: true; "
                        "the data of an update is one update old)")


def _add_parameter_flags(parser: argparse.ArgumentParser) -> None:
    """Curricula and samplers of the environment's reset parameters."""
    g = parser.add_argument_group("environment parameters")
    g.add_argument("--curriculum", metavar="DIR", default=None,
                   help="folder of per-behavior curriculum JSON files, or one YAML file of behavior -> curriculum "
                        "(ML-Agents 0.14-0.16): lessons of environment parameters")
    g.add_argument("--lesson", type=int, default=None,
                   help="start every curriculum at this lesson (default: 0, or the saved lesson with --resume)")
    g.add_argument("--sampler", metavar="FILE", default=None,
                   help="YAML file of environment-parameter samplers with their resampling-interval")


def _add_distribution_flags(parser: argparse.ArgumentParser) -> None:
    """Training the learner on several devices or hosts."""
    g = parser.add_argument_group("distribution")
    g.add_argument("--torch-device", default=None,
                   help="mlagents-learn's device as TensorFlow's: cpu (no GPU), cuda (the default), cuda:N (GPU N only)")
    g.add_argument("--gpus", type=int, default=None,
                   help="train the learner on N GPUs (MirroredStrategy; 1: one GPU); acting stays on one device")
    g.add_argument("--cpu-replicas", type=int, default=None,
                   help="train the learner on N logical CPU devices (MirroredStrategy; for testing data parallelism "
                        "without GPUs)")
    g.add_argument("--worker-hosts", metavar="HOST:PORT,...", default=None,
                   help="train on several hosts (MultiWorkerMirroredStrategy): the same list on every host, each "
                        "with its own --task-index; each host steps its own --num-envs copies and every update "
                        "trains on all of them (default: TF_CONFIG if set, else one host)")
    g.add_argument("--task-index", type=int, default=None,
                   help="this host's index in --worker-hosts (0: the chief, which writes the results)")


def build_parser(prog: str = "kerasrl-learn", config_required: bool = True) -> argparse.ArgumentParser:
    """The parser of ``kerasrl-learn`` (``config_required=False``: the config is ``--config``, as in ``examples/``)."""
    p = OneLineParser(prog=prog, description="Train PPO with kerasrl on a built-in or Gymnasium environment.")
    if config_required:
        p.add_argument("trainer_config_path", nargs="?", default=None,
                       help="ML-Agents trainer config (YAML in today's behaviors: layout or the 0.9-0.15 layout of "
                            "default + per-behavior sections), or the name of a shipped one: "
                            f"{', '.join(available_configs())}; left out: the defaults for every behavior")
    else:
        p.add_argument("--config", dest="trainer_config_path", default=None, help="trainer config YAML")
    _add_environment_flags(p)
    _add_unity_flags(p)
    _add_run_flags(p)
    _add_speed_flags(p)
    _add_parameter_flags(p)
    _add_distribution_flags(p)
    p.add_argument("--debug", action="store_true", help="debug logging")
    p.add_argument("--version", action="version", version=f"kerasrl {__version__}",
                   help="print kerasrl's version and exit")
    return p


def check_args(args: argparse.Namespace) -> None:
    for flag, value, low in (("--num-envs", args.num_envs, 1), ("--workers", getattr(args, "workers", 1), 1),
                             ("--steps", args.steps, 1), ("--save-freq", args.save_freq, 1),
                             ("--keep-checkpoints", getattr(args, "keep_checkpoints", None), 1),
                             ("--num-areas", getattr(args, "num_areas", 1), 1),
                             ("--save-every-minutes", args.save_every_minutes, 0)):
        if value is not None and value < low:
            raise TrainerError(f"{flag} must be >= {low}, got {value}.")
    if getattr(args, "num_areas", 1) != 1 and not is_unity_env(getattr(args, "env", "")):
        raise TrainerError(f"--num-areas {args.num_areas}: training areas are a Unity scene's (its "
                           "TrainingAreaReplicator); --env is not one.")
    seed = getattr(args, "seed", DRAW_SEED)
    if seed != DRAW_SEED:  # the parser checked its own; this checks a namespace made elsewhere
        check_seed(seed)
    if getattr(args, "progress_every", 1) < 1:
        raise TrainerError(f"--progress-every must be >= 1 (environment steps between progress lines), "
                           f"got {args.progress_every}.")
    if getattr(args, "tf_threads", 0) < 0:
        raise TrainerError(f"--tf-threads must be >= 0 (0: TensorFlow's default), got {args.tf_threads}.")
    if getattr(args, "lesson", None) is not None and args.lesson < 0:
        raise TrainerError(f"--lesson must be >= 0 (lessons count from 0), got {args.lesson}.")
    if getattr(args, "timeout_wait", 1.0) <= 0:
        raise TrainerError(f"--timeout-wait must be > 0 seconds, got {args.timeout_wait}.")
    if getattr(args, "time_scale", 1.0) <= 0:
        raise TrainerError(f"--time-scale must be > 0, got {args.time_scale}.")
    base_port = getattr(args, "base_port", None)
    if base_port is not None and not 1 <= base_port <= 65535:
        raise TrainerError(f"--base-port must be a port number (1-65535), got {base_port}.")
    _check_not_blank("--results-dir", args.results_dir, "the folder that holds the run folders (default: results)")
    check_run_name("--run-id", args.run_id)
    if args.initialize_from is not None:
        check_run_name("--initialize-from", args.initialize_from)
    if args.force and (args.load or args.inference) and getattr(args, "record_demo", None) is None:
        raise TrainerError("--force starts a run afresh; it cannot be combined with --resume or --inference.")
    if args.train and args.inference:
        raise TrainerError("--train and --inference contradict each other.")
    if args.initialize_from is not None and (args.load or args.inference):
        raise TrainerError("--initialize-from starts a new run; use it without --resume and --inference.")
    record_demo = getattr(args, "record_demo", None)
    if record_demo is not None:
        _check_not_blank("--record-demo", record_demo, "the demonstration file to write")
        _check_parent_exists("--record-demo", record_demo)
