"""The ``kerasrl`` command: ``kerasrl export RUN_DIR`` and ``kerasrl plot RUN_DIR...``."""
from __future__ import annotations

import argparse
import sys
import traceback
from typing import Optional, Sequence

from kerasrl.cli.main import quiet_tensorflow, tensorflow_start_up_hidden
from kerasrl.cli.parser import OneLineParser
from kerasrl.exception import TrainerError
from kerasrl.plot import DEFAULT_KEYS, plot_runs


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="kerasrl", description="Tools for kerasrl runs.")
    sub = p.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="export a run's newest checkpoints as SavedModel (and ONNX)")
    export.add_argument("run_dir", help="the run folder (results/<run-id>)")
    export.add_argument("--no-onnx", action="store_true", help="SavedModel only, even with tf2onnx installed")
    plot = sub.add_parser("plot", help="learning curves of one or more runs to a PNG (needs matplotlib)")
    plot.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders holding <behavior>.csv")
    plot.add_argument("-o", "--output", default="learning_curves.png",
                      help="image file to write (its suffix picks the format: .png, .jpg, .svg, .pdf, ...)")
    plot.add_argument("--force", action="store_true", help="overwrite an existing output file")
    plot.add_argument("--key", action="append", default=None,
                      help="metric column to plot (repeatable; default: Environment/Cumulative Reward)")
    plot.add_argument("--title", default=None)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _run(args: argparse.Namespace) -> None:
    if args.command == "export":
        quiet_tensorflow(args.debug)
        with tensorflow_start_up_hidden(args.debug):
            from kerasrl.export import export_run  # after quiet_tensorflow, which TensorFlow reads as it loads

        for behavior, paths in export_run(args.run_dir, onnx=False if args.no_onnx else None).items():
            print(f"{behavior}: {', '.join(paths[k] for k in ('savedmodel', 'onnx', 'unity_onnx') if k in paths)}", flush=True)
    else:
        print(plot_runs(args.run_dirs, args.output, args.key or DEFAULT_KEYS, args.title, force=args.force), flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run a subcommand; a ``TrainerError`` is one line on stderr and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _run(args)
    except TrainerError as e:
        if args.debug:  # the traceback too, with the same exit status
            traceback.print_exc()
        print(f"kerasrl {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
