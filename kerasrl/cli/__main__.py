"""``python -m kerasrl.cli``: the same as ``kerasrl-learn``."""
import sys

from kerasrl.cli.main import main

sys.exit(main())
