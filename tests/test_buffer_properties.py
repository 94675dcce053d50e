"""Hypothesis property tests: the Cython buffer against the list-based reference."""
from __future__ import annotations

import os
import tempfile
from functools import partial
from typing import Any, Callable

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from buffer_reference import RefAgentBuffer, RefBuffer, RefField
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kerasrl.buffer import AgentBuffer, AgentBufferField, Buffer, BufferException

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.uint8, np.int8, np.float16,
          np.complex64]
PADS = [0, 1, -1, 2, 0.5, -1.5, 0.1, 3.3, True, False, float("nan"), float("inf"),
        np.float32(0.5), np.float64(-2.0), np.int64(3), np.int8(1), np.uint64(1), np.bool_(True)]

dtypes = st.sampled_from(DTYPES).map(np.dtype)
row_shapes = st.lists(st.integers(0, 3), max_size=2).map(tuple)
pads = st.sampled_from(PADS)
FAST = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_same(a: Any, b: Any, exact_nan: bool = False) -> None:
    """Same dtype, shape and bytes; NaNs only need to be NaN in both (their sign and payload
    depend on numpy's loop selection) unless ``exact_nan``."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if exact_nan or a.dtype.kind not in "fc":
        assert a.tobytes() == b.tobytes(), (a, b)
        return
    real = np.dtype(a.dtype.char.lower()) if a.dtype.kind == "c" else a.dtype
    fa, fb = a.reshape(-1).view(real), b.reshape(-1).view(real)
    nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    assert np.array_equal(nan_a, nan_b), (a, b)
    assert fa[~nan_a].tobytes() == fb[~nan_b].tobytes(), (a, b)


def assert_field_same(f: AgentBufferField, r: RefField) -> None:
    assert len(f) == len(r)
    assert f.dtype == r.dtype and f.row_shape == r.row_shape
    assert_same(f.array, r.array)
    pf, pr = f.padding_value, r.padding_value
    assert pf is pr or pf == pr or (pf != pf and pr != pr)


def same_outcome(core: Callable[[], Any], ref: Callable[[], Any]) -> tuple[Any, Any]:
    """Run both; they must both succeed or both raise BufferException."""
    try:
        out_core, err_core = core(), None
    except BufferException as e:
        out_core, err_core = None, e
    try:
        out_ref, err_ref = ref(), None
    except BufferException as e:
        out_ref, err_ref = None, e
    assert (err_core is None) == (err_ref is None), (err_core, err_ref)
    return out_core, out_ref


@st.composite
def rows_for(draw: Any, dtype: np.dtype, shape: tuple, n: int | None = None,
             odd: bool = True) -> Any:
    """Rows of ``dtype``/``shape`` (sometimes of another layout, or as Python data)."""
    if odd and draw(st.integers(0, 9)) == 0:
        dtype = draw(dtypes)
    if odd and draw(st.integers(0, 9)) == 0:
        shape = draw(row_shapes)
    full = shape if n is None else (n,) + shape
    arr = draw(hnp.arrays(dtype, full))
    if draw(st.integers(0, 4)) == 0 and arr.size:
        return arr.tolist()
    return arr


# ---------------------------------------------------------------------- one field
@st.composite
def field_programs(draw: Any) -> tuple:
    dtype, shape = draw(dtypes), draw(row_shapes)
    ops = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["append", "append", "append", "extend", "set", "reset",
                                     "pad"]))
        if kind == "append":
            ops.append((kind, draw(rows_for(dtype, shape)), draw(pads)))
        elif kind in ("extend", "set"):
            ops.append((kind, draw(rows_for(dtype, shape, draw(st.integers(0, 6)))), None))
        elif kind == "pad":
            ops.append((kind, draw(pads), None))
        else:
            ops.append((kind, None, None))
    return ops


@FAST
@given(program=field_programs(), batch_size=st.none() | st.integers(-1, 8),
       training_length=st.none() | st.integers(0, 6), sequential=st.booleans())
def test_field_matches_reference(program, batch_size, training_length, sequential):
    f, r = AgentBufferField(name="x"), RefField(name="x")
    for kind, value, pv in program:
        if kind == "append":
            same_outcome(partial(f.append, value, pv), partial(r.append, value, pv))
        elif kind == "extend":
            same_outcome(partial(f.extend, value), partial(r.extend, value))
        elif kind == "set":
            same_outcome(partial(f.set, value), partial(r.set, value))
        elif kind == "pad":
            f.padding_value = r.padding_value = value
        else:
            f.reset_field()
            r.reset_field()
        assert_field_same(f, r)
    out_f, out_r = same_outcome(
        lambda: f.get_batch(batch_size, training_length, sequential),
        lambda: r.get_batch(batch_size, training_length, sequential),
    )
    if out_f is not None:
        assert_same(out_f, out_r)
    for start, end in [(0, None), (1, 3), (-2, None), (5, 2)]:
        assert_same(f.copy_rows(start, end), r._stack(r[start:end]))


@FAST
@given(dtype=dtypes, shape=row_shapes, n=st.integers(1, 9), pv=pads,
       training_length=st.integers(1, 5), data=st.data())
def test_padding_matches_numpy(dtype, shape, n, pv, training_length, data):
    rows = data.draw(hnp.arrays(dtype, (n,) + shape))
    f, r = AgentBufferField(rows), RefField()
    r.extend(rows)
    f.padding_value = r.padding_value = pv
    out_f, out_r = same_outcome(lambda: f.get_batch(training_length=training_length),
                                lambda: r.get_batch(training_length=training_length))
    if out_f is not None:
        assert_same(out_f, out_r)


@FAST
@given(dtype=dtypes, shape=row_shapes, n=st.integers(1, 9), pv=pads, training_length=st.integers(1, 5),
       data=st.data())
def test_pad_end_is_the_front_padding_moved_behind(dtype, shape, n, pv, training_length, data):
    rows = data.draw(hnp.arrays(dtype, (n,) + shape))
    f = AgentBufferField(rows)
    f.padding_value = pv
    try:
        front = f.get_batch(training_length=training_length)
    except BufferException:  # a padding value the dtype cannot hold (-1 for uint8) is refused at the end too
        with pytest.raises(BufferException):
            f.get_batch(training_length=training_length, pad_end=True)
        return
    end = f.get_batch(training_length=training_length, pad_end=True)
    npad = len(front) - n
    assert_same(end, np.concatenate([front[npad:], front[:npad]]))
    assert_same(end[:n], f.copy_rows(0, None))


# ---------------------------------------------------------------------- whole buffers
@st.composite
def schemas(draw: Any) -> dict:
    n = draw(st.integers(1, 3))
    return {f"k{i}": (draw(dtypes), draw(row_shapes), draw(pads)) for i in range(n)}


AGENTS = st.lists(st.integers(0, 4), min_size=1, max_size=4, unique=True)


class BufferMachine(RuleBasedStateMachine):
    """Drive a Buffer and a RefBuffer with the same calls; they must stay identical."""

    @initialize(schema=schemas())
    def setup(self, schema: dict) -> None:
        self.schema = schema
        self.core = Buffer()
        self.ref = RefBuffer()

    @rule(data=st.data(), ids=AGENTS)
    def append_batch(self, data: Any, ids: list) -> None:
        keys = data.draw(st.lists(st.sampled_from(sorted(self.schema)), min_size=1, unique=True))
        fields = {k: data.draw(rows_for(self.schema[k][0], self.schema[k][1], len(ids),
                                        odd=data.draw(st.integers(0, 5)) == 0))
                  for k in keys}
        pvs = {k: self.schema[k][2] for k in keys if data.draw(st.booleans())}
        agent_ids = np.array(ids) if data.draw(st.booleans()) else ids
        same_outcome(lambda: self.core.append_batch(agent_ids, fields, pvs),
                     lambda: self.ref.append_batch(ids, fields, pvs))

    @rule(data=st.data(), agent=st.integers(0, 4))
    def append_one(self, data: Any, agent: int) -> None:
        key = data.draw(st.sampled_from(sorted(self.schema)))
        dtype, shape, pv = self.schema[key]
        row = data.draw(rows_for(dtype, shape, odd=data.draw(st.integers(0, 5)) == 0))
        same_outcome(lambda: self.core[agent][key].append(row, pv),
                     lambda: self.ref[agent][key].append(row, pv))

    @rule(data=st.data(), agent=st.integers(0, 4), n=st.integers(0, 4))
    def set_field(self, data: Any, agent: int, n: int) -> None:
        key = data.draw(st.sampled_from(sorted(self.schema)))
        dtype, shape, _ = self.schema[key]
        rows = data.draw(rows_for(dtype, shape, n, odd=data.draw(st.integers(0, 3)) == 0))
        same_outcome(lambda: self.core[agent][key].set(rows),
                     lambda: self.ref[agent][key].set(rows))

    @rule(agent=st.integers(0, 4), drop=st.booleans())
    def replace_agent(self, agent: int, drop: bool) -> None:
        if agent not in self.ref:
            return
        if drop:
            del self.core[agent]
            del self.ref[agent]
        else:
            self.core[agent] = AgentBuffer()
            self.ref[agent] = RefAgentBuffer()

    @rule(agent=st.none() | st.integers(0, 4), batch_size=st.none() | st.integers(0, 3),
          training_length=st.none() | st.integers(1, 4), data=st.data())
    def to_update(self, agent: int | None, batch_size: int | None,
                  training_length: int | None, data: Any) -> None:
        keys = None
        if data.draw(st.booleans()):
            keys = data.draw(st.lists(st.sampled_from(sorted(self.schema)), min_size=1,
                                      unique=True))
        if agent is None:
            same_outcome(
                lambda: self.core.append_all_agent_batch_to_update_buffer(
                    keys, batch_size, training_length),
                lambda: self.ref.append_all_agent_batch_to_update_buffer(
                    keys, batch_size, training_length))
        else:
            same_outcome(
                lambda: self.core.append_update_buffer(agent, keys, batch_size, training_length),
                lambda: self.ref.append_update_buffer(agent, keys, batch_size, training_length))

    @rule(length=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
    def shuffle(self, length: int, seed: int) -> None:
        same_outcome(
            lambda: self.core.update_buffer.shuffle(length, rng=np.random.default_rng(seed)),
            lambda: self.ref.update_buffer.shuffle(length, rng=np.random.default_rng(seed)))

    @rule(max_length=st.integers(0, 12), length=st.integers(1, 4))
    def truncate(self, max_length: int, length: int) -> None:
        self.core.truncate_update_buffer(max_length, length)
        self.ref.truncate_update_buffer(max_length, length)

    @rule(batch_size=st.integers(0, 8), length=st.integers(1, 3), seed=st.integers(0, 100))
    def sample(self, batch_size: int, length: int, seed: int) -> None:
        out_c, out_r = same_outcome(
            lambda: self.core.update_buffer.sample_mini_batch(
                batch_size, length, np.random.default_rng(seed)),
            lambda: self.ref.update_buffer.sample_mini_batch(
                batch_size, length, np.random.default_rng(seed)))
        if out_c is not None:
            assert set(out_c) == set(out_r)
            for k in out_c:
                assert_field_same(out_c[k], out_r[k])

    @rule(start=st.integers(-3, 10), size=st.integers(0, 6))
    def mini_batch(self, start: int, size: int) -> None:
        out_c = self.core.update_buffer.make_mini_batch(start, start + size)
        out_r = self.ref.update_buffer.make_mini_batch(start, start + size)
        assert set(out_c) == set(out_r)
        for k in out_c:
            assert_same(out_c[k], out_r[k])

    @rule(which=st.sampled_from(["local", "update", "agent"]), agent=st.integers(0, 4))
    def reset(self, which: str, agent: int) -> None:
        if which == "local":
            self.core.reset_local_buffers()
            self.ref.reset_local_buffers()
        elif which == "update":
            self.core.reset_update_buffer()
            self.ref.reset_update_buffer()
        elif agent in self.ref:
            self.core[agent].reset_agent()
            self.ref[agent].reset_agent()

    @invariant()
    def same_contents(self) -> None:
        if not hasattr(self, "core"):
            return
        assert set(self.core) == set(self.ref)
        pairs = [(self.core.update_buffer, self.ref.update_buffer)]
        pairs += [(self.core[a], self.ref[a]) for a in self.ref]
        for c, r in pairs:
            assert list(c) == list(r)
            for k in r:
                assert_field_same(c[k], r[k])


TestBufferMachine = BufferMachine.TestCase
TestBufferMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow,
                                                             HealthCheck.data_too_large])


# ---------------------------------------------------------------------- structural properties
def id_buffer(n: int, extra: bool = True) -> AgentBuffer:
    """A buffer whose fields are all functions of the row id."""
    ab = AgentBuffer()
    ids = np.arange(n)
    ab["id"].extend(ids)
    if extra:
        ab["obs"].extend(np.stack([ids, -ids, 2 * ids], axis=1).astype(np.float32))
        ab["flag"].extend(ids % 3 == 0)
        ab["v"].extend(ids.astype(np.float64) / 7)
    return ab


def check_aligned(ab: AgentBuffer) -> np.ndarray:
    ids = ab["id"].array
    assert_same(ab["obs"].array, np.stack([ids, -ids, 2 * ids], axis=1).astype(np.float32))
    assert_same(ab["flag"].array, ids % 3 == 0)
    assert_same(ab["v"].array, ids.astype(np.float64) / 7)
    return ids


def check_whole_sequences(ids: np.ndarray, length: int) -> None:
    for s in range(len(ids) // length):
        seq = ids[s * length:(s + 1) * length]
        assert seq[0] % length == 0
        assert_same(seq, np.arange(seq[0], seq[0] + length))


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 60), length=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_shuffle_keeps_rows_aligned_and_sequences_whole(n, length, seed):
    ab = id_buffer(n)
    ab.shuffle(length, rng=np.random.default_rng(seed))
    ids = check_aligned(ab)
    assert sorted(ids.tolist()) == list(range(n))
    check_whole_sequences(ids, length)
    tail = n - n % length
    assert_same(ids[tail:], np.arange(tail, n))


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 60), length=st.integers(1, 9), batch=st.integers(0, 40),
       seed=st.integers(0, 2**32 - 1))
def test_sampling_returns_whole_sequences(n, length, batch, seed):
    ab = id_buffer(n)
    if n < length and batch >= length:
        try:
            ab.sample_mini_batch(batch, length, np.random.default_rng(seed))
        except BufferException:
            return
        raise AssertionError("sampling from too short a buffer must fail")
    mb = ab.sample_mini_batch(batch, length, np.random.default_rng(seed))
    if batch < length:
        assert set(mb) == set(ab) and all(len(f) == 0 for f in mb.values())
        return
    ids = check_aligned(mb)
    assert len(ids) == (batch // length) * length
    check_whole_sequences(ids, length)
    assert (ids < (n // length) * length).all()


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 80), max_length=st.integers(0, 100), length=st.integers(1, 9))
def test_truncation_keeps_newest_multiple_of_sequence_length(n, max_length, length):
    b = Buffer()
    b.update_buffer = id_buffer(n)
    b.truncate_update_buffer(max_length, length)
    keep = max_length - max_length % length
    ids = check_aligned(b.update_buffer)
    assert_same(ids, np.arange(n - keep if n > keep else 0, n))


@settings(max_examples=60, deadline=None)
@given(n_agents=st.integers(1, 6), steps=st.integers(1, 20), length=st.integers(1, 5),
       data=st.data())
def test_append_batch_equals_per_agent_appends(n_agents, steps, length, data):
    ids = data.draw(st.lists(st.integers(-5, 50), min_size=n_agents, max_size=n_agents,
                             unique=True))
    batched, single = Buffer(), Buffer()
    for _ in range(steps):
        obs = data.draw(hnp.arrays(np.float32, (n_agents, 3)))
        done = data.draw(hnp.arrays(np.bool_, (n_agents,)))
        batched.append_batch(ids, {"obs": obs, "done": done}, {"obs": 1})
        for i, a in enumerate(ids):
            single[a]["obs"].append(obs[i], 1)
            single[a]["done"].append(done[i])
    batched.append_all_agent_batch_to_update_buffer(training_length=length)
    single.append_all_agent_batch_to_update_buffer(training_length=length)
    for k in ("obs", "done"):
        assert_same(batched.update_buffer[k].array, single.update_buffer[k].array)


# ---------------------------------------------------------------------- files
SAVE_DTYPES = st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.bool_]).map(np.dtype)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), n_fields=st.integers(1, 4), n=st.integers(0, 30))
def test_save_load_round_trip_is_bit_exact(data, n_fields, n):
    ab = AgentBuffer()
    for i in range(n_fields):
        dtype, shape = data.draw(SAVE_DTYPES), data.draw(row_shapes)
        ab[f"f{i}"].set(data.draw(hnp.arrays(dtype, (n,) + shape)))
        ab[f"f{i}"].padding_value = data.draw(st.sampled_from([0, 1, 0.5]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "buffer.hdf5")
        ab.save_to_file(path)
        assert os.listdir(tmp) == ["buffer.hdf5"]
        loaded = AgentBuffer()
        loaded.load_from_file(path)
    assert set(loaded) == set(ab)
    for k in ab:
        assert loaded[k].dtype == ab[k].dtype and loaded[k].row_shape == ab[k].row_shape
        assert_same(loaded[k].array, ab[k].array, exact_nan=True)
        assert loaded[k].padding_value == ab[k].padding_value
    ref = RefAgentBuffer()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ref.hdf5")
        ab.save_to_file(path)
        ref.load_from_file(path)
    for k in ab:
        if len(ab[k]):
            assert_same(ref[k].array, ab[k].array, exact_nan=True)
