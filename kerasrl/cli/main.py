"""``kerasrl-learn``: parse the flags, set what must be set before TensorFlow loads, then train."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from kerasrl.cli.parser import build_parser, check_args
from kerasrl.exception import EnvironmentException, TrainerError

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130


def quiet_tensorflow(debug: bool) -> None:
    """TensorFlow's C++ logs off unless ``--debug`` (before TF loads): errors that matter reach
    us as exceptions, and loading an XLA cache entry logs two spurious ones (``kerasrl.xla_cache``).
    oneDNN stays on (TensorFlow's default; its one-line banner is the price): it speeds up a CNN
    policy's update on CPU (benchmarks/README.md)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if debug else "3")


def main(argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None,
         default_config: Optional[str] = None) -> int:
    """Parse ``argv`` and train. A ``TrainerError`` or an environment's error is one line on
    stderr and exit status 2 (``--debug`` shows the traceback); Ctrl-C exits with 130.

    The training stack (and so TensorFlow) is imported only once the flags are checked and
    TensorFlow's log level is set, which it reads when it loads."""
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    args.argv = [parser.prog, *(sys.argv[1:] if argv is None else argv)]
    quiet_tensorflow(args.debug)
    try:
        check_args(args)
        from kerasrl.cli.train import record_demo, run_training  # after quiet_tensorflow: see the docstring

        if args.record_demo is not None:
            result = record_demo(args, default_config=default_config)
        else:
            result = run_training(args, default_config=default_config)
    except (TrainerError, EnvironmentException) as e:
        if args.debug:
            raise
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted before training started; nothing was saved.", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_INTERRUPTED if result["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
