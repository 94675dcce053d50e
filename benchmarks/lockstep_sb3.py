"""kerasrl's ``pendulum_sb3`` PPO beside Stable-Baselines3's PPO on Pendulum-v1, in lockstep.

    python benchmarks/lockstep_sb3.py --seed 0 --updates 25

Seeds cannot settle a gap of a few points between two PPOs; this script compares them
deterministically. kerasrl runs first (its own ``TrainerController`` loop: 4 envs, rollouts of
1024 env steps, 102,400 steps, the config's schedules) and every update is recorded: its batch,
weights before and after, Adam moments, losses, each mini-batch's gradient norm and clip fraction,
the envs' states. SB3 then runs its own ``collect_rollouts`` and ``train`` (the bench task's
hyper-parameters) from kerasrl's initial weights, on the same seeded envs, in step with it:

* noise: env ``e``'s ``k``-th stored transition takes ``table[e, k]`` on both sides (kerasrl's
  ``ActorCriticPolicy.draw_noise`` and SB3's ``DiagGaussianDistribution.sample`` are replaced); the
  action kerasrl chooses on a final observation, which Gymnasium's NEXT_STEP autoreset discards,
  takes none;
* rollouts: SB3 collects as many steps per env as kerasrl's rollout stored transitions (the
  ``STRUCTURE`` line: kerasrl's rollout of 1024 env steps spends one per episode on the reset step);
* mini-batches: SB3's ``np.random.permutation`` returns kerasrl's epoch permutations
  (``minibatch_plan``) mapped onto SB3's rows; SB3's trailing partial mini-batch, which kerasrl
  drops, is skipped too unless ``--keep-partial``;
* learning rate: SB3's progress is kerasrl's step over 102,400, as SB3's own count would give;
* re-synchronisation (not with ``--free``): float rounding (kerasrl maps the clipped action to
  [-1, 1] and back; TensorFlow and PyTorch sum in different orders) grows through Pendulum's
  dynamics into different trajectories within two rollouts, so SB3's envs take kerasrl's state
  before each step, and each update starts from kerasrl's weights and (not with ``--own-adam``)
  Adam moments: each update is then compared on its own, its data and state equal to rounding.

Per update it prints the largest |kerasrl − SB3| of each quantity (observations, stored actions,
old log-probs, values, returns, normalised advantages, learning rate, per-step clip fractions and
gradient norms, losses, weights after the update), the first mini-batch step whose clip fractions
differ and how far the gradient norms agreed before it; then a verdict: the first quantity that
differs by more than ``--rtol`` of SB3's scale, and how that difference grows.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

N_ENVS, TOTAL, EPOCHS = 4, 102_400, 10
ENV_ID = "Pendulum-v1"
#: The table's columns, in the order data flows through an update (the verdict reads them so).
COLUMNS = ("obs", "action", "logp", "value", "return", "adv", "lr", "clip", "gnorm", "pg_loss", "v_loss", "weights")
#: SB3's layers beside kerasrl's separate-network layer names (as tests/test_sb3_parity.py).
LAYERS = (("mlp_extractor.policy_net.0", "main_graph_0/vector/hidden_0"),
          ("mlp_extractor.policy_net.2", "main_graph_0/vector/hidden_1"),
          ("mlp_extractor.value_net.0", "main_graph_1/vector/hidden_0"),
          ("mlp_extractor.value_net.2", "main_graph_1/vector/hidden_1"),
          ("action_net", "mu"), ("value_net", "extrinsic_value"))


class Stop(Exception):
    """Raised from the update spy once enough updates are recorded."""


def noise_table(seed: int) -> np.ndarray:
    """The shared standard-normal noise ``[env, transition]`` (float32, as kerasrl draws it)."""
    rng = np.random.default_rng([seed, 0x10C5])
    return rng.standard_normal((N_ENVS, TOTAL // N_ENVS + 8), dtype=np.float32)


def share_kerasrl_noise(policy: Any, table: np.ndarray) -> None:
    """kerasrl's policy acts with ``table[e, k]`` for env ``e``'s ``k``-th stored transition, not
    its own generator; agents on a final observation (their action is never taken) draw none."""
    counters = np.zeros(N_ENVS, np.int64)
    evaluate = policy.evaluate

    def shared(result: Any) -> Any:
        ids = np.asarray(result.agent_ids, np.int64)
        live = ~np.asarray(result.done, bool)
        noise = table[ids, counters[ids]][:, None]
        counters[ids[live]] += 1
        policy.draw_noise = lambda n: noise
        return evaluate(result)

    policy.evaluate = shared


def tap_steps(capacity: int = 4096) -> tuple[Any, Any, Callable[[], None]]:
    """Make kerasrl's PPO learner record, per mini-batch step ``count``, its gradient norm before
    clipping and its clip fraction (into ``steps[:count]``): patched before the update is traced,
    undone by the returned callable (the traced update keeps the tap)."""
    import tensorflow as tf

    import kerasrl.ppo.learner as learner_module

    steps = tf.Variable(tf.zeros([capacity, 2]), trainable=False)
    count = tf.Variable(0, trainable=False)
    clip, loss = learner_module.clip_by_global_norm, learner_module.ppo_loss

    def put(column: int, value: tf.Tensor) -> Any:
        return steps.scatter_nd_update(tf.reshape(tf.stack([count, column]), [1, 2]), tf.reshape(value, [1]))

    def recorded_loss(*args: Any, **kwargs: Any) -> Any:
        total, metrics = loss(*args, **kwargs)
        with tf.control_dependencies([put(1, metrics["clip_fraction"])]):
            return tf.identity(total), metrics

    def recorded_clip(grads: list, max_norm: float) -> list:
        norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
        with tf.control_dependencies([put(0, norm)]):
            bump = count.assign_add(1)
        with tf.control_dependencies([bump]):
            return [tf.identity(g) for g in clip(grads, max_norm)]

    def undo() -> None:
        learner_module.clip_by_global_norm, learner_module.ppo_loss = clip, loss

    learner_module.clip_by_global_norm, learner_module.ppo_loss = recorded_clip, recorded_loss
    return steps, count, undo


def kerasrl_weights(learner: Any) -> dict[str, np.ndarray]:
    """The actor-critic's trainable weights by name (without the model's own prefix)."""
    return {v.path.split("/", 1)[1]: v.numpy().copy() for v in learner.actor_critic.trainable_variables}


def adam_moments(learner: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """kerasrl's Adam moments ``(m, v)`` by weight name."""
    opt = learner.optimizer
    out = {}
    for var in learner.actor_critic.trainable_variables:
        i = opt._get_variable_index(var)
        out[var.path.split("/", 1)[1]] = (opt._momentums[i].numpy().copy(), opt._velocities[i].numpy().copy())
    return out


def record_updates(trainer: Any, steps: Any, count: Any, limit: int, envs: list) -> list[dict[str, Any]]:
    """Wrap the learner's ``update`` to keep, per update, its batch, step, seed, metrics, the
    weights and Adam moments before it, the weights after it, its steps' gradient norms and clip
    fractions, and the states of the Gymnasium ``envs`` it left (rollout ``u + 1`` goes on from
    them); raises ``Stop`` after ``limit`` updates."""
    learner = trainer.learner
    update = learner.update
    records: list[dict[str, Any]] = []

    def spy(batch: dict, step: int, seed: int) -> dict:
        learner.wait_warm_up()  # its zero-learning-rate call also passes the tap
        count.assign(0)
        before, adam = kerasrl_weights(learner), adam_moments(learner)
        metrics = update(batch, step, seed)
        records.append({"batch": {k: np.array(v) for k, v in batch.items()}, "step": int(step), "seed": int(seed),
                        "metrics": dict(metrics), "before": before, "adam": adam, "after": kerasrl_weights(learner),
                        "steps": steps.numpy()[: int(count.numpy())].copy(),
                        "states": [np.array(env.unwrapped.state, copy=True) for env in envs]})
        if len(records) >= limit:
            raise Stop
        return metrics

    learner.update = spy
    return records


def state_wrappers() -> tuple[type, type]:
    """Gymnasium wrappers over Pendulum: one logs ``(θ, θ̇)`` before every real step (kerasrl's
    side; Gymnasium's NEXT_STEP reset step calls ``reset``, not ``step``), the other sets them
    from such a log before each step (SB3's side), so that float rounding cannot grow through
    the dynamics: each transition starts from kerasrl's state, SB3's action and reward are its own."""
    import gymnasium

    class StateLog(gymnasium.Wrapper):
        def __init__(self, env: Any, log: list) -> None:
            super().__init__(env)
            self.log = log

        def step(self, action: Any) -> Any:
            self.log.append(np.array(self.env.unwrapped.state, copy=True))
            return self.env.step(action)

    class StateForcer(gymnasium.Wrapper):
        def __init__(self, env: Any, log: list) -> None:
            super().__init__(env)
            self.log, self.k = log, 0

        def step(self, action: Any) -> Any:
            if self.k < len(self.log):
                self.env.unwrapped.state = np.array(self.log[self.k], copy=True)
            self.k += 1
            return self.env.step(action)

    return StateLog, StateForcer


def run_kerasrl(seed: int, updates: int, table: np.ndarray, workdir: str) -> tuple[dict, list[dict], list]:
    """kerasrl's run of ``pendulum_sb3``: its initial weights, the first ``updates`` records and
    each env's log of states before its real steps."""
    import gymnasium

    from kerasrl.configs import config_path
    from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
    from kerasrl.settings import RunContext, read_yaml
    from kerasrl.trainers import TrainerController, create_trainers

    state_log = state_wrappers()[0]
    logs: list[list] = [[] for _ in range(N_ENVS)]
    vec = gymnasium.vector.SyncVectorEnv([lambda log=log: state_log(gymnasium.make(ENV_ID), log) for log in logs])
    manager = SimpleEnvManager(GymnasiumEnv(vec, seed=seed, behavior_name=ENV_ID))
    config = {"default": {**read_yaml(config_path("pendulum_sb3"))["default"], "summary_freq": 10**9}}
    context = RunContext(summaries_dir=os.path.join(workdir, "s"), model_path=os.path.join(workdir, "m"), seed=seed,
                         max_steps=TOTAL)
    steps, count, undo = tap_steps()
    try:
        trainer = create_trainers(config, manager.behavior_specs, context)[ENV_ID]
        initial = kerasrl_weights(trainer.learner)
        share_kerasrl_noise(trainer.policy, table)
        records = record_updates(trainer, steps, count, updates, vec.envs)
        TrainerController({ENV_ID: trainer}, os.path.join(workdir, "m"), os.path.join(workdir, "s"), "lockstep",
                          save_freq=10**9, training_seed=seed).start_learning(manager)
    except Stop:
        pass
    finally:
        undo()
    return initial, records, logs


def sb3_parameters(model: Any) -> dict[str, np.ndarray]:
    """SB3's weights under kerasrl's names (kernels as Keras lays them out)."""
    modules = dict(model.policy.named_modules())
    out = {"log_std": model.policy.log_std.detach().numpy().copy()}
    for theirs, ours in LAYERS:
        out[f"{ours}/kernel"] = modules[theirs].weight.detach().numpy().T.copy()
        out[f"{ours}/bias"] = modules[theirs].bias.detach().numpy().copy()
    return out


def sb3_model(seed: int, initial: dict[str, np.ndarray], table: np.ndarray) -> Any:
    """SB3's PPO with the bench task's settings, kerasrl's initial weights and the shared noise."""
    import torch
    from bench_tasks import TASKS
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    model = PPO("MlpPolicy", make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed), seed=seed, device="cpu", verbose=0,
                **TASKS["pendulum"].sb3_kwargs())
    model.set_logger(configure(None, []))
    load_weights(model, initial)
    dist, step = model.policy.action_dist, [0]

    def sample() -> Any:  # DiagGaussianDistribution.sample with the shared noise
        eps = torch.from_numpy(table[:, step[0]][:, None])
        step[0] += 1
        return dist.distribution.mean + eps * dist.distribution.stddev

    dist.sample = sample
    return model


def load_weights(model: Any, weights: dict[str, np.ndarray]) -> None:
    """kerasrl's ``weights`` (by name) into SB3's policy, in place (its Adam state is left as it is)."""
    import torch

    modules = dict(model.policy.named_modules())
    with torch.no_grad():
        model.policy.log_std.copy_(torch.tensor(weights["log_std"]))
        for theirs, ours in LAYERS:
            modules[theirs].weight.copy_(torch.tensor(weights[f"{ours}/kernel"].T))
            modules[theirs].bias.copy_(torch.tensor(weights[f"{ours}/bias"]))


def load_adam(model: Any, moments: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """kerasrl's Adam moments into SB3's optimizer state (its step count stays its own)."""
    import torch

    modules = dict(model.policy.named_modules())
    params = [(model.policy.log_std, "log_std", False)]
    for theirs, ours in LAYERS:
        params += [(modules[theirs].weight, f"{ours}/kernel", True), (modules[theirs].bias, f"{ours}/bias", False)]
    with torch.no_grad():
        for param, name, transpose in params:
            state = model.policy.optimizer.state[param]
            for key, value in zip(("exp_avg", "exp_avg_sq"), moments[name]):
                state[key].copy_(torch.tensor(value.T if transpose else value))


def resync(model: Any, weights: dict[str, np.ndarray], states: list[np.ndarray]) -> None:
    """SB3 starts rollout ``u`` where kerasrl did: kerasrl's weights before update ``u`` and its
    envs' states (Pendulum's ``(θ, θ̇)``) and observations; SB3's Adam state is its own. Without
    this, float rounding (e.g. kerasrl's action mapped to [-1, 1] and back) grows through
    Pendulum's dynamics into different trajectories within a rollout or two."""
    load_weights(model, weights)
    envs = model.env.envs
    for env, state in zip(envs, states):
        env.unwrapped.state = np.array(state, copy=True)
    model._last_obs = np.stack([env.unwrapped._get_obs() for env in envs]).astype(np.float32)


def row_map(ours: np.ndarray, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each kerasrl row, the SB3 row (env-major flat index, as ``RolloutBuffer.get``) with the
    nearest observation, and that distance (max over the observation's entries)."""
    flat = theirs.swapaxes(0, 1).reshape(-1, theirs.shape[-1])
    index, dist = np.empty(len(ours), np.int64), np.empty(len(ours))
    for lo in range(0, len(ours), 256):
        d = np.abs(ours[lo : lo + 256, None, :] - flat[None]).max(-1)
        index[lo : lo + 256], dist[lo : lo + 256] = d.argmin(1), d.min(1)
    return index, dist


def flat(a: np.ndarray) -> np.ndarray:
    """SB3's ``[step, env, ...]`` array in ``RolloutBuffer.get``'s env-major row order."""
    return a.swapaxes(0, 1).reshape(a.shape[0] * a.shape[1], *a.shape[2:])


def normalized(a: np.ndarray) -> np.ndarray:
    """Advantages as kerasrl's ``learning_batch`` normalises them over the batch."""
    return (a - a.mean()) / (a.std() + 1e-10)


def compare_rollout(rec: dict, buf: Any) -> tuple[dict[str, float], dict[str, float], np.ndarray]:
    """Max |Δ| and SB3's scale of the rollout's quantities, and the row map."""
    batch = rec["batch"]
    index, dist = row_map(batch["vector_obs"], buf.observations)
    pairs = {"obs": (batch["vector_obs"], flat(buf.observations)[index]),
             "action": (batch["actions_pre"][:, 0], flat(buf.actions)[index, 0]),
             "logp": (batch["action_log_probs"].sum(-1), flat(buf.log_probs)[index]),
             "value": (batch["extrinsic_value_estimates"], flat(buf.values)[index]),
             "return": (batch["extrinsic_returns"], flat(buf.returns)[index]),
             "adv": (batch["advantages"], normalized(flat(buf.advantages))[index])}
    diffs = {k: float(np.abs(a - b).max()) for k, (a, b) in pairs.items()}
    scales = {k: float(np.abs(b).max()) for k, (_, b) in pairs.items()}
    if len(set(index.tolist())) != len(index):
        diffs["obs"] = max(diffs["obs"], float("inf"))  # rows no longer pair up: the runs parted
    return diffs, scales, index


def sb3_train(model: Any, rec: dict, index: np.ndarray, keep_partial: bool) -> tuple[np.ndarray, float]:
    """SB3's ``train`` on its buffer with kerasrl's epoch permutations mapped onto its rows;
    returns each step's ``[gradient norm before clipping, clip fraction]`` and its learning rate."""
    import torch

    from kerasrl.common.minibatches import minibatch_plan

    n = len(index)
    perms = iter(index[p] for p in minibatch_plan(n, 1, EPOCHS, rec["seed"]).reshape(EPOCHS, n))
    steps: list[list[float]] = []
    clip, clamp, permutation, buf = torch.nn.utils.clip_grad_norm_, torch.clamp, np.random.permutation, model.rollout_buffer
    get = type(buf).get.__get__(buf)
    clip_range = model.clip_range(1.0 - rec["step"] / TOTAL)

    def recorded_clamp(x: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 2 and all(isinstance(a, float) for a in args):  # the ratio's clamp: SB3's clip fraction
            steps.append([float("nan"), float(((x - 1).abs() > clip_range).float().mean())])
        return clamp(x, *args, **kwargs)

    def recorded_clip(parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> Any:
        norm = clip(parameters, max_norm, *args, **kwargs)
        steps[-1][0] = float(norm)
        return norm

    def batches(batch_size: int) -> Any:
        return (b for b in get(batch_size) if keep_partial or len(b.advantages) == batch_size)

    torch.nn.utils.clip_grad_norm_, torch.clamp = recorded_clip, recorded_clamp
    np.random.permutation, buf.get = lambda size: next(perms), batches
    try:
        model._current_progress_remaining = 1.0 - rec["step"] / TOTAL
        model.train()
    finally:
        torch.nn.utils.clip_grad_norm_, torch.clamp, np.random.permutation = clip, clamp, permutation
        del buf.get
    return np.asarray(steps, np.float64), float(model.policy.optimizer.param_groups[0]["lr"])


def pair_steps(ours: np.ndarray, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two runs' per-step records side by side (SB3's partial mini-batch of each epoch, when
    kept, is left out: kerasrl has none to pair it with)."""
    if len(theirs) == len(ours) + EPOCHS:
        theirs = theirs.reshape(EPOCHS, -1, theirs.shape[-1])[:, :-1].reshape(-1, theirs.shape[-1])
    n = min(len(ours), len(theirs))
    return np.asarray(ours[:n], np.float64), theirs[:n]


def compare_update(rec: dict, model: Any, steps: np.ndarray, lr: float) -> tuple[dict, dict]:
    """Max |Δ| and SB3's scale of the update's learning rate, per-step clip fractions and
    gradient norms, losses and weights; ``clip_step``: the first step whose clip fractions
    differ (-1: none), ``gnorm_before``: the largest relative gradient-norm difference before it."""
    logged = model.logger.name_to_value
    ours, theirs = pair_steps(rec["steps"], steps)
    pairs = {"lr": (rec["metrics"]["learning_rate"], lr), "clip": (ours[:, 1], theirs[:, 1]),
             "gnorm": (ours[:, 0], theirs[:, 0]),
             "pg_loss": (rec["metrics"]["policy_loss"], logged["train/policy_gradient_loss"]),
             "v_loss": (rec["metrics"]["value_loss"], logged["train/value_loss"])}
    diffs = {k: float(np.abs(np.asarray(a) - np.asarray(b)).max()) for k, (a, b) in pairs.items()}
    scales = {k: float(np.abs(np.asarray(b)).max()) for k, (_, b) in pairs.items()}
    scales["clip"] = 1.0
    # The policy loss is a mean of O(1) terms (ratio × normalised advantage) that cancel to ~1e-3:
    # its rounding is relative to 1, not to the mean.
    scales["pg_loss"] = max(scales["pg_loss"], 1.0)
    if len(rec["steps"]) != len(steps) and len(rec["steps"]) != len(steps) - EPOCHS:
        diffs["gnorm"] = float("inf")
    flips = np.flatnonzero(np.abs(ours[:, 1] - theirs[:, 1]) > 1e-6)
    diffs["clip_step"] = int(flips[0]) if len(flips) else -1
    upto = flips[0] if len(flips) else len(ours)
    rel = np.abs(ours[:upto, 0] - theirs[:upto, 0]) / theirs[:upto, 0]
    diffs["gnorm_before"] = float(rel.max()) if upto else 0.0
    theirs_w = sb3_parameters(model)
    diffs["weights"] = max(float(np.abs(rec["after"][k] - v).max()) for k, v in theirs_w.items())
    scales["weights"] = max(float(np.abs(v).max()) for v in theirs_w.values())
    return diffs, scales


def lockstep(seed: int, updates: int, keep_partial: bool, free: bool, own_adam: bool) -> list[tuple[int, dict, dict]]:
    """Run kerasrl, then SB3 rollout by rollout beside its records (``free``: without ``resync``
    at each rollout's start; ``own_adam``: SB3 keeps its own Adam moments, else it takes
    kerasrl's at each update's start); per update: rows, diffs, scales."""
    table = noise_table(seed)
    with tempfile.TemporaryDirectory() as tmp:
        initial, records, logs = run_kerasrl(seed, updates, table, tmp)
    print(structure(records, keep_partial), flush=True)
    model = sb3_model(seed, initial, table)
    if not free:
        forcer = state_wrappers()[1]
        model.env.envs[:] = [forcer(env, log) for env, log in zip(model.env.envs, logs)]
    _, callback = model._setup_learn(TOTAL, None)
    callback.on_training_start(locals(), globals())
    print(header(), flush=True)
    rows = []
    for u, rec in enumerate(records, 1):
        n = len(rec["batch"]["advantages"])
        if n % N_ENVS:
            raise RuntimeError(f"update {u}: {n} rows are not a whole number of steps of {N_ENVS} envs")
        if u > 1 and not free:
            resync(model, rec["before"], records[u - 2]["states"])
            if not own_adam:
                load_adam(model, rec["adam"])
        model.n_steps = model.rollout_buffer.buffer_size = n // N_ENVS
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=n // N_ENVS)
        diffs, scales, index = compare_rollout(rec, model.rollout_buffer)
        steps, lr = sb3_train(model, rec, index, keep_partial)
        more_diffs, more_scales = compare_update(rec, model, steps, lr)
        rows.append((n, {**diffs, **more_diffs}, {**scales, **more_scales}))
        print(table_row(u, n, rows[-1][1]), flush=True)
    return rows


def structure(records: list[dict], keep_partial: bool) -> str:
    """What kerasrl's rollouts and updates held beside SB3's own (``n_steps × n_envs`` = 4,096
    transitions, 64 mini-batches of 64 per epoch): the differences that lockstep has SB3 follow."""
    rows = [len(r["batch"]["advantages"]) for r in records]
    batches = [len(r["steps"]) // EPOCHS for r in records]
    left_out = sorted({n - b * 64 for n, b in zip(rows, batches)})
    return (f"STRUCTURE: kerasrl made {len(records)} updates; transitions per rollout {sorted(set(rows))} "
            f"(SB3: 4096), mini-batches per epoch {sorted(set(batches))} (SB3: 64), rows left out of each epoch "
            f"{left_out} (SB3: 0); SB3 below collects kerasrl's rollout lengths and "
            f"{'keeps' if keep_partial else 'skips'} its partial mini-batch")


def header() -> str:
    """The table's header: max |kerasrl − SB3| per quantity, then the first mini-batch step whose
    clip fractions differ and the largest relative gradient-norm difference before it."""
    return "upd  rows " + " ".join(f"{q:>8}" for q in COLUMNS) + "  flip@  gnorm<flip"


def table_row(u: int, n: int, diffs: dict) -> str:
    flip = "-" if diffs["clip_step"] < 0 else str(diffs["clip_step"])
    return (f"{u:>3} {n:>5} " + " ".join(f"{diffs[q]:>8.1e}" for q in COLUMNS)
            + f"  {flip:>5}  {diffs['gnorm_before']:>9.1e}")


def first_divergence(rows: list[tuple[int, dict, dict]], rtol: float) -> tuple[int, str] | None:
    """The first (update, quantity), in data-flow order, whose |Δ| exceeds ``rtol`` of SB3's scale."""
    for u, (_, diffs, scales) in enumerate(rows, 1):
        for q in COLUMNS:
            if diffs[q] > rtol * max(scales[q], 1e-12):
                return u, q
    return None


def verdict(rows: list[tuple[int, dict, dict]], rtol: float) -> str:
    """One line: where kerasrl and SB3 first part beyond ``rtol`` and how that difference grows."""
    found = first_divergence(rows, rtol)
    weights = " ".join(f"{d['weights']:.0e}" for _, d, _ in rows)
    if found is None:
        return f"VERDICT: lockstep over {len(rows)} updates, no quantity beyond {rtol:g} relative; weights |Δ| {weights}"
    u, q = found
    rel = [d[q] / max(s[q], 1e-12) for _, d, s in rows]
    growth = " ".join(f"{r:.0e}" for r in rel[u - 1 :])
    where = ""
    if q == "clip":
        d = rows[u - 1][1]
        where = (f" at mini-batch step {d['clip_step']} (a ratio on the other side of 1 ± ε; gradient norms "
                 f"agreed to {d['gnorm_before']:.0e} relative before it)")
    return (f"VERDICT: first divergence at update {u}: {q}{where} (|Δ| {rows[u - 1][1][q]:.2e}, {rel[u - 1]:.1e} of "
            f"SB3's scale; relative from there: {growth}); weights |Δ| per update: {weights}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=25, help="updates to compare (25: the whole 102,400 steps)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative difference called a divergence")
    parser.add_argument("--keep-partial", action="store_true",
                        help="SB3 also trains on each epoch's trailing partial mini-batch, as it does by default")
    parser.add_argument("--free", action="store_true",
                        help="no resync: SB3 goes on from its own weights and env states after update 1")
    parser.add_argument("--count-transitions", action="store_true",
                        help="kerasrl's rollouts count stored transitions (pendulum_seeds.count_transitions): "
                             "4,096 rows each, SB3's own n_steps of 1024")
    parser.add_argument("--own-adam", action="store_true",
                        help="SB3 keeps its own Adam moments (else each update starts from kerasrl's)")
    args = parser.parse_args()

    import torch

    from kerasrl.cli.train import set_tf_threads

    torch.set_num_threads(1)
    set_tf_threads(1)
    if args.count_transitions:
        from pendulum_seeds import count_transitions

        count_transitions()
    rows = lockstep(args.seed, args.updates, args.keep_partial, args.free, args.own_adam)
    print(verdict(rows, args.rtol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
