"""A persistent cache of XLA-compiled code that runs can share safely.

Compiling the PPO update with XLA is most of a short run's start-up (figures in
``benchmarks/README.md``). TensorFlow can keep the compiled code on disk
(``--tf_xla_persistent_cache_directory``), but its cache is unsafe to share as it is: it writes
entries in place, so a run that reads an entry while another run is still writing it, or
after a run was killed mid-write, fails its first update ("Read less bytes than requested");
and its entries do not say which TensorFlow and CPU they were compiled for. So here:

* TensorFlow writes into a private folder of this process (``.staging-<host>-<pid>-*``) inside the
  cache, into which every published entry is hard-linked when the cache is enabled;
* an entry is published (hard-linked into the shared folder: all or nothing) only after the
  call that compiled it has returned, under ``compiling()``'s lock, so no half-written file is
  ever published;
* entries live in a folder per TensorFlow version, CPU and ``XLA_FLAGS``;
* if a cached entry still fails to load, the caller discards the loaded entries
  (``discard_loaded``) and compiles afresh;
* the cache is pruned to ``max_bytes`` (oldest entries first) when it is enabled.

Loading an entry makes TensorFlow log two spurious errors at ``TF_CPP_MIN_LOG_LEVEL`` below 3
(a text-format parse attempt, and a CPU-feature comparison that lists tuning flags and warns of
SIGILL); ``kerasrl-learn`` sets 3 unless ``--debug``. Enable before the process compiles anything
with XLA: TensorFlow reads ``TF_XLA_FLAGS`` at its first XLA compilation.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import platform
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Iterator, Optional

import tensorflow as tf

logger = logging.getLogger("kerasrl")

#: Environment variable naming the cache folder; ``off`` (or empty) disables the cache.
ENV_VAR = "KERASRL_XLA_CACHE"
OFF = ("", "off", "none", "0", "false")
TF_FLAG = "--tf_xla_persistent_cache_directory"
ENTRY_SUFFIX = ".pb"
STAGING_PREFIX = ".staging-"
DEFAULT_MAX_BYTES = 512 * 2**20


@dataclass
class _Cache:
    root: str  # this TensorFlow/CPU's folder of published entries
    staging: str  # the folder TensorFlow reads and writes, private to this process
    loaded: set[str] = field(default_factory=set)  # published entries linked into staging
    lock: threading.Lock = field(default_factory=threading.Lock)


_cache: Optional[_Cache] = None


def default_directory() -> Optional[str]:
    """``$KERASRL_XLA_CACHE`` (None when it says ``off``), else ``$XDG_CACHE_HOME/kerasrl/xla``
    (``~/.cache/kerasrl/xla``)."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        return None if value.strip().lower() in OFF else value
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kerasrl", "xla")


def namespace() -> str:
    """``tf<version>-<digest>``: entries compiled by another TensorFlow, for another CPU or with
    other ``XLA_FLAGS`` are never loaded."""
    cpu = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu += "".join(line for line in f if line.startswith(("flags", "model name")))
    except OSError:
        pass
    digest = hashlib.sha256(f"{cpu}|{os.environ.get('XLA_FLAGS', '')}".encode()).hexdigest()[:12]
    return f"tf{tf.__version__}-{digest}"


def enable(directory: Optional[str] = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Optional[str]:
    """Keep XLA's compiled code in ``directory`` (default: ``default_directory()``) so that later
    runs compiling the same update (same command: network, batch shapes, TensorFlow) load it.

    Returns this TensorFlow's entry folder, or None when the cache stays off: ``directory``
    says ``off``, ``TF_XLA_FLAGS`` already names a cache of the user's own (kept as it is), or
    the folder cannot be written (a warning says why; training goes on without the cache).
    """
    global _cache
    directory = default_directory() if directory is None else directory
    if directory is None or directory.strip().lower() in OFF:
        return None
    if _cache is not None:
        return _cache.root
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if TF_FLAG in flags:
        logger.info("TF_XLA_FLAGS already sets an XLA cache; kerasrl's is not used.")
        return None
    try:
        root = os.path.join(os.path.abspath(os.path.expanduser(directory)), namespace())
        os.makedirs(root, exist_ok=True)
        _remove_stale_staging(root)
        staging = tempfile.mkdtemp(prefix=f"{_staging_prefix()}{os.getpid()}-", dir=root)
        loaded = _link_entries(root, staging)
        prune(os.path.dirname(root), max_bytes)
    except OSError as e:
        logger.warning("kerasrl: the XLA cache in %s cannot be used (%s); compiling without it.", directory, e)
        return None
    os.environ["TF_XLA_FLAGS"] = f"{flags} {TF_FLAG}={staging}".strip()
    _cache = _Cache(root, staging, loaded)
    atexit.register(shutil.rmtree, staging, True)
    logger.info("XLA cache: %s (%d entries).", root, len(loaded))
    return root


def enabled() -> bool:
    return _cache is not None


def _link_entries(root: str, staging: str) -> set[str]:
    names = set()
    for name in os.listdir(root):
        if name.endswith(ENTRY_SUFFIX):
            try:
                os.link(os.path.join(root, name), os.path.join(staging, name))
                names.add(name)
            except OSError:  # removed meanwhile by another run's pruning
                continue
    return names


def _staging_prefix() -> str:
    """``.staging-<host>-``: a cache on a shared file system is shared by hosts whose process ids
    mean nothing to each other."""
    host = "".join(c if c.isalnum() else "_" for c in platform.node()) or "host"
    return f"{STAGING_PREFIX}{host}-"


def _remove_stale_staging(root: str) -> None:
    """This host's staging folders of processes that no longer run (killed before their ``atexit``)."""
    prefix = _staging_prefix()
    for name in os.listdir(root):
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune(directory: str, max_bytes: int) -> int:
    """Delete the oldest published entries under ``directory`` until they fill at most
    ``max_bytes``; returns how many were deleted."""
    entries = []
    for parent, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(STAGING_PREFIX)]
        for name in files:
            if name.endswith(ENTRY_SUFFIX):
                path = os.path.join(parent, name)
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    deleted = 0
    for _, size, path in sorted(entries):
        if total <= max_bytes:
            break
        with contextlib.suppress(OSError):
            os.remove(path)
            deleted += 1
        total -= size
    return deleted


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """Hold around a call that may compile with XLA: compilations are serialised, and what the
    call wrote to the cache is published once it has returned (nothing, if it raised)."""
    cache = _cache
    if cache is None:
        yield
        return
    with cache.lock:
        before = set(os.listdir(cache.staging))
        yield
        for name in set(os.listdir(cache.staging)) - before:
            if name.endswith(ENTRY_SUFFIX):
                with contextlib.suppress(FileExistsError, FileNotFoundError):
                    os.link(os.path.join(cache.staging, name), os.path.join(cache.root, name))


def discard_loaded() -> bool:
    """Remove the published entries this process could have loaded (after a call that loaded
    one failed), here and in the shared folder; returns whether there were any. The caller
    then rebuilds its function, whose new trace compiles afresh."""
    cache = _cache
    if cache is None or not cache.loaded:
        return False
    for name in cache.loaded:
        for folder in (cache.staging, cache.root):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, name))
    logger.warning("kerasrl: discarded %d XLA cache entries of %s that failed to load.", len(cache.loaded), cache.root)
    cache.loaded.clear()
    return True
