"""The loop over stacked mini-batches that every update runs, written once.

An update (PPO's epochs, behavioral cloning's passes over a demonstration, SAC's gradient
steps, a reward signal's model) is many gradient steps on small networks, where a compiled
call costs more than a step: so each update takes its mini-batches stacked along a leading
axis (``[batches, rows, ...]`` per field) and walks them in one ``tf.while_loop`` inside one
``tf.function`` (XLA-compiled where its learner chooses so). The learner gives the loop a
*step*, ``step(i, batches) -> metrics [size]``, one gradient step on mini-batch ``i``; the
loop returns the metrics summed over the steps (the learner divides: its own count, its own
arithmetic).

Under a ``tf.distribute`` strategy the loop runs in cross-replica context and each step is
one ``strategy.run`` on the replicas' slices of its mini-batch (``replica_inputs``): the
optimizers' cross-replica sum cannot sit inside a loop that runs in replica context
(TensorFlow refuses a ``merge_call`` there). Each replica sums its own metrics (its shares,
local sums over the global count) across steps, and one reduction across replicas ends the
update: one all-reduce per update, not per step (on several hosts each is a network round trip).

Both loops are plain ``tf.while_loop``\\ s without ``maximum_iterations`` (which XLA would need
at compile time): ``count`` may be a tensor, so that a stack padded to a fixed size (one
compiled shape per run) runs only its first ``count`` mini-batches.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import numpy as np
import tensorflow as tf

from kerasrl.distribute import distribute_minibatches

#: One gradient step: ``step(i, batches)`` on mini-batch ``i`` of ``batches`` (a replica's
#: slices under a strategy) returns its metric vector ``[size]`` (float32).
Step = Callable[[tf.Tensor, Any], tf.Tensor]
#: Run after each step (in cross-replica context under a strategy), once its metrics exist,
#: e.g. SAC's soft update of the target critics.
AfterStep = Callable[[], Any]


def stack_size(stacked: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """The number of mini-batches of ``stacked`` (the leading size of its fields)."""
    return tf.shape(next(iter(stacked.values())))[0]


def _while(count: tf.Tensor, body: Callable[[tf.Tensor, Any], tuple[tf.Tensor, Any]], zeros: Any) -> Any:
    """``body(i, totals)`` for ``i < count`` from ``totals = zeros``; the last totals."""
    _, totals = tf.while_loop(lambda i, _: i < count, body, (tf.constant(0), zeros))
    return totals


def sum_steps(step: Step, batches: Any, size: int, count: Optional[tf.Tensor] = None,
              after_step: Optional[AfterStep] = None) -> tf.Tensor:
    """Inside a ``tf.function``, on one device: ``Σ_{i < count} step(i, batches)``, a ``[size]``
    vector. ``count`` defaults to every stacked mini-batch of ``batches``; ``after_step`` runs
    after each step (ordered after its metrics)."""
    n = stack_size(batches) if count is None else count

    def body(i: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        metrics = step(i, batches)
        if after_step is not None:
            with tf.control_dependencies([metrics]):
                after_step()
        return i + 1, totals + metrics

    return _while(n, body, tf.zeros([size]))


def sum_replica_steps(strategy: tf.distribute.Strategy, step: Step, per_replica: Any, size: int,
                      count: Optional[tf.Tensor] = None, after_step: Optional[AfterStep] = None) -> tf.Tensor:
    """Inside a ``tf.function``, under ``strategy``: for each mini-batch ``i < count`` one
    ``strategy.run(step, (i, local))`` on the replicas' slices (``replica_inputs``), summed on
    each replica across steps, then once across replicas. ``count`` defaults to every stacked
    mini-batch; ``after_step`` runs in cross-replica context after each step."""
    n = stack_size(strategy.experimental_local_results(per_replica)[0]) if count is None else count

    def accumulate(i: tf.Tensor, local: Any, totals: tf.Tensor) -> tf.Tensor:
        return totals + step(i, local)

    def body(i: tf.Tensor, totals: Any) -> tuple[tf.Tensor, Any]:
        totals = strategy.run(accumulate, args=(i, per_replica, totals))
        if after_step is not None:
            with tf.control_dependencies(strategy.experimental_local_results(totals)):
                after_step()
        return i + 1, totals

    totals = _while(n, body, strategy.run(lambda: tf.zeros([size])))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, totals, axis=None)


def sum_minibatch_steps(strategy: tf.distribute.Strategy, step: Step, batches: Any, size: int,
                        count: Optional[tf.Tensor] = None, after_step: Optional[AfterStep] = None) -> tf.Tensor:
    """``sum_replica_steps`` under a strategy of several replicas, else ``sum_steps``: the
    summed ``[size]`` metrics of ``count`` steps (default: every stacked mini-batch)."""
    if strategy.num_replicas_in_sync > 1:
        return sum_replica_steps(strategy, step, batches, size, count, after_step)
    return sum_steps(step, batches, size, count, after_step)


def replica_inputs(strategy: tf.distribute.Strategy, stacked: Mapping[str, np.ndarray],
                   dtypes: Optional[Mapping[str, tf.DType]] = None) -> Any:
    """``stacked`` (fields ``[batches, rows, ...]``) as ``sum_minibatch_steps`` takes it: as it
    is on one device; under a strategy of several replicas, replica ``r``'s ``r``-th ``1/N`` of
    every mini-batch's rows (``kerasrl.distribute.distribute_minibatches``), in ``dtypes``
    (default: the arrays' own)."""
    if strategy.num_replicas_in_sync == 1:
        return stacked
    if dtypes is None:
        dtypes = {k: tf.as_dtype(np.asarray(v).dtype) for k, v in stacked.items()}
    return distribute_minibatches(strategy, stacked, dtypes)


class TracedCalls:
    """Calls of a ``tf.function`` through the concrete function traced for each input shape.

    A ``tf.function`` called with numpy arrays converts them through its input specs and looks
    its trace up from the arguments' types at every call: for an update of a small network
    that is a large share of the whole call. Once a shape has been traced (the first call,
    through the ``tf.function``, compiles it), later calls of that shape convert their
    arguments with ``tf.constant`` (``tf.convert_to_tensor`` without its dispatch layers) and
    call the cached concrete function: the same graph and the same compiled kernels, without
    the look-up. Arguments are nests of arrays and scalars (no ``tf.distribute`` values).
    """

    def __init__(self) -> None:
        self._concrete: dict[Any, Any] = {}

    def __call__(self, function: Any, key: Any, args: tuple[Any, ...]) -> Any:
        """``function(*args)``, for arguments of the shape ``key`` stands for."""
        tensors = _constants(args)
        concrete = self._concrete.get(key)
        if concrete is None:
            concrete = self._concrete[key] = function.get_concrete_function(*tensors)
        return concrete(*tensors)

    def clear(self) -> None:
        """Forget the concrete functions (the ``tf.function`` was rebuilt)."""
        self._concrete.clear()


def _constants(value: Any) -> Any:
    """``value`` (dicts, tuples and lists of arrays and scalars) with tensors for its leaves."""
    if isinstance(value, dict):
        return {key: _constants(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_constants(item) for item in value)
    return tf.constant(value)
