"""The MA-POCA learner: the per-agent actor, the centralised critic, one Adam optimizer over both,
and the update (every epoch and mini-batch in one compiled call, :mod:`kerasrl.common.update_loop`).

One device only (no ``tf.distribute`` strategy). The update is compiled with XLA where PPO's is
(``jit_compile``, :func:`kerasrl.common.fast_path.choose_jit_compile`): its stack of mini-batches is
padded to the most an update has had, and the loop runs only the real ones, so that XLA compiles
once per run (again only when a larger group widens the groupmates' arrays). Its compiled code goes
to the XLA cache (``kerasrl.xla_cache``, as PPO's), so that a later run of the same command loads it
instead of compiling; and, as PPO's, it is compiled ahead in a background thread
(``start_warm_up``, from the trainer's first trajectory) while the first rollout goes on. The first
call of each shape, or the wait for the warm-up, counts as tracing (``trace_seconds``), as does the
first call of the critic's compiled estimates (``estimate_fn``).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from kerasrl import xla_cache
from kerasrl.common.fast_path import choose_jit_compile, join_warm_up
from kerasrl.common.minibatches import minibatch_plan
from kerasrl.common.policy import TimedFirstCall
from kerasrl.common.schedules import decayed_hyperparameters
from kerasrl.common.update_loop import sum_steps
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.optimizers import Adam
from kerasrl.poca.loss import METRIC_NAMES, poca_loss
from kerasrl.poca.networks import POCACritic, check_poca_spec
from kerasrl.settings import POCASettings, TrainerSettings
from kerasrl.spec import BehaviorSpec

logger = logging.getLogger("kerasrl")


def trained_variables(actor: ActorCritic, critic: POCACritic) -> list[tf.Variable]:
    """The actor's policy weights (not its own value heads or value stream, which POCA does not
    use) and every weight of the critic."""
    unused = [layer for layer in (*actor.value_heads.values(), actor.value_body) if layer is not None]
    skipped = {id(v) for layer in unused for v in layer.trainable_variables}
    return [v for v in actor.trainable_variables if id(v) not in skipped] + list(critic.trainable_variables)


class POCALearner:
    """Owns the actor, the critic, the optimizer and the schedules of one behavior."""

    def __init__(self, actor: ActorCritic, critic: POCACritic, hyperparameters: Optional[POCASettings] = None,
                 max_steps: int = TrainerSettings.max_steps) -> None:
        self.hyperparameters = POCASettings() if hyperparameters is None else hyperparameters
        self.actor, self.critic = actor, critic
        self.stream_names = list(actor.stream_names)
        self.max_steps = int(max_steps)
        hp = self.hyperparameters
        self.variables = trained_variables(actor, critic)
        self.optimizer = Adam(learning_rate=hp.learning_rate)
        self.optimizer.build(self.variables)
        self.epsilon = tf.Variable(hp.epsilon, trainable=False, dtype=tf.float32, name="epsilon")
        self.beta = tf.Variable(hp.beta, trainable=False, dtype=tf.float32, name="beta")
        self._update_fn: Optional[Any] = None
        self.use_xla = choose_jit_compile(hp.jit_compile, actor)
        #: Mini-batches every update's stack is padded to (the most seen): one compiled shape.
        self._stack_size = 0
        #: Seconds spent in the update's first call per shape and the estimates' first call (tracing
        #: and compiling), for the run's report.
        self.trace_seconds = 0.0
        self._traced_shapes: set[tuple[tuple[int, ...], ...]] = set()
        self._warm_up: Optional[threading.Thread] = None
        self._log_prob_fn: Optional[Any] = None

    @classmethod
    def for_behavior(cls, spec: BehaviorSpec, stream_names: Sequence[str], settings: TrainerSettings, seed: int,
                     max_steps: int) -> "POCALearner":
        """A learner of a new actor and critic for ``spec`` (TensorFlow's global seed set first)."""
        check_poca_spec(spec, settings.network)
        tf.random.set_seed(seed)
        actor = ActorCritic(spec, stream_names, settings.network, seed=seed, name="actor_critic")
        critic = POCACritic(spec, stream_names, settings.network, actor.normalizer, seed=seed, name="poca_critic")
        return cls(actor, critic, settings.hyperparameters, max_steps=max_steps)

    @property
    def batch_fields(self) -> list[str]:
        """The update-buffer fields a learning batch is made of."""
        fields = list(self.actor.input_signature())
        fields += [Field.ACTIONS if self.actor.is_discrete else Field.ACTIONS_PRE, Field.ACTION_LOG_PROBS,
                   Field.ADVANTAGES, Field.MASKS, Field.GROUPMATE_VECTOR_OBS, Field.GROUPMATE_ACTIONS,
                   Field.GROUPMATE_MASK]
        for name in self.stream_names:
            fields += [Field.returns(name), Field.value_estimates(name), Field.baseline_estimates(name)]
        return fields

    def schedules(self, step: float) -> dict[str, float]:
        """Learning rate, clip epsilon and entropy coefficient at trainer step ``step``."""
        return decayed_hyperparameters(self.hyperparameters, step, self.max_steps)

    def set_schedules(self, step: float) -> dict[str, float]:
        values = self.schedules(step)
        self.optimizer.learning_rate.assign(values["learning_rate"])
        self.epsilon.assign(values["epsilon"])
        self.beta.assign(values["beta"])
        return values

    def update_normalization(self, vector_obs: np.ndarray) -> None:
        """Feed observations to the actor's running normalizer, which the critic shares (no-op without one)."""
        if self.actor.normalizer is not None and len(vector_obs):
            self.actor.normalizer.update(vector_obs)

    def _gradient_step(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """One gradient step on a mini-batch; its metrics as a ``[len(METRIC_NAMES)]`` vector."""
        with tf.GradientTape() as tape:
            loss, metrics = poca_loss(self.actor, self.critic, batch, self.epsilon, self.beta, self.stream_names)
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return tf.stack([loss, *(metrics[k] for k in METRIC_NAMES[1:])])

    def _build_update(self) -> Any:
        def update(stacked: Mapping[str, tf.Tensor], count: tf.Tensor) -> tf.Tensor:
            return sum_steps(lambda i, b: self._gradient_step({k: v[i] for k, v in b.items()}), stacked,
                             len(METRIC_NAMES), count=count)

        return tf.function(update, jit_compile=self.use_xla, reduce_retracing=not self.use_xla, autograph=False)

    def _padded(self, rows: np.ndarray, num_epoch: int) -> np.ndarray:
        """The plan's mini-batches ``[count, batch]`` padded with copies of row 0 to ``_stack_size``:
        at first two mini-batches per epoch more than the first update has (an update buffer runs
        past ``buffer_size`` by what the last trajectories bring), later the most seen."""
        spare = 2 * num_epoch if self._stack_size == 0 else 0
        self._stack_size = max(self._stack_size, rows.shape[0] + spare)
        pad = self._stack_size - rows.shape[0]
        return np.concatenate([rows, np.zeros((pad, rows.shape[1]), rows.dtype)]) if pad else rows

    def update(self, batch: Mapping[str, np.ndarray], step: int, seed: int) -> dict[str, float]:
        """One update at trainer step ``step``: ``num_epoch`` passes of mini-batches of
        ``batch_size`` over ``batch`` (``batch_fields``). Returns the mean metrics and the schedule values."""
        hp = self.hyperparameters
        self.wait_warm_up()
        values = self.set_schedules(step)
        n = len(batch[Field.ADVANTAGES])
        if n == 0:
            raise ValueError("The learning batch is empty.")
        plan = minibatch_plan(n, hp.batch_size, hp.num_epoch, seed)
        rows = plan.reshape(-1, plan.shape[-1])
        padded = self._padded(rows, hp.num_epoch)
        stacked = {k: tf.convert_to_tensor(np.asarray(batch[k])[padded]) for k in self.batch_fields}
        count = tf.constant(rows.shape[0], tf.int32)
        shape = tuple(tuple(v.shape) for v in stacked.values())
        if shape in self._traced_shapes:
            assert self._update_fn is not None
            totals = self._update_fn(stacked, count).numpy() / rows.shape[0]
        else:
            start = time.perf_counter()
            totals = self._compile_call(stacked, count).numpy() / rows.shape[0]
            self._traced_shapes.add(shape)
            self.trace_seconds += time.perf_counter() - start
        return {**dict(zip(METRIC_NAMES, totals.tolist())), **values}

    def _compile_call(self, stacked: Mapping[str, tf.Tensor], count: tf.Tensor) -> tf.Tensor:
        """The update's first call for a shape, which traces and compiles it (or loads it from the
        XLA cache, whose entries it publishes); a cached entry that fails to load is discarded
        and the update traced and compiled afresh, as PPO's (``PPOLearner._compile_call``)."""
        if self._update_fn is None:
            self._update_fn = self._build_update()
        with xla_cache.compiling():
            try:
                return self._update_fn(stacked, count)
            except tf.errors.OpError:
                if not (self.use_xla and xla_cache.discard_loaded()):
                    raise
            self._update_fn = self._build_update()
            return self._update_fn(stacked, count)

    @property
    def wants_warm_up(self) -> bool:
        """Whether ``start_warm_up`` would start: XLA, nothing compiled nor compiling yet."""
        return self.use_xla and self._warm_up is None and not self._traced_shapes

    def start_warm_up(self, template: Mapping[str, np.ndarray], rows: int) -> bool:
        """Compile the XLA update for an update buffer of ``rows`` rows shaped as ``template``
        (``batch_fields``, one row or more, as the update will read them) in a background thread,
        so that its tracing and compilation overlap the rollout. The warm-up call runs no
        mini-batch (its count is 0): no weight or optimizer state moves. Returns whether it started."""
        hp = self.hyperparameters
        if not self.wants_warm_up:
            return False
        per_batch = min(max(hp.batch_size, 1), max(int(rows), 1))
        plan_rows = np.zeros((hp.num_epoch * max(int(rows) // per_batch, 1), per_batch), np.int64)
        stacked = {k: tf.convert_to_tensor(np.asarray(template[k])[self._padded(plan_rows, hp.num_epoch)])
                   for k in self.batch_fields}
        self._warm_up = threading.Thread(target=self._run_warm_up, args=(stacked,), name="kerasrl-poca-warm-up",
                                         daemon=True)
        self._warm_up.start()
        return True

    def _run_warm_up(self, stacked: Mapping[str, tf.Tensor]) -> None:
        try:
            self._compile_call(stacked, tf.constant(0, tf.int32)).numpy()
            self._traced_shapes.add(tuple(tuple(v.shape) for v in stacked.values()))
        except Exception as e:  # the real update compiles (and fails, if it must) on its own
            logger.warning("%s: compiling the POCA update ahead failed (%s); the first update compiles it.",
                           self.actor.name, e)

    def wait_warm_up(self) -> None:
        """Wait for ``start_warm_up``'s compilation (the wait counts as tracing time)."""
        self.trace_seconds += join_warm_up(self._warm_up)
        self._warm_up = None

    def log_probs(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """The actor's log-probabilities ``[B]`` of ``batch``'s stored actions under the learner's
        weights now (one compiled call, traced once for any number of rows)."""
        action_key = Field.ACTIONS if self.actor.is_discrete else Field.ACTIONS_PRE
        signature = dict(self.actor.input_signature())
        if self._log_prob_fn is None:
            size = len(self.actor.spec.discrete_branches) if self.actor.is_discrete else self.actor.spec.action_size
            action_spec = tf.TensorSpec([None, size], tf.int32 if self.actor.is_discrete else tf.float32)

            def log_prob(inputs: dict[str, tf.Tensor], actions: tf.Tensor) -> tf.Tensor:
                return self.actor.evaluate_actions(inputs, actions)[0]

            self._log_prob_fn = tf.function(log_prob, input_signature=[signature, action_spec], autograph=False)
        inputs = {k: tf.convert_to_tensor(np.asarray(batch[k]), spec.dtype) for k, spec in signature.items()}
        actions = np.asarray(batch[action_key], np.int32 if self.actor.is_discrete else np.float32)
        return self._log_prob_fn(inputs, tf.convert_to_tensor(actions)).numpy()

    def estimate_fn(self) -> Any:
        """``(own, mates, actions, mask) -> (values, baselines)`` of the critic, compiled once for
        any number of rows and groupmates."""
        spec = self.actor.spec
        size = spec.vector_observation_size
        branches = len(spec.discrete_branches)
        action = (tf.TensorSpec([None, None, branches], tf.int32) if self.actor.is_discrete
                  else tf.TensorSpec([None, None, spec.action_size], tf.float32))
        signature = [tf.TensorSpec([None, size], tf.float32), tf.TensorSpec([None, None, size], tf.float32), action,
                     tf.TensorSpec([None, None], tf.float32)]

        def estimates(own: tf.Tensor, mates: tf.Tensor, actions: tf.Tensor,
                      mask: tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
            return self.critic.estimates(own, mates, actions, mask)

        return TimedFirstCall(tf.function(estimates, input_signature=signature, autograph=False), self)
