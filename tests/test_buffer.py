"""Example tests for kerasrl.buffer: ML-Agents 0.9's semantics on small cases, our fixes, and the errors."""
from __future__ import annotations

import glob
import io
import os
import pickle

import h5py
import numpy as np
import pytest

import kerasrl.buffer as kbuf
from kerasrl.buffer import AgentBuffer, AgentBufferField, Buffer, BufferException


def field_of(values, padding_value=0) -> AgentBufferField:
    f = AgentBufferField()
    for v in values:
        f.append(np.asarray(v, dtype=np.float32), padding_value)
    return f


# ---------------------------------------------------------------------- AgentBufferField
def test_dtype_inference():
    f = AgentBufferField()
    f.append(1.5)
    assert f.dtype == np.float32 and f.row_shape == ()
    f = AgentBufferField()
    f.append([1.0, 2.0])
    assert f.dtype == np.float32 and f.row_shape == (2,)
    f = AgentBufferField()
    f.append(3)
    assert f.dtype == np.int64
    f = AgentBufferField()
    f.append(True)
    assert f.dtype == np.bool_
    f = AgentBufferField()
    f.append(np.zeros(3, np.float64))
    assert f.dtype == np.float64 and f.row_shape == (3,)
    f = AgentBufferField()
    f.append(np.float64(2.0))
    assert f.dtype == np.float64
    f = AgentBufferField()
    f.extend([np.zeros(2, np.int16), np.ones(2, np.int16)])
    assert f.dtype == np.int16 and len(f) == 2
    f = AgentBufferField()
    f.append(np.zeros(2, ">f4"))
    assert f.dtype == np.dtype("<f4") if np.little_endian else np.dtype(">f4")


def test_python_float_into_float64_field_is_not_rounded_to_float32():
    f = AgentBufferField()
    f.append(np.float64(0.0))
    f.append(0.1)
    assert f.array[1] == 0.1


def test_append_extend_set_and_access():
    f = AgentBufferField()
    for i in range(5):
        f.append(np.array([i, -i], np.float32))
    f.extend(np.arange(6, dtype=np.float32).reshape(3, 2))
    assert len(f) == 8
    assert f[0].tolist() == [0, 0] and f[-1].tolist() == [4, 5]
    assert f[1:3].tolist() == [[1, -1], [2, -2]]
    assert f[np.array([0, 7])].tolist() == [[0, 0], [4, 5]]
    assert np.asarray(f).shape == (8, 2) and np.array(f).flags.writeable
    assert [r.tolist() for r in f][:2] == [[0, 0], [1, -1]]
    f.set([[1.0, 1.0]])
    assert f.array.tolist() == [[1, 1]]
    f.set(np.zeros((2, 3), np.int32))
    assert f.dtype == np.int32 and f.row_shape == (3,)
    f.reset_field()
    assert len(f) == 0 and f.dtype is None
    f.append(np.zeros(4, np.bool_))
    assert f.row_shape == (4,)


def test_views_are_read_only_and_stable():
    f = field_of([[1, 2], [3, 4], [5, 6]])
    view = f.array
    with pytest.raises(ValueError):
        view[0, 0] = 9
    before = view.copy()
    ab = AgentBuffer()
    ab["x"] = f
    ab.shuffle(1, rng=0)
    f.set([[0, 0]])
    f.reset_field()
    f.append(np.array([7, 7], np.float32))
    assert np.array_equal(view, before)


def test_padding_value_is_overwritten_by_each_append():
    f = AgentBufferField()
    f.append(1.0, padding_value=1)
    assert f.padding_value == 1
    f.append(2.0)
    assert f.padding_value == 0


def test_get_batch_sequential_examples():
    f = field_of(range(10), padding_value=1)
    assert f.get_batch().tolist() == list(range(10))
    assert f.get_batch(batch_size=2, training_length=4).tolist() == list(range(2, 10))
    # 3 * 4 > 10: every row, preceded by 4 - 10 % 4 = 2 rows of last * padding_value
    assert f.get_batch(batch_size=3, training_length=4).tolist() == [9, 9] + list(range(10))
    assert f.get_batch(training_length=4).tolist() == [9, 9] + list(range(10))
    # leftover 0: no padding
    assert f.get_batch(training_length=5).tolist() == list(range(10))
    assert f.get_batch(batch_size=1, training_length=5).tolist() == list(range(5, 10))
    assert f.get_batch(training_length=None).tolist() == list(range(10))
    assert f.get_batch(batch_size=0, training_length=3).shape == (0,)
    f.append(np.float32(-3.0), padding_value=0)
    padded = f.get_batch(training_length=4)
    assert padded[0] == 0 and np.signbit(padded[0])  # last row * 0 = -0.0
    with pytest.raises(BufferException, match="too large"):
        f.get_batch(batch_size=4, training_length=4)


def test_get_batch_windows_examples():
    f = field_of(range(6))
    assert f.get_batch(batch_size=2, training_length=3, sequential=False).tolist() == [
        2, 3, 4, 3, 4, 5]
    assert f.get_batch(training_length=3, sequential=False).tolist() == [
        0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5]
    assert f.get_batch(training_length=7, sequential=False).shape == (0,)
    assert f.get_batch(batch_size=6, training_length=1, sequential=False).tolist() == list(range(6))
    with pytest.raises(BufferException, match="too large"):
        f.get_batch(batch_size=5, training_length=3, sequential=False)


def test_get_batch_bad_arguments():
    f = field_of(range(4))
    with pytest.raises(BufferException):
        f.get_batch(training_length=0)
    with pytest.raises(BufferException):
        f.get_batch(batch_size=-1)
    assert AgentBufferField().get_batch().shape == (0,)
    with pytest.raises(BufferException):
        AgentBufferField().get_batch(batch_size=1)


def test_padding_with_masks_and_ints():
    f = AgentBufferField()
    f.append(np.array([1, 0, 1], np.float32), padding_value=1)
    f.append(np.array([0, 1, 1], np.float32), padding_value=1)
    assert f.get_batch(training_length=3).tolist() == [[0, 1, 1], [1, 0, 1], [0, 1, 1]]
    g = AgentBufferField()
    g.extend(np.array([[3, 4]], np.int32))
    g.padding_value = 0.5
    assert g.get_batch(training_length=2).tolist() == [[1, 2], [3, 4]]
    h = AgentBufferField()
    h.append(True, padding_value=0)
    assert h.get_batch(training_length=2).tolist() == [False, True]


@pytest.mark.parametrize(
    "first, bad",
    [
        (np.zeros(2, np.float32), np.zeros(3, np.float32)),
        (np.zeros(2, np.float32), np.zeros((2, 1), np.float32)),
        (np.zeros(2, np.float32), np.zeros(2, np.int64)),
        (np.zeros(2, np.int32), np.zeros(2, np.float32)),
        (np.zeros(2, np.bool_), np.zeros(2, np.float32)),
        (np.zeros(2, np.int32), np.zeros(2, np.bool_)),
        (1.0, 1),
        (1, 1.0),
        (True, 1.0),
    ],
)
def test_append_mismatch_names_field_and_both_layouts(first, bad):
    ab = AgentBuffer()
    f = ab["obs"]
    f.append(first, padding_value=1)
    f.append(first, padding_value=1)
    snapshot = np.array(f.array)
    with pytest.raises(BufferException) as err:
        f.append(bad, padding_value=0)
    msg = str(err.value)
    assert "'obs'" in msg
    assert str(np.shape(bad)) in msg and str(np.shape(first)) in msg
    assert str(np.asarray(bad).dtype) in msg and str(f.dtype) in msg
    assert np.array_equal(f.array, snapshot) and f.padding_value == 1
    with pytest.raises(BufferException):
        f.extend([bad, bad])
    assert np.array_equal(f.array, snapshot)


def test_unsupported_dtype():
    f = AgentBufferField()
    with pytest.raises(BufferException):
        f.append(np.array(["a", "b"]))
    with pytest.raises(BufferException):
        f.append([1, "x", None])
    with pytest.raises(BufferException):
        f.extend(3.0)
    assert len(f) == 0


def test_extend_with_zero_rows_is_a_no_op():
    f = field_of([[1, 2]])
    f.extend([])
    f.extend(np.zeros((0, 5), np.int8))
    assert len(f) == 1


def test_pickle_field_and_buffers():
    b = Buffer()
    b.append_batch([1, 2], {"x": np.ones((2, 3), np.float32), "d": np.array([True, False])},
                   {"x": 1})
    b.update_buffer["v"].extend([1.0, 2.0])
    c = pickle.loads(pickle.dumps(b))
    assert type(c) is Buffer and set(c) == {1, 2}
    assert np.array_equal(c[2]["x"].array, b[2]["x"].array) and c[2]["x"].padding_value == 1
    assert c.update_buffer["v"].array.tolist() == [1.0, 2.0]
    c.append_batch([1, 2], {"x": np.zeros((2, 3), np.float32), "d": np.array([True, True])})
    assert len(c[1]["x"]) == 2 and len(b[1]["x"]) == 1


# ---------------------------------------------------------------------- AgentBuffer
def test_agent_buffer_basics():
    ab = AgentBuffer()
    ab["a"].append(1.0)
    assert isinstance(ab["a"], AgentBufferField) and ab["a"].name == "a"
    ab["b"] = np.arange(3)
    assert isinstance(ab["b"], AgentBufferField) and len(ab["b"]) == 3
    ab.reset_agent()
    assert len(ab["a"]) == 0 and len(ab["b"]) == 0 and set(ab) == {"a", "b"}


def test_check_length():
    ab = AgentBuffer()
    ab["a"].extend([1.0, 2.0])
    ab["b"].extend([1.0, 2.0])
    ab["c"].extend([1.0])
    assert ab.check_length(["a"]) and ab.check_length(["missing"]) and ab.check_length([])
    assert ab.check_length(["a", "b"])
    assert not ab.check_length(["a", "c"])
    assert not ab.check_length(["a", "missing"])
    assert "missing" not in ab


def test_shuffle_unequal_lengths():
    ab = AgentBuffer()
    ab["a"].extend([1.0, 2.0])
    ab["b"].extend([1.0])
    with pytest.raises(BufferException,
                       match="Unable to shuffle if the fields are not of same length"):
        ab.shuffle(1)


def test_shuffle_keeps_trailing_partial_sequence_and_is_seedable():
    def make() -> AgentBuffer:
        ab = AgentBuffer()
        ab["id"].extend(np.arange(11))
        ab["obs"].extend(np.arange(22, dtype=np.float32).reshape(11, 2))
        return ab

    a, b = make(), make()
    a.shuffle(3, rng=np.random.default_rng(5))
    b.shuffle(3, rng=5)
    assert np.array_equal(a["id"].array, b["id"].array)
    ids = a["id"].array
    assert sorted(ids.tolist()) == list(range(11))
    assert ids[9:].tolist() == [9, 10]
    for s in range(3):
        seq = ids[3 * s:3 * s + 3]
        assert seq[0] % 3 == 0 and seq.tolist() == list(range(seq[0], seq[0] + 3))
    assert np.array_equal(a["obs"].array[:, 0], 2 * ids)
    kbuf.seed(11)
    c = make()
    c.shuffle(3)
    kbuf.seed(11)
    d = make()
    d.shuffle(3)
    assert np.array_equal(c["id"].array, d["id"].array)


def test_make_mini_batch_returns_numpy_arrays():
    ab = AgentBuffer()
    ab["x"].extend(np.arange(10, dtype=np.float32))
    ab["m"].extend(np.ones((10, 2), np.int8))
    mb = ab.make_mini_batch(2, 5)
    assert isinstance(mb["x"], np.ndarray) and mb["x"].tolist() == [2, 3, 4]
    assert mb["m"].dtype == np.int8 and mb["m"].shape == (3, 2) and mb["m"].flags.c_contiguous
    mb["x"][0] = 100
    assert ab["x"].array[2] == 2
    assert ab.make_mini_batch(8, 20)["x"].tolist() == [8, 9]


def test_sample_mini_batch_whole_sequences():
    ab = AgentBuffer()
    ab["id"].extend(np.arange(20))
    ab["v"].extend(np.arange(20, dtype=np.float64) * 0.5)
    mb = ab.sample_mini_batch(8, 4, rng=np.random.default_rng(0))
    assert isinstance(mb, AgentBuffer) and len(mb["id"]) == 8
    ids = mb["id"].array.reshape(2, 4)
    for seq in ids:
        assert seq[0] % 4 == 0 and seq.tolist() == list(range(seq[0], seq[0] + 4))
    assert np.array_equal(mb["v"].array, mb["id"].array * 0.5)
    again = ab.sample_mini_batch(8, 4, rng=0)
    assert np.array_equal(again["id"].array, mb["id"].array)
    unequal = AgentBuffer()
    unequal["x"].extend([1.0, 2.0])
    unequal["y"].extend([1.0])
    with pytest.raises(BufferException, match="not of same length"):
        unequal.sample_mini_batch(4)
    with pytest.raises(BufferException):
        ab.sample_mini_batch(21, 21)
    assert len(ab.sample_mini_batch(3, 4)["id"]) == 0


def test_as_arrays_and_to_dict():
    ab = AgentBuffer()
    ab["x"].extend(np.arange(4, dtype=np.float32))
    ab["y"].extend(np.ones((4, 3), np.int32))
    d = ab.to_dict()
    assert set(d) == {"x", "y"} and d["y"].shape == (4, 3) and d["y"].flags.c_contiguous
    assert list(ab.as_arrays(["x"])) == ["x"]


def test_append_step_and_extend_fields_are_atomic():
    ab = AgentBuffer()
    ab.append_step({"a": 1.0, "m": np.ones(2, np.float32)}, {"m": 1})
    assert ab["m"].padding_value == 1 and ab["a"].padding_value == 0
    with pytest.raises(BufferException):
        ab.append_step({"a": 2.0, "m": np.ones(3, np.float32)})
    assert len(ab["a"]) == 1 and len(ab["m"]) == 1
    ab.extend_fields({"a": [2.0, 3.0], "m": np.zeros((2, 2), np.float32)})
    assert len(ab["a"]) == 3 and len(ab["m"]) == 3
    with pytest.raises(BufferException):
        ab.extend_fields({"a": [2.0], "m": np.zeros((1, 2), np.int32)})
    assert len(ab["a"]) == 3


# ---------------------------------------------------------------------- Buffer
def test_buffer_creates_agents_and_update_buffer():
    b = Buffer()
    assert isinstance(b[7], AgentBuffer) and isinstance(b.update_buffer, AgentBuffer)
    assert isinstance(b[("env", 3)], AgentBuffer)
    with pytest.raises(BufferException):
        b[1] = {"x": 1}


def test_append_update_buffer_and_errors():
    b = Buffer()
    for t in range(5):
        b[0]["a"].append(float(t))
        b[0]["b"].append(np.array([t, t], np.float32), padding_value=1)
    b.append_update_buffer(0, training_length=2)
    assert b.update_buffer["a"].array.tolist() == [0, 0, 1, 2, 3, 4]
    assert b.update_buffer["b"].array[0].tolist() == [4, 4]
    b.append_update_buffer(0, ["a"], batch_size=2, training_length=2)
    assert len(b.update_buffer["a"]) == 10 and len(b.update_buffer["b"]) == 6
    b[0]["c"].append(1.0)
    with pytest.raises(BufferException) as err:
        b.append_update_buffer(0)
    assert "for agent 0" in str(err.value) and "'c'" in str(err.value) and "'a'" in str(err.value)
    with pytest.raises(BufferException):
        b.append_update_buffer(0, ["a", "zzz"])
    assert len(b.update_buffer["a"]) == 10
    with pytest.raises(BufferException, match="too large"):
        b.append_update_buffer(0, ["a", "b"], batch_size=4, training_length=2)
    b.update_buffer["b"].reset_field()
    b.update_buffer["b"].append(np.zeros(3, np.float32))
    with pytest.raises(BufferException) as err:
        b.append_update_buffer(0, ["a", "b"])
    assert "'b'" in str(err.value) and "(3,)" in str(err.value) and "(2,)" in str(err.value)
    assert len(b.update_buffer["a"]) == 10 and len(b.update_buffer["b"]) == 1


def test_pad_end_puts_the_padding_after_the_data():
    """``pad_end`` (what the PPO trainer uses): a partial sequence starts at its first real row,
    so the memory stored there is the sequence's initial state; full sequences are unchanged."""
    b = Buffer()
    for t in range(5):
        b[0]["a"].append(float(t + 1))
        b[0]["mem"].append(np.array([t + 1, -t - 1], np.float32))
        b[0]["mask"].append(np.array([1, 1], np.float32), padding_value=1)
    b[0]["f64"].extend(np.array([7.0, 8.0, 9.0, 10.0, 11.0]))
    b.update_buffer["f64"].append(np.float32(0.5))  # the cast path: float64 rows into float32
    b.append_update_buffer(0, training_length=4, pad_end=True)
    assert b.update_buffer["a"].array.tolist() == [1, 2, 3, 4, 5, 0, 0, 0]
    assert b.update_buffer["mem"].array[::4].tolist() == [[1, -1], [5, -5]]
    assert b.update_buffer["mask"].array.tolist() == [[1, 1]] * 8
    assert b.update_buffer["f64"].array.tolist() == [0.5, 7, 8, 9, 10, 11, 0, 0, 0]
    field = b[0]["a"]
    assert field.get_batch(training_length=4, pad_end=True).tolist() == [1, 2, 3, 4, 5, 0, 0, 0]
    assert field.get_batch(training_length=4).tolist() == [0, 0, 0, 1, 2, 3, 4, 5]
    assert field.get_batch(training_length=5, pad_end=True).tolist() == [1, 2, 3, 4, 5]
    assert field.get_batch(batch_size=1, training_length=2, pad_end=True).tolist() == [4, 5]
    c = Buffer()
    for agent in (0, 1):
        c[agent]["x"].extend([1.0, 2.0, 3.0])
    c.append_all_agent_batch_to_update_buffer(training_length=2, pad_end=True)
    assert c.update_buffer["x"].array.tolist() == [1, 2, 3, 0, 1, 2, 3, 0]


def test_append_update_buffer_casts_within_category():
    b = Buffer()
    b.update_buffer["x"].append(np.float64(1.0))
    b[0]["x"].extend(np.array([2.5, 3.5], np.float32))
    b.append_update_buffer(0)
    assert b.update_buffer["x"].dtype == np.float64
    assert b.update_buffer["x"].array.tolist() == [1.0, 2.5, 3.5]


def test_append_all_and_resets():
    b = Buffer()
    for agent in (0, 1):
        b[agent]["x"].extend([1.0, 2.0, 3.0])
    b.append_all_agent_batch_to_update_buffer(training_length=2)
    assert len(b.update_buffer["x"]) == 8
    b.reset_local_buffers()
    assert len(b[0]["x"]) == 0 and len(b[1]["x"]) == 0
    b.reset_update_buffer()
    assert len(b.update_buffer["x"]) == 0


def test_truncate_update_buffer():
    b = Buffer()
    b.update_buffer["x"].extend(np.arange(100))
    b.update_buffer["y"].extend(np.arange(100, dtype=np.float32))
    b.truncate_update_buffer(50, 16)
    assert b.update_buffer["x"].array.tolist() == list(range(52, 100))
    assert b.update_buffer["y"].array.tolist() == list(range(52, 100))
    b.truncate_update_buffer(100)
    assert len(b.update_buffer["x"]) == 48
    b.truncate_update_buffer(0)
    assert len(b.update_buffer["x"]) == 0 and b.update_buffer["x"].dtype == np.int64


def test_append_batch_basic_and_padding():
    b = Buffer()
    ids = np.array([3, 1, 2])
    for t in range(4):
        b.append_batch(ids, {
            "obs": np.full((3, 2), t, np.float32) + np.arange(3)[:, None],
            "reward": [0.5, 1.5, 2.5],
            "done": np.array([False, False, t == 3]),
            "mask": np.ones((3, 2), np.float32),
        }, {"mask": 1})
    assert set(b) == {1, 2, 3}
    assert b[1]["obs"].array[:, 0].tolist() == [1, 2, 3, 4]
    assert b[1]["reward"].dtype == np.float32 and b[1]["reward"].array.tolist() == [1.5] * 4
    assert b[2]["done"].array.tolist() == [False, False, False, True]
    assert b[2]["mask"].padding_value == 1 and b[2]["obs"].padding_value == 0
    b.append_batch([1], {"obs": np.zeros((1, 2), np.float32)})
    assert len(b[1]["obs"]) == 5 and len(b[1]["reward"]) == 4


def test_append_batch_mismatch_leaves_everything_unchanged():
    b = Buffer()
    b.append_batch([0, 1], {"x": np.zeros((2, 2), np.float32), "y": np.zeros(2, np.int64)})
    b[1]["x"].reset_field()
    b[1]["x"].append(np.zeros(3, np.float32))
    before = {(a, k): np.array(b[a][k].array) for a in (0, 1) for k in ("x", "y")}
    with pytest.raises(BufferException) as err:
        b.append_batch([0, 1], {"x": np.ones((2, 2), np.float32), "y": np.ones(2, np.int64)})
    assert "'x'" in str(err.value) and "agent 1" in str(err.value)
    with pytest.raises(BufferException):
        b.append_batch([0, 1], {"x": np.ones((3, 2), np.float32)})
    with pytest.raises(BufferException):
        b.append_batch([0, 1], {"y": np.ones(2, np.float32)})
    for (a, k), arr in before.items():
        assert np.array_equal(b[a][k].array, arr)


def test_append_batch_follows_structural_changes():
    b = Buffer()
    fields = {"x": np.ones((2, 1), np.float32)}
    b.append_batch([0, 1], fields)
    old_agent = b[0]
    del b[0]
    b.append_batch([0, 1], fields)
    assert len(b[0]["x"]) == 1 and len(old_agent["x"]) == 1 and len(b[1]["x"]) == 2
    old_field = b[1]["x"]
    b[1]["x"] = AgentBufferField()
    b.append_batch([0, 1], fields)
    assert len(b[1]["x"]) == 1 and len(old_field) == 2
    b[1].pop("x")
    b.append_batch([0, 1], fields)
    assert len(b[1]["x"]) == 1
    b[1].reset_agent()
    b.append_batch([0, 1], fields)
    assert len(b[1]["x"]) == 1 and len(b[0]["x"]) == 4
    b[0] = AgentBuffer()
    b.append_batch((0, 1), fields)
    assert len(b[0]["x"]) == 1
    b[1].clear()
    b.append_batch([0, 1], fields)
    assert len(b[1]["x"]) == 1
    b[1].update({"x": AgentBufferField()})
    b.append_batch([0, 1], fields)
    assert len(b[1]["x"]) == 1


def test_append_batch_duplicate_ids_and_casts():
    b = Buffer()
    b[5]["v"].append(np.float64(0.0))
    b.append_batch([5, 5, 6], {"v": np.array([1.0, 2.0, 3.0], np.float32)})
    assert b[5]["v"].dtype == np.float64 and b[5]["v"].array.tolist() == [0.0, 1.0, 2.0]
    assert b[6]["v"].dtype == np.float32


# ---------------------------------------------------------------------- files
def _sample_buffer() -> AgentBuffer:
    ab = AgentBuffer()
    ab["f32"].extend(np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32))
    ab["i64"].extend(np.arange(7))
    ab["b"].extend(np.arange(7) % 2 == 0)
    ab["f64"].append(np.float64(1.0), padding_value=1)
    ab["empty"]
    return ab


def _assert_buffers_equal(a: AgentBuffer, b: AgentBuffer) -> None:
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].row_shape == b[k].row_shape
        assert a[k].array.tobytes() == b[k].array.tobytes()
        assert a[k].padding_value == b[k].padding_value


def test_save_load_path(tmp_path):
    ab = _sample_buffer()
    path = tmp_path / "buf.hdf5"
    ab.save_to_file(path)
    assert not glob.glob(str(path) + ".tmp-*")
    loaded = AgentBuffer()
    loaded["other"].append(1.0)
    loaded.load_from_file(str(path))
    assert loaded["other"].array.tolist() == [1.0]
    del loaded["other"]
    _assert_buffers_equal(ab, loaded)
    with h5py.File(path, "r") as hf:
        assert hf["f32"].compression == "gzip" and hf["i64"].dtype == np.int64
    ab.save_to_file(str(path))
    assert sorted(os.listdir(tmp_path)) == ["buf.hdf5"]


def test_save_load_file_object_and_group(tmp_path):
    ab = _sample_buffer()
    bio = io.BytesIO()
    ab.save_to_file(bio)
    bio.seek(0)
    loaded = AgentBuffer()
    loaded.load_from_file(bio)
    _assert_buffers_equal(ab, loaded)
    with h5py.File(tmp_path / "g.h5", "w") as hf:
        ab.save_to_file(hf.create_group("replay"))
    with h5py.File(tmp_path / "g.h5", "r") as hf:
        again = AgentBuffer()
        again.load_from_file(hf["replay"])
    _assert_buffers_equal(ab, again)
    with open(tmp_path / "f.h5", "wb") as fh:
        ab.save_to_file(fh)
    with open(tmp_path / "f.h5", "rb") as fh:
        third = AgentBuffer()
        third.load_from_file(fh)
    _assert_buffers_equal(ab, third)


def _check_load_fails(path, tmp_path):
    target = _sample_buffer()
    before = {k: (v.array.tobytes(), v.dtype) for k, v in target.items()}
    with pytest.raises(BufferException) as err:
        target.load_from_file(path)
    assert os.fspath(path) in str(err.value)
    assert {k: (v.array.tobytes(), v.dtype) for k, v in target.items()} == before


def test_load_missing_file(tmp_path):
    _check_load_fails(tmp_path / "nope.hdf5", tmp_path)
    _check_load_fails(str(tmp_path / "nope.hdf5"), tmp_path)


def test_load_non_hdf5_file(tmp_path):
    path = tmp_path / "text.hdf5"
    path.write_text("this is not an HDF5 file\n" * 100)
    _check_load_fails(path, tmp_path)


def test_load_truncated_file(tmp_path):
    big = AgentBuffer()
    big["x"].extend(np.random.default_rng(1).normal(size=(5000, 8)).astype(np.float32))
    big["y"].extend(np.arange(5000))
    good = tmp_path / "good.hdf5"
    big.save_to_file(good)
    data = good.read_bytes()
    for cut in (len(data) // 2, len(data) - 100, 1000, 10):
        bad = tmp_path / f"cut{cut}.hdf5"
        bad.write_bytes(data[:cut])
        _check_load_fails(bad, tmp_path)


def test_save_error_leaves_no_file(tmp_path, monkeypatch):
    ab = _sample_buffer()
    path = tmp_path / "out.hdf5"
    original = h5py.Group.create_dataset
    calls = []

    def failing(self, name, *args, **kwargs):
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(h5py.Group, "create_dataset", failing)
    with pytest.raises(BufferException) as err:
        ab.save_to_file(path)
    assert str(path) in str(err.value)
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(h5py.Group, "create_dataset", original)
    ab.save_to_file(path)
    good = path.read_bytes()
    monkeypatch.setattr(h5py.Group, "create_dataset", failing)
    calls.clear()
    with pytest.raises(BufferException):
        ab.save_to_file(path)
    assert os.listdir(tmp_path) == ["out.hdf5"] and path.read_bytes() == good


def test_save_to_missing_directory_and_bad_keys(tmp_path):
    ab = _sample_buffer()
    with pytest.raises(BufferException):
        ab.save_to_file(tmp_path / "no" / "such" / "dir.h5")
    bad = AgentBuffer()
    bad[3].append(1.0)
    with pytest.raises(BufferException):
        bad.save_to_file(tmp_path / "x.h5")
    assert os.listdir(tmp_path) == []


def test_failed_append_batch_creates_nothing():
    b = Buffer()
    b.append_batch([0], {"x": np.zeros((1, 2), np.float32)})
    with pytest.raises(BufferException):
        b.append_batch([0, 1], {"x": np.zeros((2, 3), np.float32), "y": np.zeros(2)})
    assert set(b) == {0} and set(b[0]) == {"x"} and len(b[0]["x"]) == 1
    with pytest.raises(BufferException):
        b.append_batch([5], {"s": np.array(["text"])})
    assert set(b) == {0}


def test_append_batch_id_kinds():
    b = Buffer()
    ids = np.array([10, 20, 300, 4000])
    for t in range(3):
        b.append_batch(ids, {"r": [1.0, 2.0, 3.0, float(t)]})
        b.append_batch([("env", 0), ("env", 1)], {"r": np.ones(2, np.float32)})
    assert b[4000]["r"].dtype == np.float32 and b[4000]["r"].array.tolist() == [0.0, 1.0, 2.0]
    assert len(b[("env", 1)]["r"]) == 3
    b.append_batch([10, 20, 300, 4000], {"r": np.zeros(4, np.float32)})
    assert len(b[10]["r"]) == 4


def test_from_array_reserve_and_batch_rows():
    arr = np.arange(12, dtype=np.int16).reshape(6, 2)
    f = AgentBufferField.from_array(arr, padding_value=1, name="a")
    assert f.dtype == np.int16 and len(f) == 6 and f.padding_value == 1 and f.name == "a"
    f.reserve(100)
    assert f.capacity >= 106
    f.append(np.array([1, 2], np.int16))
    assert arr.tolist() == np.arange(12).reshape(6, 2).tolist()
    assert kbuf._core.batch_rows(10, None, 4) == 12
    assert kbuf._core.batch_rows(10, 2, 4, False) == 8
    with pytest.raises(BufferException):
        kbuf._core.batch_rows(10, 8, 4, False)


def test_module_seed_drives_sampling():
    ab = AgentBuffer()
    ab["x"].extend(np.arange(100))
    kbuf.seed(7)
    first = ab.sample_mini_batch(10)["x"].array
    kbuf.seed(7)
    assert np.array_equal(ab.sample_mini_batch(10)["x"].array, first)


def test_unusual_padding_values_round_trip(tmp_path):
    ab = AgentBuffer()
    ab["a"].append(1.0, padding_value=float("nan"))
    ab["b"].append(1.0, padding_value=np.float32(0.5))
    ab["c"].append(1.0, padding_value=True)
    ab.save_to_file(tmp_path / "p.h5")
    loaded = AgentBuffer()
    loaded.load_from_file(tmp_path / "p.h5")
    assert np.isnan(loaded["a"].padding_value)
    assert loaded["b"].padding_value == 0.5 and loaded["c"].padding_value is True


def test_nested_keys_round_trip(tmp_path):
    ab = AgentBuffer()
    ab["group/obs"].extend(np.ones((3, 2), np.float32))
    ab["top"].extend([1, 2, 3])
    ab.save_to_file(tmp_path / "n.h5")
    loaded = AgentBuffer()
    loaded.load_from_file(tmp_path / "n.h5")
    assert set(loaded) == {"group/obs", "top"}
    assert loaded["group/obs"].array.shape == (3, 2)


def test_append_batch_rejects_other_category_after_a_failed_call():
    b = Buffer()
    b.append_batch([0], {"k": [3]})
    with pytest.raises(BufferException):
        b.append_batch([0], {"k": [0.5]})
    with pytest.raises(BufferException):
        b.append_batch([0], {"k": np.array([0.5], np.float32)})
    assert b[0]["k"].array.tolist() == [3] and b[0]["k"].dtype == np.int64


def test_reset_reuses_unshared_storage_only():
    f = AgentBufferField()
    f.extend(np.arange(3000, dtype=np.float32))
    capacity = f.capacity
    f.reset_field()
    f.append(np.float32(1.0))
    assert f.capacity == capacity and f.array.tolist() == [1.0]
    view = f.array
    f.reset_field()
    f.append(np.float32(2.0))
    assert view.tolist() == [1.0] and f.array.tolist() == [2.0]
    f.reset_field()
    f.append(np.zeros(2, np.float32))
    assert f.row_shape == (2,) and len(f) == 1


def test_take_moves_the_rows_out_and_keeps_the_fields():
    agent = AgentBuffer()
    agent["a"].extend(np.arange(6, dtype=np.float32).reshape(3, 2))
    agent["b"] = AgentBufferField(padding_value=1)
    agent["b"].extend([1.0, 2.0, 3.0])
    field = agent["a"]
    taken = agent.take()
    np.testing.assert_array_equal(taken["a"].get_batch(), np.arange(6, dtype=np.float32).reshape(3, 2))
    assert taken["b"].padding_value == 1 and len(agent["a"]) == len(agent["b"]) == 0 and agent["a"] is field
    agent["a"].extend(np.zeros((1, 2), np.float32))
    assert len(taken["a"]) == 3  # the taken rows are a copy
    assert [f.name for f in taken.values()] == ["a", "b"] and taken["a"].row_shape == (2,)
    agent["empty"]  # a field without rows is taken as an empty field
    assert len(agent.take()["empty"]) == 0 and agent.take()["a"].get_batch().shape == (0,)
