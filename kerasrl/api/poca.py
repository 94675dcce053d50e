"""``kerasrl.POCA``: MA-POCA (groups of agents with a shared reward) through the fit-style API."""
from __future__ import annotations

from typing import Any, Optional

import keras
import numpy as np

from kerasrl.api.agent import _Agent
from kerasrl.api.models import TrainingAgent, _TrainingModel
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.poca.networks import POCACritic
from kerasrl.poca.trainer import POCATrainer

POCA_FORMAT = "kerasrl.poca/1"
#: The losses every MA-POCA epoch's logs hold (from the learner's update).
POCA_UPDATE_KEYS = ("loss", "policy_loss", "value_loss", "baseline_loss", "entropy", "approx_kl", "clip_fraction",
                    "learning_rate")


class POCANetworks(keras.Model):
    """The actor (which acts and is exported) and the centralised critic, saved and loaded together."""

    def __init__(self, actor: ActorCritic, critic: POCACritic) -> None:
        super().__init__(name="poca_networks")
        self.actor, self.critic = actor, critic
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        return self.actor(inputs)


class POCAModel(_TrainingModel):
    """What ``callback.model`` is during :meth:`POCA.fit`: the actor, the critic and the optimizer
    plus the trainer's step and update count (``save_weights``/``load_weights`` carry them)."""

    def __init__(self, agent: TrainingAgent, networks: POCANetworks) -> None:
        super().__init__(agent, "kerasrl_poca")
        self.networks = networks
        self.optimizer = agent._active_trainer().learner.optimizer
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        return self.networks(inputs)


class POCA(_Agent):
    """MA-POCA on one behavior of ``env`` (its agents in groups: ``StepResult.group_id`` and
    ``group_reward``), configured like ``kerasrl-learn`` (``trainer: poca``) and trained with ``fit``;
    arguments as :class:`kerasrl.PPO`'s. The learning rate follows the config's schedule (a
    callback's learning rate is not applied)."""

    ALGORITHM, TRAINER, FORMAT, WEIGHTS = "POCA", POCATrainer, POCA_FORMAT, "poca_networks.weights.h5"
    UPDATE_KEYS = POCA_UPDATE_KEYS
    trainer: Optional[POCATrainer]
    model: Optional[POCAModel]

    def _attach(self, trainer: POCATrainer) -> None:
        self.networks = POCANetworks(trainer.learner.actor, trainer.learner.critic)
        self.model = POCAModel(self, self.networks)
        self._predict_fns: dict[bool, Any] = {}

    def _build_networks(self) -> None:
        actor = ActorCritic(self.spec, list(self.settings.reward_signals), self.settings.network, seed=self.seed,
                            name="actor_critic")
        critic = POCACritic(self.spec, list(self.settings.reward_signals), self.settings.network, actor.normalizer,
                            seed=self.seed, name="poca_critic")
        self.networks = POCANetworks(actor, critic)
        self._predict_fns = {}

    @property
    def _networks(self) -> keras.Model:
        return self.networks

    def _continue_at(self, trainer: POCATrainer, step: int, updates: int) -> None:
        trainer.step, trainer.update_count = step, updates
        trainer.policy.refresh()
        trainer.policy.refresh_normalizer()

    def _steps_per_epoch(self) -> int:
        return self.settings.hyperparameters.buffer_size

    def predict(self, observations: Any, action_mask: Optional[np.ndarray] = None,
                deterministic: bool = True) -> np.ndarray:
        """Each agent's action from its own observations (the actor acts alone; the critic only
        trains it), as :meth:`kerasrl.PPO.predict`."""
        obs = self._checked_observations(observations)
        model, n = self.networks.actor, len(obs[0])
        inputs = model.acting_inputs(obs, self._checked_mask(action_mask, n))
        deterministic = bool(deterministic)
        noise = (np.zeros((n, self.spec.action_size), np.float32) if deterministic
                 else model.draw_noise(np.random.default_rng(), n))
        if deterministic not in self._predict_fns:
            self._predict_fns[deterministic] = model.act_function(deterministic)
        return self._predict_fns[deterministic](inputs, noise)[Field.ACTIONS].numpy()
