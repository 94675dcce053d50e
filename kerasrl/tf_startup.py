"""TensorFlow's start-up chatter kept off stderr: its C++ log level set before it loads (a
user's own ``TF_CPP_MIN_LOG_LEVEL`` wins), and the lines it writes while it is imported, before
that level applies, dropped (anything else written meanwhile still shows). The command line and
the Python API (``kerasrl.PPO`` and the other names that load TensorFlow) both go through here.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Iterator

#: What TensorFlow's C++ side writes to stderr while it is imported, before its log level
#: applies (lines of absl's ``I0000 00:00:... file.cc:N] message`` format, matched by file and
#: message): dropped unless ``--debug``. Anything else written meanwhile is shown.
_ABSL_LINE = re.compile(r"^[IWE]\d{4} [\d:.]+\s+\d+ (\S+):\d+\] (.*)$")
_START_UP_CHATTER = (
    ("port.cc", re.compile(r"^oneDNN custom operations are on\.")),
    ("cudart_stub.cc", re.compile(r"^Could not find cuda drivers on your machine, GPU will not be used\.$")),
    ("cpu_feature_guard.cc", re.compile(r"^This TensorFlow binary is optimized to use available CPU instructions")),
    ("cuda_dnn.cc", re.compile(r"^Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN "
                               r"when one has already been registered$")),
    ("cuda_fft.cc", re.compile(r"^Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT "
                               r"when one has already been registered$")),
    ("cuda_blas.cc", re.compile(r"^Unable to register cuBLAS factory: Attempting to register factory for plugin "
                                r"cuBLAS when one has already been registered$")),
    ("computation_placer.cc", re.compile(r"^computation placer already registered\.")),
)
_WHOLE_LINES = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    # cpu_feature_guard.cc's message goes on on a second line
    re.compile(r"^To enable the following instructions: [A-Z0-9_ ]+, in other operations, rebuild TensorFlow with "
               r"the appropriate compiler flags\.$"),
)


def quiet_tensorflow(debug: bool) -> None:
    """TensorFlow's C++ logs off unless ``--debug`` (before TF loads): errors that matter reach
    us as exceptions, and loading an XLA cache entry logs two spurious ones (``kerasrl.xla_cache``).
    oneDNN stays on (TensorFlow's default; :func:`tensorflow_start_up_hidden` drops its banner):
    it speeds up a CNN policy's update on CPU (benchmarks/README.md)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if debug else "3")


def is_start_up_chatter(line: str) -> bool:
    """Whether ``line`` (no newline) is one of TensorFlow's known start-up messages."""
    for known in _WHOLE_LINES:
        if (known.match(line) is not None) if isinstance(known, re.Pattern) else line == known:
            return True
    match = _ABSL_LINE.match(line)
    return match is not None and any(match.group(1) == file and pattern.match(match.group(2))
                                      for file, pattern in _START_UP_CHATTER)


@contextlib.contextmanager
def tensorflow_start_up_hidden(debug: bool) -> Iterator[None]:
    """Import TensorFlow (and what needs it) in this block: file descriptor 2 goes to a
    temporary file meanwhile, and what was written there comes back to stderr afterwards,
    less TensorFlow's known start-up lines (:func:`is_start_up_chatter`), so a real error
    written during the import still shows. Nothing is hidden with ``debug``, once TensorFlow
    is loaded, or when stderr has no file descriptor."""
    if debug or "tensorflow" in sys.modules:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not is_start_up_chatter(line.rstrip("\r\n"))]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
