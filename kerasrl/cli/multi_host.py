"""Training on several hosts from the command line: the flags that cannot join such a run, the
hosts' agreement on the run, and the learners' strategy."""
from __future__ import annotations

import argparse
import random
import tempfile
import zlib
from typing import Any, Optional

from kerasrl.configs import config_source
from kerasrl.distribute import cluster, get_strategy, set_cluster, tf_config, warn_if_small
from kerasrl.envs.registry import BUILTIN_ENVS, DEFAULT_NUM_ENVS
from kerasrl.exception import TrainerError


def host_seed_offset(args: argparse.Namespace) -> int:
    """On several hosts, host ``i``'s copies are seeded after those of hosts ``0..i-1``, so that
    the hosts see different episodes."""
    hosts = cluster()
    return 0 if hosts is None else hosts.task_index * copies_per_host(args)


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
    hosts, index = getattr(args, "worker_hosts", None), getattr(args, "task_index", None)
    if (hosts is None) != (index is None):
        raise TrainerError("--worker-hosts and --task-index go together: every host gets the same --worker-hosts "
                           "and its own --task-index.")
    several = len([h for h in hosts.split(",") if h.strip()]) > 1 if hosts is not None else tf_config() is not None
    if not several:  # one host named: a plain run (a malformed entry is still an error)
        if hosts is not None and index is not None:
            set_cluster(hosts.split(","), index)
        return False
    for key, why in MULTI_HOST_CONFLICTS.items():
        value = getattr(args, key, None)
        if value not in (None, False):
            flag = "--resume" if key == "load" else "--" + key.replace("_", "-")
            raise TrainerError(f"{flag} cannot be combined with a multi-host run (--worker-hosts or TF_CONFIG): {why}.")
    if hosts is not None and index is not None:
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
        get_strategy(gpus=gpus, cpu_replicas=cpu_replicas)


def warn_small_policies(args: argparse.Namespace, trainers: dict[str, Any]) -> None:
    """Several GPUs for a small MLP policy: a warning that environment stepping dominates."""
    gpus = getattr(args, "gpus", None)
    if gpus and gpus > 1:
        for trainer in trainers.values():
            net = trainer.settings.network
            warn_if_small(net.hidden_units, net.num_layers, bool(trainer.spec.visual_observation_shapes), gpus)
