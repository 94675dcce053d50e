"""The fit-style Python API: ``kerasrl.PPO(env, ...).fit(total_steps, callbacks=...)``, ``kerasrl.SAC``
(the same for Soft Actor-Critic), ``kerasrl.POCA`` (MA-POCA, for groups), ``kerasrl.load``.

Built over the same objects as the command line: an env manager, a ``PPOTrainer`` (whose
learner is built under the chosen ``tf.distribute`` strategy) and a ``TrainerController``
whose loop calls the callbacks — one Keras epoch per policy update::

    import keras, kerasrl

    agent = kerasrl.PPO("CartPole-v1", config="cartpole_zoo", seed=0)
    history = agent.fit(100_000, callbacks=[  # patience counts updates (256 steps each here)
        keras.callbacks.EarlyStopping(monitor="episode_reward_mean", mode="max", patience=40),
        keras.callbacks.CSVLogger("cartpole.csv")])
    agent.save("cartpole.keras")
    actions = kerasrl.load("cartpole.keras").predict(observations)  # observations: [n, 4]

The package's modules, one per concern: :mod:`kerasrl.api.arguments` (config, environment and run
folder arguments), :mod:`kerasrl.api.models` (what callbacks see as ``model``),
:mod:`kerasrl.api.fit_controller` (the loop of ``fit``), :mod:`kerasrl.api.agent` (what the agents
share), :mod:`kerasrl.api.ppo`, :mod:`kerasrl.api.sac`, :mod:`kerasrl.api.poca`, :mod:`kerasrl.api.saving`
(the archive) and :mod:`kerasrl.api.loading` (``kerasrl.load``).
"""
from __future__ import annotations

from kerasrl.api.arguments import ConfigArg, as_env_manager, behavior_settings
from kerasrl.api.loading import load
from kerasrl.api.models import PolicyModel, SACModel
from kerasrl.api.poca import POCA, POCA_FORMAT, POCA_UPDATE_KEYS
from kerasrl.api.ppo import PPO, PPO_FORMAT, PPO_UPDATE_KEYS
from kerasrl.api.sac import LEARNING_RATE_CALLBACKS, SAC, SAC_FORMAT, SAC_UPDATE_KEYS
from kerasrl.api.saving import REWARD_STATE

__all__ = [
    "LEARNING_RATE_CALLBACKS", "POCA", "POCA_FORMAT", "POCA_UPDATE_KEYS", "PPO", "PPO_FORMAT", "PPO_UPDATE_KEYS",
    "REWARD_STATE", "SAC", "SAC_FORMAT", "SAC_UPDATE_KEYS", "ConfigArg", "PolicyModel", "SACModel", "as_env_manager",
    "behavior_settings", "load",
]
