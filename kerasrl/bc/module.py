"""Behavioral cloning between an algorithm's updates: the ``pretraining`` section.

After every update of its algorithm the policy also imitates a demonstration, with its own
Adam whose learning rate is the algorithm's (initial) one × ``strength``, decaying linearly to 0
over ``steps`` of the trainer's step (constant when ``steps`` is 0). ``batch_size`` and
``num_epoch`` default to the algorithm's; ``samples_per_update`` (0: all) caps the
demonstration rows one epoch uses. ``Pretraining`` takes the algorithm's policy as a
``kerasrl.bc.learner.Imitator``; ``BCModule`` is PPO's and POCA's (an ``ActorCritic``).
"""
from __future__ import annotations

import keras

from kerasrl.bc.actor_critic import ActorCriticImitator
from kerasrl.bc.learner import BCLearner, Imitator, as_tensors, imitation_batch
from kerasrl.demos import load_demo
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.settings import BehavioralCloningSettings
from kerasrl.spec import BehaviorSpec

LOSS_STAT = "Losses/Pretraining Loss"


class Pretraining:
    """Behavioral cloning of ``settings.demo_path`` on ``imitator``'s policy; its optimizer is
    ``{name}_adam`` (checkpointed with the trainer)."""

    def __init__(self, imitator: Imitator, spec: BehaviorSpec, settings: BehavioralCloningSettings,
                 learning_rate: float, default_batch_size: int, default_num_epoch: int, seed: int = 0,
                 behavior: str = "", name: str = "pretraining") -> None:
        _, demo = load_demo(settings.demo_path, spec, behavior)
        self.settings = settings
        self.seed = int(seed)
        self.base_learning_rate = float(learning_rate) * settings.strength
        self.steps = settings.steps
        self.batch_size = settings.batch_size or int(default_batch_size)
        self.num_epoch = settings.num_epoch or int(default_num_epoch)
        self.learner = BCLearner(imitator, self.base_learning_rate, name=name)
        self.data = as_tensors(imitation_batch(spec, demo, imitator))
        self.n_rows = int(self.data[next(iter(self.data))].shape[0])
        seq_len = self.learner.sequence_length
        #: Whole sequences (rows, without memory) per mini-batch.
        self.n_sequences = max(min(self.batch_size, self.n_rows) // seq_len, 1)
        per_update = settings.samples_per_update
        self.max_batches = max(per_update // (self.n_sequences * seq_len), 1) if per_update > 0 else None
        where = f"Behavior {behavior}: pretraining: " if behavior else "pretraining: "
        self.learner.check_batch_size(self.n_sequences * seq_len, where)
        self.update_count = 0

    @property
    def optimizer(self) -> keras.optimizers.Optimizer:
        """The module's own Adam (checkpointed with the trainer)."""
        return self.learner.optimizer

    @property
    def batches_per_update(self) -> int:
        """The mini-batches (gradient steps) of an update."""
        per_epoch = max(self.n_rows // self.learner.sequence_length // self.n_sequences, 1)
        return self.num_epoch * min(per_epoch, self.max_batches or per_epoch)

    def learning_rate(self, step: int) -> float:
        """``learning rate × strength``, linearly to 0 at ``steps`` (constant when ``steps`` is 0)."""
        if self.steps == 0:
            return self.base_learning_rate
        return self.base_learning_rate * max(1.0 - float(step) / self.steps, 0.0)

    def update(self, step: int) -> dict[str, float]:
        """``num_epoch`` passes over the demonstration in one compiled call; its loss statistic."""
        lr = self.learning_rate(step)
        if lr <= 0.0:
            return {LOSS_STAT: 0.0}
        seed = self.seed * 100003 + self.update_count
        rows = self.learner.plan(self.n_rows, self.batch_size, self.num_epoch, self.max_batches, seed)
        self.update_count += 1
        return {LOSS_STAT: self.learner.update(self.data, rows, lr, seed)}


class BCModule(Pretraining):
    """PPO's and POCA's pretraining: behavioral cloning on ``model``'s policy weights, sampling
    its continuous actions with σ·ε as ML-Agents 0.9 does."""

    def __init__(self, model: ActorCritic, spec: BehaviorSpec, settings: BehavioralCloningSettings,
                 policy_learning_rate: float, default_batch_size: int, default_num_epoch: int, seed: int = 0,
                 behavior: str = "") -> None:
        super().__init__(ActorCriticImitator(model, sample_noise=True), spec, settings, policy_learning_rate,
                         default_batch_size, default_num_epoch, seed, behavior, name="pretraining")
