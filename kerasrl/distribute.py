"""Which devices the learners train on: one device, several GPUs or several logical CPUs.

Only learners enter a strategy (behaviour.md §9.3, fixed as ML-Agents #2362 meant it): a
trainer takes :func:`learner_strategy` once, builds its learner — model *and* optimizer —
inside ``strategy.scope()`` and runs each update as one compiled call in which every
mini-batch is one ``strategy.run`` (synchronous data parallelism; gradients summed across
replicas of losses normalised by the global row count). Acting stays on one device.

Logical CPU devices (``cpu_replicas``) must be configured before TensorFlow initialises its
devices, so :func:`get_strategy` is called at the entry points (the CLI, ``kerasrl.PPO``)
before anything runs a TensorFlow op.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from kerasrl.exception import TrainerError

logger = logging.getLogger("kerasrl")

#: Hidden units × layers under which a policy counts as small: several GPUs then wait for
#: the environments (a warning says so).
SMALL_POLICY_UNITS = 512

_strategy: Optional[tf.distribute.Strategy] = None


def _check_count(name: str, value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TrainerError(f"{name} must be a whole number >= 1, got {value!r}.")
    return value


def split_cpu(replicas: int) -> list[str]:
    """Split the CPU into ``replicas`` logical devices; returns their names.

    Raises a one-line ``TrainerError`` once TensorFlow has initialised its devices (virtual
    devices cannot change after that), unless the split already in place is the same.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    wanted = [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
    try:
        tf.config.set_logical_device_configuration(cpu, wanted)
    except RuntimeError as e:
        current = tf.config.get_logical_device_configuration(cpu) or [None]
        if len(current) != replicas:
            raise TrainerError(
                f"cpu_replicas={replicas}: TensorFlow has already initialised its devices ({len(current)} CPU "
                "device(s)); choose the strategy before any TensorFlow operation runs (at the start of the "
                "program, or in a new process).") from e
    return [d.name for d in tf.config.list_logical_devices("CPU")][:replicas]


def _gpu_devices(gpus: int) -> list[str]:
    present = tf.config.list_physical_devices("GPU")
    if gpus > len(present):
        raise TrainerError(
            f"gpus={gpus}: this machine has {len(present)} GPU(s) visible to TensorFlow. Use at most {len(present)}, "
            "or (to test data parallelism without GPUs) cpu_replicas=N / --cpu-replicas N, which splits the CPU "
            "into N logical devices.")
    return [f"/gpu:{i}" for i in range(gpus)]


def get_strategy(gpus: Optional[int] = None, cpu_replicas: Optional[int] = None) -> tf.distribute.Strategy:
    """The learners' strategy, also remembered for :func:`learner_strategy`.

    ``gpus=N > 1``: ``MirroredStrategy`` over the first N GPUs (NCCL all-reduce); ``gpus=1``:
    ``OneDeviceStrategy`` on GPU 0; ``cpu_replicas=N > 1``: ``MirroredStrategy`` over N
    logical CPU devices (correctness, not speed); neither: the default strategy (one device).
    """
    global _strategy
    if tf_config() is not None:  # several hosts (TF_CONFIG, or --worker-hosts/--task-index)
        _strategy = multi_worker_strategy()
        return _strategy
    gpus, cpu_replicas = _check_count("gpus", gpus), _check_count("cpu_replicas", cpu_replicas)
    if gpus is not None and cpu_replicas is not None:
        raise TrainerError("Choose gpus or cpu_replicas, not both.")
    if gpus is not None:
        devices = _gpu_devices(gpus)
        strategy = (tf.distribute.MirroredStrategy(devices) if gpus > 1
                    else tf.distribute.OneDeviceStrategy(devices[0]))
    elif cpu_replicas is not None and cpu_replicas > 1:
        strategy = tf.distribute.MirroredStrategy(split_cpu(cpu_replicas),
                                                  cross_device_ops=tf.distribute.ReductionToOneDevice())
    else:
        strategy = tf.distribute.get_strategy()
    _strategy = strategy
    return strategy


def learner_strategy() -> tf.distribute.Strategy:
    """The strategy learners are built and updated under: the one :func:`get_strategy` chose
    last in this process, else TensorFlow's default (one device)."""
    return _strategy if _strategy is not None else tf.distribute.get_strategy()


def set_strategy(strategy: Optional[tf.distribute.Strategy]) -> None:
    """Build the learners made from now on under ``strategy`` (None: one device), e.g. one of
    several strategies over subsets of the devices that one :func:`split_cpu` made."""
    global _strategy
    _strategy = strategy


def replicas(strategy: Optional[tf.distribute.Strategy] = None) -> int:
    """Number of replicas that share each mini-batch."""
    return int((strategy or learner_strategy()).num_replicas_in_sync)


def check_batch_size(batch_size: int, sequence_length: int, n_replicas: int, where: str = "") -> None:
    """``batch_size`` is the global mini-batch: each replica gets ``batch_size / n_replicas`` rows
    of whole sequences, so the number of sequences per mini-batch must split evenly."""
    if n_replicas <= 1:
        return
    sequences = max(int(batch_size) // int(sequence_length), 1)
    if batch_size % n_replicas or sequences % n_replicas:
        unit = f"sequences of {sequence_length} rows ({sequences})" if sequence_length > 1 else "rows"
        raise TrainerError(
            f"{where}batch_size {batch_size} cannot be split over {n_replicas} replicas: the number of {unit} per "
            f"mini-batch must be a multiple of {n_replicas}.")


def distribute_minibatches(strategy: tf.distribute.Strategy, stacked: Mapping[str, np.ndarray],
                           dtypes: Mapping[str, tf.DType]) -> Any:
    """Per-replica slices of stacked mini-batches (each field ``[n_batches, rows, ...]``): replica
    ``r`` takes the ``r``-th ``1/N`` of every mini-batch's rows (callers keep whole sequences
    together: ``check_batch_size``). A field stacked per sequence (``memory``) splits the same way."""
    n = int(strategy.num_replicas_in_sync)

    def value_fn(ctx: tf.distribute.experimental.ValueContext) -> dict[str, tf.Tensor]:
        r = ctx.replica_id_in_sync_group
        out = {}
        for k, v in stacked.items():
            width = v.shape[1] // n
            out[k] = tf.convert_to_tensor(v[:, r * width:(r + 1) * width], dtype=dtypes[k])
        return out

    return strategy.experimental_distribute_values_from_function(value_fn)


def run_minibatches(strategy: tf.distribute.Strategy, replica_step: Callable[[tf.Tensor, Any], tf.Tensor],
                    per_replica: Any, size: int) -> tf.Tensor:
    """Inside a ``tf.function``: for each mini-batch ``i`` one ``strategy.run(replica_step, (i, local))``
    whose ``[size]`` output (partial sums: local sums over the *global* count) is summed across
    replicas and mini-batches. The loop runs in cross-replica context: a loop inside ``strategy.run``
    cannot hold the optimizer's cross-replica sum (TensorFlow refuses a ``merge_call`` there)."""
    first = next(iter(strategy.experimental_local_results(per_replica)[0].values()))
    n = tf.shape(first)[0]

    def body(i: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        out = strategy.run(replica_step, args=(i, per_replica))
        return i + 1, totals + strategy.reduce(tf.distribute.ReduceOp.SUM, out, axis=None)

    _, totals = tf.while_loop(lambda i, _: i < n, body, (tf.constant(0), tf.zeros([size])))
    return totals


def warn_if_small(hidden_units: int, num_layers: int, visual: bool, n_gpus: int) -> bool:
    """Warn that environment stepping dominates when several GPUs train a small MLP policy."""
    if n_gpus > 1 and not visual and hidden_units * num_layers <= SMALL_POLICY_UNITS:
        logger.warning("%d GPUs for a %d×%d MLP policy: the update is a small part of a step, environment stepping "
                       "dominates; one device is as fast.", n_gpus, num_layers, hidden_units)
        return True
    return False


# ----------------------------------------------------------------------------------------------
# Several hosts: MultiWorkerMirroredStrategy from TF_CONFIG (behaviour beyond the seed, issue 15)

#: How long a worker waits for every other worker to join before it gives up (seconds).
JOIN_TIMEOUT_S = 300.0


def tf_config() -> Optional[dict]:
    """The cluster that ``TF_CONFIG`` describes (``{"cluster": {"worker": [...]}, "task": {...}}``),
    checked; ``None`` when it is unset or names a single worker."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
        workers = list(config["cluster"]["worker"]) + list(config["cluster"].get("chief", []))
        task_type, index = config["task"]["type"], int(config["task"]["index"])
    except (ValueError, KeyError, TypeError) as e:
        raise TrainerError(f"TF_CONFIG is not a cluster description ({type(e).__name__}: {e}): expected "
                           '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}.') from e
    if task_type not in config["cluster"] or not 0 <= index < len(config["cluster"][task_type]):
        raise TrainerError(f"TF_CONFIG: task {task_type} {index} is not in its cluster {config['cluster']}.")
    return config if len(workers) > 1 else None


def set_cluster(worker_hosts: Sequence[str], task_index: int) -> None:
    """Describe the cluster in ``TF_CONFIG`` (what ``--worker-hosts``/``--task-index`` do): worker
    ``task_index`` of ``worker_hosts`` (``host:port`` each, the same list on every host)."""
    hosts = [h.strip() for h in worker_hosts if h.strip()]
    bad = [h for h in hosts if ":" not in h or not h.rsplit(":", 1)[1].isdigit()]
    if not hosts or bad:
        raise TrainerError(f"--worker-hosts must be host:port entries separated by commas, got {','.join(worker_hosts)!r}.")
    if not 0 <= task_index < len(hosts):
        raise TrainerError(f"--task-index {task_index} is not an index of the {len(hosts)} --worker-hosts.")
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": task_index}})


def multi_worker_strategy(join_timeout_s: float = JOIN_TIMEOUT_S) -> tf.distribute.Strategy:
    """``MultiWorkerMirroredStrategy`` over the hosts of ``TF_CONFIG`` (every local GPU, else the
    CPU, of each), once every worker has joined (one all-reduce).

    TensorFlow waits for the other workers inside the strategy's constructor, in C++ that holds
    the interpreter (no Python thread, signal handler or exception runs meanwhile); so a watchdog
    process prints a one-line error naming the cluster and kills this process when they have not
    all joined within ``join_timeout_s``.
    """
    config = tf_config()
    if config is None:
        raise TrainerError("A multi-host learner needs TF_CONFIG (or --worker-hosts and --task-index) naming at "
                           "least two workers.")
    task = config["task"]
    message = (f"kerasrl: error: worker {task['index']} of the cluster {config['cluster']} waited {join_timeout_s:g} s "
               "for the other workers to join; start every worker with the same host list (and check the ports).")
    watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(float(join_timeout_s)), message],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=float(join_timeout_s))
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        joined = tf.function(lambda: strategy.reduce(tf.distribute.ReduceOp.SUM,
                                                      strategy.run(lambda: tf.constant(1.0)), axis=None))()
    finally:
        watchdog.kill()
        watchdog.wait()
    if int(joined.numpy()) != strategy.num_replicas_in_sync:
        raise TrainerError(f"Only {int(joined.numpy())} of {strategy.num_replicas_in_sync} replicas answered the "
                           "join all-reduce.")
    return strategy


#: The join watchdog: after the timeout, if the worker still runs, say why and kill it.
_WATCHDOG = """
import os, signal, sys, time
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
time.sleep(timeout)
try:
    os.kill(pid, 0)
except OSError:
    sys.exit(0)
sys.stderr.write(message + "\\n")
sys.stderr.flush()
os.kill(pid, signal.SIGKILL)
"""


def is_chief(strategy: Optional[tf.distribute.Strategy] = None) -> bool:
    """Whether this process writes checkpoints and summaries: always, except a non-chief worker
    of a multi-host strategy (task 0 of ``worker`` is the chief when the cluster has no ``chief``)."""
    strategy = strategy or learner_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, index = resolver.task_type, resolver.task_id
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return not has_chief and task_type == "worker" and index == 0
