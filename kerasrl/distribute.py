"""Which devices the learners train on: one device, several GPUs or several logical CPUs.

Only learners enter a strategy (ML-Agents 0.9's multi-GPU PPO, fixed as ML-Agents #2362 meant it): a
trainer takes :func:`learner_strategy` once, builds its learner — model *and* optimizer —
inside ``strategy.scope()`` and runs each update as one compiled call in which every
mini-batch is one ``strategy.run`` (synchronous data parallelism; gradients summed across
replicas of losses normalised by the global row count). Acting stays on one device.

Logical CPU devices (``cpu_replicas``) must be configured before TensorFlow initialises its
devices, so :func:`get_strategy` is called at the entry points (the CLI, ``kerasrl.PPO``)
before anything runs a TensorFlow op.

Several hosts (``TF_CONFIG``): :func:`multi_worker_strategy`, and :class:`Cluster`, the all-gather
with which ``kerasrl.trainers.multi_host`` gives every host the same global batch.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from kerasrl.exception import TrainerError

logger = logging.getLogger("kerasrl")

#: Hidden units × layers under which a policy counts as small: several GPUs then wait for
#: the environments (a warning says so).
SMALL_POLICY_UNITS = 512

_strategy: Optional[tf.distribute.Strategy] = None
_cluster: Optional["Cluster"] = None


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


def warn_if_small(hidden_units: int, num_layers: int, visual: bool, n_gpus: int) -> bool:
    """Warn that environment stepping dominates when several GPUs train a small MLP policy."""
    if n_gpus > 1 and not visual and hidden_units * num_layers <= SMALL_POLICY_UNITS:
        logger.warning("%d GPUs for a %d×%d MLP policy: the update is a small part of a step, environment stepping "
                       "dominates; one device is as fast.", n_gpus, num_layers, hidden_units)
        return True
    return False


# ----------------------------------------------------------------------------------------------
# Several hosts: MultiWorkerMirroredStrategy from TF_CONFIG (beyond ML-Agents 0.9, which trains on one host)

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
    all joined within ``join_timeout_s``. Later, a worker that dies makes the others' collectives
    fail (the strategy's health check aborts them within about a minute); one that hangs while
    its process still answers is waited for.
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
        # No CommunicationOptions timeout: TensorFlow then parks a thread per collective op for
        # the whole timeout (thousands per minute of training). A worker that dies is found by
        # the strategy's own health check (a peer ping every 30 s), which aborts the collectives.
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
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


class Cluster:
    """This process's place in a multi-host run, and the one collective a training loop needs:
    an all-gather of row tables in worker order (TensorFlow's collective ops under the strategy,
    no transport of our own). Every worker must call :meth:`gather_tables` at the same moments."""

    def __init__(self, strategy: tf.distribute.Strategy) -> None:
        spec = strategy.cluster_resolver.cluster_spec().as_dict()
        self.strategy = strategy
        self.hosts = len(spec.get("chief", [])) + len(spec.get("worker", []))
        self.task_index = int(strategy.cluster_resolver.task_id)
        self.chief = is_chief(strategy)
        #: Replicas per host (local GPUs, else 1): the gathered copies of one host's value.
        self.local_replicas = int(strategy.num_replicas_in_sync) // self.hosts

        def gather(flat: tf.Tensor) -> tf.Tensor:
            return strategy.gather(strategy.run(tf.identity, args=(flat,)), axis=0)

        # One traced function for every length: eager gathers would retrace on every call.
        self._gather = tf.function(gather, input_signature=[tf.TensorSpec([None], tf.int32)])

    def __str__(self) -> str:
        return f"worker {self.task_index} of {self.hosts}"

    def all_gather(self, values: np.ndarray) -> np.ndarray:
        """Every host's int32 vector (all the same length), stacked ``[hosts, length]`` in worker order."""
        flat = np.ascontiguousarray(values, dtype=np.int32).reshape(-1)
        out = self._gather(tf.constant(flat)).numpy().reshape(-1, flat.size)
        return out[:: self.local_replicas]

    def chief_value(self, value: int) -> int:
        """The chief's ``value`` (an int32), on every host."""
        return int(self.all_gather(np.array([value]))[0, 0])

    def check_same(self, items: Mapping[str, int]) -> None:
        """A one-line error naming the first of ``items`` (int32 values) on which the hosts
        differ: every host must start the same run (only its index differs)."""
        values = self.all_gather(np.array(list(items.values()), np.int64).astype(np.int32))
        for k, name in enumerate(items):
            if (values[:, k] != values[0, k]).any():
                each = ", ".join(f"worker {h}: {v}" for h, v in enumerate(values[:, k].tolist()))
                raise TrainerError(f"{self}: the workers disagree on {name} ({each}); start every worker with the same "
                                   "command line and files (only --task-index differs).")

    def gather_tables(self, tables: Sequence[Mapping[str, np.ndarray]],
                      layouts: Sequence[Mapping[str, tuple[np.dtype, tuple[int, ...]]]]
                      ) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
        """Every host's rows of each table (fields of equal length), concatenated in worker order;
        also the row counts ``[hosts, tables]``. ``layouts`` give each field's dtype and row shape
        (the same on every host), so a host with no rows takes part too. Two collectives: the
        counts, then every table's bytes padded to the longest host's."""
        counts = self.all_gather(np.array([_rows(t, lay) for t, lay in zip(tables, layouts)], np.int32))
        most = counts.max(axis=0)
        local = [_pack(t, lay, int(m)) for t, lay, m in zip(tables, layouts, most)]
        raw = np.concatenate([b.reshape(-1) for b in local]) if local else np.zeros(0, np.uint8)
        raw = np.concatenate([raw, np.zeros(-len(raw) % 4, np.uint8)])
        hosts = self.all_gather(raw.view(np.int32)).view(np.uint8)
        out = []
        offset = 0
        for k, (block, layout) in enumerate(zip(local, layouts)):
            parts = [host[offset:offset + block.size].reshape(block.shape)[:count]
                     for host, count in zip(hosts, counts[:, k])]
            out.append(_unpack(np.concatenate(parts), layout))
            offset += block.size
        return out, counts


def _row_bytes(layout: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> list[tuple[str, np.dtype, tuple, int]]:
    return [(k, np.dtype(d), tuple(s), np.dtype(d).itemsize * int(np.prod(s, dtype=np.int64))) for k, (d, s) in
            layout.items()]


def _rows(table: Mapping[str, np.ndarray], layout: Mapping[str, Any]) -> int:
    lengths = {len(table[k]) for k in layout if k in table}
    if len(lengths) > 1:
        raise TrainerError(f"The fields of a gathered table differ in length: {sorted(lengths)}.")
    return lengths.pop() if lengths else 0


def _pack(table: Mapping[str, np.ndarray], layout: Mapping[str, Any], rows: int) -> np.ndarray:
    """The table as bytes ``[rows, row_bytes]`` (fields side by side), zero-padded to ``rows``."""
    n = _rows(table, layout)
    cols = [np.ascontiguousarray(np.asarray(table[k], d).reshape(n, *s)).reshape(n, -1).view(np.uint8)
            if n else np.zeros((0, width), np.uint8) for k, d, s, width in _row_bytes(layout)]
    packed = np.concatenate(cols, axis=1) if cols else np.zeros((n, 0), np.uint8)
    return np.concatenate([packed, np.zeros((rows - n, packed.shape[1]), np.uint8)])


def _unpack(packed: np.ndarray, layout: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out, start = {}, 0
    for k, d, s, width in _row_bytes(layout):
        out[k] = np.ascontiguousarray(packed[:, start:start + width]).view(d).reshape(len(packed), *s)
        start += width
    return out


def cluster() -> Optional[Cluster]:
    """The multi-host cluster this process trains in (the learners' strategy is a
    ``MultiWorkerMirroredStrategy`` over two or more hosts), else ``None``."""
    global _cluster
    strategy = learner_strategy()
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None
    if _cluster is None or _cluster.strategy is not strategy:
        _cluster = Cluster(strategy)
    return _cluster if _cluster.hosts > 1 else None
