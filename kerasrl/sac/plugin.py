"""The ``sac`` trainer type, as kerasrl registers it through the ``kerasrl.trainer_type`` entry point."""
from __future__ import annotations

from kerasrl.settings import SACSettings


def trainer_types() -> tuple[dict[str, str], dict[str, type]]:
    """``({name: trainer class path}, {name: settings class})``: the class path is loaded when first
    trained, so reading a config does not load TensorFlow."""
    return {"sac": "kerasrl.sac.trainer:SACTrainer"}, {"sac": SACSettings}
