"""Helpers the subprocess tests share: the live members of a process group, free local ports, the
first lines of a running process, and its group killed when a test leaves it running."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from typing import Iterator


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry))
    return members


def free_ports(n: int) -> list[int]:
    """``n`` ports on localhost that were free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def read_until(proc: subprocess.Popen, prefix: str, count: int = 2) -> list[str]:
    """``proc``'s stdout lines up to the ``count``-th that starts with ``prefix``; asserts that
    ``proc`` is still running then (else the lines and its stderr say why it is not)."""
    head: list[str] = []
    for line in proc.stdout:  # type: ignore[union-attr]
        head.append(line)
        if sum(x.startswith(prefix) for x in head) == count:
            break
    assert proc.poll() is None, "".join(head) + proc.stderr.read()  # type: ignore[union-attr]
    return head


@contextlib.contextmanager
def killed_on_exit(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """``proc``, whose process group (its own session's) is killed and reaped if it still runs when
    the block ends (a failed assertion, a timeout), so that no test leaves it behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
