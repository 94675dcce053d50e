"""PPOTrainer: trajectories → GAE per reward signal → PPO updates (behaviour.md §6.3)."""
from __future__ import annotations

import logging
import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from kerasrl.envs.base import BehaviorSpec, StepResult, shared_ones
from kerasrl.exception import UnityTrainerException
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.optimizers import EPSILON_STYLES
from kerasrl.ppo.gae import gae_and_returns
from kerasrl.ppo.learner import PPOLearner
from kerasrl.ppo.policy import PPOPolicy
from kerasrl.ppo.schedules import EPSILON_END
from kerasrl.rl_trainer import RLTrainer
from kerasrl.timers import hierarchical_timer

logger = logging.getLogger("kerasrl.trainers")


class PPOTrainer(RLTrainer):
    """Proximal Policy Optimization over one behavior's agents."""

    required_keys = (
        "batch_size", "beta", "buffer_size", "epsilon", "hidden_units", "lambd", "learning_rate", "max_steps",
        "normalize", "num_epoch", "num_layers", "time_horizon", "sequence_length", "summary_freq",
        "use_recurrent", "summary_path", "memory_size", "model_path", "reward_signals",
    )

    def __init__(self, brain_name: str, spec: BehaviorSpec, reward_buff_cap: int, trainer_parameters: dict[str, Any],
                 training: bool, load: bool, seed: int, run_id: str, multi_gpu: bool = False) -> None:
        super().__init__(brain_name, spec, trainer_parameters, training, run_id, reward_buff_cap)
        p = trainer_parameters
        self.seed = int(seed)
        self.use_recurrent = bool(p["use_recurrent"])
        self.sequence_length = int(p["sequence_length"]) if self.use_recurrent else 1
        self.batch_size = int(p["batch_size"])
        self.buffer_size = int(p["buffer_size"])
        self.num_epoch = int(p["num_epoch"])
        self.time_horizon = int(p["time_horizon"])
        self.lambd = float(p["lambd"])
        self.fused = bool(p.get("fused_update", True))
        self.flush_on_update = bool(p.get("flush_on_update", False))
        for key in ("batch_size", "buffer_size", "num_epoch", "time_horizon", "sequence_length"):
            if int(p[key]) < 1:
                raise UnityTrainerException(f"The hyper-parameter {key} of brain {brain_name} must be >= 1, got {p[key]}.")
        self.model_path = str(p["model_path"])
        self.keep_checkpoints = int(p.get("keep_checkpoints", 5))
        tf.random.set_seed(self.seed)
        try:
            model = ActorCritic(
                spec, list(self.reward_signals), hidden_units=int(p["hidden_units"]), num_layers=int(p["num_layers"]),
                normalize=bool(p["normalize"]), vis_encode_type=str(p.get("vis_encode_type", "simple")),
                use_recurrent=self.use_recurrent, memory_size=int(p["memory_size"]), seed=self.seed,
                activation=str(p.get("activation", "swish")),
                separate_value_network=p.get("separate_value_network"),
                initializer=str(p.get("initializer", "variance_scaling")),
                name=f"actor_critic",
            )
        except ModelConfigError as e:
            raise UnityTrainerException(f"Brain {brain_name}: {e}") from e
        adam_epsilon, adam_epsilon_style = p.get("adam_epsilon", 1e-7), p.get("adam_epsilon_style", "keras")
        try:  # PyYAML reads ``1e-5`` (no dot) as a string
            adam_epsilon = float(adam_epsilon) if not isinstance(adam_epsilon, bool) else float("nan")
        except (TypeError, ValueError):
            adam_epsilon = float("nan")
        if not 0 < adam_epsilon < float("inf"):
            raise UnityTrainerException(
                f"The hyper-parameter adam_epsilon of brain {brain_name} must be a positive number, "
                f"got {p.get('adam_epsilon')!r}."
            )
        if adam_epsilon_style not in EPSILON_STYLES:
            raise UnityTrainerException(
                f"The hyper-parameter adam_epsilon_style of brain {brain_name} must be one of {list(EPSILON_STYLES)}, "
                f"got {adam_epsilon_style!r}."
            )
        self.learner = PPOLearner(
            model, learning_rate=float(p["learning_rate"]), epsilon=float(p["epsilon"]), beta=float(p["beta"]),
            max_steps=float(p["max_steps"]), sequence_length=self.sequence_length,
            jit_compile=bool(p.get("jit_compile", False)),
            clip_value_loss=bool(p.get("clip_value_loss", True)),
            max_grad_norm=None if p.get("max_grad_norm") is None else float(p["max_grad_norm"]),
            epsilon_end=float(p.get("epsilon_end", EPSILON_END)),
            adam_epsilon=adam_epsilon, adam_epsilon_style=adam_epsilon_style,
        )
        self._policy = PPOPolicy(spec, model, seed=self.seed, inference=str(p.get("inference", "auto")))
        self._policy.learning_rate = self.learner.set_schedules(0)["learning_rate"]
        self.update_count = 0
        #: With ``flush_on_update``: agent steps since the last update, counting the steps that
        #: stored no experience (the reset step of Gymnasium's NEXT_STEP autoreset), so that
        #: updates come every ``buffer_size + 1`` agent steps, as Stable-Baselines3's rollouts of
        #: ``n_steps × n_envs``. A rollout may then hold a few fewer transitions than that; the
        #: learner pads a batch shorter than ``batch_size`` with masked rows.
        self.rollout_steps = 0
        self._checkpoint = tf.train.Checkpoint(
            model=model, optimizer=self.learner.optimizer, learner=self.learner,
            step=tf.Variable(0, dtype=tf.int64), updates=tf.Variable(0, dtype=tf.int64),
        )
        self._manager: Optional[tf.train.CheckpointManager] = None
        if load:
            self.load_model()

    @property
    def policy(self) -> PPOPolicy:
        return self._policy

    # -- checkpoints -------------------------------------------------------------------
    def _checkpoint_manager(self) -> tf.train.CheckpointManager:
        if self._manager is None:
            os.makedirs(self.model_path, exist_ok=True)
            self._manager = tf.train.CheckpointManager(
                self._checkpoint, self.model_path, max_to_keep=max(self.keep_checkpoints, 1), checkpoint_name="model"
            )
        return self._manager

    def save_model(self) -> str:
        """Checkpoint weights, optimizer slots, normalizer, step and schedules (index updated last)."""
        self._checkpoint.step.assign(self.get_step)
        self._checkpoint.updates.assign(self.update_count)
        return self._checkpoint_manager().save(checkpoint_number=self.get_step)

    def load_model(self) -> None:
        latest = tf.train.latest_checkpoint(self.model_path)
        if latest is None:
            raise UnityTrainerException(
                f"The model {self.model_path} could not be found. Make sure you specified the right --run-id."
            )
        self._checkpoint.restore(latest).assert_existing_objects_matched()
        self.step = int(self._checkpoint.step.numpy())
        self._policy.step = self.step
        self.update_count = int(self._checkpoint.updates.numpy())
        self._policy.learning_rate = self.learner.set_schedules(self.step)["learning_rate"]
        self._policy.refresh()
        logger.info("Restored %s at step %d from %s", self.brain_name, self.step, latest)

    def export_model(self) -> None:
        """Write the actor-critic weights (normalizer included) to ``{model_path}/{brain}.weights.h5`` atomically."""
        path = os.path.join(self.model_path, f"{self.brain_name}.weights.h5")
        tmp = path + ".tmp.weights.h5"
        self.learner.actor_critic.save_weights(tmp)
        os.replace(tmp, path)

    # -- experiences ---------------------------------------------------------------------
    def experience_fields(self, curr: StepResult, rows: np.ndarray, outputs: dict[str, Any],
                          nxt: StepResult, next_rows: np.ndarray) -> dict[str, np.ndarray]:
        fields = super().experience_fields(curr, rows, outputs, nxt, next_rows)
        fields["actions"] = outputs["action"][rows]
        fields["action_probs"] = outputs["log_probs"][rows]
        if self.spec.is_discrete:
            masks = curr.action_masks
            fields["action_mask"] = (masks[rows] if masks is not None
                                     else shared_ones(len(fields["masks"]), self.spec.action_mask_size))
        else:
            fields["actions_pre"] = outputs["pre_action"][rows]
        if self.use_recurrent:
            fields["memory"] = outputs["memory"][rows]
            if self.spec.is_discrete:
                fields["prev_action"] = outputs["prev_action"][rows]
        return fields

    def process_experiences(self, current_all: dict[str, StepResult], new_all: dict[str, StepResult]) -> None:
        """Close trajectories that ended or reached ``time_horizon``: bootstrap, GAE, move to the update buffer."""
        nxt = new_all.get(self.brain_name) if new_all else None
        if nxt is None or len(nxt) == 0:
            return
        slots = self.agents.slots(nxt.agent_ids)
        length_col = self.agents.columns["trajectory_length"]
        lengths = length_col[slots]
        done = nxt.done
        if self.flush_on_update:
            self.rollout_steps += len(nxt)
        if self.flush_on_update and self.rollout_steps > self.buffer_size:
            # A rollout is complete: cut every trajectory now (bootstrapping from the current
            # value), so the update sees all of it and none waits to be used stale.
            ready_mask = lengths > 0
        else:
            ready_mask = (lengths > 0) & (done | (lengths > self.time_horizon))
        if not ready_mask.any():
            return
        rows = np.flatnonzero(ready_mask)
        ids = nxt.agent_ids[rows].tolist()
        terminated = nxt.terminated[rows].tolist()
        ended = done[rows].tolist()
        with hierarchical_timer("process_experiences"):
            values_next = self.policy.get_value_estimates(nxt, rows)
            for k, agent_id in enumerate(ids):
                self._close_trajectory(agent_id, {n: float(v[k]) for n, v in values_next.items()}, terminated[k])
                if ended[k]:
                    self.record_episode_end(agent_id)

    def _close_trajectory(self, agent_id: int, value_next: dict[str, float], terminated: bool) -> None:
        agent = self.training_buffer[agent_id]
        advantages, returns = [], []
        for name, signal in self.reward_signals.items():
            v_next = 0.0 if (terminated and signal.use_terminal_states) else value_next[name]
            adv, ret = gae_and_returns(agent[f"{name}_rewards"].get_batch(), agent[f"{name}_value_estimates"].get_batch(),
                                       value_next=v_next, gamma=signal.gamma, lambd=self.lambd)
            agent[f"{name}_advantage"].set(adv)
            agent[f"{name}_returns"].set(ret)
            advantages.append(adv)
            returns.append(ret)
        if len(advantages) == 1:
            agent["advantages"].set(advantages[0])
            agent["discounted_returns"].set(returns[0])
        else:
            agent["advantages"].set(np.mean(advantages, axis=0).astype(np.float32))
            agent["discounted_returns"].set(np.mean(returns, axis=0).astype(np.float32))
        if self.policy.model.normalizer is not None and "vector_obs" in agent:
            self.policy.update_normalization(agent["vector_obs"].get_batch())
        self.training_buffer.append_update_buffer(agent_id, batch_size=None, training_length=self.sequence_length)
        agent.reset_agent()
        self.agents.set("trajectory_length", agent_id, 0.0)

    def end_episode(self) -> None:
        """An environment reset: also start every agent's recurrent memory afresh."""
        super().end_episode()
        self._policy.forget_agents()

    # -- updates -----------------------------------------------------------------------
    def _update_buffer_length(self) -> int:
        update = self.training_buffer.update_buffer
        return len(update["actions"]) if "actions" in update else 0

    def is_ready_update(self) -> bool:
        if self.flush_on_update:
            return self.rollout_steps > self.buffer_size and self._update_buffer_length() > 0
        return self._update_buffer_length() > self.buffer_size

    def learning_batch(self) -> dict[str, np.ndarray]:
        """The update buffer as the learner's field names, advantages normalised."""
        ub = self.training_buffer.update_buffer
        batch: dict[str, np.ndarray] = {}
        if self.spec.vector_observation_size:
            batch["vector_obs"] = ub["vector_obs"].get_batch()
        for j in range(len(self.spec.visual_observation_shapes)):
            batch[f"visual_obs_{j}"] = ub[f"visual_obs{j}"].get_batch()
        if self.spec.is_discrete:
            batch["actions"] = ub["actions"].get_batch().astype(np.int32)
            batch["action_masks"] = ub["action_mask"].get_batch().astype(np.float32)
        else:
            batch["pre_actions"] = ub["actions_pre"].get_batch()
        batch["old_log_probs"] = ub["action_probs"].get_batch().sum(axis=-1).astype(np.float32)
        adv = ub["advantages"].get_batch().astype(np.float32)
        batch["advantages"] = (adv - adv.mean()) / (adv.std() + 1e-10)
        batch["masks"] = ub["masks"].get_batch().astype(np.float32)
        for name in self.reward_signals:
            batch[f"{name}_returns"] = ub[f"{name}_returns"].get_batch()
            batch[f"{name}_value_estimates"] = ub[f"{name}_value_estimates"].get_batch()
        if self.use_recurrent:
            batch["memory"] = ub["memory"].get_batch()
            if self.spec.is_discrete:
                batch["prev_action"] = ub["prev_action"].get_batch().astype(np.int32)
        return batch

    def update_policy(self) -> None:
        """``num_epoch`` passes of PPO over the update buffer, then clear it (fully on-policy)."""
        batch = self.learning_batch()
        if not np.isfinite(batch["advantages"]).all():
            raise UnityTrainerException(f"Brain {self.brain_name}: non-finite advantages in the update buffer.")
        self.cumulative_returns_since_policy_update.clear()
        self.learner.set_schedules(self.get_step, apply=not self.fused)
        seed = self.seed * 100003 + self.update_count
        with hierarchical_timer("ppo.update"):
            if self.fused:
                metrics = self.learner.fused_update(batch, self.num_epoch, self.batch_size, seed)
            else:
                metrics = self.learner.minibatch_update(batch, self.num_epoch, self.batch_size, seed)
        self.update_count += 1
        if not np.isfinite(metrics["loss"]):
            raise UnityTrainerException(f"Brain {self.brain_name}: the PPO loss became {metrics['loss']}.")
        self.stats["Losses/Value Loss"].append(metrics["value_loss"])
        self.stats["Losses/Policy Loss"].append(abs(metrics["policy_loss"]))
        self.last_update_metrics = metrics
        self.training_buffer.reset_update_buffer()
        self.rollout_steps = 0
        self._policy.refresh(self.learner.latest_weights)
        self._policy.learning_rate = float(self.learner._schedule_values[0])
