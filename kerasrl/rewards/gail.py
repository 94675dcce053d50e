"""GAIL reward signal (as ML-Agents 0.9's ``gail``): a discriminator between demonstrations and the policy."""
from __future__ import annotations

from typing import Any, Mapping, Optional

import keras
import numpy as np
import tensorflow as tf

from kerasrl import demos
from kerasrl.common.reductions import global_count
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.models.gail import Z_SIZE, Discriminator
from kerasrl.rewards.model_signal import (
    ModelRewardSignal,
    action_features,
    field_dtype,
    field_shapes,
    observation_fields,
    replica_draw,
    replica_share,
)
from kerasrl.settings import GAILSettings, NetworkSettings
from kerasrl.spec import BehaviorSpec

GRADIENT_PENALTY_WEIGHT = 10.0
#: VAIL's information constraint I_c and β's step size.
MUTUAL_INFORMATION = 0.5
BETA_STEP = 5.0e-4
EPSILON = 1e-7

Demo = tuple[BehaviorSpec, Any]


class GAILRewardSignal(ModelRewardSignal):
    """Reward = ``−log(1 − D(policy) + 1e-7) × strength`` (0 before the first update).

    Discriminator loss ``−mean(log(D_e + ε) + log(1 − D_p + ε))`` + 10 × a one-sided gradient
    penalty ``mean(max(‖∂D/∂x‖ − 1, 0)²)`` on inputs interpolated per element between expert
    and policy rows (ML-Agents penalises ``(‖∂D/∂x‖ − 1)²``, see ``_gradient_penalty``); with
    VAIL also ``β·(KL − 0.5)``, β adapted after every mini-batch. ``demo`` (spec, buffer) replaces
    reading ``demo_path`` (tests, demonstrations made in memory). Every mean is over the global
    mini-batch (a replica's local sum over the global row count) and the interpolation and VAIL
    noise are drawn for the global mini-batch, so a split update equals one device's.
    """

    short_name = "GAIL"
    settings: GAILSettings

    def __init__(self, settings: GAILSettings, spec: Optional[BehaviorSpec] = None,
                 network: Optional[NetworkSettings] = None, seed: int = 0, jit_compile: bool = False,
                 demo: Optional[Demo] = None) -> None:
        self.loss_names = ("Losses/GAIL Loss", "Policy/GAIL Policy Estimate", "Policy/GAIL Expert Estimate",
                           *(("Policy/GAIL Beta", "Policy/GAIL KL") if settings.use_vail else ()))
        super().__init__(settings, spec, network, seed, jit_compile)
        demo_spec, buffer = demo if demo is not None else demos.load(settings.demo_path)
        if demo_spec != self.spec:
            raise TrainerConfigError(
                f"GAIL's demo_path {settings.demo_path} is for {demos.describe_spec(demo_spec)}, "
                f"but the behavior has {demos.describe_spec(self.spec)}.")
        self.expert = self._expert_arrays(buffer)
        #: The policy's observation normalizer (``use_normalizer``): expert and policy vector
        #: observations both go through it, so D compares what the policy sees.
        self.normalizer: Optional[keras.layers.Layer] = None

    def use_normalizer(self, normalizer: Optional[Any]) -> None:
        if normalizer is not self.normalizer:
            self.normalizer = normalizer
            self._reward_fn = self._update_fn = None  # compiled without it

    def _expert_arrays(self, buffer: Any) -> dict[str, np.ndarray]:
        fields = self.batch_fields
        missing = [k for k in fields if k not in buffer]
        if missing:
            raise TrainerConfigError(f"The demonstrations {self.settings.demo_path} lack the fields {missing}.")
        arrays = {k: np.asarray(buffer[k].get_batch(), field_dtype(k, self.spec)) for k in fields}
        n = {len(v) for v in arrays.values()}
        if len(n) != 1 or 0 in n:
            raise TrainerConfigError(f"The demonstrations {self.settings.demo_path} are empty or have fields "
                                     f"of different lengths.")
        for k, v in arrays.items():
            if not np.isfinite(v).all():
                raise TrainerConfigError(f"The demonstrations {self.settings.demo_path} hold non-finite {k}.")
        return {f"expert/{k}": v for k, v in arrays.items()}

    @property
    def batch_fields(self) -> list[str]:
        extra = [Field.ACTIONS, Field.DONE] if self.settings.use_actions else []
        return [*observation_fields(self.spec), *extra]

    def build_model(self) -> keras.Model:
        s = self.settings
        model = Discriminator(self.spec, s.encoding_size, s.use_actions, s.use_vail, self.network.vis_encode_type,
                              seed=self.seed, name="GAIL_model")
        shapes = field_shapes(self.spec)
        dummy = {k: tf.zeros([1, *shapes[k]]) for k in observation_fields(self.spec)}
        model(dummy, action_features(tf.zeros([1, self.spec.action_size]), self.spec), tf.zeros([1]))
        return model

    def _features(self, batch: Mapping[str, tf.Tensor], prefix: str = "") -> tuple[dict[str, tf.Tensor], Any, Any]:
        obs = {k: tf.cast(batch[prefix + k], tf.float32) for k in observation_fields(self.spec)}
        if self.normalizer is not None and Field.VECTOR_OBS in obs:
            obs[Field.VECTOR_OBS] = self.normalizer(obs[Field.VECTOR_OBS])
        if not self.settings.use_actions:
            return obs, None, None
        return obs, action_features(batch[prefix + Field.ACTIONS], self.spec), batch[prefix + Field.DONE]

    def rewards(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        d = self.model(*self._features(batch))
        return -tf.math.log(1.0 - d + EPSILON)

    def _gradient_penalty(self, policy: tuple, expert: tuple, seed: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
        """``mean(max(‖∂D/∂x‖ − 1, 0)²)`` (this replica's share: ``count`` is the global row count)
        at inputs interpolated per element between expert and policy.

        One-sided: D is bounded to be 1-Lipschitz, never pushed to be steep. ML-Agents' two-sided
        ``(‖∂D/∂x‖ − 1)²`` asks a sigmoid's slope to be 1 everywhere: at the start (slope ≈ 0.1)
        that term is ~5× the classification loss, so the first updates make D steep in whatever
        direction its initial weights favour, and its rewards can rank the anti-expert's actions
        above the expert's; PPO then commits to the wrong action before D recovers.
        """
        def mix(e: Any, p: Any, k: int) -> Any:
            if e is None:
                return None
            e, p = tf.cast(e, tf.float32), tf.cast(p, tf.float32)
            offset = seed + tf.constant([0, 7919 * (k + 1)], tf.int64)
            alpha = replica_draw(lambda shape: tf.random.stateless_uniform(shape, offset), tf.shape(e))
            return alpha * e + (1.0 - alpha) * p

        obs = {k: mix(expert[0][k], policy[0][k], i) for i, k in enumerate(sorted(policy[0]))}
        x = self.model.features(obs, mix(expert[1], policy[1], 100), mix(expert[2], policy[2], 101))
        with tf.GradientTape() as inner:
            inner.watch(x)
            d, _ = self.model.head(x)
        g = inner.gradient(d, x)
        norm = tf.sqrt(tf.reduce_sum(tf.square(g), axis=-1) + EPSILON)
        return tf.reduce_sum(tf.square(tf.nn.relu(norm - 1.0))) / count

    def train_step(self, batch: Mapping[str, tf.Tensor], seed: tf.Tensor) -> tf.Tensor:
        model, vail = self.model, self.settings.use_vail
        policy, expert = self._features(batch), self._features(batch, "expert/")
        rows = tf.shape(next(iter(policy[0].values())))[0]
        count = global_count(tf.ones([rows]))  # policy (and expert) rows of all replicas
        _, replicas = replica_share()
        with tf.GradientTape() as tape:
            x_p, x_e = model.features(*policy), model.features(*expert)
            noise_p = noise_e = None
            if vail:
                def normal(k: int) -> tf.Tensor:
                    offset = seed + tf.constant([0, k], tf.int64)
                    return replica_draw(lambda shape: tf.random.stateless_normal(shape, offset), [rows, Z_SIZE])

                noise_p, noise_e = normal(1), normal(2)
            d_p, mu_p = model.head(x_p, noise_p)
            d_e, mu_e = model.head(x_e, noise_e)
            loss = -tf.reduce_sum(tf.math.log(d_e + EPSILON) + tf.math.log(1.0 - d_p + EPSILON)) / count
            loss += GRADIENT_PENALTY_WEIGHT * self._gradient_penalty(policy, expert, seed, count)
            if vail:
                var = tf.square(model.z_sigma)
                per_row = -tf.reduce_sum(
                    1.0 + tf.math.log(var + EPSILON) - 0.5 * tf.square(mu_e) - 0.5 * tf.square(mu_p) - var, axis=1)
                kl = tf.reduce_sum(per_row) / count
                loss += tf.stop_gradient(model.beta) * (kl - MUTUAL_INFORMATION / replicas)
        self.apply(tape, loss)
        metrics = [loss, tf.reduce_sum(d_p) / count, tf.reduce_sum(d_e) / count]
        if vail:
            ctx = tf.distribute.get_replica_context()
            total_kl = ctx.all_reduce(tf.distribute.ReduceOp.SUM, kl) if replicas > 1 else kl
            beta = tf.maximum(model.beta + BETA_STEP * (total_kl - MUTUAL_INFORMATION), EPSILON)
            model.beta.assign(beta)  # the same value on every replica (aggregation: first replica's)
            metrics += [beta / replicas, kl]
        return tf.stack(metrics)

    def minibatches(self, update_buffer: Any, n_sequences: int,
                    rng: np.random.Generator) -> Optional[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
        policy = self.policy_rows(update_buffer)
        n_p = len(policy[Field.MASKS])
        n_e = len(next(iter(self.expert.values())))
        if n_p == 0:
            return None
        rows = self.rows_per_batch(n_sequences)
        batches = max(min(n_p // rows, n_e // rows), 1)
        if self.settings.samples_per_update > 0:
            batches = min(batches, max(self.settings.samples_per_update // rows, 1))
        arrays: dict[str, Any] = {f"policy/{k}": v for k, v in policy.items() if k != Field.MASKS}
        arrays.update(self.expert)  # numpy: indexed by the plan on the host
        return arrays, {"policy": self.plan(n_p, rows, batches, rng), "expert": self.plan(n_e, rows, batches, rng)}
