"""What a run adds to the hyper-parameters (paths, run id, seed, a ``--steps`` override)."""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any, Optional

from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.settings.trainer import TrainerSettings
from kerasrl.spec import behavior_file_name

#: How the names of kerasrl's own hidden files in a run folder begin (its marker, its lock...:
#: ``kerasrl.cli.run_folder``); here so that the Python API, which must not import the command line, sees them too.
HIDDEN_PREFIX = ".kerasrl-"
#: The largest seed: NumPy's ``np.random.seed`` (which a run seeds) takes 0 to 2**32 - 1.
MAX_SEED = 2**32 - 1


def check_seed(seed: int, name: str = "--seed") -> int:
    """``seed`` if it is an integer from 0 to :data:`MAX_SEED`, else a one-line ``TrainerError``
    naming ``name`` and that range (instead of NumPy's traceback once the run has started)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
        raise TrainerError(f"{name} must be an integer from 0 to {MAX_SEED}, got {seed!r}.")
    return int(seed)


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What a run adds to the hyper-parameters: where it writes, its id and seed, whether it
    trains or resumes, and a ``max_steps`` override (``--steps``). Never merged into settings."""

    run_id: str = "ppo"
    summaries_dir: str = "results/ppo/summaries"
    model_path: str = "results/ppo/models"
    keep_checkpoints: int = 5
    train_model: bool = True
    load_model: bool = False
    seed: int = 0
    max_steps: Optional[int] = None
    #: Where the per-behavior metrics CSV goes (``<metrics_dir>/<behavior>.csv``); None:
    #: beside the TensorBoard folder, ``<summary_path>.csv`` (ML-Agents' TrainerMetrics path).
    metrics_dir: Optional[str] = None
    #: Another run's models folder to start from (its newest checkpoint: weights, normalizer,
    #: optimizer), with the step counted from 0 (``--initialize-from``).
    initialize_from: Optional[str] = None
    #: Whether the environment steps in processes of its own (environment workers, Ray actors, a
    #: Unity player), which is where ``threaded: auto`` updates in a thread.
    environment_in_other_processes: bool = False

    def initial_model_path(self, behavior: str, settings: TrainerSettings) -> Optional[str]:
        """The checkpoint folder a new run of ``behavior`` starts from: its section's ``init_path``,
        else the behavior's folder under ``initialize_from`` (``--initialize-from``), else None."""
        if settings.init_path is not None:
            return settings.init_path
        return os.path.join(self.initialize_from, behavior) if self.initialize_from is not None else None

    def __post_init__(self) -> None:
        if self.keep_checkpoints < 1:
            raise TrainerConfigError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}.")
        if self.max_steps is not None and self.max_steps < 1:
            raise TrainerConfigError(f"max_steps must be >= 1, got {self.max_steps}.")
        if self.initialize_from is not None and self.load_model:
            raise TrainerConfigError("initialize_from starts a new run from another one; it cannot be combined "
                                     "with load_model (which continues this run).")

    @classmethod
    def in_results_dir(cls, results_dir: str, run_id: str, **kwargs: Any) -> "RunContext":
        """Models in ``results_dir/run_id/models``, summaries in ``results_dir/run_id/summaries``,
        the metrics CSVs in ``results_dir/run_id``."""
        run_dir = os.path.join(results_dir, run_id)
        return cls(run_id=run_id, model_path=os.path.join(run_dir, "models"),
                   summaries_dir=os.path.join(run_dir, "summaries"), metrics_dir=run_dir, **kwargs)

    # Paths name a behavior by behavior_file_name: no "?" or "=" of a team suffix in them.
    def summary_path(self, behavior: str) -> str:
        """The behavior's TensorBoard folder."""
        return f"{self.summaries_dir}/{self.run_id}_{behavior_file_name(behavior)}"

    def metrics_path(self, behavior: str) -> str:
        """The behavior's metrics CSV."""
        if self.metrics_dir is None:
            return f"{self.summary_path(behavior)}.csv"
        return os.path.join(self.metrics_dir, f"{behavior_file_name(behavior)}.csv")

    def behavior_model_path(self, behavior: str) -> str:
        """The behavior's checkpoints and exported models."""
        return f"{self.model_path}/{behavior_file_name(behavior)}"

    def max_steps_for(self, settings: TrainerSettings) -> int:
        return settings.max_steps if self.max_steps is None else self.max_steps
