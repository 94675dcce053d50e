"""kerasrl's recurrent PPO beside sb3-contrib's RecurrentPPO on MaskedCartPole-v1, a whole run in step.

    python benchmarks/lockstep_recurrent.py --seed 1200 --steps 100000

``tests/test_sb3_parity.py`` shows that one update of ``lstm_mlp_critic`` equals RecurrentPPO's
given the same weights and batch. This script checks what that test does not: the batches a
whole run collects. kerasrl runs ``lstm_mlp_critic`` (with ``action_bias: true`` and
``sequence_batches: sb3`` unless ``--shipped``: RecurrentPPO's exact network and mini-batches)
on 8 envs through its own ``TrainerController``; every sub-env logs each real transition
(observation acted on, action, reward, terminated, truncated, next observation) and every
update's batch and weights are kept. Then RecurrentPPO's own code goes over the same
transitions, env by env, with the weights that acted on them: its policy's ``get_distribution``
and ``predict_values`` (the LSTM state carried from step to step and zeroed at episode starts,
as its ``collect_rollouts`` carries it), the bootstrap of a truncated episode from the value
of its final observation, and its ``RolloutBuffer.compute_returns_and_advantage`` (its
log-probabilities compared through kerasrl's categorical arithmetic, ML-Agents' ε included:
``EPSILON``). Where every env of an update holds 32 transitions (the rectangle its buffer
holds), RecurrentPPO's own ``train`` runs on them too, from kerasrl's weights and Adam state.

Per update it prints the largest |kerasrl - RecurrentPPO| of the LSTM state each step started
from, the old log-probabilities, the values, the advantages, the returns and (where
RecurrentPPO's update ran) the weights after the update, with the ``floor`` that float rounding
alone reaches in that update and how far a weight ``moved``; then the first quantity beyond
float rounding, if any, and the accounting of the run's transitions.

What a rollout holds differs by design, and the script measures it: kerasrl reports an
episode's final observation on the step that ends it and the next episode's first observation
on the following step (ML-Agents' protocol), so each episode end takes one env step that stores
no transition, while RecurrentPPO's vector env resets within the ending step. kerasrl's update
every 256 agent steps then holds 256 transitions minus the episode ends among them.
"""
from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_tasks  # noqa: E402  (registers MaskedCartPole-v1)
from lockstep_sb3 import adam_moments  # noqa: E402

N_ENVS, UNITS, GAMMA, LAMBDA = 8, 64, 0.98, 0.8
ENV_ID = "MaskedCartPole-v1"
#: ML-Agents' ε in kerasrl's categorical: added to each probability before renormalising and inside
#: the log, it moves an unlikely action's log-probability by about 2ε/p (2.7e-4 at p = 7.5e-4).
EPSILON = 1e-7
COLUMNS = ("memory", "logp", "value", "adv", "return", "weights", "floor")


def transition_log() -> type:
    """A Gymnasium wrapper that appends each real step to a list: ``(obs acted on, action, reward,
    terminated, truncated, next obs, episode start)`` (the vector env's reset step calls ``reset``)."""
    import gymnasium

    class TransitionLog(gymnasium.Wrapper):
        def __init__(self, env: Any, log: list) -> None:
            super().__init__(env)
            self.log, self.obs, self.start = log, None, True

        def reset(self, **kwargs: Any) -> Any:
            obs, info = self.env.reset(**kwargs)
            self.obs, self.start = np.array(obs, np.float32), True
            return obs, info

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.log.append((self.obs, int(action), float(reward), bool(terminated), bool(truncated),
                             np.array(obs, np.float32), self.start))
            self.obs, self.start = np.array(obs, np.float32), False
            return obs, reward, terminated, truncated, info

    return TransitionLog


def kerasrl_config(shipped: bool) -> dict[str, Any]:
    from kerasrl.configs import config_path
    from kerasrl.settings import read_yaml

    keys = read_yaml(config_path("lstm_mlp_critic"))["default"]
    if not shipped:
        keys = {**keys, "action_bias": True, "sequence_batches": "sb3"}
    return {"default": {**keys, "summary_freq": 10**9}}


def run_kerasrl(seed: int, steps: int, shipped: bool, workdir: str) -> tuple[list[dict], list[list]]:
    """kerasrl's run: per update its batch and the weights that collected it; each env's transitions."""
    import gymnasium

    from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
    from kerasrl.settings import RunContext
    from kerasrl.trainers import TrainerController, create_trainers

    wrapper = transition_log()
    logs: list[list] = [[] for _ in range(N_ENVS)]
    vec = gymnasium.vector.SyncVectorEnv([lambda log=log: wrapper(gymnasium.make(ENV_ID), log) for log in logs])
    manager = SimpleEnvManager(GymnasiumEnv(vec, seed=seed, behavior_name=ENV_ID))
    context = RunContext(summaries_dir=os.path.join(workdir, "s"), model_path=os.path.join(workdir, "m"), seed=seed,
                         max_steps=steps)
    trainer = create_trainers(kerasrl_config(shipped), manager.behavior_specs, context)[ENV_ID]
    learner = trainer.learner
    update, records = learner.update, []

    def spy(batch: dict, step: int, seed: int) -> dict:
        learner.wait_warm_up()  # it puts the optimizer's state back when it ends
        record = {"batch": {k: np.array(v) for k, v in batch.items()}, "step": int(step), "weights": weights(),
                  "adam": adam_moments(learner), "iterations": int(learner.optimizer.iterations.numpy())}
        metrics = update(batch, step, seed)
        records.append({**record, "after": weights(), "metrics": dict(metrics)})
        return metrics

    def weights() -> dict[str, np.ndarray]:
        return {v.path.split("/", 1)[1]: v.numpy().copy() for v in learner.actor_critic.trainable_variables}

    learner.update = spy
    TrainerController({ENV_ID: trainer}, os.path.join(workdir, "m"), os.path.join(workdir, "s"), "lockstep",
                      save_freq=10**9, training_seed=seed).start_learning(manager)
    return records, logs


def sb3_model(seed: int) -> Any:
    """RecurrentPPO as ``lstm_seeds.py --peer mlp-critic`` builds it, its LSTM's second bias frozen
    at 0 (Keras's LSTM has one bias)."""
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    torch.set_num_threads(1)
    model = RecurrentPPO("MlpLstmPolicy", make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed), seed=seed, device="cpu",
                         **bench_tasks._zoo_cartpole(), policy_kwargs={
                             "lstm_hidden_size": UNITS, "enable_critic_lstm": False,
                             "net_arch": {"pi": [UNITS], "vf": [UNITS]}, "activation_fn": torch.nn.Tanh})
    model.set_logger(configure(None, []))
    model.policy.lstm_actor.bias_hh_l0.requires_grad_(False)
    return model


def parameters(policy: Any) -> list[tuple[Any, str, bool]]:
    """RecurrentPPO's trained parameters beside kerasrl's weight names (and whether transposed)."""
    extractor, lstm, cell = policy.mlp_extractor, policy.lstm_actor, "main_graph_0/lstm/lstm_cell"
    out = [(lstm.weight_ih_l0, f"{cell}/kernel", True), (lstm.weight_hh_l0, f"{cell}/recurrent_kernel", True),
           (lstm.bias_ih_l0, f"{cell}/bias", False)]
    for linear, name in [(extractor.policy_net[0], "main_graph_0/vector/hidden_0"),
                         (extractor.value_net[0], "main_graph_1/vector/hidden_0"),
                         (policy.action_net, "branch_0"), (policy.value_net, "extrinsic_value"),
                         (policy.critic, "main_graph_1/projection")]:
        out += [(linear.weight, f"{name}/kernel", True), (linear.bias, f"{name}/bias", False)]
    return out


def load_weights(policy: Any, weights: dict[str, np.ndarray]) -> None:
    """kerasrl's weights into RecurrentPPO's policy (its LSTM's second bias and, without kerasrl's
    ``action_bias``, the action layer's bias at 0: the sums equal kerasrl's single biases)."""
    import torch

    extractor, lstm = policy.mlp_extractor, policy.lstm_actor
    with torch.no_grad():
        for linear, name in [(extractor.policy_net[0], "main_graph_0/vector/hidden_0"),
                             (extractor.value_net[0], "main_graph_1/vector/hidden_0"),
                             (policy.action_net, "branch_0"), (policy.value_net, "extrinsic_value"),
                             (policy.critic, "main_graph_1/projection")]:
            linear.weight.copy_(torch.tensor(weights[f"{name}/kernel"].T))
            bias = weights.get(f"{name}/bias")
            linear.bias.copy_(torch.tensor(bias) if bias is not None else torch.zeros_like(linear.bias))
        cell = "main_graph_0/lstm/lstm_cell"
        lstm.weight_ih_l0.copy_(torch.tensor(weights[f"{cell}/kernel"].T))
        lstm.weight_hh_l0.copy_(torch.tensor(weights[f"{cell}/recurrent_kernel"].T))
        lstm.bias_ih_l0.copy_(torch.tensor(weights[f"{cell}/bias"]))
        lstm.bias_hh_l0.zero_()


def load_adam(policy: Any, record: dict) -> list[Any]:
    """A fresh Adam over the parameters kerasrl trains (the others frozen), holding kerasrl's
    moments and step count from before the update; returns those parameters."""
    import torch

    trained = []
    for param, name, transpose in parameters(policy):
        param.requires_grad_(name in record["weights"])
        if name in record["weights"]:
            trained.append((param, name, transpose))
    policy.optimizer = torch.optim.Adam([p for p, _, _ in trained], lr=1e-3, eps=1e-5)
    for param, name, transpose in trained:
        m, v = (torch.tensor(a.T if transpose else a).clone() for a in record["adam"][name])
        policy.optimizer.state[param] = {"step": torch.tensor(float(record["iterations"])), "exp_avg": m, "exp_avg_sq": v}
    return trained


def sb3_update(model: Any, per_env: list[dict], record: dict, total: int,
               nudge: float) -> tuple[float, float, float] | None:
    """RecurrentPPO's own ``train`` on this update's transitions, from kerasrl's weights and Adam
    state, its rollout cut where it starts (no random split point): the largest |kerasrl -
    RecurrentPPO| weight after it; the same between RecurrentPPO's update on its own numbers and on
    kerasrl's (old log-probabilities, values, advantages, returns, LSTM states: equal to rounding)
    or with its clip range ε nudged by ±``nudge`` (as far as the two sides' log-probabilities
    differ, so a ratio that rounding moves across 1 ± ε is moved across here too), the most of
    which is how far rounding alone carries through this update (a probability ratio on the other
    side of the clip range changes all that follows); and the most a weight moved.
    Only for updates whose every env holds 32 transitions (no episode end's reset step inside):
    the rectangle its buffer holds."""
    if len(per_env) != N_ENVS or any(len(r["obs"]) != 32 for r in per_env):
        return None
    own = sb3_train(model, per_env, record, total, kerasrl_data=False)
    others = [sb3_train(model, per_env, record, total, kerasrl_data=True)]
    others += [sb3_train(model, per_env, record, total, kerasrl_data=False, clip_nudge=n) for n in (-nudge, nudge)]
    worst = floor = moved = 0.0
    for name, value in own.items():
        worst = max(worst, float(np.abs(value - record["after"][name]).max()))
        floor = max([floor] + [float(np.abs(value - other[name]).max()) for other in others])
        moved = max(moved, float(np.abs(record["after"][name] - record["weights"][name]).max()))
    return worst, floor, moved


def sb3_data(per_env: list[dict], kerasrl_data: bool) -> dict[str, np.ndarray]:
    """The update's numbers ``[step, env]`` as RecurrentPPO computed them, or kerasrl's."""
    def stack(key: str) -> np.ndarray:
        return np.stack([r["ours"][key] if kerasrl_data else r[key] for r in per_env], axis=1)

    data = {k: stack(k) for k in ("logp", "value", "adv", "return")}
    if kerasrl_data:
        memory = stack("memory")
        data["c"], data["h"] = memory[..., :UNITS], memory[..., UNITS:]
    else:
        data["c"], data["h"] = stack("c"), stack("h")
    return data


def sb3_train(model: Any, per_env: list[dict], record: dict, total: int, kerasrl_data: bool,
              clip_nudge: float = 0.0) -> dict[str, np.ndarray]:
    """RecurrentPPO's ``train`` from kerasrl's state before the update; its weights after, by kerasrl's names."""
    policy = model.policy
    load_weights(policy, record["weights"])
    trained = load_adam(policy, record)
    buf = model.rollout_buffer
    buf.reset()

    data = sb3_data(per_env, kerasrl_data)
    buf.observations[:] = np.stack([r["obs"] for r in per_env], axis=1)
    buf.actions[:] = np.stack([r["action"] for r in per_env], axis=1)[..., None]
    buf.episode_starts[:] = np.stack([r["start"] for r in per_env], axis=1)
    buf.log_probs[:], buf.values[:], buf.advantages[:] = data["logp"], data["value"], data["adv"]
    buf.returns[:] = data["return"]
    for name, key in (("hidden_states_pi", "h"), ("cell_states_pi", "c"), ("hidden_states_vf", "h"),
                      ("cell_states_vf", "c")):
        getattr(buf, name)[:, 0] = data[key]
    buf.full, buf.pos = True, 32
    model._current_progress_remaining = 1.0 - record["step"] / total
    randint, clip_range = np.random.randint, model.clip_range
    np.random.randint = lambda *a, **k: 0
    model.clip_range = lambda progress: clip_range(progress) + clip_nudge
    try:
        model.train()
    finally:
        np.random.randint, model.clip_range = randint, clip_range
    return {name: (p.detach().numpy().T if transpose else p.detach().numpy()).copy() for p, name, transpose in trained}


def match_rows(batch: dict, index: dict[bytes, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Each real row of kerasrl's batch as ``(env, transition)``: the first row of each sequence is
    found by its observation, the rows after it continue that env's transitions (checked)."""
    obs, masks, seq = batch["vector_obs"], batch["masks"] > 0, 32
    env = np.full(len(masks), -1)
    pos = np.full(len(masks), -1)
    for lo in range(0, len(masks), seq):
        real = np.flatnonzero(masks[lo : lo + seq]) + lo
        if not len(real):
            continue
        e, k = index[obs[real[0]].tobytes()]
        env[real], pos[real] = e, k + np.arange(len(real))
    return env, pos


class Replay:
    """RecurrentPPO's view of the same transitions: its LSTM state carried per env across the run."""

    def __init__(self, policy: Any, logs: list[list]) -> None:
        import torch

        self.policy, self.logs = policy, logs
        self.state = [(torch.zeros(1, 1, UNITS), torch.zeros(1, 1, UNITS)) for _ in logs]
        self.done = [0] * len(logs)  # transitions already replayed, per env

    def rollout(self, e: int, stop: int) -> dict[str, np.ndarray]:
        """Env ``e``'s transitions up to ``stop`` (exclusive), as RecurrentPPO's rollout computes them."""
        import torch
        from stable_baselines3.common.buffers import RolloutBuffer

        policy, log = self.policy, self.logs[e]
        rows = range(self.done[e], stop)
        out = {k: np.zeros(len(rows), np.float32) for k in ("logp", "logp_eps", "value", "reward", "start")}
        out["memory"] = np.zeros((len(rows), 2 * UNITS), np.float32)
        out["h"], out["c"] = np.zeros((len(rows), UNITS), np.float32), np.zeros((len(rows), UNITS), np.float32)
        out["obs"] = np.stack([log[k][0] for k in rows]) if len(rows) else np.zeros((0, 4), np.float32)
        out["action"] = np.array([log[k][1] for k in rows], np.int64)
        with torch.no_grad():
            for i, k in enumerate(rows):
                obs, action, reward, terminated, truncated, next_obs, start = log[k]
                h, c = self.state[e]
                starts = torch.tensor([float(start)])
                out["memory"][i] = np.concatenate([c[0, 0].numpy(), h[0, 0].numpy()]) * (1.0 - start)
                out["h"][i], out["c"][i] = h[0, 0].numpy(), c[0, 0].numpy()  # as its buffer stores them
                dist, self.state[e] = policy.get_distribution(torch.tensor(obs[None]), (h, c), starts)
                out["logp"][i] = float(dist.log_prob(torch.tensor([action])))
                p = np.exp(np.float64(out["logp"][i]))
                out["logp_eps"][i] = np.log((p + EPSILON) / (1 + 2 * EPSILON) + EPSILON)  # kerasrl's arithmetic
                out["value"][i] = float(policy.predict_values(torch.tensor(obs[None]), (h, c), starts))
                if truncated and not terminated:
                    reward += GAMMA * float(policy.predict_values(torch.tensor(next_obs[None]), self.state[e],
                                                                  torch.tensor([0.0])))
                out["reward"][i], out["start"][i] = reward, start
            _, _, _, terminated, truncated, next_obs, _ = log[stop - 1]
            done = terminated or truncated
            last = policy.predict_values(torch.tensor(next_obs[None]), self.state[e], torch.tensor([float(done)]))
        buf = RolloutBuffer(len(rows), policy.observation_space, policy.action_space, device="cpu",
                            gae_lambda=LAMBDA, gamma=GAMMA, n_envs=1)
        buf.rewards[:, 0], buf.values[:, 0], buf.episode_starts[:, 0] = out["reward"], out["value"], out["start"]
        buf.compute_returns_and_advantage(last_values=last, dones=np.array([done]))
        out["adv"], out["return"] = buf.advantages[:, 0].copy(), buf.returns[:, 0].copy()
        self.done[e] = stop
        return out


def compare(record: dict, replay: Replay, index: dict) -> tuple[dict[str, float], dict[str, float], int, list]:
    """One update: the largest differences per quantity (and ``raw_logp``, the log-probabilities'
    without ML-Agents' ε), the quantities' scales (their largest magnitude, at least 1), the
    transitions it holds (each env's continue where its previous update's stopped, or the update
    lost or repeated one) and RecurrentPPO's numbers per env. The batch's
    advantages are normalised over its transitions (kerasrl's trainer does it before the update;
    RecurrentPPO per mini-batch, here one of the whole rollout), so RecurrentPPO's are too."""
    batch = record["batch"]
    load_weights(replay.policy, record["weights"])
    env, pos = match_rows(batch, index)
    real = env >= 0
    columns = COLUMNS[:5]
    ours = {"memory": batch["memory"], "logp": batch["action_log_probs"].reshape(len(env), -1).sum(axis=1),
            "value": batch["extrinsic_value_estimates"], "adv": batch["advantages"], "return": batch["extrinsic_returns"]}
    theirs = {k: np.zeros_like(np.asarray(v, np.float32)) for k, v in ours.items()}
    per_env: list = []
    raw_logp = 0.0  # without ML-Agents' ε: how far the two sides' probability ratios may differ
    for e in range(N_ENVS):
        rows = np.flatnonzero(real & (env == e))
        if not len(rows):
            continue
        first, stop = int(pos[rows].min()), int(pos[rows].max()) + 1
        if first != replay.done[e] or stop - first != len(rows):
            raise AssertionError(f"env {e}: the update holds transitions {first}..{stop - 1} ({len(rows)} rows); "
                                 f"the previous update ended at {replay.done[e]}: a transition was lost or repeated")
        replayed = replay.rollout(e, stop)
        order = rows[np.argsort(pos[rows])]
        replayed["ours"] = {k: np.asarray(v)[order] for k, v in ours.items()}
        per_env.append(replayed)
        raw_logp = max(raw_logp, float(np.abs(replayed["ours"]["logp"] - replayed["logp"]).max()))
        for k in columns:
            column = replayed["logp_eps" if k == "logp" else k]
            theirs[k][rows] = column[pos[rows] - first].reshape(theirs[k][rows].shape)
    adv = theirs["adv"][real]
    theirs["adv"][real] = (adv - adv.mean()) / (adv.std() + 1e-10)
    diffs = {k: float(np.max(np.abs(np.asarray(ours[k])[real] - theirs[k][real]))) for k in columns}
    scales = {k: max(1.0, float(np.max(np.abs(theirs[k][real])))) for k in columns}
    diffs["raw_logp"] = raw_logp
    return diffs, scales, int(real.sum()), per_env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1200)
    parser.add_argument("--steps", type=int, default=100_000, help="kerasrl's max_steps (agent steps)")
    parser.add_argument("--shipped", action="store_true",
                        help="lstm_mlp_critic as shipped (no action bias, ML-Agents' sequence mini-batches)")
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="a difference beyond this share of its quantity's scale is not float rounding (for "
                             "the weights: of how far they moved, and beyond 10 times rounding's reach, the floor)")
    parser.add_argument("--save", metavar="FILE", help="keep kerasrl's run (records and transitions) in this pickle")
    parser.add_argument("--load", metavar="FILE", help="compare a run kept by --save instead of running kerasrl")
    args = parser.parse_args()

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    if args.load:
        with open(args.load, "rb") as f:
            records, logs = pickle.load(f)
    else:
        with tempfile.TemporaryDirectory() as workdir:
            records, logs = run_kerasrl(args.seed, args.steps, args.shipped, workdir)
    if args.save:
        with open(args.save, "wb") as f:
            pickle.dump((records, logs), f)
    print(f"{'update':>6} {'rows':>5} " + " ".join(f"{c:>9}" for c in COLUMNS) + f" {'moved':>9}")
    worst, first_bad, stored, updated = dict.fromkeys(COLUMNS, 0.0), None, 0, 0
    for row in lockstep(records, logs, args.seed, args.steps, args.shipped, args.rtol):
        u, diffs = row["update"], row["diffs"]
        updated += row["moved"] is not None
        stored += row["rows"]
        worst = {k: max(worst[k], diffs[k]) if diffs[k] == diffs[k] else worst[k] for k in COLUMNS}
        if row["bad"] and first_bad is None:
            first_bad = (u, row["bad"][0])
        if u < 5 or u % 25 == 0 or u == len(records) - 1 or row["bad"]:
            moved = f" {row['moved']:9.1e}" if row["moved"] is not None else ""
            print(f"{u:>6} {row['rows']:>5} " + " ".join(f"{diffs[k]:9.1e}" for k in COLUMNS) + moved)
    report(records, worst, stored, updated, first_bad, args.rtol)
    return 0


def lockstep(records: list[dict], logs: list[list], seed: int, total: int, shipped: bool,
             rtol: float) -> Iterator[dict[str, Any]]:
    """Per update of kerasrl's run: its transitions (``rows``), the differences from RecurrentPPO
    (``diffs``), the quantities beyond float rounding (``bad``) and, where RecurrentPPO's update
    was run, how far a weight moved (``moved``)."""
    index = {t[0].tobytes(): (e, k) for e, log in enumerate(logs) for k, t in enumerate(log)}
    model = sb3_model(seed)
    replay = Replay(model.policy, logs)
    for u, record in enumerate(records):
        diffs, scales, rows, per_env = compare(record, replay, index)
        trained = None if shipped else sb3_update(model, per_env, record, total, max(diffs["raw_logp"], 2e-7))
        diffs["weights"], diffs["floor"] = trained[:2] if trained else (float("nan"), float("nan"))
        bad = [k for k in COLUMNS[:5] if diffs[k] > rtol * scales[k]]
        if trained and trained[0] > max(rtol * trained[2], 10 * trained[1]):
            bad.append("weights")
        yield {"update": u, "rows": rows, "diffs": diffs, "bad": bad, "moved": trained[2] if trained else None}


def report(records: list, worst: dict, stored: int, updated: int, first_bad: Any, rtol: float) -> None:
    """The run's largest differences, its transitions against RecurrentPPO's, and the verdict."""
    spanned = 256 * len(records)  # agent steps up to the last update (one update every 256)
    print(f"largest differences over {len(records)} updates: " + ", ".join(f"{k} {worst[k]:.1e}" for k in COLUMNS)
          + f" (weights: RecurrentPPO's train on the {updated} updates whose envs all hold 32 transitions)")
    print(f"transitions: the {len(records)} updates held {stored} of the {spanned} agent steps before the last one "
          f"({spanned - stored} episode ends' reset steps, {(spanned - stored) / spanned:.2%}); RecurrentPPO's "
          f"{len(records)} rollouts hold {spanned}")
    if first_bad is None:
        print(f"verdict: every update's batch, and every update compared, equals RecurrentPPO's to float rounding "
              f"(rtol {rtol:g})")
    else:
        print(f"verdict: first difference beyond float rounding (rtol {rtol:g}): {first_bad[1]} at update {first_bad[0]}")


if __name__ == "__main__":
    sys.exit(main())
