"""The ``poca`` trainer type, as kerasrl registers it through the ``kerasrl.trainer_type`` entry point."""
from __future__ import annotations

from kerasrl.settings import POCASettings


def trainer_types() -> tuple[dict[str, str], dict[str, type]]:
    """``({name: trainer class path}, {name: settings class})``: the class path is loaded when first
    trained, so reading a config does not load TensorFlow."""
    return {"poca": "kerasrl.poca.trainer:POCATrainer"}, {"poca": POCASettings}
