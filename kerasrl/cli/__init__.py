"""The command line: ``kerasrl-learn`` (train, resume, run or record a trained policy) and
``kerasrl`` (export a run's policy, plot runs). Nothing in kerasrl imports this package."""
from kerasrl.cli.main import EXIT_INTERRUPTED, main, quiet_tensorflow
from kerasrl.cli.parser import build_parser

__all__ = ["EXIT_INTERRUPTED", "build_parser", "main", "quiet_tensorflow"]
