"""The SAC learner: owns the networks and their three Adam optimizers, and runs many gradient
steps per compiled call.

Recurrent networks take mini-batches of sequences (``kerasrl.sac.replay``; under a strategy
each replica takes whole sequences): each loss is the mean over their real steps.

One gradient step, in Stable-Baselines3's order: the entropy coefficients (with the policy's
log-probabilities at the batch), the critics (towards the soft target of the target critics,
with the coefficients from before their step), the actor (against the freshly updated
critics), then the soft (Polyak) update of the targets with ``tau``. ``update`` takes the
mini-batches of several gradient steps stacked along a leading axis and walks them in one
``tf.while_loop`` inside one ``tf.function`` (XLA-compiled with ``jit_compile: true``): a
call costs far more than a step of these small networks, so an update of ``K`` steps pays it
once. Every call takes a stack of ``STEPS_PER_CALL`` mini-batches (padded; a larger update
takes several calls), so that a run compiles one shape only.

Under a ``tf.distribute`` strategy (networks and learner built inside ``strategy.scope()``, see
``kerasrl.distribute``) ``batch_size`` stays the global mini-batch: each replica takes its
``1/N`` of every mini-batch's rows, each loss and metric is the replica's share of the global
mean (its local mean over ``N``) and the optimizers sum the gradients, so a step equals the
one-device step on the same mini-batch. The loop over the gradient steps runs in cross-replica
context, each step one ``strategy.run`` followed by the target update (TensorFlow refuses the
optimizers' cross-replica sum inside a loop in replica context).
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from kerasrl import xla_cache
from kerasrl.common.update_loop import replica_inputs, sum_minibatch_steps
from kerasrl.distribute import check_batch_size
from kerasrl.fields import Field
from kerasrl.optimizers import Adam
from kerasrl.sac import loss
from kerasrl.sac.networks import Observation, SACNetworks, Sequences, update_uses_xla
from kerasrl.sac.replay import BURN_IN
from kerasrl.settings import SACSettings, TrainerSettings
from kerasrl.spec import BehaviorSpec

METRIC_NAMES = ("critic_loss", "actor_loss", "ent_coef_loss", "ent_coef", "q_value")
#: The gradient steps one compiled call can run (a larger update takes several calls).
STEPS_PER_CALL = 128
#: Name of the stacked rewards ``[K, B, signals]`` in a learning batch.
REWARDS = "rewards"
NOISE, NEXT_NOISE = "noise", "next_noise"
#: Name of the steps' weights in a learning batch of sequences (``loss.step_weights`` of its masks).
STEP_WEIGHTS = "step_weights"


def replicas_in_sync() -> int:
    """Replicas sharing the mini-batch of the step being traced (1 outside a strategy's ``run``)."""
    ctx = tf.distribute.get_replica_context()
    return int(ctx.num_replicas_in_sync) if ctx is not None else 1


class SACLearner:
    """Trains :class:`SACNetworks` with SAC's losses (``kerasrl.sac.loss``)."""

    def __init__(self, networks: SACNetworks, hyperparameters: Optional[SACSettings] = None,
                 gammas: Sequence[float] = (0.99,), max_steps: int = TrainerSettings.max_steps) -> None:
        #: The strategy whose scope the learner was built in (TensorFlow's default outside any).
        self.strategy = tf.distribute.get_strategy()
        self.replicas = int(self.strategy.num_replicas_in_sync)
        hp = SACSettings() if hyperparameters is None else hyperparameters
        check_batch_size(hp.batch_size, networks.sequence_length, self.replicas)
        if len(gammas) != len(networks.stream_names):
            raise ValueError(f"one gamma per reward signal ({networks.stream_names}), got {list(gammas)}.")
        self.hyperparameters = hp
        self.networks = networks
        self.max_steps = int(max_steps)
        self.gammas = tf.constant(np.asarray(gammas, np.float32))
        self.tau = float(hp.tau)
        self.use_xla = update_uses_xla(hp, networks.recurrent, self.replicas)

        def adam() -> Adam:
            return Adam(learning_rate=hp.learning_rate, epsilon=hp.adam_epsilon, epsilon_style="torch")

        self.actor_optimizer, self.critic_optimizer, self.entropy_optimizer = adam(), adam(), adam()
        self.actor_optimizer.build(networks.actor_variables)
        self.critic_optimizer.build(networks.critic_variables)
        self.entropy_optimizer.build([networks.log_ent_coef])
        self._fn: Optional[Any] = None
        self._traced: set[tuple[int, ...]] = set()
        #: Seconds spent in calls that traced (and compiled) a new stack size.
        self.trace_seconds = 0.0

    @classmethod
    def for_behavior(cls, spec: BehaviorSpec, settings: TrainerSettings, seed: int, max_steps: int) -> "SACLearner":
        """A learner of new networks for ``spec`` (TensorFlow's global seed set first)."""
        tf.random.set_seed(seed)
        streams = list(settings.reward_signals)
        networks = SACNetworks(spec, streams, settings.network, settings.hyperparameters, seed=seed, name="sac")
        gammas = [settings.reward_signals[s].gamma for s in streams]
        return cls(networks, settings.hyperparameters, gammas, max_steps)

    def learning_rate(self, step: int) -> float:
        """The step size at trainer step ``step``: constant, or linear decay towards 0 at ``max_steps``."""
        hp = self.hyperparameters
        if hp.learning_rate_schedule == "constant":
            return hp.learning_rate
        return max(hp.learning_rate * (1.0 - step / max(self.max_steps, 1)), 1e-10)

    @property
    def optimizers(self) -> dict[str, Adam]:
        return {"actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer,
                "entropy_optimizer": self.entropy_optimizer}

    # -- one gradient step ----------------------------------------------------------------
    def _gradient_step(self, b: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """One gradient step of the entropy coefficients, the critics and the actor (not the
        targets: ``_update_targets``); returns this replica's share of the metrics."""
        nets = self.networks
        share = 1.0 / float(replicas_in_sync())  # a replica's losses are its share of the global mean
        obs, next_obs, b, weights = self._views(b)
        ent_coef = tf.exp(nets.log_ent_coef)  # read before the coefficients' own step, as SB3
        with tf.GradientTape() as actor_tape:
            pi, neg_entropy = self._policy(obs, b, next_state=False)  # one actor pass serves both losses
            with actor_tape.stop_recording():
                with tf.GradientTape() as tape:
                    ent_loss = share * loss.entropy_coef_loss(nets.log_ent_coef, neg_entropy, nets.target_entropy,
                                                              weights)
                self._apply(self.entropy_optimizer, tape, ent_loss, [nets.log_ent_coef])
                critic_loss, q = self._critic_step(obs, next_obs, b, ent_coef, share, weights)
            actor_loss = share * self._actor_loss(obs, pi, neg_entropy, ent_coef, weights)  # against the updated critics
        self._apply(self.actor_optimizer, actor_tape, actor_loss, nets.actor_variables)
        return tf.stack([critic_loss, actor_loss, ent_loss, share * tf.reduce_mean(ent_coef),
                         share * loss.masked_mean(q, weights)])

    def _views(self, b: Mapping[str, tf.Tensor]) -> tuple[Any, Any, dict[str, tf.Tensor], Optional[tf.Tensor]]:
        """The observations and next observations of a mini-batch as the networks take them, its
        per-step fields one row per step and the steps' weights in the losses (recurrent: the
        sequences' mask, flat; ``None`` without memory)."""
        nets = self.networks
        if not nets.recurrent:
            return nets.observations(b), nets.observations(b, nxt=True), dict(b), None
        obs, next_obs = nets.sequences(b)
        rows = {k: tf.reshape(v, [-1, *v.shape[2:]]) for k, v in b.items()
                if k != Field.MEMORY and not k.startswith(BURN_IN)}
        return obs, next_obs, rows, rows[STEP_WEIGHTS]

    def _update_targets(self) -> None:
        """The soft (Polyak) update of the target critics (in cross-replica context under a strategy)."""
        nets = self.networks
        for t, c in zip(nets.target_variables, nets.critic_variables):
            t.assign(t * (1.0 - self.tau) + self.tau * c)

    def _critic_step(self, obs: Observation | Sequences, next_obs: Observation | Sequences, b: Mapping[str, tf.Tensor],
                     ent_coef: tf.Tensor, share: float, weights: Optional[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """One step of the critics towards the soft target; returns their loss (this replica's
        ``share``) and Q₁ at the batch."""
        nets = self.networks
        target = loss.soft_target(b[REWARDS], b[Field.TERMINATED], self.gammas, self._next_value(next_obs, b, ent_coef))
        with tf.GradientTape() as tape:
            q = nets.q_values(nets.critics, obs, None if nets.is_discrete else b[Field.ACTIONS])
            if nets.is_discrete:
                q = [loss.discrete_taken_q(qi, b[Field.ACTIONS], nets.branches) for qi in q]
                target = tf.repeat(target[:, :, None], len(nets.branches), axis=-1)
            critic_loss = share * loss.critic_loss(q, target, weights)
        self._apply(self.critic_optimizer, tape, critic_loss, nets.critic_variables)
        return critic_loss, q[0]

    @staticmethod
    def _apply(optimizer: Adam, tape: tf.GradientTape, value: tf.Tensor, variables: list[Any]) -> None:
        optimizer.apply_gradients(zip(tape.gradient(value, variables), variables))

    def _policy(self, obs: Observation | Sequences, b: Mapping[str, tf.Tensor], next_state: bool) -> tuple[Any, tf.Tensor]:
        """The policy at ``obs`` and ``log π`` per branch ``[B, branches]``: continuous, the action
        sampled with the batch's noise and its log-probability; discrete, the masked probabilities
        and log-probabilities, and each branch's ``Σₐ π log π``."""
        nets = self.networks
        if nets.is_discrete:
            dist = nets.distribution(obs, b[Field.NEXT_ACTION_MASK if next_state else Field.ACTION_MASK])
            probs, log_probs = dist.probs, tf.concat(dist.branch_log_probs, axis=-1)
            return (probs, log_probs), loss.branch_neg_entropy(probs, log_probs, nets.branches)
        action, log_prob = nets.sample(obs, b[NEXT_NOISE if next_state else NOISE])
        return action, log_prob[:, None]

    def _next_value(self, next_obs: Observation | Sequences, b: Mapping[str, tf.Tensor], ent_coef: tf.Tensor) -> tf.Tensor:
        nets = self.networks
        pi, log_pi = self._policy(next_obs, b, next_state=True)
        if nets.is_discrete:
            next_q = nets.q_values(nets.targets, next_obs)
            return loss.discrete_soft_value(tf.minimum(next_q[0], next_q[1]), pi[0], pi[1], ent_coef, nets.branches)
        return loss.continuous_next_value(nets.q_values(nets.targets, next_obs, pi), log_pi[:, 0], ent_coef)

    def _actor_loss(self, obs: Observation | Sequences, pi: Any, log_pi: tf.Tensor, ent_coef: tf.Tensor,
                    weights: Optional[tf.Tensor]) -> tf.Tensor:
        nets = self.networks
        if nets.is_discrete:
            return loss.discrete_actor_loss(nets.q_values(nets.critics, obs), pi[0], pi[1], ent_coef, nets.branches,
                                            weights)
        return loss.continuous_actor_loss(nets.q_values(nets.critics, obs, pi), log_pi[:, 0], ent_coef, weights)

    # -- many steps per call --------------------------------------------------------------
    def _build(self) -> Any:
        return tf.function(self._steps, jit_compile=self.use_xla, autograph=False)

    def _set_learning_rate(self, learning_rate: tf.Tensor) -> None:
        for opt in (self.actor_optimizer, self.critic_optimizer, self.entropy_optimizer):
            opt.learning_rate.assign(learning_rate)

    def _steps(self, batches: Any, count: tf.Tensor, learning_rate: tf.Tensor) -> tf.Tensor:
        """``count`` gradient steps, each on its mini-batch of ``batches`` and followed by the target
        update; the summed metrics. Under the strategy each step is one ``strategy.run`` on the
        replicas' slices, the target update in cross-replica context after it, and the metrics'
        shares are summed on each replica and once across replicas at the end."""
        self._set_learning_rate(learning_rate)

        def step(i: tf.Tensor, local: Mapping[str, tf.Tensor]) -> tf.Tensor:
            return self._gradient_step({k: v[i] for k, v in local.items()})

        return sum_minibatch_steps(self.strategy, step, batches, len(METRIC_NAMES), count,
                                   after_step=self._update_targets)

    def update(self, stacked: Mapping[str, np.ndarray], count: int, learning_rate: float) -> dict[str, float]:
        """``count`` gradient steps, on the first ``count`` mini-batches of ``stacked`` (each field
        ``[K, batch, ...]``, ``K >= count``: the rest is padding). Returns the mean metrics."""
        if self._fn is None:
            self._fn = self._build()
        shape = tuple(next(iter(stacked.values())).shape[:2])
        if self.networks.recurrent:
            stacked = {**stacked, STEP_WEIGHTS: loss.step_weights(stacked[Field.MASKS])}
        args = (replica_inputs(self.strategy, dict(stacked)), np.int32(count), np.float32(learning_rate))
        if shape in self._traced:
            totals = self._fn(*args)
        else:
            start = time.perf_counter()
            with xla_cache.compiling():
                totals = self._fn(*args)
            self._traced.add(shape)
            self.trace_seconds += time.perf_counter() - start
        return {k: v / max(count, 1) for k, v in zip(METRIC_NAMES, totals.numpy().tolist())}
