"""The stand-alone behavioral-cloning trainer types, ``offline_bc`` and ``online_bc``, as kerasrl
registers them through the ``kerasrl.trainer_type`` entry point."""
from __future__ import annotations

from kerasrl.settings import OfflineBCSettings, OnlineBCSettings


def trainer_types() -> tuple[dict[str, str], dict[str, type]]:
    """``({name: trainer class path}, {name: settings class})``: the class paths are loaded when
    first trained, so reading a config does not load TensorFlow."""
    trainers = {"offline_bc": "kerasrl.bc.trainer:OfflineBCTrainer", "online_bc": "kerasrl.bc.trainer:OnlineBCTrainer"}
    return trainers, {"offline_bc": OfflineBCSettings, "online_bc": OnlineBCSettings}
