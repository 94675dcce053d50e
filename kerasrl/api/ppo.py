"""``kerasrl.PPO``: proximal policy optimization through the fit-style API."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence, Union

import keras
import numpy as np

from kerasrl.api.agent import _Agent
from kerasrl.api.models import PolicyModel
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.trainer import PPOTrainer

PPO_FORMAT = "kerasrl.ppo/1"
#: The losses every PPO epoch's logs hold (from the learner's update), besides the reward signals'.
PPO_UPDATE_KEYS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "learning_rate")


class PPO(_Agent):
    """PPO on one behavior of ``env``, configured like ``kerasrl-learn`` and trained with ``fit``.

    ``env``: a Gymnasium id (``num_envs`` copies, default 8) or env, a built-in environment's
    name (``Simple1D``, ...), a kerasrl ``Environment`` or an env manager. ``config``: a trainer
    config (a YAML path, a shipped config's name or a dict in ML-Agents' form); keyword
    ``hyperparameters`` take ML-Agents' key names (``batch_size=64``, ``reward_signals={...}``)
    and override the behavior's section, checked as the YAML is. ``gpus`` / ``cpu_replicas``
    choose the learner's strategy (:func:`kerasrl.distribute.get_strategy`; logical CPU devices
    must be split before TensorFlow starts). Summaries and checkpoints go to ``run_dir``
    (default: a new temporary folder, removed by ``close``, when the agent is garbage-collected
    or when Python exits; kept, and named on stderr, once a Ctrl-C, SIGTERM or SIGHUP saved a checkpoint in it).
    A ``run_dir`` that already holds a run (checkpoints, summaries, a ``kerasrl-learn`` run's marker)
    is refused: a new run would delete its checkpoints.
    """

    ALGORITHM, TRAINER, FORMAT, WEIGHTS = "PPO", PPOTrainer, PPO_FORMAT, "actor_critic.weights.h5"
    UPDATE_KEYS = PPO_UPDATE_KEYS
    trainer: Optional[PPOTrainer]
    model: Optional[PolicyModel]
    _predict_fns: dict[bool, Any]

    def _attach(self, trainer: PPOTrainer) -> None:
        self.actor_critic = trainer.learner.actor_critic
        self.model = PolicyModel(self)
        self._predict_fns = {}

    def _build_networks(self) -> None:
        self.actor_critic = ActorCritic(self.spec, list(self.settings.reward_signals), self.settings.network,
                                        seed=self.seed, name="actor_critic")
        self._predict_fns = {}

    @property
    def _networks(self) -> keras.Model:
        return self.actor_critic

    def _continue_at(self, trainer: PPOTrainer, step: int, updates: int) -> None:
        trainer.step, trainer.update_count = step, updates
        trainer.learner.set_schedules(step)
        trainer.policy.refresh()
        trainer.policy.refresh_normalizer()

    def _steps_per_epoch(self) -> int:
        return self.settings.hyperparameters.buffer_size

    def _extra_logs(self, trainer: PPOTrainer) -> dict[str, float]:
        """Each reward signal's losses (the last of the update)."""
        logs = {}
        for key, values in trainer.stats.items():
            if key.startswith("Losses/") and key not in ("Losses/Value Loss", "Losses/Policy Loss") and values:
                logs[key[len("Losses/"):].lower().replace(" ", "_")] = float(values[-1])
        return logs

    @contextlib.contextmanager
    def _fitting(self, callbacks: keras.callbacks.CallbackList) -> Iterator[None]:
        """A non-finite loss is reported (not raised) while ``TerminateOnNaN`` watches."""
        trainer = self._active_trainer()
        trainer.nonfinite_loss = "report" if any(
            isinstance(c, keras.callbacks.TerminateOnNaN) for c in callbacks.callbacks) else "raise"
        try:
            yield
        finally:
            trainer.nonfinite_loss = "raise"

    def _settle(self, trainer: PPOTrainer) -> None:
        """The update's compilation ahead (``PPOLearner.start_warm_up``) puts the optimizer's state back when it ends."""
        trainer.learner.wait_warm_up()

    def fit(self, total_steps: int, callbacks: Optional[Sequence[keras.callbacks.Callback]] = None,
            verbose: Union[int, str] = 1) -> keras.callbacks.History:
        """Train for ``total_steps`` more environment steps (all copies counted; training stops
        earlier at the config's ``max_steps``, which also sets the schedules' horizon, or when a
        callback sets ``model.stop_training``). One epoch per policy update; its logs hold
        ``episode_reward_mean``, ``episode_length_mean`` (last 100 episodes), ``fps``, the update's
        losses (``loss``, ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``,
        ``clip_fraction``), ``learning_rate``, each reward signal's losses, ``step`` and ``episodes``.
        ``verbose``: 1 (or ``"auto"``) one progress bar over ``total_steps`` on a terminal, else a
        line per summary period (``summary_freq`` steps); 2: a line per summary period; 0: silent
        (:class:`kerasrl.callbacks.FitProgress`). Ctrl-C, SIGTERM or SIGHUP saves a checkpoint in the run folder,
        says where on stderr, and raises ``KeyboardInterrupt``. Once a callback sets ``model.optimizer.learning_rate``
        (``LearningRateScheduler``, ``ReduceLROnPlateau``), the updates use that rate from then on, not the schedule's."""
        return super().fit(total_steps, callbacks, verbose)

    def predict(self, observations: Any, action_mask: Optional[np.ndarray] = None,
                deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations (an array ``[n, ...]``, or a list with one array per
        observation of the behavior; with one observation, nested lists of rows too). Deterministic:
        the most probable allowed action per branch (discrete) or the clipped mean (continuous);
        else a sample. Recurrent policies start each call from zero memory."""
        obs = self._checked_observations(observations)
        model, n = self.actor_critic, len(obs[0])
        inputs = model.acting_inputs(obs, self._checked_mask(action_mask, n))
        deterministic = bool(deterministic)
        if deterministic:
            noise = np.zeros((n, self.spec.action_size), np.float32)
        else:
            noise = model.draw_noise(np.random.default_rng(), n)
        if deterministic not in self._predict_fns:
            self._predict_fns[deterministic] = model.act_function(deterministic)
        return self._predict_fns[deterministic](inputs, noise)[Field.ACTIONS].numpy()
