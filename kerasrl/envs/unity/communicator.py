"""The trainer's end of the gRPC exchange with a Unity player, and the player's process.

kerasrl serves ``UnityToExternalProto.Exchange`` on a port; the player (or the Editor, after
Play) connects and calls it once per step with its agents' infos, and each answer carries the
trainer's actions or command. Each call is handed from gRPC's thread to the trainer through a
pair of queues, so the trainer simply alternates :meth:`Communicator.send` and
:meth:`Communicator.receive`. While waiting, the trainer watches the player's process: a player
that exits, or sends nothing for ``timeout_wait`` seconds, ends the wait with one line naming
the build, the port and the player's log.

On Linux a player gets SIGKILL when the process that started it dies, however it dies (SIGKILL
included: no cleanup of the trainer's runs then), through the kernel's parent-death signal, set
by util-linux's ``setpriv`` as the player starts.
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Optional, Sequence

import grpc

from kerasrl.exception import EnvironmentException
from kerasrl.interrupts import raise_if_stopping
from kerasrl.protos import unity_protocol_pb2 as pb
from kerasrl.protos import unity_protocol_pb2_grpc as pb_grpc

__all__ = ["Communicator", "PlayerProcess", "UnityCommunicationError", "describe_player", "find_player"]

#: How often a waiting trainer checks on the player's process.
POLL_SECONDS = 0.05
PLAYER_EXTENSIONS = (".x86_64", ".x86", ".exe", ".app")


def parent_death_prefix() -> list[str]:
    """The command that starts a player with the kernel's parent-death signal (SIGKILL) set:
    util-linux's ``setpriv`` on Linux; empty elsewhere or where ``setpriv`` is not installed.

    The signal is set by a program rather than by a Python function run between fork and exec
    (``preexec_fn``): that makes subprocess fork the whole trainer, whose gRPC fork handlers
    can crash the child (SIGSEGV or SIGABRT) while the server's threads are busy."""
    if not sys.platform.startswith("linux"):
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class UnityCommunicationError(EnvironmentException):
    """The player did not connect, exited, hung or broke the protocol."""


def find_player(path: str) -> str:
    """The executable of the Unity player ``path``, given with or without its extension
    (``.x86_64``, ``.x86``, ``.exe``, or a macOS ``.app`` bundle)."""
    stem = path
    for ext in PLAYER_EXTENSIONS:
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
    candidates = [path] + [stem + ext for ext in PLAYER_EXTENSIONS]
    for candidate in candidates:
        if candidate.endswith(".app") and os.path.isdir(candidate):
            macos = os.path.join(candidate, "Contents", "MacOS")
            names = sorted(os.listdir(macos)) if os.path.isdir(macos) else []
            if names:
                return os.path.join(macos, names[0])
        elif os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    tried = ", ".join(dict.fromkeys(candidates))
    raise UnityCommunicationError(f"--env {path}: no Unity player there (looked for an executable file at {tried}).")


def describe_player(path: str, port: int, log_file: Optional[str]) -> str:
    """The player at ``path`` on ``port``, for messages (also before it is launched)."""
    log = f", its log: {log_file}" if log_file else ""
    return f"the Unity player {path} (port {port}{log})"


@dataclass
class PlayerProcess:
    """A launched player, in its own process group so that it is stopped with everything it
    started, and (Linux) killed by the kernel if its trainer dies first."""

    path: str
    port: int
    log_file: Optional[str]
    process: subprocess.Popen

    @classmethod
    def launch(cls, path: str, port: int, log_file: Optional[str], no_graphics: bool,
               args: Sequence[str] = ()) -> "PlayerProcess":
        command = parent_death_prefix() + [find_player(path), "--mlagents-port", str(port)]
        if no_graphics:
            command += ["-nographics", "-batchmode"]
        if log_file is not None:
            os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
            command += ["-logFile", log_file]
        command += list(args)
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=sys.platform != "win32")
        except OSError as e:
            raise UnityCommunicationError(f"--env {path}: the Unity player could not be started ({e}).") from e
        return cls(path, port, log_file, process)

    def describe(self) -> str:
        """As ``describe_player``; a player that exited without writing its log says so instead
        of naming a file that is not there (a player that fails on its arguments writes none)."""
        if self.log_file and self.exit_code() is not None and not os.path.exists(self.log_file):
            return f"the Unity player {self.path} (port {self.port}, which wrote no log)"
        return describe_player(self.path, self.port, self.log_file)

    def exit_code(self) -> Optional[int]:
        return self.process.poll()

    def stop(self, wait: float = 5.0, grace: float = 0.0) -> None:
        """Ask the player's process group to end (after ``grace`` seconds to quit by itself); kill
        it if it has not within ``wait`` seconds."""
        if grace > 0:
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        self._signal(getattr(signal, "SIGKILL", signal.SIGTERM))  # what the player itself started
        try:
            self.process.wait(wait)
        except subprocess.TimeoutExpired:
            pass

    def _signal(self, sig: int) -> None:
        try:
            if sys.platform == "win32":
                self.process.terminate()
            else:
                os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError, OSError):
            pass


class _Servicer(pb_grpc.UnityToExternalProtoServicer):
    """Hands each call to the trainer (``inbox``) and returns the trainer's answer (``outbox``)."""

    def __init__(self) -> None:
        self.inbox: "queue.Queue[pb.UnityMessageProto]" = queue.Queue()
        self.outbox: "queue.Queue[pb.UnityMessageProto]" = queue.Queue()
        self.closed = threading.Event()

    def Exchange(self, request: pb.UnityMessageProto, context: object) -> pb.UnityMessageProto:  # noqa: N802
        self.inbox.put(request)
        while not self.closed.is_set():
            try:
                return self.outbox.get(timeout=0.1)
            except queue.Empty:
                continue
        return closing_message()


def closing_message() -> pb.UnityMessageProto:
    """Status 400: the trainer is done; the player quits."""
    message = pb.UnityMessageProto()
    message.header.status = 400
    return message


def check_port_free(port: int, label: str) -> None:
    """One line if another program (another run, or ML-Agents) already listens on ``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("localhost", port))
        except OSError as e:
            raise UnityCommunicationError(
                f"Port {port} for {label} is in use ({e.strerror}): another training run or Unity Editor "
                "connection may hold it; choose another --base-port.") from e


class Communicator:
    """Serves the exchange on ``port`` and talks to one player (or the Editor)."""

    def __init__(self, port: int, timeout_wait: float, player: Optional[PlayerProcess] = None) -> None:
        self.port = port
        self.timeout_wait = timeout_wait
        self.player = player
        self.servicer = _Servicer()
        self.server: Optional[grpc.Server] = None
        self.pending = False  # a call of the player waits for the trainer's answer

    def describe(self) -> str:
        return self.player.describe() if self.player is not None else f"the Unity Editor (port {self.port})"

    def start(self, label: Optional[str] = None) -> None:
        """Serve on the port; ``label`` names the peer in errors (the player before it is launched)."""
        label = label or self.describe()
        check_port_free(self.port, label)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[
            ("grpc.so_reuseport", 0), ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
        pb_grpc.add_UnityToExternalProtoServicer_to_server(self.servicer, server)
        try:
            server.add_insecure_port(f"[::]:{self.port}")
        except RuntimeError as e:
            raise UnityCommunicationError(f"Cannot listen on port {self.port} for {label} ({e}); choose "
                                          "another --base-port.") from e
        server.start()
        self.server = server

    def receive(self, first: bool = False) -> pb.UnityMessageProto:
        """The player's next message; waits ``timeout_wait`` seconds at most, watching its process."""
        deadline = time.monotonic() + self.timeout_wait
        while True:
            try:
                message = self.servicer.inbox.get(timeout=POLL_SECONDS)
                break
            except queue.Empty:
                pass
            raise_if_stopping()  # before the player's exit: a Ctrl-C reaches the player too
            code = self.player.exit_code() if self.player is not None else None
            if code is not None:
                raise UnityCommunicationError(f"{self._who()} exited with code {code}"
                                              f"{' before it connected' if first else ''}.")
            if time.monotonic() > deadline:
                if first:
                    hint = "" if self.player is not None else ": press Play in the Editor after starting kerasrl"
                    raise UnityCommunicationError(f"{self._who()} did not connect within {self.timeout_wait:g} s "
                                                  f"(--timeout-wait){hint}.")
                raise UnityCommunicationError(f"{self._who()} sent nothing for {self.timeout_wait:g} s "
                                              "(--timeout-wait): it hangs.")
        self.pending = True
        if message.header.status == 400:
            raise UnityCommunicationError(f"{self._who()} closed the connection"
                                          f"{': ' + message.header.message if message.header.message else ''}.")
        if message.header.status not in (0, 200):
            raise UnityCommunicationError(f"{self._who()} sent status {message.header.status}: "
                                          f"{message.header.message or 'no message'}.")
        return message

    def _who(self) -> str:
        who = self.describe()
        return who[0].upper() + who[1:]

    def send(self, unity_input: pb.UnityInputProto) -> None:
        """Answer the player's waiting call with ``unity_input``."""
        message = pb.UnityMessageProto()
        message.header.status = 200
        message.unity_input.CopyFrom(unity_input)
        self.pending = False
        self.servicer.outbox.put(message)

    def exchange(self, unity_input: pb.UnityInputProto) -> pb.UnityMessageProto:
        self.send(unity_input)
        return self.receive()

    def close(self) -> None:
        """Tell a waiting player to quit, stop serving, and stop the player's process."""
        told_to_quit = self.pending
        if self.pending:
            self.servicer.outbox.put(closing_message())
            self.pending = False
        if self.server is not None:
            time.sleep(0.05)  # let gRPC deliver the answer before the servicer gives up waiting
        self.servicer.closed.set()
        if self.server is not None:
            self.server.stop(grace=0.5).wait(2.0)
            self.server = None
        if self.player is not None:
            self.player.stop(grace=2.0 if told_to_quit else 0.0)
