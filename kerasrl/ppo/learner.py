"""The PPO learner: a ``keras.Model`` whose ``train_step`` is one PPO gradient step.

Two drivers share the same loss (``kerasrl.ppo.loss.ppo_loss``) and the same gradient code:

* ``train_step`` / ``train_minibatch`` — one mini-batch per compiled call (for ``fit`` and
  ``tf.distribute`` strategies);
* ``fused_update`` — every epoch and mini-batch of an update, shuffling included, in one
  compiled call (optionally XLA-compiled), which removes the per-call overhead.

Both follow the same seeded ``minibatch_plan``, so they give the same weights.

Under a ``tf.distribute`` strategy (a learner built inside ``strategy.scope()``, see
``kerasrl.distribute``) ``batch_size`` stays the global mini-batch: each replica takes its
``batch_size / N`` rows (whole sequences) of every mini-batch, losses are normalised by the
global row count and the optimizer sums the gradients, so an update equals the one-device
update on the same batch. The fused driver is still one compiled call per update, in which each
mini-batch is one ``strategy.run``: the optimizer's cross-replica sum cannot sit inside a loop
that runs in replica context (TensorFlow refuses a ``merge_call`` there).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterator, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from kerasrl import xla_cache
from kerasrl.common.fast_path import choose_jit_compile, join_warm_up
from kerasrl.common.minibatches import minibatch_plan, step_counted_plan
from kerasrl.common.reductions import global_count
from kerasrl.common.schedules import decayed_hyperparameters
from kerasrl.common.update_loop import TracedCalls, replica_inputs, sum_minibatch_steps
from kerasrl.distribute import check_batch_size
from kerasrl.exception import one_line
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.optimizers import Adam
from kerasrl.ppo.loss import ppo_loss
from kerasrl.settings import PPOSettings, TrainerSettings
from kerasrl.spec import BehaviorSpec

logger = logging.getLogger("kerasrl")

METRIC_NAMES = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


MAX_STACKED_BYTES = 256 * 2**20
#: The values the schedules set for each update, by name (``PPOLearner.schedule``).
SCHEDULED = ("learning_rate", "epsilon", "beta")


def clip_by_global_norm(grads: Sequence[tf.Tensor], max_norm: float) -> list[tf.Tensor]:
    """Scale ``grads`` by ``min(1, max_norm / (‖grads‖ + 1e-6))`` (PyTorch's ``clip_grad_norm_``).

    The ``1e-6`` is PyTorch's, so the Zoo configuration clips exactly as Stable-Baselines3
    (``tf.clip_by_global_norm`` has none). A non-finite norm makes the gradients non-finite,
    which the trainer's loss check reports.
    """
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
    scale = tf.minimum(1.0, max_norm / (norm + 1e-6))
    return [g * tf.cast(scale, g.dtype) for g in grads]


class PPOLearner(keras.Model):
    """Owns the actor-critic being trained, its Adam optimizer and the PPO schedules.

    ``update(batch, step, seed)`` is what a trainer calls: it sets the schedules for ``step``,
    runs every epoch and mini-batch (fused or one call per mini-batch, as the settings say)
    and returns every metric, the schedule values included.
    """

    def __init__(self, actor_critic: ActorCritic, hyperparameters: Optional[PPOSettings] = None,
                 max_steps: int = TrainerSettings.max_steps, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: The strategy whose scope the learner was built in (TensorFlow's default outside any).
        self.strategy = tf.distribute.get_strategy()
        self.replicas = int(self.strategy.num_replicas_in_sync)
        hp = PPOSettings() if hyperparameters is None else hyperparameters
        self.hyperparameters = hp
        self.clip_value_loss = hp.clip_value_loss
        self.max_grad_norm = hp.max_grad_norm
        self.actor_critic = actor_critic
        self.stream_names = list(actor_critic.stream_names)
        self.max_steps = int(max_steps)
        self.sequence_length = actor_critic.sequence_length
        check_batch_size(hp.batch_size, self.sequence_length, self.replicas)
        self.use_xla = choose_jit_compile(hp.jit_compile, actor_critic)
        self.clip_epsilon = self.add_weight(name="epsilon", shape=(), initializer=keras.initializers.Constant(hp.epsilon),
                                            trainable=False)
        self.beta = self.add_weight(name="beta", shape=(), initializer=keras.initializers.Constant(hp.beta),
                                    trainable=False)
        self.compile(optimizer=Adam(learning_rate=hp.learning_rate, epsilon=hp.adam_epsilon,
                                    epsilon_style=hp.adam_epsilon_style), jit_compile=self.use_xla)
        self.optimizer.build(self.actor_critic.trainable_variables)
        self._fused: Optional[tf.types.experimental.GenericFunction] = None
        self._traced_calls = TracedCalls()  # ``_fused`` without its per-call dispatch (one device)
        #: The schedule values of the next update, by name (float32 scalars, as the compiled update takes them).
        self.schedule = self._scalars({"learning_rate": hp.learning_rate, "epsilon": hp.epsilon, "beta": hp.beta})
        #: True once something else set the optimizer's learning rate (a ``fit`` callback such as
        #: ``keras.callbacks.LearningRateScheduler``): from then on the updates use, and report, the
        #: optimizer's rate as they find it, and the schedule sets only ``epsilon`` and ``beta``.
        self.learning_rate_from_optimizer = False
        self.trace_seconds = 0.0
        self._traced_shapes: set[tuple[int, ...]] = set()
        self._minibatch_fn: Optional[tf.types.experimental.GenericFunction] = None
        self._batch_signature: Optional[dict[str, tf.TensorSpec]] = None
        self._numpy_dtypes: Optional[dict[str, np.dtype]] = None
        #: The actor-critic's trainable weights after the latest fused update (numpy, in
        #: ``trainable_variables`` order), returned by the same compiled call, so that acting
        #: with the numpy mirror needs no separate read.
        self.latest_weights: Optional[list[np.ndarray]] = None
        self._weight_shapes: Optional[list[tuple[int, ...]]] = None
        self._weight_ends: list[int] = []
        self._warm_up: Optional[threading.Thread] = None
        #: Mini-batches a one-call fused update is padded to (see ``_stacked_calls``).
        self._stack_size = 0

    @classmethod
    def for_behavior(cls, spec: BehaviorSpec, stream_names: Sequence[str], settings: TrainerSettings, seed: int,
                     max_steps: int) -> "PPOLearner":
        """A learner of a new actor-critic for ``spec`` (TensorFlow's global seed is set first,
        so that seeded runs are reproducible)."""
        tf.random.set_seed(seed)
        model = ActorCritic(spec, stream_names, settings.network, seed=seed, name="actor_critic")
        return cls(model, settings.hyperparameters, max_steps=max_steps)

    def batch_signature(self) -> dict[str, tf.TensorSpec]:
        """Signature of a learning batch: model inputs plus what the loss needs, batch dim free."""
        if self._batch_signature is None:
            self._batch_signature = self._make_batch_signature()
        return dict(self._batch_signature)

    @property
    def batch_fields(self) -> list[str]:
        """The update-buffer fields a learning batch is made of (``Field`` names)."""
        return list(self.batch_signature())

    def _make_batch_signature(self) -> dict[str, tf.TensorSpec]:
        sig = dict(self.actor_critic.input_signature())
        ac = self.actor_critic

        def spec(name: str, shape: list[Optional[int]], dtype: tf.DType = tf.float32) -> None:
            sig[name] = tf.TensorSpec(shape, dtype, name=name)

        if ac.is_discrete:
            spec(Field.ACTIONS, [None, len(ac.branches)], tf.int32)
        else:
            spec(Field.ACTIONS_PRE, [None, ac.spec.action_size])
        spec(Field.ACTION_LOG_PROBS, [None, ac.spec.action_size])
        spec(Field.ADVANTAGES, [None])
        spec(Field.MASKS, [None])
        for name in self.stream_names:
            spec(Field.returns(name), [None])
            spec(Field.value_estimates(name), [None])
        return sig

    def schedules(self, step: float) -> dict[str, float]:
        """Learning rate, clip epsilon and entropy coefficient at trainer step ``step``."""
        return decayed_hyperparameters(self.hyperparameters, step, self.max_steps)

    def set_schedules(self, step: float, apply: bool = True) -> dict[str, float]:
        """Use the schedule values of ``step`` from the next update on (the optimizer's own
        learning rate once ``learning_rate_from_optimizer``: the returned values report it).

        With ``apply=False`` the values are only remembered: ``fused_update`` assigns them inside
        its compiled call, which saves a separate call per update.
        """
        values = self.schedules(step)
        self.schedule = self._scalars(values)
        if self.learning_rate_from_optimizer:
            values["learning_rate"] = float(self._optimizer_learning_rate())
        if apply:
            self._assign(self.schedule, self._keep_learning_rate())
        return values

    @staticmethod
    def _scalars(values: Mapping[str, float]) -> dict[str, np.ndarray]:
        """The scheduled values by name, as float32 scalars (arrays: the compiled update takes them
        as tensors, so that a new value does not trace it again)."""
        return {name: np.array(values[name], np.float32) for name in SCHEDULED}

    def _keep_learning_rate(self) -> np.ndarray:
        """Whether the optimizer keeps its own learning rate (a boolean scalar for the compiled update)."""
        return np.array(self.learning_rate_from_optimizer)

    def _optimizer_learning_rate(self) -> np.float32:
        return np.float32(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

    def notice_learning_rate(self) -> None:
        """Leave the learning rate to whoever set the optimizer's since the learner last assigned
        its schedule's (``learning_rate_from_optimizer``, for good), as Keras's ``fit`` does."""
        if not self.learning_rate_from_optimizer and self._optimizer_learning_rate() != self.schedule["learning_rate"]:
            self.learning_rate_from_optimizer = True

    def update(self, batch: Mapping[str, np.ndarray], step: int, seed: int) -> dict[str, float]:
        """One PPO update at trainer step ``step``: ``num_epoch`` passes of mini-batches of
        ``batch_size`` over ``batch``. Returns the mean losses and the schedule values used."""
        hp = self.hyperparameters
        self.wait_warm_up()  # it puts the optimizer's state (its learning rate too) back when it ends
        self.notice_learning_rate()
        values = self.set_schedules(step, apply=not hp.fused_update)
        drive = self.fused_update if hp.fused_update else self.minibatch_update
        metrics = drive(batch, hp.num_epoch, hp.batch_size, seed)
        return {**metrics, **values}

    def update_normalization(self, vector_obs: np.ndarray) -> None:
        """Feed observations to the model's running normalizer (no-op without one)."""
        if self.actor_critic.normalizer is not None and len(vector_obs):
            self.actor_critic.normalizer.update(vector_obs)

    def _assign(self, schedule: Mapping[str, Any], keep_learning_rate: Any) -> None:
        """The schedule values into the optimizer (unless ``keep_learning_rate``: it keeps its own)
        and into the loss's ``epsilon`` and ``beta``."""
        learning_rate = self.optimizer.learning_rate
        tf.cond(tf.convert_to_tensor(keep_learning_rate), lambda: learning_rate,
                lambda: learning_rate.assign(schedule["learning_rate"]))
        self.clip_epsilon.assign(schedule["epsilon"])
        self.beta.assign(schedule["beta"])

    def call(self, inputs: Mapping[str, tf.Tensor], training: bool = False) -> dict[str, Any]:
        return self.actor_critic(inputs)

    def _gradient_step(self, batch: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        variables = self.actor_critic.trainable_variables
        count = global_count(tf.cast(batch[Field.MASKS], tf.float32))
        with tf.GradientTape() as tape:
            loss, metrics = ppo_loss(
                self.actor_critic, batch, self.clip_epsilon, self.beta, self.stream_names, self.sequence_length,
                self.clip_value_loss, row_count=count,
                minibatch_advantages=self.hyperparameters.normalize_advantages == "minibatch",
                value_coef=self.hyperparameters.vf_coef,
            )
        grads = tape.gradient(loss, variables)
        if self.max_grad_norm is not None:
            ctx = tf.distribute.get_replica_context()
            replicas = ctx.num_replicas_in_sync if ctx is not None else 1
            if replicas > 1:
                # Clip the norm of the *summed* gradient: all-reduce here (outside the tape),
                # clip, and hand each replica 1/n of it for the optimizer's own summation.
                total = clip_by_global_norm(ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads), self.max_grad_norm)
                grads = [g / float(replicas) for g in total]
            else:
                grads = clip_by_global_norm(grads, self.max_grad_norm)
        self.optimizer.apply_gradients(zip(grads, variables))
        return {"loss": loss, **metrics}

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        """One PPO gradient step on a mini-batch (a dict as ``batch_signature`` describes)."""
        if isinstance(data, tuple):
            data = data[0]
        return self._gradient_step(data)

    def train_minibatch(self, batch: Mapping[str, np.ndarray]) -> dict[str, float]:
        """Compiled per-mini-batch driver (fixed signature: no retracing across batch sizes)."""
        inputs = self._distribute({k: v[None] for k, v in batch.items()}) if self.replicas > 1 else self._to_tensors(batch)
        if self._minibatch_fn is None:
            self._minibatch_fn = self._build_minibatch_fn()
            with xla_cache.compiling():
                out = self._minibatch_fn(inputs)
        else:
            out = self._minibatch_fn(inputs)
        return {k: float(v) for k, v in out.items()}

    def _build_minibatch_fn(self) -> tf.types.experimental.GenericFunction:
        if self.replicas == 1:
            return tf.function(self.train_step, input_signature=[self.batch_signature()],
                               jit_compile=self.use_xla, reduce_retracing=True)
        strategy = self.strategy

        def step(per_replica: Any) -> dict[str, tf.Tensor]:
            out = strategy.run(lambda b: self._gradient_step({k: v[0] for k, v in b.items()}), args=(per_replica,))
            return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in out.items()}

        return tf.function(step, reduce_retracing=True)

    def _distribute(self, stacked: Mapping[str, np.ndarray]) -> Any:
        """The replicas' slices of stacked mini-batches (``kerasrl.common.update_loop.replica_inputs``)."""
        dtypes = {k: spec.dtype for k, spec in self.batch_signature().items()}
        return replica_inputs(self.strategy, stacked, dtypes)

    def _to_tensors(self, batch: Mapping[str, np.ndarray]) -> dict[str, tf.Tensor]:
        sig = self.batch_signature()
        missing = [k for k in sig if k not in batch]
        if missing:
            raise KeyError(f"Learning batch lacks fields {missing}.")
        return {k: tf.convert_to_tensor(np.asarray(batch[k]), dtype=spec.dtype) for k, spec in sig.items()}

    def _build_fused(self) -> tf.types.experimental.GenericFunction:
        """The fused update: ``(stacked or per-replica mini-batches, schedule, keep_learning_rate,
        count) -> (summed metrics, flat weights)``, a loop over the first ``count`` stacked
        mini-batches (on one device the rest pad the stack to its compiled size), each one
        ``strategy.run`` under a strategy; ``schedule`` is ``PPOLearner.schedule``."""
        names = list(self.batch_signature())
        variables = self.actor_critic.trainable_variables

        def step(i: tf.Tensor, stacked: Mapping[str, tf.Tensor]) -> tf.Tensor:
            metrics = self._gradient_step({k: stacked[k][i] for k in names})
            return tf.stack([metrics[k] for k in METRIC_NAMES])

        def fused(inputs: Any, schedule: dict[str, tf.Tensor], keep_learning_rate: tf.Tensor,
                  count: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            self._assign(schedule, keep_learning_rate)
            totals = sum_minibatch_steps(self.strategy, step, inputs, len(METRIC_NAMES), count)
            with tf.control_dependencies([totals]):
                flat = tf.concat([tf.reshape(tf.cast(v.value, tf.float32), [-1]) for v in variables], axis=0)
            return totals, flat

        # No input signature: static shapes compile to faster code, and the stacked
        # shape is padded to the most mini-batches seen (``_stacked_calls``): one trace per run.
        # No autograph: converting every Keras layer's code only adds tracing time.
        return tf.function(fused, jit_compile=self.use_xla and self.replicas == 1, autograph=False)

    def _counts_steps(self) -> bool:
        """Recurrent mini-batches of ``batch_size`` agent steps (``sequence_batches: sb3``)."""
        return self.sequence_length > 1 and self.hyperparameters.sequence_batches == "sb3"

    def _plan_rows(self, arrays: Mapping[str, np.ndarray], num_epoch: int, batch_size: int,
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices ``[E·B, spb·L]`` and sequence starts ``[E·B, spb]`` of every mini-batch."""
        seq_len = self.sequence_length
        n_seq = len(arrays[Field.ADVANTAGES]) // seq_len
        if self._counts_steps():  # the last sequence is _arrays' masked one
            steps = int(np.count_nonzero(arrays[Field.MASKS]))
            plan = step_counted_plan(n_seq - 1, steps, batch_size, seq_len, num_epoch, seed)
        else:
            plan = minibatch_plan(n_seq, max(int(batch_size) // seq_len, 1), num_epoch, seed)
        starts = plan.reshape(-1, plan.shape[-1]) * seq_len
        rows = (starts[:, :, None] + np.arange(seq_len)[None, None, :]).reshape(starts.shape[0], -1)
        return rows, starts

    def _arrays(self, buffer: Mapping[str, np.ndarray], batch_size: int) -> dict[str, np.ndarray]:
        """The batch's fields in the signature's dtypes; a buffer shorter than one mini-batch is
        padded to one with masked rows (all actions allowed, everything else 0), so that every
        collected row is used and the compiled update keeps one shape."""
        if self._numpy_dtypes is None:
            self._numpy_dtypes = {k: np.dtype(spec.dtype.as_numpy_dtype) for k, spec in self.batch_signature().items()}
        missing = [k for k in self._numpy_dtypes if k not in buffer]
        if missing:
            raise KeyError(f"Learning batch lacks fields {missing}.")
        arrays = {k: np.asarray(buffer[k], dtype=dtype) for k, dtype in self._numpy_dtypes.items()}
        n = len(arrays[Field.ADVANTAGES])
        if n == 0:
            raise ValueError("The learning batch is empty.")
        target = max(int(batch_size) // self.sequence_length, 1) * self.sequence_length
        if self._counts_steps():  # one masked sequence for the step-counted plan's padding
            target = n + self.sequence_length
        if n < target:
            arrays = {k: np.concatenate([v, np.full((target - n, *v.shape[1:]), 1 if k == Field.ACTION_MASK else 0, v.dtype)])
                      for k, v in arrays.items()}
        return arrays

    def _stacked_calls(self, arrays: Mapping[str, np.ndarray], num_epoch: int, batch_size: int,
                       seed: int) -> Iterator[tuple[dict[str, np.ndarray], tuple[int, ...], int]]:
        """The stacked mini-batches of each compiled call of an update, the shape of its row
        indices and its count of mini-batches.

        An update in one call (the usual case) is padded to ``self._stack_size`` mini-batches,
        the most seen (or warmed up) so far, so that buffers of a few rows more or fewer, whose
        last mini-batch comes and goes, reuse one compiled update instead of compiling another.
        """
        rows, starts = self._plan_rows(arrays, num_epoch, batch_size, seed)
        total = rows.shape[0]
        row_bytes = sum(v[:1].nbytes for k, v in arrays.items() if k != Field.MEMORY) * rows.shape[1]
        per_call = max(1, min(total, MAX_STACKED_BYTES // max(row_bytes, 1)))
        if per_call == total and self.replicas == 1:
            self._stack_size = max(self._stack_size, total)
            pad = self._stack_size - total
            if pad:
                rows = np.concatenate([rows, np.zeros((pad, rows.shape[1]), rows.dtype)])
                starts = np.concatenate([starts, np.zeros((pad, starts.shape[1]), starts.dtype)])
            per_call = self._stack_size
        for lo in range(0, total, per_call):
            r, st = rows[lo : lo + per_call], starts[lo : lo + per_call]
            yield ({k: (v[st] if k == Field.MEMORY else v[r]) for k, v in arrays.items()}, r.shape,
                   min(per_call, total - lo))

    def fused_update(self, buffer: Mapping[str, np.ndarray], num_epoch: int, batch_size: int, seed: int) -> dict[str, float]:
        """All ``num_epoch`` epochs of mini-batches of ``batch_size`` rows in one compiled call.

        The mini-batches (``minibatch_plan``) are gathered here into one stacked array per
        field and the compiled loop walks its leading axis: gathering inside the loop makes
        XLA carry the whole buffer through every iteration. Updates whose stacked batches
        exceed ``MAX_STACKED_BYTES`` (large images) run in several calls, whole epochs each.
        ``buffer['memory']`` holds every row's memory (the start of each sequence is used).
        """
        self.wait_warm_up()
        if self._fused is None:
            self._fused = self._build_fused()
        arrays = self._arrays(buffer, batch_size)
        totals = {k: 0.0 for k in METRIC_NAMES}
        calls = 0
        for stacked, shape, count in self._stacked_calls(arrays, num_epoch, batch_size, seed):
            first = shape not in self._traced_shapes
            start = time.perf_counter()
            inputs = self._distribute(stacked)
            # (a plain dict: Keras wraps the attribute's in its tracking dict)
            args = (inputs, dict(self.schedule), self._keep_learning_rate(), np.array(count, np.int32))
            if first:
                out, flat = self._compile_call(*args)
            else:
                out, flat = self._traced_calls(self._fused, shape, args) if self.replicas == 1 else self._fused(*args)
            for k, v in zip(METRIC_NAMES, out.numpy().tolist()):
                totals[k] += v
            object.__setattr__(self, "latest_weights", self._split_weights(flat.numpy()))  # untracked by Keras
            if first:
                self._traced_shapes.add(shape)
                self.trace_seconds += time.perf_counter() - start
            calls += count
        return {k: v / calls for k, v in totals.items()}

    def _compile_call(self, *args: Any) -> tuple[tf.Tensor, tf.Tensor]:
        """The fused update's first call for a shape, which compiles it (or loads it from the XLA
        cache, ``kerasrl.xla_cache``). A cached entry that fails to load is discarded and the
        update traced and compiled afresh (a new trace: TensorFlow remembers the failure)."""
        assert self._fused is not None  # fused_update built it
        with xla_cache.compiling():
            try:
                return self._fused(*args)
            except tf.errors.OpError:
                if not (self.use_xla and self.replicas == 1 and xla_cache.discard_loaded()):
                    raise
            self._fused = self._build_fused()
            self._traced_calls.clear()
            return self._fused(*args)

    def start_warm_up(self, rows: int, num_epoch: Optional[int] = None, batch_size: Optional[int] = None) -> bool:
        """Compile the fused update for a buffer of ``rows`` rows in a background thread, so that
        its one-time tracing and XLA compilation overlap the first rollout.

        The warm-up runs the very call an update of that size makes (same shapes and dtypes:
        no retrace) on zeros, with every row masked and a learning rate of 0, so that no
        weight moves; the optimizer's state (step count, moments) is restored afterwards. Only
        for the XLA-compiled fused update on one device (a plain ``tf.function`` traces in a
        fraction of the time). ``fused_update`` waits for it. Returns whether it started.
        """
        hp = self.hyperparameters
        if not (hp.fused_update and self.use_xla and self.replicas == 1) or self._warm_up is not None:
            return False
        num_epoch = hp.num_epoch if num_epoch is None else int(num_epoch)
        batch_size = hp.batch_size if batch_size is None else int(batch_size)
        if self._fused is None:
            self._fused = self._build_fused()
        dummy = self._warm_up_batch(max(int(rows), 1))
        self._warm_up = threading.Thread(target=self._run_warm_up, args=(dummy, num_epoch, batch_size),
                                         name="kerasrl-warm-up", daemon=True)
        self._warm_up.start()
        return True

    def _warm_up_batch(self, rows: int) -> dict[str, np.ndarray]:
        """Zeros in the batch's dtypes (all actions allowed, every row masked out)."""
        out = {}
        for name, spec in self.batch_signature().items():
            fill = 1 if name == Field.ACTION_MASK else 0
            out[name] = np.full([rows, *spec.shape[1:]], fill, spec.dtype.as_numpy_dtype)
        return out

    def _run_warm_up(self, dummy: Mapping[str, np.ndarray], num_epoch: int, batch_size: int) -> None:
        state = [v.numpy() for v in self.optimizer.variables]
        try:
            arrays = self._arrays(dummy, batch_size)
            for stacked, shape, count in self._stacked_calls(arrays, num_epoch, batch_size, seed=0):
                if shape not in self._traced_shapes:
                    schedule = {**self.schedule, "learning_rate": np.array(0.0, np.float32)}
                    self._compile_call(stacked, schedule, np.array(False), np.array(count, np.int32))[0].numpy()
                    self._traced_shapes.add(shape)
        except Exception as e:  # the real update compiles (and fails, if it must) on its own
            logger.warning("%s: compiling the PPO update ahead failed (%s); the first update compiles it.",
                           self.actor_critic.name, one_line(e))
        finally:
            for variable, value in zip(self.optimizer.variables, state):
                variable.assign(value)

    def wait_warm_up(self) -> None:
        """Wait for ``start_warm_up``'s compilation (the wait counts as tracing time)."""
        self.trace_seconds += join_warm_up(self._warm_up)
        self._warm_up = None

    def _split_weights(self, flat: np.ndarray) -> list[np.ndarray]:
        if self._weight_shapes is None:  # ``trainable_variables`` walks every layer: do it once
            self._weight_shapes = [tuple(v.shape) for v in self.actor_critic.trainable_variables]
            self._weight_ends = np.cumsum([int(np.prod(s)) for s in self._weight_shapes]).tolist()
        starts = [0, *self._weight_ends[:-1]]
        return [flat[a:b].reshape(s) for a, b, s in zip(starts, self._weight_ends, self._weight_shapes)]

    def minibatch_update(self, buffer: Mapping[str, np.ndarray], num_epoch: int, batch_size: int, seed: int) -> dict[str, float]:
        """The same update as ``fused_update``, one compiled call per mini-batch."""
        self.latest_weights = None
        arrays = self._arrays(buffer, batch_size)
        rows, starts = self._plan_rows(arrays, num_epoch, batch_size, seed)
        totals = {k: 0.0 for k in METRIC_NAMES}
        for r, st in zip(rows, starts):
            metrics = self.train_minibatch({k: (v[st] if k == Field.MEMORY else v[r]) for k, v in arrays.items()})
            for k in METRIC_NAMES:
                totals[k] += metrics[k]
        return {k: v / rows.shape[0] for k, v in totals.items()}
