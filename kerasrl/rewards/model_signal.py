"""Reward signals with a model of their own (curiosity, GAIL): batched rewards, fused updates.

Rewards come from one compiled call over every transition of the trajectories that close
together (``evaluate_batch``), never per agent or per step. An update is one compiled call:
the whole update buffer (and the demonstrations) go in once with a seeded plan of row
indices ``[num_epoch · batches, rows]``, and a ``tf.while_loop`` walks the plan, gathering
each mini-batch and taking one gradient step on it.

Under the learner's ``tf.distribute`` strategy (``kerasrl.distribute.learner_strategy``, taken
once at construction) model and optimizer are built inside its scope; an update is still one
compiled call, in which every mini-batch is one ``strategy.run`` on the replicas' slices of its
rows (``kerasrl.common.update_loop``), losses are local sums over the *global* row count (the
optimizer sums the replicas' gradients) and random draws are made for the global mini-batch, so
an update equals the one-device update. XLA is used on one device only. Rewards
(``evaluate_batch``) stay on one device: they read the mirrored weights.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Mapping, Optional

import keras
import numpy as np
import tensorflow as tf

from kerasrl import distribute, xla_cache
from kerasrl.common import update_loop
from kerasrl.exception import TrainerError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.optimizers import Adam
from kerasrl.rewards.base import RewardSignal, RewardSignalResult
from kerasrl.settings import NetworkSettings, RewardSignalSettings
from kerasrl.spec import BehaviorSpec


def observation_fields(spec: BehaviorSpec, nxt: bool = False) -> list[str]:
    """The observation fields of ``spec`` (vector first, then one per camera)."""
    fields = [Field.NEXT_VECTOR_OBS if nxt else Field.VECTOR_OBS] if spec.vector_observation_size else []
    visual = Field.next_visual_obs if nxt else Field.visual_obs
    return fields + [visual(j) for j in range(len(spec.visual_observation_shapes))]


def field_dtype(name: str, spec: BehaviorSpec) -> np.dtype:
    """Dtype of a stored field as the signal models take it."""
    return np.dtype(np.int32) if name == Field.ACTIONS and spec.is_discrete else np.dtype(np.float32)


def field_shapes(spec: BehaviorSpec) -> dict[str, tuple[int, ...]]:
    """Row shape of every observation field (current and next) of ``spec``."""
    shapes: dict[str, tuple[int, ...]] = {}
    if spec.vector_observation_size:
        shapes[Field.VECTOR_OBS] = shapes[Field.NEXT_VECTOR_OBS] = (spec.vector_observation_size,)
    for j, shape in enumerate(spec.visual_observation_shapes):
        shapes[Field.visual_obs(j)] = shapes[Field.next_visual_obs(j)] = tuple(shape)
    return shapes


def action_features(actions: tf.Tensor, spec: BehaviorSpec) -> tf.Tensor:
    """Actions as model input: the continuous floats, then one one-hot per branch, concatenated."""
    if not spec.discrete_branches:
        return tf.cast(actions, tf.float32)
    size = spec.continuous_size
    chosen = tf.cast(actions[:, size:], tf.int32)
    parts = [tf.one_hot(chosen[:, k], b) for k, b in enumerate(spec.discrete_branches)]
    if size:
        parts.insert(0, tf.cast(actions[:, :size], tf.float32))
    return tf.concat(parts, axis=-1)


def replica_share() -> tuple[Any, int]:
    """(this replica's index, number of replicas) of the current replica context ((0, 1) outside a strategy)."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return 0, 1
    return ctx.replica_id_in_sync_group, int(ctx.num_replicas_in_sync)


def replica_draw(sample: Callable[[tf.Tensor], tf.Tensor], local_shape: Any) -> tf.Tensor:
    """``sample(shape)`` drawn for the global mini-batch, this replica's rows of it: the draws of
    a split mini-batch equal one device's (replica ``r`` holds rows ``r·n .. (r+1)·n``)."""
    r, n = replica_share()
    if n == 1:
        return sample(local_shape)
    local_shape = tf.convert_to_tensor(local_shape, tf.int32)
    rows = local_shape[0]
    full = sample(tf.concat([[rows * n], local_shape[1:]], axis=0))
    return full[r * rows:(r + 1) * rows]


class ModelRewardSignal(RewardSignal):
    """Base of the signals with a ``keras.Model`` trained by their own Adam.

    Subclasses set ``loss_names`` (the TensorBoard keys of ``train_step``'s metric vector) and
    implement ``build_model``, ``rewards`` (unscaled, one per row) and ``train_step``.
    """

    per_step = False
    use_terminal_states = False
    loss_names: tuple[str, ...] = ()
    #: Never ``None`` here: ``__init__`` refuses a signal without the behavior spec.
    spec: BehaviorSpec

    def __init__(self, settings: RewardSignalSettings, spec: Optional[BehaviorSpec] = None,
                 network: Optional[NetworkSettings] = None, seed: int = 0, jit_compile: bool = False) -> None:
        if spec is None:
            raise UnityTrainerException(f"The {self.short_name} reward signal needs the behavior spec.")
        super().__init__(settings, spec, network, seed)
        #: Updates done (checkpointed: the rewards stay on after a resume).
        self._updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        #: The learners' strategy (one device unless ``kerasrl.distribute.get_strategy`` chose several).
        self.strategy = distribute.learner_strategy()
        self.replicas = distribute.replicas(self.strategy)
        #: XLA (as PPO's ``jit_compile``; vector observations, one device only).
        self.jit_compile = bool(jit_compile) and not spec.visual_observation_shapes and self.replicas == 1
        self._reward_fn: Optional[Any] = None
        self._update_fn: Optional[Any] = None
        #: Seconds spent in calls that traced (compiled) a function (benchmarks leave them out).
        self.trace_seconds = 0.0
        with self.strategy.scope():
            self.build()

    @property
    def update_count(self) -> int:
        return int(self._updates.numpy())

    @property
    def has_updated(self) -> bool:
        """Rewards are 0 until the model's first update."""
        return self.update_count > 0

    def checkpoint_state(self) -> Optional[tf.train.Checkpoint]:
        """The model, its optimizer and the update count, for the trainer's checkpoints."""
        return tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, updates=self._updates)

    # -- construction ----------------------------------------------------------------------
    def build(self) -> None:
        """The model, its weights and its optimizer (``__init__`` calls it in the strategy's scope)."""
        tf.random.set_seed(self.seed)
        self.model = self.build_model()
        self.optimizer = Adam(learning_rate=self.settings.learning_rate)  # type: ignore[attr-defined]
        self.optimizer.build(self.model.trainable_variables)

    def build_model(self) -> keras.Model:
        raise NotImplementedError

    @property
    def update_fields(self) -> list[str]:
        """The update-buffer fields ``train_step`` reads."""
        return [*self.batch_fields, Field.MASKS]

    # -- rewards ---------------------------------------------------------------------------
    def rewards(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """Unscaled reward of every row (compiled)."""
        raise NotImplementedError

    def scale(self, unscaled: np.ndarray) -> np.ndarray:
        return unscaled * np.float32(self.strength)

    def evaluate_batch(self, batch: Mapping[str, np.ndarray]) -> RewardSignalResult:
        """Rewards of a batch of stored transitions: 0 until the first update, then one compiled call."""
        n = len(batch[self.batch_fields[0]]) if self.batch_fields[0] in batch else 0
        if not self.has_updated or n == 0:
            zeros = np.zeros(n, np.float32)
            return RewardSignalResult(zeros, zeros)
        if self._reward_fn is None:
            self._reward_fn = (tf.function(self.rewards, jit_compile=True, autograph=False) if self.jit_compile
                               else tf.function(self.rewards, reduce_retracing=True, autograph=False))
        arrays = {k: np.asarray(batch[k], field_dtype(k, self.spec)) for k in self.batch_fields}
        if self.jit_compile:  # rows padded to a power of two: XLA compiles a few shapes only
            size = max(64, 1 << (n - 1).bit_length())
            arrays = {k: np.concatenate([v, np.zeros((size - n, *v.shape[1:]), v.dtype)]) for k, v in arrays.items()}
        unscaled = self._timed(self._reward_fn, arrays).numpy()[:n].astype(np.float32)
        if not np.isfinite(unscaled).all():
            raise UnityTrainerException(f"The {self.short_name} reward signal gave non-finite rewards.")
        return RewardSignalResult(self.scale(unscaled).astype(np.float32), unscaled)

    def _timed(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, adding the call's time to ``trace_seconds`` when it traced."""
        traces = fn.experimental_get_tracing_count()
        start = time.perf_counter()
        with xla_cache.compiling() if self.jit_compile else contextlib.nullcontext():
            out = fn(*args)
        if fn.experimental_get_tracing_count() != traces:
            self.trace_seconds += time.perf_counter() - start
        return out

    # -- updates ---------------------------------------------------------------------------
    def train_step(self, batch: Mapping[str, tf.Tensor], seed: tf.Tensor) -> tf.Tensor:
        """One gradient step on a mini-batch; returns the metric vector (``loss_names`` order)."""
        raise NotImplementedError

    def apply(self, tape: tf.GradientTape, loss: tf.Tensor) -> None:
        variables = self.model.trainable_variables
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))

    def _build_update(self) -> Any:
        """The compiled update: ``(stacked or per-replica mini-batches, seed) -> summed metrics``."""

        def step(i: tf.Tensor, stacked: Mapping[str, tf.Tensor], seed: tf.Tensor) -> tf.Tensor:
            return self.train_step({k: v[i] for k, v in stacked.items()}, tf.stack([seed, tf.cast(i, tf.int64)]))

        def fused(batches: Any, seed: tf.Tensor) -> tf.Tensor:
            """``batches``: every mini-batch of the update, ``[batches, rows, ...]`` per field
            (the replicas' slices of them under a strategy)."""
            return update_loop.sum_minibatch_steps(self.strategy, lambda i, b: step(i, b, seed), batches,
                                                   len(self.loss_names))

        if self.replicas > 1:
            return tf.function(fused, autograph=False)
        # The mini-batches have one shape (``plan``), so XLA compiles once.
        return tf.function(fused, jit_compile=self.jit_compile, autograph=False)

    def _inputs(self, stacked: dict[str, np.ndarray]) -> Any:
        """The stacked mini-batches as the compiled update takes them (split over the replicas)."""
        rows = next(iter(stacked.values())).shape[1]
        if rows % self.replicas:
            raise TrainerError(f"reward signal {self.short_name}: mini-batches of {rows} rows cannot be split over "
                               f"{self.replicas} replicas: batch_size must give a multiple of {self.replicas} rows.")
        return update_loop.replica_inputs(self.strategy, stacked)

    def rows_per_batch(self, n_sequences: int) -> int:
        """Rows of a mini-batch: PPO's (``n_sequences`` whole sequences), as ML-Agents after #2362
        (ML-Agents 0.9's ``n_sequences`` *rows* is not kept)."""
        return max(int(n_sequences), 1) * self.sequence_length

    def plan(self, n_rows: int, rows: int, batches: int, rng: np.random.Generator) -> np.ndarray:
        """Row indices ``[num_epoch · batches, rows]``: a fresh permutation of ``n_rows`` per epoch; rows
        short of one mini-batch are filled up with repeated ones, so that the update keeps one shape."""
        need = batches * rows
        epochs = []
        for _ in range(self.settings.num_epoch):  # type: ignore[attr-defined]
            perm = rng.permutation(n_rows)
            if n_rows < need:
                perm = np.concatenate([perm, rng.integers(0, n_rows, need - n_rows)])
            epochs.append(perm[:need].reshape(batches, rows))
        return np.concatenate(epochs)

    def minibatches(self, update_buffer: Any, n_sequences: int,
                    rng: np.random.Generator) -> Optional[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
        """Arrays (keys ``source/field``, source ``policy`` or e.g. ``expert``; ``train_step`` sees policy
        fields by their plain name) and the ``plan`` of row indices per source; ``None`` when there is
        nothing to learn from. By default the policy's rows alone, in mini-batches of the trainer's
        (a signal that also learns from other rows, as GAIL, says its own)."""
        arrays = self.policy_rows(update_buffer)
        n = len(arrays[Field.MASKS])
        if n == 0:
            return None
        rows = self.rows_per_batch(n_sequences)
        plan = self.plan(n, rows, max(n // rows, 1), rng)
        return {f"policy/{k}": v for k, v in arrays.items()}, {"policy": plan}

    def update(self, update_buffer: Any, n_sequences: int) -> dict[str, float]:
        """Every epoch and mini-batch of the signal's update in one compiled call; returns the mean losses."""
        count = self.update_count
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, count, 0x516])
        prepared = self.minibatches(update_buffer, n_sequences, rng)
        if prepared is None:
            return {}
        arrays, plan = prepared
        if self._update_fn is None:
            self._update_fn = self._build_update()
        stacked = {}
        for key, value in arrays.items():
            source, name = key.split("/", 1)
            stacked[name if source == "policy" else key] = np.asarray(value)[plan[source]]
        seed = tf.constant(self.seed * 1_000_003 + count, tf.int64)
        out = self._timed(self._update_fn, self._inputs(stacked), seed).numpy() / max(len(plan["policy"]), 1)
        if not np.isfinite(out).all():
            raise UnityTrainerException(f"The {self.short_name} reward signal's losses became {out.tolist()}.")
        self._updates.assign_add(1)
        return {k: float(v) for k, v in zip(self.loss_names, out.tolist())}

    def policy_rows(self, update_buffer: Any) -> dict[str, np.ndarray]:
        """The update buffer's real rows (padding of recurrent sequences left out) of ``update_fields``."""
        missing = [k for k in self.update_fields if k not in update_buffer]
        if missing:
            raise UnityTrainerException(f"The {self.short_name} reward signal needs the fields {missing}, "
                                        f"which the update buffer lacks.")
        arrays = {k: np.asarray(update_buffer[k].get_batch(), field_dtype(k, self.spec)) for k in self.update_fields}
        real = arrays[Field.MASKS] > 0
        if real.all():
            return arrays
        return {k: v[real] for k, v in arrays.items()}
