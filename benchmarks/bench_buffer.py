"""Benchmark: the buffer work of one PPO update cycle.

64 agents × 1000 steps (vector obs float32[8], actions float32[2], action_probs float32[2],
reward float32, done bool, value estimate float32) appended once through
``Buffer.append_batch`` and once through per-agent ``append`` calls;
``append_all_agent_batch_to_update_buffer`` with training_length 1 and 16; ``shuffle(1)``
and ``shuffle(16)``; ``make_mini_batch`` over the whole update buffer in batches of 1024;
100 × ``sample_mini_batch(1024, 16)``; ``truncate_update_buffer(51200, 16)``; save + load
(HDF5, gzip).

Each phase is timed (median of ``--runs`` ≥ 5 runs after a warm-up; kerasrl and floor runs
alternate so both see the same machine state) for kerasrl, for the list-based reference
in ``tests/buffer_reference.py`` and for a floor: numpy copying the same bytes (into
preallocated time-major arrays for the appends, concatenations / fancy-index gathers / slice
copies for the rest) and, for save/load, h5py writing/reading the same contiguous arrays with
the same compression.  Targets: the in-memory phases (appends through the batched call) ≥ 50×
faster than the reference in total, each within 3× of its floor; save/load within 1.5× of h5py.

Run: ``python benchmarks/bench_buffer.py [--runs 7]`` after ``python setup.py build_ext --inplace``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from buffer_reference import RefAgentBuffer, RefBuffer  # noqa: E402

from kerasrl.buffer import AgentBuffer, Buffer  # noqa: E402

N_AGENTS = 64
N_STEPS = 1000
SEQ = 16
MINI_BATCH = 1024
N_SAMPLES = 100
TRUNCATE = 51200
FIELDS = {
    "vector_obs": (np.float32, (8,)),
    "actions": (np.float32, (2,)),
    "action_probs": (np.float32, (2,)),
    "rewards": (np.float32, ()),
    "done": (np.bool_, ()),
    "value_estimates": (np.float32, ()),
}
PADDING = {"action_probs": 1}


def make_steps(seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Per env step: one array per field with a row per agent (as a vectorised env gives)."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(N_STEPS):
        step = {}
        for key, (dtype, shape) in FIELDS.items():
            if dtype is np.bool_:
                step[key] = rng.random(N_AGENTS) < 0.01
            else:
                step[key] = rng.normal(size=(N_AGENTS,) + shape).astype(dtype)
        steps.append(step)
    return steps


Job = tuple[Callable[[Any], Any], "Callable[[], Any] | None"]


def _timed(job: Job) -> float:
    fn, setup = job
    state = setup() if setup is not None else None
    t0 = time.perf_counter()
    fn(state)
    return time.perf_counter() - t0


def median_ms(job: Job, runs: int) -> float:
    """Median wall time (ms) of ``fn(setup())`` over ``runs`` runs after an untimed warm-up;
    ``setup`` is not timed."""
    _timed(job)
    return 1e3 * statistics.median(_timed(job) for _ in range(runs))


def paired_median_ms(a: Job, b: Job, runs: int) -> tuple[float, float]:
    """Like :func:`median_ms` for two jobs whose runs alternate (ABBA...), so that both see
    the same machine and allocator state."""
    _timed(a)
    _timed(b)
    times_a, times_b = [], []
    for i in range(runs):
        if i % 2:
            times_b.append(_timed(b))
            times_a.append(_timed(a))
        else:
            times_a.append(_timed(a))
            times_b.append(_timed(b))
    return 1e3 * statistics.median(times_a), 1e3 * statistics.median(times_b)


# ---------------------------------------------------------------------- appends
def append_batched(buf: Any, steps: list, ids: list) -> None:
    for step in steps:
        buf.append_batch(ids, step, PADDING)


def append_per_agent(buf: Any, steps: list, ids: list) -> None:
    keys = list(FIELDS)
    for step in steps:
        for i, agent_id in enumerate(ids):
            agent = buf[agent_id]
            for key in keys:
                agent[key].append(step[key][i], PADDING.get(key, 0))


def floor_append(steps: list) -> dict[str, np.ndarray]:
    store = {k: np.empty((N_STEPS, N_AGENTS) + shape, dtype)
             for k, (dtype, shape) in FIELDS.items()}
    for t, step in enumerate(steps):
        for key, arr in step.items():
            store[key][t] = arr
    return store


# ---------------------------------------------------------------------- update buffer
def floor_update(per_agent: list[dict[str, np.ndarray]], length: int) -> dict[str, np.ndarray]:
    """numpy building the update buffer from contiguous per-agent arrays (front padding)."""
    out = {}
    for key in FIELDS:
        arrays = [agent[key] for agent in per_agent]
        if length == 1:
            out[key] = np.concatenate(arrays)
            continue
        pads = [(length - len(a) % length) % length for a in arrays]
        total = sum(len(a) + p for a, p in zip(arrays, pads))
        dst = np.empty((total,) + arrays[0].shape[1:], arrays[0].dtype)
        pos = 0
        pv = PADDING.get(key, 0)
        for a, p in zip(arrays, pads):
            if p:
                dst[pos:pos + p] = a[-1] * pv
            dst[pos + p:pos + p + len(a)] = a
            pos += p + len(a)
        out[key] = dst
    return out


def floor_shuffle(arrays: dict[str, np.ndarray], length: int, seed: int) -> None:
    """One fancy-index gather per key over rows viewed as (sequences, bytes of a sequence)."""
    n = len(next(iter(arrays.values())))
    s = n // length
    perm = np.random.default_rng(seed).permutation(s)
    for key, a in arrays.items():
        out = np.take(a[:s * length].reshape(s, -1), perm, axis=0).reshape((-1,) + a.shape[1:])
        if s * length < n:
            out = np.concatenate([out, a[s * length:]])
        arrays[key] = out


def floor_mini_batches(arrays: dict[str, np.ndarray]) -> list:
    n = len(next(iter(arrays.values())))
    return [{k: a[i:i + MINI_BATCH].copy() for k, a in arrays.items()}
            for i in range(0, n, MINI_BATCH)]


def floor_sample(arrays: dict[str, np.ndarray], seed: int) -> list:
    rng = np.random.default_rng(seed)
    n_seq = len(next(iter(arrays.values()))) // SEQ
    out = []
    for _ in range(N_SAMPLES):
        idx = rng.integers(0, n_seq, size=MINI_BATCH // SEQ)
        out.append({k: np.take(a[:n_seq * SEQ].reshape(n_seq, -1), idx, axis=0)
                    .reshape((-1,) + a.shape[1:]) for k, a in arrays.items()})
    return out


def floor_truncate(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keep = TRUNCATE - TRUNCATE % SEQ
    return {k: a[len(a) - keep:].copy() if len(a) > keep else a for k, a in arrays.items()}


def floor_save(arrays: dict[str, np.ndarray], path: str) -> None:
    with h5py.File(path, "w") as hf:
        for key, a in arrays.items():
            hf.create_dataset(key, data=a, compression="gzip")


def floor_load(path: str) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as hf:
        return {key: hf[key][()] for key in hf}


def copy_ref_update(src: RefAgentBuffer) -> RefAgentBuffer:
    out = RefAgentBuffer()
    for key, field in src.items():
        out[key].dtype, out[key].row_shape = field.dtype, field.row_shape
        out[key][:] = field
    return out


def copy_update(src: AgentBuffer) -> AgentBuffer:
    out = AgentBuffer()
    for key, field in src.items():
        out[key].set(field.array)
        out[key].padding_value = field.padding_value
    return out


# ---------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per phase (median; >= 5)")
    args = parser.parse_args()
    runs = max(args.runs, 5)
    steps = make_steps()
    ids = list(range(N_AGENTS))
    rows: list[tuple[str, float, float, float, bool]] = []

    def phase(name: str, kerasrl: Job, reference: Job, floor: Job, in_memory: bool) -> None:
        """Time one phase: the reference on its own, kerasrl and the floor interleaved."""
        r = median_ms(reference, runs)
        k, f = paired_median_ms(kerasrl, floor, runs)
        rows.append((name, k, r, f, in_memory))
        print(f"  {name:<34} kerasrl {k:9.2f} ms  reference {r:9.2f} ms  floor {f:8.2f} ms",
              flush=True)

    print(f"kerasrl buffer benchmark: {N_AGENTS} agents x {N_STEPS} steps, median of {runs} runs")

    phase("append (batched call)",
          (lambda b: append_batched(b, steps, ids), Buffer),
          (lambda b: append_batched(b, steps, ids), RefBuffer),
          (lambda _: floor_append(steps), None), True)
    phase("append (per-agent calls)",
          (lambda b: append_per_agent(b, steps, ids), Buffer),
          (lambda b: append_per_agent(b, steps, ids), RefBuffer),
          (lambda _: floor_append(steps), None), False)

    local = Buffer()
    append_batched(local, steps, ids)
    ref_local = RefBuffer()
    append_batched(ref_local, steps, ids)
    per_agent = [{k: local[a][k].array for k in FIELDS} for a in ids]

    def fresh(proto: Buffer) -> Buffer:
        proto.reset_update_buffer()
        return proto

    def fresh_ref(proto: RefBuffer) -> RefBuffer:
        proto.reset_update_buffer()
        return proto

    for length in (1, SEQ):
        def to_update(b: Any, length: int = length) -> None:
            b.append_all_agent_batch_to_update_buffer(training_length=length)

        phase(f"append_update_buffer L={length}",
              (to_update, lambda: fresh(local)),
              (to_update, lambda: fresh_ref(ref_local)),
              (lambda _, length=length: floor_update(per_agent, length), None), True)

    local.reset_update_buffer()
    local.append_all_agent_batch_to_update_buffer(training_length=1)
    update1 = local.update_buffer
    local.update_buffer = AgentBuffer()
    local.append_all_agent_batch_to_update_buffer(training_length=SEQ)
    update16 = local.update_buffer
    ref_local.reset_update_buffer()
    ref_local.append_all_agent_batch_to_update_buffer(training_length=1)
    ref1 = ref_local.update_buffer
    ref_local.update_buffer = RefAgentBuffer()
    ref_local.append_all_agent_batch_to_update_buffer(training_length=SEQ)
    ref16 = ref_local.update_buffer
    arrays1 = {k: np.array(v.array) for k, v in update1.items()}
    arrays16 = {k: np.array(v.array) for k, v in update16.items()}

    for length, buf, ref, arrays in ((1, update1, ref1, arrays1),
                                     (SEQ, update16, ref16, arrays16)):
        def shuffle(b: Any, length: int = length) -> None:
            b.shuffle(length, rng=np.random.default_rng(1))

        phase(f"shuffle({length})",
              (shuffle, lambda buf=buf: buf),
              (shuffle, lambda ref=ref: ref),
              (lambda a, length=length: floor_shuffle(a, length, 1), lambda arrays=arrays: dict(arrays)), True)

    def mini_batches(b: Any) -> list:
        return [b.make_mini_batch(i, i + MINI_BATCH)
                for i in range(0, len(b["rewards"]), MINI_BATCH)]

    def samples(b: Any) -> list:
        rng = np.random.default_rng(2)
        return [b.sample_mini_batch(MINI_BATCH, SEQ, rng) for _ in range(N_SAMPLES)]

    phase(f"make_mini_batch x{-(-len(arrays1['rewards']) // MINI_BATCH)} ({MINI_BATCH} rows)",
          (mini_batches, lambda: update1),
          (mini_batches, lambda: ref1),
          (floor_mini_batches, lambda: arrays1), True)
    phase(f"{N_SAMPLES} x sample_mini_batch({MINI_BATCH}, {SEQ})",
          (samples, lambda: update16),
          (samples, lambda: ref16),
          (lambda a: floor_sample(a, 2), lambda: arrays16), True)

    def trunc_setup() -> Buffer:
        b = Buffer()
        b.update_buffer = copy_update(update16)
        return b

    def trunc_ref_setup() -> RefBuffer:
        b = RefBuffer()
        b.update_buffer = copy_ref_update(ref16)
        return b

    phase(f"truncate_update_buffer({TRUNCATE}, {SEQ})",
          (lambda b: b.truncate_update_buffer(TRUNCATE, SEQ), trunc_setup),
          (lambda b: b.truncate_update_buffer(TRUNCATE, SEQ), trunc_ref_setup),
          (floor_truncate, lambda: arrays16), True)

    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: os.path.join(tmp, f"{name}.hdf5") for name in ("k", "r", "f")}
        phase("save (HDF5, gzip)",
              (lambda b: b.save_to_file(paths["k"]), lambda: update16),
              (lambda b: b.save_to_file(paths["r"]), lambda: ref16),
              (lambda a: floor_save(a, paths["f"]), lambda: arrays16), False)
        phase("load (HDF5, gzip)",
              (lambda b: b.load_from_file(paths["k"]), AgentBuffer),
              (lambda b: b.load_from_file(paths["r"]), RefAgentBuffer),
              (lambda _: floor_load(paths["f"]), None), False)
        loaded = AgentBuffer()
        loaded.load_from_file(paths["k"])
        assert all(loaded[k].array.tobytes() == update16[k].array.tobytes() for k in FIELDS)

    return report(rows)


def report(rows: list[tuple[str, float, float, float, bool]]) -> int:
    """Print the final table and the target checks; returns 0 if every target is met."""
    print()
    header = (f"{'phase':<36}{'kerasrl ms':>12}{'reference ms':>14}{'floor ms':>10}"
              f"{'ref/kerasrl':>13}{'kerasrl/floor':>15}")
    print(header)
    print("-" * len(header))
    for name, k, r, f, _ in rows:
        print(f"{name:<36}{k:>12.2f}{r:>14.2f}{f:>10.2f}{r / k:>12.1f}x{k / f:>14.2f}x")
    mem = [row for row in rows if row[4]]
    k_tot, r_tot, f_tot = (sum(row[i] for row in mem) for i in (1, 2, 3))
    print("-" * len(header))
    print(f"{'in-memory total (batched append)':<36}{k_tot:>12.2f}{r_tot:>14.2f}{f_tot:>10.2f}"
          f"{r_tot / k_tot:>12.1f}x{k_tot / f_tot:>14.2f}x")
    print()
    checks = [(f"in-memory workload {r_tot / k_tot:.1f}x faster than the reference "
               f"(target >= 50x)", r_tot / k_tot >= 50)]
    for name, k, _r, f, in_memory in rows:
        if in_memory:
            checks.append((f"{name}: {k / f:.2f}x its floor (target <= 3x)", k / f <= 3.0))
        elif name.startswith(("save", "load")):
            checks.append((f"{name}: {k / f:.2f}x h5py on contiguous arrays (target <= 1.5x)",
                           k / f <= 1.5))
    for text, good in checks:
        print(f"[{'PASS' if good else 'MISS'}] {text}")
    return 0 if all(good for _, good in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
