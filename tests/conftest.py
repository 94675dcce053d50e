"""Test set-up: quiet TensorFlow, deterministic ops, and no XLA by default in short runs.

Most tests train for a few hundred steps, where compiling the update with XLA (kerasrl's
default for MLP and LSTM policies, ``kerasrl/common/fast_path.py``) costs more than the run: in this
process the default becomes "no XLA" unless a test is marked ``default_fast_path`` (the tests
of that choice and the acceptance runs) or sets ``jit_compile`` itself. The XLA update is still
checked against the plain one (tests/test_learner.py) and runs in every subprocess test.
Command-line runs keep no XLA cache (``KERASRL_XLA_CACHE=off``): a test never reads or fills
the user's ``~/.cache`` (tests/test_xla_cache.py uses folders of its own).

A suite started in the background of a non-interactive shell inherits SIGINT ignored, and one
started under ``nohup`` SIGHUP ignored; the signal tests (and the runs they start, which inherit
the disposition) need both live, so an ignored one is made live again here.

Every temporary file of the suite (the tests' own, kerasrl's temporary run folders, TensorFlow's
autograph modules, the subprocesses' files) goes to one folder per process, removed when its
session ends: the suite leaves nothing in the system's temporary folder.
"""
import gc
import os
import shutil
import signal
import tempfile

import pytest

#: This process's temporary folder (``TMPDIR`` for its subprocesses too), removed at the end.
SESSION_TEMP = tempfile.mkdtemp(prefix="kerasrl-tests-")
os.environ["TMPDIR"] = tempfile.tempdir = SESSION_TEMP

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["KERASRL_XLA_CACHE"] = "off"
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def _plain_tf_function_unless_marked(request, monkeypatch):
    if request.node.get_closest_marker("default_fast_path") is None:
        import kerasrl.common.fast_path

        monkeypatch.setattr(kerasrl.common.fast_path, "XLA_FASTER", frozenset())


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_TEMP, ignore_errors=True)


@pytest.fixture
def signals_in_process():
    """For a test that signals its own process: no garbage collection and no collector callbacks
    while it runs. A callback that the collector calls (Hypothesis installs one; code under test
    may call ``gc.collect()`` itself) would otherwise receive the signal's ``KeyboardInterrupt``,
    which Python reports as unraisable and drops."""
    was_enabled, callbacks = gc.isenabled(), list(gc.callbacks)
    gc.disable()
    gc.callbacks.clear()
    try:
        yield
    finally:
        gc.callbacks.extend(callbacks)
        if was_enabled:
            gc.enable()
