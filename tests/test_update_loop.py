"""The shared loop over stacked mini-batches (``kerasrl.common.update_loop``): it runs the first
``count`` mini-batches of a padded stack and never touches the rest, its sum divided by the
steps is the mean of the steps' metrics, ``after_step`` follows every step, eager, compiled and
XLA-compiled runs agree, and under a strategy of 2 logical CPUs (in a subprocess: the devices are
split before TensorFlow starts) it sums the replicas' shares to the one-device result."""
import numpy as np
import pytest
import tensorflow as tf
from test_distribute import run_script

from kerasrl.common.update_loop import TracedCalls, replica_inputs, stack_size, sum_minibatch_steps, sum_steps

K, ROWS = 6, 4


def stacked(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=(K, ROWS, 3)).astype(np.float32), "w": rng.uniform(size=(K, ROWS)).astype(np.float32)}


def metrics(i: tf.Tensor, batches: dict) -> tf.Tensor:
    """A step's metric vector: the weighted row sum of ``x`` and the weights' sum."""
    x, w = batches["x"][i], batches["w"][i]
    return tf.concat([tf.reduce_sum(x * w[:, None], axis=0), tf.reduce_sum(w)[None]], axis=0)


def expected(data: dict[str, np.ndarray], count: int) -> np.ndarray:
    return np.sum([np.r_[(data["x"][i] * data["w"][i][:, None]).sum(0), data["w"][i].sum()] for i in range(count)], 0)


def test_runs_count_steps_of_a_padded_stack_and_ignores_the_rest():
    data = stacked()
    data["x"][4:] = np.nan  # padding: any step on it would make the sums NaN
    steps = tf.Variable(0)

    def step(i, batches):
        steps.assign_add(1)
        return metrics(i, batches)

    totals = tf.function(lambda b, n: sum_steps(step, b, 4, count=n), autograph=False)(data, tf.constant(4))
    np.testing.assert_allclose(totals.numpy(), expected(data, 4), rtol=1e-6)
    assert int(steps.numpy()) == 4


def test_without_a_count_every_stacked_minibatch_runs_and_the_sum_over_steps_is_their_mean():
    data = stacked(1)
    per_step = [metrics(tf.constant(i), data).numpy() for i in range(K)]
    totals = tf.function(lambda b: sum_steps(metrics, b, 4), autograph=False)(data)
    np.testing.assert_allclose(totals.numpy() / K, np.mean(per_step, axis=0), rtol=1e-6)
    assert int(stack_size({k: tf.constant(v) for k, v in data.items()})) == K


def test_after_step_follows_each_step():
    data = stacked(2)
    running, seen, calls = tf.Variable(tf.zeros([4])), tf.Variable(tf.zeros([4])), tf.Variable(0)

    def step(i, batches):
        m = metrics(i, batches)
        with tf.control_dependencies([running.assign_add(m)]):
            return tf.identity(m)

    def after():
        calls.assign_add(1)
        return seen.assign(running)  # the running sum including this step's metrics

    totals = tf.function(lambda b: sum_steps(step, b, 4, count=tf.constant(5), after_step=after), autograph=False)(data)
    assert int(calls.numpy()) == 5
    np.testing.assert_array_equal(seen.numpy(), running.numpy())
    np.testing.assert_allclose(totals.numpy(), expected(data, 5), rtol=1e-6)


@pytest.mark.parametrize("how", ["tf.function", "xla"])
def test_eager_and_compiled_runs_agree(how):
    data = stacked(3)
    strategy = tf.distribute.get_strategy()  # the default: one device, ``sum_steps``

    def run(b, n):
        return sum_minibatch_steps(strategy, metrics, b, 4, n)

    eager = run({k: tf.constant(v) for k, v in data.items()}, tf.constant(5))
    compiled = tf.function(run, jit_compile=how == "xla", autograph=False)(data, tf.constant(5))
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-6)
    np.testing.assert_allclose(eager.numpy(), expected(data, 5), rtol=1e-6)


def test_traced_calls_run_the_functions_trace_for_each_shape():
    traces = []

    def scaled(batch, scale):
        traces.append(1)
        return {"sum": tf.reduce_sum(batch["x"]) * scale, "rows": tf.shape(batch["x"])[0]}

    function = tf.function(scaled, autograph=False)
    calls = TracedCalls()
    small, large = {"x": np.ones((2, 3), np.float32)}, {"x": np.ones((4, 3), np.float32)}
    function(small, np.float32(2.0))  # the first call of a shape traces it
    out = calls(function, "small", (small, np.float32(3.0)))
    assert out["sum"].numpy() == 18.0 and out["rows"].numpy() == 2 and len(traces) == 1
    assert calls(function, "large", (large, np.float32(1.0)))["sum"].numpy() == 12.0 and len(traces) == 2
    assert calls(function, "small", ({"x": np.full((2, 3), 2, np.float32)}, np.float32(1.0)))["sum"].numpy() == 12.0
    assert len(traces) == 2  # no retrace for new values of a known shape
    calls.clear()
    assert calls(function, "small", (small, np.float32(1.0)))["sum"].numpy() == 6.0 and len(traces) == 2


def test_one_device_inputs_are_the_stack_itself():
    data = stacked()
    assert replica_inputs(tf.distribute.get_strategy(), data) is data


MIRRORED = """
from kerasrl.common.update_loop import replica_inputs, sum_minibatch_steps, sum_steps
rng = np.random.default_rng(0)
data = {"x": rng.normal(size=(6, 4, 3)).astype(np.float32), "w": rng.uniform(size=(6, 4)).astype(np.float32)}
data["x"][5:] = np.nan  # padding

def step(i, b):
    x, w = b["x"][i], b["w"][i]  # this replica's rows: its share is a local sum
    return tf.concat([tf.reduce_sum(x * w[:, None], axis=0), tf.reduce_sum(w)[None]], axis=0)

one = tf.function(lambda b, n: sum_steps(step, b, 4, n), autograph=False)(data, tf.constant(5)).numpy()
with strategy.scope():
    calls = tf.Variable(0)
per_replica = replica_inputs(strategy, data)
local = strategy.experimental_local_results(per_replica)
assert len(local) == N and all(v["x"].shape == (6, 4 // N, 3) for v in local)
fn = tf.function(lambda b, n: sum_minibatch_steps(strategy, step, b, 4, n, after_step=lambda: calls.assign_add(1)),
                 autograph=False)
two = fn(per_replica, tf.constant(5)).numpy()
np.testing.assert_allclose(two, one, rtol=1e-5)
assert int(calls.numpy()) == 5
every = tf.function(lambda b: sum_minibatch_steps(strategy, step, b, 4), autograph=False)(per_replica).numpy()
assert np.isnan(every[:3]).all()  # without a count every stacked mini-batch runs, the padding too
print("UPDATE_LOOP_OK")
"""


def test_under_a_strategy_the_replicas_shares_sum_to_the_one_device_result():
    run_script(MIRRORED, 2, "UPDATE_LOOP_OK")
