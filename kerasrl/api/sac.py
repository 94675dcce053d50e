"""``kerasrl.SAC``: Soft Actor-Critic through the fit-style API."""
from __future__ import annotations

import random
from typing import Any, Optional, Sequence, Union

import keras
import numpy as np

from kerasrl.api.agent import _Agent
from kerasrl.api.arguments import callback_list
from kerasrl.api.models import SACModel
from kerasrl.exception import TrainerError
from kerasrl.sac.networks import SACNetworks
from kerasrl.sac.policy import SACPolicy
from kerasrl.sac.trainer import SACTrainer

SAC_FORMAT = "kerasrl.sac/1"
#: The losses every SAC epoch's logs hold (from the update's gradient steps, averaged).
SAC_UPDATE_KEYS = ("critic_loss", "actor_loss", "ent_coef_loss", "ent_coef", "q_value", "learning_rate")
#: The stock callbacks that set ``model.optimizer.learning_rate``, which ``SAC.fit`` refuses.
LEARNING_RATE_CALLBACKS = (keras.callbacks.LearningRateScheduler, keras.callbacks.ReduceLROnPlateau)


class SAC(_Agent):
    """Soft Actor-Critic on one behavior of ``env``, configured like ``kerasrl-learn`` (``trainer:
    sac`` and ML-Agents' SAC keys) and trained with ``fit``.

    ``env``: a Gymnasium id (``num_envs`` copies, default 1) or env, a built-in environment's
    name, a kerasrl ``Environment`` or an env manager. ``config``: a trainer config (a YAML path,
    a shipped config's name such as ``"sac_pendulum"``, or a dict in ML-Agents' form; ``trainer:
    sac`` is implied); keyword ``hyperparameters`` take ML-Agents' key names and override the
    behavior's section. ``gpus`` / ``cpu_replicas`` choose the learner's strategy, as for
    :class:`PPO`. Summaries and checkpoints go to ``run_dir`` (default: a new temporary folder,
    as :class:`PPO`'s). An epoch of ``fit`` is one update (the gradient steps due when
    trajectories reach the replay buffer).
    """

    ALGORITHM, TRAINER, FORMAT, WEIGHTS = "SAC", SACTrainer, SAC_FORMAT, "sac.weights.h5"
    UPDATE_KEYS = SAC_UPDATE_KEYS
    DEFAULT_NUM_ENVS = 1
    trainer: Optional[SACTrainer]
    model: Optional[SACModel]

    def _attach(self, trainer: SACTrainer) -> None:
        self.networks = trainer.networks
        self.model = SACModel(self)

    def _build_networks(self) -> None:
        self.networks = SACNetworks(self.spec, list(self.settings.reward_signals), self.settings.network,
                                    self.settings.hyperparameters, seed=self.seed, name="sac")

    @property
    def _networks(self) -> keras.Model:
        return self.networks

    def _counters(self, trainer: SACTrainer) -> tuple[int, int]:
        return trainer.step, trainer.update_steps

    def _continue_at(self, trainer: SACTrainer, step: int, updates: int) -> None:
        trainer.step, trainer.update_steps = step, updates
        trainer.policy.refresh()

    def _steps_per_epoch(self) -> int:
        return self.settings.time_horizon + 1

    def fit(self, total_steps: int, callbacks: Optional[Sequence[keras.callbacks.Callback]] = None,
            verbose: Union[int, str] = 1) -> keras.callbacks.History:
        """Train for ``total_steps`` more environment steps (all copies counted; training stops
        earlier at the config's ``max_steps`` or when a callback sets ``model.stop_training``).
        One epoch per update; its logs hold ``episode_reward_mean``, ``episode_length_mean`` (last
        100 episodes), ``fps``, the update's mean ``critic_loss``, ``actor_loss``, ``ent_coef_loss``,
        ``ent_coef``, ``q_value``, ``learning_rate``, ``step`` and ``episodes``. ``verbose`` as
        :meth:`PPO.fit`. Ctrl-C, SIGTERM or SIGHUP saves a checkpoint in the run folder and raises ``KeyboardInterrupt``.
        Callbacks cannot set the learning rate (``LearningRateScheduler``, ``ReduceLROnPlateau``): SAC
        has three optimizers; the config's ``learning_rate`` and ``learning_rate_schedule`` set it."""
        for c in callback_list(callbacks):
            if isinstance(c, LEARNING_RATE_CALLBACKS):
                raise TrainerError(f"kerasrl.SAC.fit: {type(c).__name__} cannot set SAC's learning rate (it has three "
                                   "optimizers: actor, critics, entropy coefficient); set learning_rate and "
                                   "learning_rate_schedule in the config instead.")
        return super().fit(total_steps, callbacks, verbose)

    def predict(self, observations: Any, action_mask: Optional[np.ndarray] = None,
                deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of vector observations ``[n, size]`` (or a list of one array per
        observation, cameras ``[n, h, w, c]`` included; with one observation, nested lists of rows
        too): continuous ones in [-1, 1] (``tanh(μ)`` when deterministic, which the
        environment maps onto its bounds), discrete ones the most probable allowed action of every
        branch (or samples)."""
        obs = self._checked_observations(observations)
        mask = self._checked_mask(action_mask, len(obs[0]))
        policy = SACPolicy(self.networks, seed=random.randrange(2**31), deterministic=bool(deterministic))
        return policy.actions(policy.inputs(obs), mask)
