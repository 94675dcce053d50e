"""kerasrl.xla_cache: entries are published whole or not at all, bad entries are discarded and
compiled afresh, stale staging folders and old entries are cleaned up."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kerasrl import xla_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache as ``enable`` leaves it, without touching TensorFlow's flags."""
    root, staging = tmp_path / "ns", tmp_path / "ns" / ".staging-1-x"
    staging.mkdir(parents=True)
    state = xla_cache._Cache(str(root), str(staging))
    monkeypatch.setattr(xla_cache, "_cache", state)
    return state


def test_compiling_publishes_what_the_call_wrote(cache):
    (open(os.path.join(cache.staging, "old.pb"), "wb")).close()
    with xla_cache.compiling():
        with open(os.path.join(cache.staging, "new.pb"), "wb") as f:
            f.write(b"x" * 10)
    assert sorted(os.listdir(cache.root)) == sorted([".staging-1-x", "new.pb"])
    assert os.path.samefile(os.path.join(cache.root, "new.pb"), os.path.join(cache.staging, "new.pb"))


def test_compiling_publishes_nothing_when_the_call_raises(cache):
    with pytest.raises(RuntimeError):
        with xla_cache.compiling():
            with open(os.path.join(cache.staging, "half.pb"), "wb") as f:
                f.write(b"x")
            raise RuntimeError("killed mid-write")
    assert os.listdir(cache.root) == [".staging-1-x"]


def test_compiling_without_a_cache_just_runs():
    assert not xla_cache.enabled()
    with xla_cache.compiling():
        ran = True
    assert ran


def test_discard_loaded_removes_the_entries_here_and_in_the_shared_folder(cache):
    for folder in (cache.root, cache.staging):
        with open(os.path.join(folder, "e.pb"), "wb") as f:
            f.write(b"bad")
    cache.loaded.add("e.pb")
    assert xla_cache.discard_loaded()
    assert not os.path.exists(os.path.join(cache.root, "e.pb"))
    assert not os.path.exists(os.path.join(cache.staging, "e.pb"))
    assert not xla_cache.discard_loaded()  # nothing left that could have been loaded


def test_prune_deletes_the_oldest_entries_first(tmp_path):
    for i in range(4):
        path = tmp_path / "tf1" / f"{i}.pb"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + i, 1000 + i))
    (tmp_path / "tf1" / ".staging-1-a").mkdir()
    (tmp_path / "tf1" / ".staging-1-a" / "in-use.pb").write_bytes(b"x" * 1000)
    assert xla_cache.prune(str(tmp_path), 250) == 2
    assert sorted(os.listdir(tmp_path / "tf1")) == [".staging-1-a", "2.pb", "3.pb"]


def test_stale_staging_folders_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    prefix = xla_cache._staging_prefix()
    (tmp_path / f"{prefix}{dead.pid}-abc").mkdir()
    (tmp_path / f"{prefix}{os.getpid()}-abc").mkdir()
    (tmp_path / f".staging-otherhost-{dead.pid}-abc").mkdir()  # another host's, on a shared file system
    xla_cache._remove_stale_staging(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted([f"{prefix}{os.getpid()}-abc", f".staging-otherhost-{dead.pid}-abc"])


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(xla_cache.ENV_VAR, "off")
    assert xla_cache.default_directory() is None
    assert xla_cache.enable() is None
    monkeypatch.setenv(xla_cache.ENV_VAR, str(tmp_path))
    assert xla_cache.default_directory() == str(tmp_path)
    monkeypatch.delenv(xla_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert xla_cache.default_directory() == os.path.join(str(tmp_path), "kerasrl", "xla")


def test_namespace_follows_xla_flags(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    plain = xla_cache.namespace()
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    assert xla_cache.namespace() != plain
    assert plain.startswith("tf")


LEARNER_RUN = textwrap.dedent("""
    import logging, os, sys
    sys.path.insert(0, {root!r})
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    from kerasrl import xla_cache
    xla_cache.enable({cache!r})
    print("ENTRIES", len(xla_cache._cache.loaded))
    import numpy as np
    from kerasrl.ppo.learner import PPOLearner
    from kerasrl.settings import load_trainer_config
    from kerasrl.spec import ActionType, BehaviorSpec
    settings = load_trainer_config({{"default": {{"batch_size": 32, "buffer_size": 64, "hidden_units": 16,
                                                  "num_layers": 1, "num_epoch": 2, "jit_compile": True}}}})
    spec = BehaviorSpec(((3,),), ActionType.DISCRETE, (2,))
    learner = PPOLearner.for_behavior(spec, ["extrinsic"], settings.sections["default"], 0, 1000)
    batch = learner._warm_up_batch(64)
    batch["masks"][:] = 1.0
    batch["advantages"][:] = np.linspace(-1, 1, 64)
    metrics = learner.update(batch, 0, seed=3)
    print("LOSS", repr(metrics["loss"]))
""")


def _learner_run(tmp_path, cache_dir) -> subprocess.CompletedProcess:
    script = tmp_path / "run.py"
    script.write_text(LEARNER_RUN.format(root=ROOT, cache=str(cache_dir)))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TF_XLA_FLAGS", None)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_a_second_run_loads_the_entry_and_a_broken_one_is_compiled_afresh(tmp_path):
    """Run 1 compiles and publishes; run 2 loads it (same loss); a truncated entry (a run killed
    mid-write under TensorFlow's own cache) makes run 3 discard it, compile afresh, and train."""
    cache_dir = tmp_path / "cache"
    first = _learner_run(tmp_path, cache_dir)
    assert first.returncode == 0, first.stderr
    assert "ENTRIES 0" in first.stdout
    (namespace,) = os.listdir(cache_dir)
    entries = [n for n in os.listdir(cache_dir / namespace) if n.endswith(".pb")]
    assert len(entries) == 1
    loss = first.stdout.split("LOSS")[1].strip()

    second = _learner_run(tmp_path, cache_dir)
    assert second.returncode == 0, second.stderr
    assert "ENTRIES 1" in second.stdout and second.stdout.split("LOSS")[1].strip() == loss
    assert "discarded" not in second.stderr
    assert [n for n in os.listdir(cache_dir / namespace) if not n.startswith(".")] == entries  # a hit: no new key
    assert not [n for n in os.listdir(cache_dir / namespace) if n.startswith(".staging")]  # removed at exit

    path = cache_dir / namespace / entries[0]
    path.write_bytes(path.read_bytes()[:1000])
    third = _learner_run(tmp_path, cache_dir)
    assert third.returncode == 0, third.stderr
    assert "discarded 1 XLA cache entries" in third.stderr
    assert third.stdout.split("LOSS")[1].strip() == loss
    left = [n for n in os.listdir(cache_dir / namespace) if n.endswith(".pb")]
    assert len(left) == 1 and left != entries  # the broken entry is gone, the fresh one published
