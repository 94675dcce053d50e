"""The ``kerasrl`` command: ``kerasrl export RUN_DIR``, ``kerasrl plot RUN_DIR...`` and
``kerasrl upgrade-config OLD NEW``."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import traceback
from typing import Optional, Sequence

import yaml

from kerasrl.cli.main import quiet_tensorflow, tensorflow_start_up_hidden
from kerasrl.cli.parser import OneLineParser
from kerasrl.configs import config_source
from kerasrl.exception import TrainerError
from kerasrl.plot import DEFAULT_KEYS, plot_runs
from kerasrl.settings import load_trainer_config
from kerasrl.settings.upgrade import todays_layout
from kerasrl.settings.upgrade_parameters import dropped_interval, with_parameter_files


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
    upgrade = sub.add_parser("upgrade-config", help="write a trainer config in today's ML-Agents layout (behaviors:)")
    upgrade.add_argument("old", help="the config (the 0.9-0.15 layout, or today's: rewritten in full)")
    upgrade.add_argument("new", help="the file to write")
    upgrade.add_argument("--force", action="store_true", help="overwrite an existing NEW")
    upgrade.add_argument("--curriculum", metavar="DIR", default=None,
                         help="a curriculum folder (one JSON file per behavior) or YAML file (behavior -> "
                              "curriculum) to write as environment_parameters")
    upgrade.add_argument("--sampler", metavar="FILE", default=None,
                         help="a sampler file (resampling-interval and samplers) to write as environment_parameters")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _run(args: argparse.Namespace) -> None:
    if args.command == "export":
        quiet_tensorflow(args.debug)
        with tensorflow_start_up_hidden(args.debug):
            from kerasrl.export import export_run  # after quiet_tensorflow, which TensorFlow reads as it loads

        for behavior, paths in export_run(args.run_dir, onnx=False if args.no_onnx else None).items():
            print(f"{behavior}: {', '.join(paths[k] for k in ('savedmodel', 'onnx', 'unity_onnx') if k in paths)}", flush=True)
    elif args.command == "upgrade-config":
        print(upgrade_config(args.old, args.new, force=args.force, curriculum=args.curriculum,
                             sampler=args.sampler), flush=True)
    else:
        print(plot_runs(args.run_dirs, args.output, args.key or DEFAULT_KEYS, args.title, force=args.force), flush=True)


def upgrade_config(old: str, new: str, force: bool = False, curriculum: Optional[str] = None,
                   sampler: Optional[str] = None) -> str:
    """Writes ``old`` in today's layout to ``new`` (atomically; an existing ``new`` only with
    ``force``, never ``old`` itself), with a ``curriculum`` folder and a ``sampler`` file as its
    ``environment_parameters``; returns what it wrote."""
    if os.path.exists(new):
        if os.path.exists(old) and os.path.samefile(old, new):
            raise TrainerError(f"{new} is the config being upgraded: write the upgrade to another file.")
        if not force:
            raise TrainerError(f"{new} already exists: give another file, or --force to replace it.")
    folder = os.path.dirname(os.path.abspath(new))
    if not os.path.isdir(folder):
        raise TrainerError(f"The folder {folder} of {new} does not exist (kerasrl does not create it).")
    config = load_trainer_config(config_source(old))
    if curriculum or sampler:
        config = dataclasses.replace(config, run_options=with_parameter_files(config.run_options, curriculum, sampler,
                                                                              config.source))
    text = yaml.safe_dump(todays_layout(config), sort_keys=False)
    tmp = f"{new}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"# {os.path.basename(old)} in today's ML-Agents layout (kerasrl upgrade-config).\n{text}")
        os.replace(tmp, new)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise TrainerError(f"{new} could not be written: {e.strerror or e}.") from e
    interval = dropped_interval(config.run_options)
    note = "" if interval is None else (f" The samplers' resampling-interval {interval} has no place there: they are "
                                        "drawn each episode (by a Unity scene, or by each copy of a Gymnasium env); "
                                        "to draw every so many steps, keep the --sampler file.")
    return f"Wrote {new} ({len(config.behavior_sections)} behavior sections, {config.layout} → today's layout).{note}"


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
