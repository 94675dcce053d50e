"""``kerasrl-learn``: parse the flags, set what must be set before TensorFlow loads, then train.

The launcher owns the process's signals: SIGTERM and SIGHUP stop a run as Ctrl-C does (the
controller saves, the workers are closed, the exit status is 128 + the signal's number), and
TensorFlow's start-up chatter on stderr is kept out unless ``--debug`` (``kerasrl.tf_startup``).
Importing kerasrl changes neither.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import traceback
from typing import Any, Iterator, Optional, Sequence

from kerasrl.cli.env_parameters import PARAMETER_BLOCKS, EnvParameters
from kerasrl.cli.parser import build_parser, check_args
from kerasrl.cli.run_options import apply_run_options, apply_torch_device, given_flags
from kerasrl.configs import config_source
from kerasrl.exception import EnvironmentException, TrainerError
from kerasrl.settings import load_trainer_config
from kerasrl.tf_startup import is_start_up_chatter, quiet_tensorflow, tensorflow_start_up_hidden

__all__ = ["EXIT_INTERRUPTED", "STOP_SIGNALS", "is_start_up_chatter", "main", "quiet_tensorflow",
           "tensorflow_start_up_hidden"]

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130
#: Signals that stop a run as Ctrl-C does (``timeout``, Docker, Kubernetes and Slurm send
#: SIGTERM; a closed terminal or SSH session SIGHUP); the exit status is 128 + the number.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

class _LostOutputDropped:
    """A text stream (stdout or stderr) that outlives what it writes to: once a write fails (the
    terminal was closed, the reading end of a pipe went away) its file descriptor is pointed at
    ``os.devnull`` and the run goes on, saving as it would, with its output dropped."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _lost(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._lost()
            with contextlib.suppress(OSError):
                self._stream.flush()  # what was buffered goes to os.devnull now

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _output_may_be_lost() -> Iterator[None]:
    """stdout and stderr as :class:`_LostOutputDropped` for the block."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _LostOutputDropped(sys.stdout), _LostOutputDropped(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class _StopSignals:
    """While installed: the first SIGTERM or SIGHUP raises ``KeyboardInterrupt`` in the main
    thread, which the trainer controller handles as a Ctrl-C (it saves, then closes the
    environment); later ones only say that the run is stopping (SIGKILL still ends it)."""

    def __init__(self) -> None:
        self.received: Optional[int] = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            print(f"kerasrl: {signal.Signals(signum).name}: already stopping.",
                  file=sys.stderr, flush=True)
            return
        self.received = signum
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator["_StopSignals"]:
        """Install the handlers (main thread only) for the block, then restore the previous ones.
        A signal this process inherited as ignored stays ignored (``nohup`` ignores SIGHUP)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS
                              if signal.getsignal(s) != signal.SIG_IGN}
        try:
            yield self
        finally:
            for signum, handler in self._previous.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python

    def exit_status(self) -> int:
        """128 + the stopping signal's number (Ctrl-C's 130 when none of ours came)."""
        return EXIT_INTERRUPTED if self.received is None else 128 + self.received

    def stopped_by(self) -> str:
        return "interrupted" if self.received is None else f"stopped by {signal.Signals(self.received).name}"


def main(argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None,
         default_config: Optional[str] = None) -> int:
    """Parse ``argv`` and train. A ``TrainerError`` or an environment's error is one line on
    stderr and exit status 2 (``--debug`` shows the traceback); Ctrl-C exits with 130, SIGTERM
    with 143 and SIGHUP with 129, each after saving the model (once training has started).

    The training stack (and so TensorFlow) is imported only once the flags, the trainer config
    and the curriculum and sampler files are checked and TensorFlow's log level is set, which it
    reads when it loads."""
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    args.argv = [parser.prog, *(sys.argv[1:] if argv is None else argv)]
    quiet_tensorflow(args.debug)
    with _output_may_be_lost(), _StopSignals().installed() as stop:
        try:
            check_args(args)
            config = load_trainer_config(config_source(args.trainer_config_path or default_config))  # errors first
            if config.run_options:  # today's layout: its run blocks under the command line's flags
                apply_run_options(args, parser, config.run_options, given_flags(parser, args.argv[1:]), config.source)
                check_args(args)
            apply_torch_device(getattr(args, "torch_device", None))
            # (a multi-host run first says which flags it cannot take, once TensorFlow is loaded)
            hosts = getattr(args, "worker_hosts", None) is not None or bool(os.environ.get("TF_CONFIG"))
            blocks = {k: v for k, v in config.run_options.items() if k in PARAMETER_BLOCKS}
            if hosts and blocks:
                raise TrainerError(f"{next(iter(blocks))} in {config.source}: a run on several hosts takes no "
                                   "environment parameters.")
            env_params = EnvParameters.from_args(args, blocks, config.source) \
                if args.record_demo is None and not hosts else None
            with tensorflow_start_up_hidden(args.debug):
                from kerasrl.cli.train import record_demo, run_training  # after quiet_tensorflow: see the docstring

            if args.record_demo is not None:
                result = record_demo(args, default_config=default_config)
            else:
                result = run_training(args, default_config=default_config, env_params=env_params)
        except (TrainerError, EnvironmentException) as e:
            if args.debug:  # the traceback too, with the same exit status
                traceback.print_exc()
            print(f"{parser.prog}: error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"{parser.prog}: {stop.stopped_by()} before training started; nothing was saved.", file=sys.stderr)
            return stop.exit_status()
        if not result["interrupted"]:
            return 0
        if stop.received is not None:
            print(f"{parser.prog}: {stop.stopped_by()} (exit status {stop.exit_status()}).", file=sys.stderr)
        return stop.exit_status()


if __name__ == "__main__":
    sys.exit(main())
