"""Behavioral cloning inside SAC: the ``pretraining`` section with ``trainer: sac``.

After every SAC update the actor also imitates a demonstration, with its own Adam whose step
size is SAC's ``learning_rate`` × ``strength``, decaying linearly to 0 over ``steps`` trainer
steps (constant when ``steps`` is 0), as ML-Agents' SAC did. ``batch_size`` defaults to SAC's,
``num_epoch`` to 1 (ML-Agents' SAC default) and ``samples_per_update`` (0: all) caps the rows
one pass uses. The loss of a row: discrete, ``−Σ_branches log π(expert action)`` under the
masked categorical; continuous, the mean squared error between the actor's sampled action
``tanh(μ + σ·ε)`` and the expert's clipped to [−1, 1]. Every mini-batch of an update runs in
one compiled call; under a strategy each replica takes its share of every mini-batch, with
its loss as its share of the global mean (as the SAC learner's steps).

With ``use_recurrent`` the demonstration is cut into whole sequences of ``sequence_length``
steps (each episode padded at its end, the padding masked out of the loss), a mini-batch is
``batch_size // sequence_length`` of them, and the actor runs over each from zero memory, as
PPO's behavioral cloning does.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from kerasrl import distribute
from kerasrl.common.update_loop import replica_inputs, sum_minibatch_steps
from kerasrl.demos import episode_layout, load_demo
from kerasrl.fields import Field
from kerasrl.optimizers import Adam
from kerasrl.sac.learner import NOISE, replicas_in_sync
from kerasrl.sac.loss import step_weights
from kerasrl.sac.networks import Observation, SACNetworks, Sequences
from kerasrl.settings import BehavioralCloningSettings

LOSS_STAT = "Losses/Pretraining Loss"
#: A recurrent mini-batch's per-step weights (``kerasrl.sac.loss.step_weights`` of its masks).
WEIGHTS = "bc_step_weights"


class SACBehavioralCloning:
    """Behavioral cloning of ``settings.demo_path`` on the actor of ``networks`` (built in the
    learner's strategy scope, which this takes too)."""

    def __init__(self, networks: SACNetworks, settings: BehavioralCloningSettings, learning_rate: float,
                 default_batch_size: int, seed: int = 0, behavior: str = "") -> None:
        spec = networks.spec
        _, demo = load_demo(settings.demo_path, spec, behavior)
        self.networks, self.settings = networks, settings
        self.base_learning_rate = float(learning_rate) * settings.strength
        self.data: dict[str, np.ndarray] = {}
        if spec.vector_observation_size:
            self.data[Field.VECTOR_OBS] = np.asarray(demo[Field.VECTOR_OBS].array, np.float32)
        for j in range(len(spec.visual_observation_shapes)):
            self.data[Field.visual_obs(j)] = np.asarray(demo[Field.visual_obs(j)].array, np.float32)
        actions = np.asarray(demo[Field.ACTIONS].array)
        if spec.is_discrete:
            self.data[Field.ACTIONS] = actions.astype(np.int32)
            n = len(actions)
            masks = demo[Field.ACTION_MASK].array if Field.ACTION_MASK in demo else np.ones((n, spec.action_mask_size))
            self.data[Field.ACTION_MASK] = np.asarray(masks, np.float32)
        else:
            self.data[Field.ACTIONS] = np.clip(actions.astype(np.float32), -1.0, 1.0)
        self.n_rows = len(actions)
        #: Steps per sequence (1 without memory: every row its own "sequence").
        self.length = networks.sequence_length if networks.recurrent else 1
        if networks.recurrent:
            self.data = self._in_sequences(self.data, demo)
        n_sequences = len(self.data[Field.ACTIONS])
        self.batch_size = min(int(settings.batch_size or default_batch_size), self.n_rows)
        #: Sequences (rows, without memory) per mini-batch.
        self.per_batch = min(max(self.batch_size // self.length, 1), n_sequences)
        per_epoch = max(n_sequences // self.per_batch, 1)
        if settings.samples_per_update > 0:
            per_epoch = min(per_epoch, max(settings.samples_per_update // (self.per_batch * self.length), 1))
        self.batches = per_epoch * int(settings.num_epoch or 1)
        self.strategy = distribute.learner_strategy()
        self.replicas = distribute.replicas(self.strategy)
        where = f"Behavior {behavior}: pretraining: " if behavior else "pretraining: "
        distribute.check_batch_size(self.per_batch * self.length, self.length, self.replicas, where=where)
        with self.strategy.scope():
            self.optimizer = Adam(learning_rate=self.base_learning_rate, name="sac_bc_adam")
            self.optimizer.build(networks.actor_variables)
        self.rng = np.random.default_rng([int(seed), 2])
        self._fn = tf.function(self._steps, autograph=False)

    def _in_sequences(self, rows: dict[str, np.ndarray], demo: Any) -> dict[str, np.ndarray]:
        """``rows`` as whole sequences ``[sequences, length, ...]``, each episode padded at its
        end (zeros; mask 1 so that a padded step's masked-out logits stay finite), with
        ``Field.MASKS`` marking the real steps."""
        n = self.n_rows
        episodes = demo[Field.EPISODE_ID].array if Field.EPISODE_ID in demo else np.zeros(n, np.int64)
        source, _ = episode_layout(np.asarray(episodes), self.length)
        real = source >= 0
        out = {}
        for key, arr in {**rows, Field.MASKS: np.ones(n, np.float32)}.items():
            full = arr[np.where(real, source, 0)]
            full[~real] = 1.0 if key == Field.ACTION_MASK else 0.0
            out[key] = full.reshape(-1, self.length, *arr.shape[1:])
        return out

    def learning_rate(self, step: int) -> float:
        """``learning_rate × strength``, linearly to 0 at ``steps`` (constant when ``steps`` is 0)."""
        if self.settings.steps == 0:
            return self.base_learning_rate
        return self.base_learning_rate * max(1.0 - float(step) / self.settings.steps, 0.0)

    def loss(self, b: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """The mean imitation loss of a mini-batch (a replica's share of it under a strategy)."""
        nets = self.networks
        weights = None
        if nets.recurrent:
            weights = tf.reshape(b[WEIGHTS], [-1])
            b = {k: tf.reshape(v, [-1, *v.shape[2:]]) for k, v in b.items()}
        obs = self._observations(b)
        if nets.is_discrete:
            per_row = -nets.distribution(obs, b[Field.ACTION_MASK]).log_prob(b[Field.ACTIONS])
        else:
            action, _ = nets.sample(obs, b[NOISE])
            per_row = tf.reduce_mean(tf.square(action - b[Field.ACTIONS]), axis=-1)
        if weights is not None:
            per_row = per_row * weights
        return tf.reduce_mean(per_row) / float(replicas_in_sync())

    def _observations(self, b: Mapping[str, tf.Tensor]) -> Observation | Sequences:
        """The mini-batch's observations (recurrent: its flat ``[N·length]`` steps as sequences
        the actor runs over from zero memory; a step's next observation is the following step's)."""
        nets = self.networks
        obs = nets.observations(b)
        if not nets.recurrent:
            return obs

        def shifted(x: tf.Tensor) -> tf.Tensor:
            seq = tf.reshape(x, [-1, self.length, *x.shape[1:]])
            return tf.reshape(tf.concat([seq[:, 1:], seq[:, -1:]], axis=1), tf.shape(x))

        masks = tf.reshape(b[Field.MASKS], [-1, self.length])
        memory = tf.zeros([tf.shape(masks)[0], nets.memory_size])
        next_obs = {k: shifted(v) for k, v in obs.items()} if isinstance(obs, Mapping) else shifted(obs)
        return Sequences(obs, next_obs, None, masks, None, memory, self.length)

    def _step(self, b: Mapping[str, tf.Tensor]) -> tf.Tensor:
        variables = self.networks.actor_variables
        with tf.GradientTape() as tape:
            value = self.loss(b)
        grads = tape.gradient(value, variables)
        self.optimizer.apply_gradients(zip([tf.zeros_like(v) if g is None else g for g, v in zip(grads, variables)],
                                           variables))
        return value

    def _steps(self, batches: Any, learning_rate: tf.Tensor) -> tf.Tensor:
        """A step on every stacked mini-batch (the replicas' slices under a strategy); the summed loss."""
        self.optimizer.learning_rate.assign(learning_rate)

        def step(i: tf.Tensor, local: Mapping[str, tf.Tensor]) -> tf.Tensor:
            return tf.reshape(self._step({k: v[i] for k, v in local.items()}), [1])

        return sum_minibatch_steps(self.strategy, step, batches, 1)[0]

    def minibatches(self) -> dict[str, np.ndarray]:
        """An update's mini-batches ``[batches, batch_size, ...]`` (recurrent: ``[batches,
        sequences, sequence_length, ...]`` with the steps' weights): shuffled passes over the rows
        or sequences (with the actor's sampling noise, continuous)."""
        n, size = len(self.data[Field.ACTIONS]), self.per_batch
        per_epoch = n // size
        order = np.concatenate([self.rng.permutation(n)[: per_epoch * size]
                                for _ in range(-(-self.batches // per_epoch))])
        picked = order[: self.batches * size].reshape(self.batches, size)
        stacked = {k: v[picked] for k, v in self.data.items()}
        if self.networks.recurrent:
            stacked[WEIGHTS] = step_weights(stacked[Field.MASKS])
        if not self.networks.is_discrete:
            shape = (*picked.shape, *((self.length,) if self.networks.recurrent else ()), self.networks.action_size)
            stacked[NOISE] = self.rng.standard_normal(shape, dtype=np.float32)
        return stacked

    def update(self, step: int) -> dict[str, float]:
        """One update's mini-batches in one compiled call; the mean loss as a statistic."""
        lr = self.learning_rate(step)
        if lr <= 0.0:
            return {LOSS_STAT: 0.0}
        total = self._fn(replica_inputs(self.strategy, self.minibatches()), np.float32(lr))
        return {LOSS_STAT: float(total) / self.batches}
