"""PPO's part in training on several hosts: the hooks of :class:`kerasrl.trainers.multi_host.MultiHostTrainer`.

The multi-host mode itself (the lockstep cadence, the gather, cluster-wide counts, chief-only
writing, the lost-worker error, ``--resume``'s sync, the summary line) is
:mod:`kerasrl.trainers.multi_host`, shared by every trainer type that implements these hooks.
What is PPO's: its rollouts are cut at a fixed cadence (``flush_on_update``, forced) and
``buffer_size`` is the global rollout (each host collects ``buffer_size / hosts`` of it); an
update gathers the update buffer's learner fields and, with ``normalize``, the observations of
the trajectories closed since the last update, which every host's normalizer takes; the
trainer then normalises the advantages over the global batch; each host draws its own action
noise.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from kerasrl.buffer import Buffer
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.distribute import Cluster
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.ppo.learner import PPOLearner
from kerasrl.settings import TrainerSettings
from kerasrl.trainers.multi_host import Layout, Table, forced


def check_settings(behavior_name: str, settings: TrainerSettings) -> None:
    """What a multi-host run cannot do yet, as one-line errors naming the key: reward signals
    other than ``extrinsic`` (their models train on per-host data) and ``pretraining`` (BC)."""
    others = sorted(set(settings.reward_signals) - {"extrinsic"})
    if others:
        raise TrainerConfigError(f"Behavior {behavior_name}: reward_signals: {others[0]} is not supported on several hosts "
                                 "(--worker-hosts); train with the extrinsic reward only, or on one host.")
    if settings.pretraining is not None:
        raise TrainerConfigError(f"Behavior {behavior_name}: pretraining (behavioral cloning) is not supported on several "
                                 "hosts (--worker-hosts); train on one host.")


class PPOMultiHostHooks:
    """The multi-host hooks of :class:`~kerasrl.ppo.trainer.PPOTrainer` (a base of it)."""

    seed: int
    step: int
    learner: PPOLearner
    training_buffer: Buffer
    _policy: ActorCriticPolicy
    #: On several hosts: the observations of the trajectories closed since the last update (normalizer).
    pending_observations: list[np.ndarray]

    @classmethod
    def multi_host_settings(cls, behavior_name: str, settings: TrainerSettings) -> TrainerSettings:
        """Refuse what hosts cannot share (``check_settings``); cut rollouts at a fixed cadence."""
        check_settings(behavior_name, settings)
        return forced(settings, flush_on_update=True)

    def joined_cluster(self, cluster: Cluster) -> None:
        """Each host its own action noise; observations kept for the update's normalizer."""
        self._policy.rng = np.random.default_rng([self.seed, cluster.task_index])
        self.pending_observations = []

    def _layouts(self) -> list[Layout]:
        sig = self.learner.batch_signature()
        batch = {k: (np.dtype(s.dtype.as_numpy_dtype), tuple(s.shape[1:])) for k, s in sig.items()}
        if self.learner.actor_critic.normalizer is None:
            return [batch]
        return [batch, {Field.VECTOR_OBS: (np.dtype(np.float32), (self.learner.actor_critic.normalizer.size,))}]

    def host_tables(self) -> tuple[list[Table], list[Layout]]:
        """The update buffer's learner fields (no rows if it is empty) and, with a normalizer,
        the pending observations."""
        layouts = self._layouts()
        ub = self.training_buffer.update_buffer
        empty = Field.ACTIONS not in ub or len(ub[Field.ACTIONS]) == 0
        batch = {k: np.zeros((0, *s), d) if empty else ub[k].get_batch() for k, (d, s) in layouts[0].items()}
        if len(layouts) == 1:
            return [batch], layouts
        size = layouts[1][Field.VECTOR_OBS][1]
        obs = np.concatenate(self.pending_observations) if self.pending_observations else np.zeros((0, *size), np.float32)
        return [batch, {Field.VECTOR_OBS: obs}], layouts

    def take_gathered(self, tables: list[Table]) -> Table:
        """The normalizer takes every host's observations; the batch is every host's update buffer."""
        self.pending_observations.clear()
        if len(tables) > 1:
            self.learner.update_normalization(tables[1][Field.VECTOR_OBS])
            self._policy.refresh_normalizer()
        return tables[0]

    def state_variables(self) -> list[Any]:
        """The learner's variables (weights, normalizer, schedule values) and its optimizer's."""
        seen: set[int] = set()
        out = []
        for v in [*self.learner.weights, *self.learner.optimizer.variables]:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return out

    def took_chief_state(self) -> None:
        """The schedules at the chief's step; act with its weights."""
        self.learner.set_schedules(self.step)
        self._policy.refresh()
