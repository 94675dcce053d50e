"""kerasrl's PPO with the RL-Zoo CartPole and Pendulum configs computes what Stable-Baselines3 computes.

One update on the same data gives the same weights (discrete actions with ``cartpole_zoo``,
continuous actions with ``pendulum_sb3``'s SB3-style Gaussian, SB3's ``CnnPolicy`` with
``visual_sb3``); GAE over the same rollout gives
the same advantages and returns; and the buffer a real ``pendulum_sb3`` run hands its learner is
what SB3's ``RolloutBuffer`` holds for the same transitions.

Runs only where ``stable_baselines3`` (and torch) are installed: it is the reference we
benchmark against, not a dependency. Same initial weights, same rollout (observations,
actions, old log-probs, advantages, returns), 20 epochs of one full-batch mini-batch each,
clipped objective, unclipped value loss, gradient-norm clipping, PyTorch-style Adam: the
weights after the update agree to float rounding.
"""
import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3", reason="stable_baselines3 is not installed (pip install stable-baselines3)")
torch = pytest.importorskip("torch", reason="torch is not installed")

from kerasrl.configs import config_path  # noqa: E402
from kerasrl.envs import GymnasiumEnv, SimpleEnvManager  # noqa: E402
from kerasrl.trainers import initialize_trainers  # noqa: E402


def linear_pairs(policy, head: str) -> list:
    """SB3's MLP policy layers beside the names of kerasrl's separate-network layers."""
    extractor = policy.mlp_extractor
    return [(extractor.policy_net[0], "main_graph_0/vector/hidden_0"),
            (extractor.policy_net[2], "main_graph_0/vector/hidden_1"),
            (extractor.value_net[0], "main_graph_1/vector/hidden_0"),
            (extractor.value_net[2], "main_graph_1/vector/hidden_1"),
            (policy.action_net, head), (policy.value_net, "extrinsic_value")]


def copy_into_sb3(pairs: list, weights: dict) -> None:
    """kerasrl's weights into SB3's linear layers (kernels transposed; missing biases left)."""
    with torch.no_grad():
        for linear, name in pairs:
            linear.weight.copy_(torch.tensor(weights[f"{name}/kernel"].numpy().T))
            if f"{name}/bias" in weights:
                linear.bias.copy_(torch.tensor(weights[f"{name}/bias"].numpy()))


def freeze_action_bias_at_zero(policy) -> None:
    """Without ``action_bias`` kerasrl's discrete policy layer has no bias (ML-Agents 0.9's layout):
    SB3's is held at zero, so that both compute the same function."""
    with torch.no_grad():
        policy.action_net.bias.zero_()
    policy.action_net.bias.requires_grad_(False)


@pytest.mark.parametrize("action_bias", [False, True], ids=["no-action-bias", "action-bias"])
def test_update_matches_stable_baselines3(tmp_path, action_bias):
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    from kerasrl.settings import read_yaml

    torch.set_num_threads(1)
    config = {"default": {**read_yaml(config_path("cartpole_zoo"))["default"], "action_bias": action_bias}}
    manager = SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=8, seed=0))
    trainer = next(iter(initialize_trainers(config, manager.behavior_specs, str(tmp_path), "p", str(tmp_path),
                                            1, True, False, 0).values()))
    learner = trainer.learner
    weights = {v.path.split("/", 1)[1]: v for v in learner.actor_critic.trainable_variables}

    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), n_steps=32, batch_size=256,
                gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate=1e-3, clip_range=0.2,
                seed=0, device="cpu")
    model.set_logger(configure(None, []))
    before = {k: v.numpy().copy() for k, v in weights.items()}
    policy = model.policy
    pairs = linear_pairs(policy, "branch_0")
    copy_into_sb3(pairs, weights)
    if not action_bias:
        freeze_action_bias_at_zero(policy)
    assert ("branch_0/bias" in weights) == action_bias
    policy.optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-3, eps=1e-5)

    rng = np.random.default_rng(1)
    n = 256
    obs = rng.normal(0, [0.5, 0.8, 0.1, 0.8], size=(n, 4)).astype(np.float32)
    with torch.no_grad():
        logits = policy.get_distribution(torch.tensor(obs)).distribution.logits.numpy()
        values = policy.predict_values(torch.tensor(obs)).numpy()[:, 0]
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    actions = (rng.random(n) < probs[:, 1]).astype(np.int64)
    old_log_probs = np.log(probs[np.arange(n), actions]).astype(np.float32)
    advantages = rng.normal(size=n)
    advantages = ((advantages - advantages.mean()) / advantages.std(ddof=1)).astype(np.float32)  # as SB3 re-normalises
    returns = (values + 2 * rng.normal(size=n) + 3).astype(np.float32)

    buf = model.rollout_buffer
    buf.reset()
    buf.observations[:] = obs.reshape(32, 8, 4)
    buf.actions[:] = actions.reshape(32, 8, 1)
    buf.log_probs[:] = old_log_probs.reshape(32, 8)
    buf.advantages[:] = advantages.reshape(32, 8)
    buf.returns[:] = returns.reshape(32, 8)
    buf.values[:] = values.reshape(32, 8)
    buf.full, buf.pos = True, 32
    model._current_progress_remaining = 1.0
    model.train()

    learner.set_schedules(0, apply=False)
    assert [learner.schedule["learning_rate"], learner.schedule["epsilon"]] == pytest.approx([1e-3, 0.2])
    learner.fused_update({
        "vector_obs": obs, "action_mask": np.ones((n, 2), np.float32), "actions": actions[:, None].astype(np.int32),
        "action_log_probs": old_log_probs[:, None], "advantages": advantages, "masks": np.ones(n, np.float32),
        "extrinsic_returns": returns, "extrinsic_value_estimates": values.astype(np.float32),
    }, num_epoch=20, batch_size=256, seed=0)

    moved = worst = 0.0
    for linear, name in pairs:
        for suffix, theirs in (("kernel", linear.weight.detach().numpy().T), ("bias", linear.bias.detach().numpy())):
            if f"{name}/{suffix}" not in weights:
                continue
            ours = weights[f"{name}/{suffix}"].numpy()
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6, err_msg=f"{name}/{suffix}")
            worst = max(worst, float(np.abs(ours - theirs).max()))
            moved = max(moved, float(np.abs(ours - before[f"{name}/{suffix}"]).max()))
    assert moved > 5e-3  # the update moved the weights: the comparison is not trivially true
    print(f"largest |kerasrl - SB3| weight difference after the update: {worst:.1e} (moved up to {moved:.1e})")


def test_advantages_and_returns_match_stable_baselines3():
    """GAE over a rollout with a terminated episode, a truncated one and a cut at the end.

    kerasrl closes each trajectory on its own (terminated: no bootstrap; truncated: bootstrap
    from the value of the final observation; cut: from the value of the next observation);
    SB3 runs one backward pass over the rollout with ``episode_starts`` and, for truncation,
    adds ``γ·V(final obs)`` to the last reward. The results agree.
    """
    import gymnasium
    from stable_baselines3.common.buffers import RolloutBuffer

    from kerasrl.common.gae import gae_and_returns

    gamma, lambd = 0.98, 0.8
    rng = np.random.default_rng(3)
    lengths, ends = (7, 5, 9), ("terminated", "truncated", "cut")
    v_final_truncated, v_next_cut = 1.7, -0.6
    segments = [(rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)) for n in lengths]

    buf = RolloutBuffer(sum(lengths), gymnasium.spaces.Box(-1, 1, (1,)), gymnasium.spaces.Discrete(2), device="cpu",
                        gae_lambda=lambd, gamma=gamma, n_envs=1)
    for (rewards, values), end in zip(segments, ends):
        for t in range(len(rewards)):
            r = rewards[t] + (gamma * v_final_truncated if end == "truncated" and t == len(rewards) - 1 else 0.0)
            buf.add(np.zeros((1, 1), np.float32), np.zeros((1, 1)), np.array([r], np.float32), np.array([t == 0]),
                    torch.tensor([values[t]]), torch.tensor([0.0]))
    buf.compute_returns_and_advantage(last_values=torch.tensor([[v_next_cut]]), dones=np.array([False]))

    ours_adv, ours_ret = [], []
    for (rewards, values), end in zip(segments, ends):
        value_next = {"terminated": 0.0, "truncated": v_final_truncated, "cut": v_next_cut}[end]
        adv, ret = gae_and_returns(rewards, values, value_next=value_next, gamma=gamma, lambd=lambd)
        ours_adv.append(adv)
        ours_ret.append(ret)
    np.testing.assert_allclose(np.concatenate(ours_adv), buf.advantages[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.concatenate(ours_ret), buf.returns[:, 0], rtol=1e-5, atol=1e-5)


def continuous_update(tmp_path, **overrides):
    """One update of ``pendulum_sb3`` (with ``overrides``) and of SB3 from the same weights and
    rollout: ``(kerasrl weights, SB3 weights, weights before)`` by name, log σ as ``log_std``."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    from kerasrl.settings import read_yaml

    torch.set_num_threads(1)
    n_envs, n_steps = 4, 64
    n = n_envs * n_steps
    config = {"default": {**read_yaml(config_path("pendulum_sb3"))["default"], **overrides}}
    manager = SimpleEnvManager(GymnasiumEnv("Pendulum-v1", num_envs=n_envs, seed=0))
    trainer = next(iter(initialize_trainers(config, manager.behavior_specs, str(tmp_path), "p",
                                            str(tmp_path), 1, True, False, 0).values()))
    learner = trainer.learner
    ac = learner.actor_critic
    weights = {v.path.split("/", 1)[1]: v for v in ac.trainable_variables}
    # Away from 0, so that a log σ / log σ² mix-up shows.
    if ac.gaussian_style == "sb3":
        ac.log_std.assign([-0.3])
    else:
        ac.log_sigma_sq.assign([-0.6])

    def log_std() -> np.ndarray:
        return ac.log_std.numpy() if ac.gaussian_style == "sb3" else 0.5 * ac.log_sigma_sq.numpy()

    model = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=n_envs, seed=0), n_steps=n_steps, batch_size=n,
                gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3, clip_range=0.2,
                policy_kwargs={"activation_fn": torch.nn.Tanh}, seed=0, device="cpu")
    model.set_logger(configure(None, []))
    policy = model.policy
    pairs = linear_pairs(policy, "mu")
    before = {k: v.numpy().copy() for k, v in weights.items() if "sigma" not in k and "std" not in k}
    before["log_std"] = log_std()
    copy_into_sb3(pairs, weights)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor(before["log_std"]))

    rng = np.random.default_rng(2)
    obs = np.concatenate([rng.uniform(-1, 1, (n, 2)), rng.uniform(-8, 8, (n, 1))], axis=1).astype(np.float32)
    with torch.no_grad():
        dist = policy.get_distribution(torch.tensor(obs))
        # Wider than the policy's own spread, so that many fall beyond Pendulum's ±2 bounds.
        actions = (dist.distribution.mean.numpy() + 2 * rng.normal(size=(n, 1))).astype(np.float32)
        old_log_probs = dist.distribution.log_prob(torch.tensor(actions)).numpy()
        values = policy.predict_values(torch.tensor(obs)).numpy()[:, 0]
    assert (np.abs(actions) > 2.0).mean() > 0.2
    advantages = (3 * rng.normal(size=n) + 1).astype(np.float32)  # raw: both normalise per mini-batch
    returns = (values + 2 * rng.normal(size=n) - 1).astype(np.float32)

    buf = model.rollout_buffer
    buf.reset()
    buf.observations[:] = obs.reshape(n_steps, n_envs, 3)
    buf.actions[:] = actions.reshape(n_steps, n_envs, 1)
    buf.log_probs[:] = old_log_probs.sum(1).reshape(n_steps, n_envs)
    buf.advantages[:] = advantages.reshape(n_steps, n_envs)
    buf.returns[:] = returns.reshape(n_steps, n_envs)
    buf.values[:] = values.reshape(n_steps, n_envs)
    buf.full, buf.pos = True, n_steps
    model._current_progress_remaining = 1.0
    model.train()

    learner.set_schedules(0, apply=False)
    learner.fused_update({
        "vector_obs": obs, "actions_pre": actions.astype(np.float32), "action_log_probs": old_log_probs.astype(np.float32),
        "advantages": advantages, "masks": np.ones(n, np.float32), "extrinsic_returns": returns,
        "extrinsic_value_estimates": values.astype(np.float32),
    }, num_epoch=10, batch_size=n, seed=0)

    theirs = {"log_std": policy.log_std.detach().numpy()}
    for linear, name in pairs:
        theirs[f"{name}/kernel"] = linear.weight.detach().numpy().T
        theirs[f"{name}/bias"] = linear.bias.detach().numpy()
    ours = {k: v.numpy() for k, v in weights.items() if "sigma" not in k and "std" not in k}
    ours["log_std"] = log_std()
    return ours, theirs, before


def test_continuous_update_matches_stable_baselines3(tmp_path):
    """``pendulum_sb3``: SB3's Gaussian in Pendulum's units (μ, log σ, the sample clipped at ±2
    for the env, log-prob of the unclipped sample), advantages normalised per mini-batch.

    Same weights (log σ included), same rollout of unclipped actions and their old log-probs,
    10 epochs of one full-batch mini-batch: every weight, log σ included, agrees after the update
    within 2e-6 (float32 round-off of 10 Adam steps of size ~1e-3; a wrong scale, σ
    parameterisation or advantage normalisation moves weights by ~1e-4 or more, see below).
    """
    ours, theirs, before = continuous_update(tmp_path)
    assert set(theirs) == set(ours)
    worst = 0.0
    for name, value in theirs.items():
        np.testing.assert_allclose(ours[name], value, rtol=0, atol=2e-6, err_msg=name)
        worst = max(worst, float(np.abs(ours[name] - value).max()))
    assert abs(float(ours["log_std"][0]) + 0.3) > 5e-3  # log σ itself was trained
    assert max(float(np.abs(ours[k] - before[k]).max()) for k in theirs) > 5e-3
    print(f"largest |kerasrl - SB3| weight difference after the continuous update: {worst:.1e}")


@pytest.mark.parametrize("overrides,what", [
    ({"gaussian_style": "mlagents"}, "log_std"),  # log σ² trained: Adam moves log σ half as far
    ({"normalize_advantages": "buffer"}, "mu/kernel"),
])
def test_ml_agents_choices_are_where_the_pendulum_updates_differ(tmp_path, overrides, what):
    """Each of the SB3 options is needed: with ML-Agents' choice instead, the same update
    differs from SB3's well beyond round-off (the Pendulum gap, found update by update)."""
    ours, theirs, _ = continuous_update(tmp_path, **overrides)
    diff = float(np.abs(ours[what] - theirs[what]).max())
    print(f"with {overrides}: {what} differs from SB3's by {diff:.1e} after one update")
    assert diff > 1e-4


def cnn_update(**overrides):
    """One update of ``visual_sb3`` (with ``overrides``) and of SB3's ``CnnPolicy`` from the same
    weights and the same 64 random 36×36 uint8 images: ``(kerasrl, SB3, before)`` weights as
    lists in NatureCNN's order (conv kernels in PyTorch's layout)."""
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv

    from kerasrl.ppo.learner import PPOLearner
    from kerasrl.settings import load_trainer_config, read_yaml
    from kerasrl.spec import BehaviorSpec

    class Pixels(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0, 255, (36, 36, 1), np.uint8)
        action_space = gymnasium.spaces.Discrete(3)

    torch.set_num_threads(1)
    n, epochs = 64, 4
    section = {**read_yaml(config_path("visual_sb3"))["default"], "jit_compile": False, **overrides}
    settings = load_trainer_config({"default": section}).default
    learner = PPOLearner.for_behavior(BehaviorSpec(((36, 36, 1),), "discrete", (3,)), ["extrinsic"], settings,
                                      seed=0, max_steps=10**6)
    ac = learner.actor_critic
    encoder = ac.body.visual[0]
    ours = [v for conv in encoder.convs for v in (conv.kernel, conv.bias)]
    ours += [*encoder.dense.dense[0].trainable_variables, ac.branch_logits[0].kernel,
             *ac.value_heads["extrinsic"].trainable_variables]

    model = PPO("CnnPolicy", DummyVecEnv([Pixels]), n_steps=n, batch_size=n, n_epochs=epochs, gae_lambda=0.95,
                gamma=0.95, ent_coef=0.01, learning_rate=5e-4, clip_range=0.2, seed=0, device="cpu")
    model.set_logger(configure(None, []))
    policy = model.policy
    cnn = policy.features_extractor.cnn
    theirs = [p for m in (cnn[0], cnn[2], cnn[4], policy.features_extractor.linear[0]) for p in (m.weight, m.bias)]
    theirs += [policy.action_net.weight, policy.value_net.weight, policy.value_net.bias]

    def torch_layout(v: np.ndarray) -> np.ndarray:  # Keras (h, w, in, out) / (in, out) → PyTorch
        return v.transpose(3, 2, 0, 1) if v.ndim == 4 else v.T

    with torch.no_grad():
        for v, p in zip(ours, theirs):
            p.copy_(torch.tensor(torch_layout(v.numpy())))
    freeze_action_bias_at_zero(policy)
    policy.optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=5e-4, eps=1e-5)
    before = [torch_layout(v.numpy()) for v in ours]

    rng = np.random.default_rng(4)
    images = rng.integers(0, 256, size=(n, 36, 36, 1), dtype=np.uint8)
    with torch.no_grad():
        obs_t = torch.tensor(images.transpose(0, 3, 1, 2)).float() / 255.0
        logits = policy.get_distribution(obs_t).distribution.logits.numpy()
        values = policy.predict_values(obs_t).numpy()[:, 0]
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    actions = np.array([rng.choice(3, p=p) for p in probs])
    old_log_probs = np.log(probs[np.arange(n), actions]).astype(np.float32)
    advantages = (2 * rng.normal(size=n) + 0.5).astype(np.float32)  # raw: both normalise per mini-batch
    returns = (values + rng.normal(size=n) + 1).astype(np.float32)

    buf = model.rollout_buffer
    buf.reset()
    buf.observations[:] = images.transpose(0, 3, 1, 2).reshape(n, 1, 1, 36, 36)
    buf.actions[:] = actions.reshape(n, 1, 1)
    buf.log_probs[:] = old_log_probs.reshape(n, 1)
    buf.advantages[:] = advantages.reshape(n, 1)
    buf.returns[:] = returns.reshape(n, 1)
    buf.values[:] = values.reshape(n, 1)
    buf.full, buf.pos = True, n
    model._current_progress_remaining = 1.0
    model.train()

    learner.set_schedules(0, apply=False)
    learner.fused_update({
        "visual_obs0": images.astype(np.float32) / 255.0, "action_mask": np.ones((n, 3), np.float32),
        "actions": actions[:, None].astype(np.int32), "action_log_probs": old_log_probs[:, None],
        "advantages": advantages, "masks": np.ones(n, np.float32), "extrinsic_returns": returns,
        "extrinsic_value_estimates": values.astype(np.float32),
    }, num_epoch=epochs, batch_size=n, seed=0)
    return [torch_layout(v.numpy()) for v in ours], [p.detach().numpy() for p in theirs], before


def test_cnn_update_matches_stable_baselines3():
    """``visual_sb3``: SB3's NatureCNN (ReLU convolutions with orthogonal init, one 512-unit ReLU
    layer, shared by the policy and value heads), entropy bonus 0.01, advantages normalised per
    mini-batch. Same weights, same 64 images, 4 epochs of one full-batch mini-batch: every
    weight agrees within 2e-6 after the update (measured 1.4e-7: float32 summation order in the
    convolutions), while the update moved them by ~2e-3 (4 Adam steps of 5e-4); with ML-Agents'
    convolutions instead they are ~4e-3 apart (below)."""
    ours, theirs, before = cnn_update()
    worst = 0.0
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-6, err_msg=f"weight {i} ({a.shape})")
        worst = max(worst, float(np.abs(a - b).max()))
    moved = max(float(np.abs(a - b).max()) for a, b in zip(ours, before))
    assert moved > 1e-3
    print(f"largest |kerasrl - SB3| weight difference after the CNN update: {worst:.1e} (moved up to {moved:.1e})")


def test_ml_agents_convolutions_are_where_the_cnn_updates_differ():
    """With ML-Agents 0.9's fixed ELU convolutions (``conv_style: mlagents``) instead, the same
    weights and data give an update that differs from SB3's well beyond the tolerance above."""
    ours, theirs, _ = cnn_update(conv_style="mlagents")
    diff = max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs))
    print(f"with conv_style mlagents: weights differ from SB3's by up to {diff:.1e} after one update")
    assert diff > 1e-4


@pytest.mark.parametrize("critic_lstm,action_bias", [(True, False), (False, False), (False, True)],
                         ids=["critic-lstm", "critic-mlp", "critic-mlp-action-bias"])
def test_recurrent_update_matches_sb3_contrib_recurrent_ppo(tmp_path, critic_lstm, action_bias):
    """``recurrent_style: sb3`` with the ``lstm`` bench task's keys computes sb3-contrib's
    RecurrentPPO update (``MlpLstmPolicy``: separate actor and critic LSTMs of 64 units on the
    observations, then 64 tanh units): same weights, same rollout of 8 envs × 32 steps with an
    episode starting inside one env's chunk, 20 epochs of one mini-batch of every step (kerasrl:
    ``sequence_batches: sb3``, its 256 steps in 9 sequences, padded to 16 with masked ones). SB3
    splits that chunk in two sequences and zeroes the LSTM state at the episode start; kerasrl
    gets the two as padded sequences, the second from a zero memory. PyTorch's LSTM has two
    biases: the hidden one is frozen at 0 (Keras has one); so is the action layer's bias unless
    ``action_bias`` gives kerasrl's one too. ``critic-mlp``: ``critic_memory: false`` against
    ``enable_critic_lstm=False``, whose critic has a linear layer where its LSTM would be
    (kerasrl's ``projection``)."""
    pytest.importorskip("sb3_contrib", reason="sb3-contrib is not installed")
    import tensorflow as tf
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    from kerasrl.settings import read_yaml

    torch.set_num_threads(1)
    n_envs, n_steps, units, seq = 8, 32, 64, 32
    keys = {"use_recurrent": True, "memory_size": (4 if critic_lstm else 2) * units, "sequence_length": seq,
            "num_layers": 1, "recurrent_style": "sb3", "normalize_advantages": "minibatch", "critic_memory": critic_lstm,
            "sequence_batches": "sb3", "action_bias": action_bias}
    config = {"default": {**read_yaml(config_path("cartpole_zoo"))["default"], **keys}}
    manager = SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=n_envs, seed=0))
    trainer = next(iter(initialize_trainers(config, manager.behavior_specs, str(tmp_path), "p", str(tmp_path),
                                            1, True, False, 0).values()))
    learner = trainer.learner
    ac = learner.actor_critic
    weights = {v.path.split("/", 1)[1]: v for v in ac.trainable_variables}

    model = RecurrentPPO("MlpLstmPolicy", make_vec_env("CartPole-v1", n_envs=n_envs, seed=0), n_steps=n_steps,
                         batch_size=n_envs * n_steps, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                         learning_rate=1e-3, clip_range=0.2, seed=0, device="cpu",
                         policy_kwargs={"lstm_hidden_size": units, "enable_critic_lstm": critic_lstm,
                                        "net_arch": {"pi": [units], "vf": [units]}, "activation_fn": torch.nn.Tanh})
    model.set_logger(configure(None, []))
    policy = model.policy
    extractor = policy.mlp_extractor
    pairs = [(extractor.policy_net[0], "main_graph_0/vector/hidden_0"),
             (extractor.value_net[0], "main_graph_1/vector/hidden_0"),
             (policy.action_net, "branch_0"), (policy.value_net, "extrinsic_value")]
    if not critic_lstm:
        pairs.append((policy.critic, "main_graph_1/projection"))
    lstms = [(policy.lstm_actor, "main_graph_0/lstm/lstm_cell")]
    if critic_lstm:
        lstms.append((policy.lstm_critic, "main_graph_1/lstm/lstm_cell"))
    before = {k: v.numpy().copy() for k, v in weights.items()}
    copy_into_sb3(pairs, weights)
    with torch.no_grad():  # both gate orders are input, forget, cell, output
        for lstm, name in lstms:
            lstm.weight_ih_l0.copy_(torch.tensor(weights[f"{name}/kernel"].numpy().T))
            lstm.weight_hh_l0.copy_(torch.tensor(weights[f"{name}/recurrent_kernel"].numpy().T))
            lstm.bias_ih_l0.copy_(torch.tensor(weights[f"{name}/bias"].numpy()))
            lstm.bias_hh_l0.zero_()
            lstm.bias_hh_l0.requires_grad_(False)
    if not action_bias:
        freeze_action_bias_at_zero(policy)
    policy.optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-3, eps=1e-5)

    rng = np.random.default_rng(4)
    start_env, start_t = 3, 20  # an episode starts at step 20 of env 3's chunk
    obs = rng.normal(0, [0.5, 0.0, 0.1, 0.0], size=(n_steps, n_envs, 4)).astype(np.float32)
    actions = rng.integers(0, 2, size=(n_steps, n_envs))
    episode_starts = np.zeros((n_steps, n_envs), np.float32)
    episode_starts[start_t, start_env] = 1.0
    states = rng.normal(0, 0.3, size=(4, n_envs, units)).astype(np.float32)  # h_pi, c_pi, h_vf, c_vf at t = 0

    # kerasrl's layout: one sequence per env chunk, env 3's cut at the episode start, each padded to 32.
    pieces = [(e, 0, n_steps) for e in range(n_envs) if e != start_env]
    pieces[start_env:start_env] = [(start_env, 0, start_t), (start_env, start_t, n_steps)]
    rows = len(pieces) * seq
    src = np.full(rows, -1)
    memory = np.zeros((rows, (4 if critic_lstm else 2) * units), np.float32)
    for i, (e, lo, hi) in enumerate(pieces):
        src[i * seq : i * seq + hi - lo] = np.arange(lo, hi) * n_envs + e  # index into [t, e] flattened
        if lo == 0:
            memory[i * seq] = np.concatenate([states[1, e], states[0, e], states[3, e], states[2, e]][: 4 if critic_lstm else 2])
    real = src >= 0

    def ours(a: np.ndarray, pad: float = 0.0) -> np.ndarray:
        flat = a.reshape(n_steps * n_envs, *a.shape[2:])
        out = flat[np.where(real, src, 0)].copy()
        out[~real] = pad
        return out

    inputs = {"vector_obs": ours(obs), "action_mask": np.ones((rows, 2), np.float32), "memory": memory}
    tf_inputs = {k: tf.constant(v) for k, v in inputs.items()}
    log_prob, _, values = ac.evaluate_actions({**tf_inputs, "memory": tf.constant(memory[::seq])},
                                              tf.constant(ours(actions)[:, None].astype(np.int32)), sequence_length=seq)
    old_log_probs = np.zeros((n_steps * n_envs,), np.float32)
    old_values = np.zeros((n_steps * n_envs,), np.float32)
    old_log_probs[src[real]] = log_prob.numpy()[real]
    old_values[src[real]] = values["extrinsic"].numpy()[real]
    old_log_probs = old_log_probs.reshape(n_steps, n_envs) + rng.normal(0, 0.05, (n_steps, n_envs)).astype(np.float32)
    old_values = old_values.reshape(n_steps, n_envs)
    advantages = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    returns = (old_values + rng.normal(size=(n_steps, n_envs)) + 1).astype(np.float32)

    buf = model.rollout_buffer
    buf.reset()
    buf.observations[:] = obs
    buf.actions[:] = actions[..., None]
    buf.log_probs[:] = old_log_probs
    buf.values[:] = old_values
    buf.advantages[:] = advantages
    buf.returns[:] = returns
    buf.episode_starts[:] = episode_starts
    for k, name in enumerate(("hidden_states_pi", "cell_states_pi", "hidden_states_vf", "cell_states_vf")):
        getattr(buf, name)[0, 0] = states[k]
    buf.full, buf.pos = True, n_steps
    model._current_progress_remaining = 1.0
    randint = np.random.randint
    np.random.randint = lambda *a, **k: 0  # SB3 rotates the rollout at a random step: keep it in order
    try:
        model.train()
    finally:
        np.random.randint = randint

    learner.set_schedules(0, apply=False)
    learner.fused_update({
        **inputs, "actions": ours(actions)[:, None].astype(np.int32),
        "action_log_probs": ours(old_log_probs)[:, None], "advantages": ours(advantages),
        "masks": real.astype(np.float32), "extrinsic_returns": ours(returns),
        "extrinsic_value_estimates": ours(old_values),
    }, num_epoch=20, batch_size=n_envs * n_steps, seed=0)  # 9 sequences: one mini-batch of every step, as SB3's

    theirs = {}
    for linear, name in pairs:
        theirs[f"{name}/kernel"] = linear.weight.detach().numpy().T
        if f"{name}/bias" in weights:
            theirs[f"{name}/bias"] = linear.bias.detach().numpy()
    for lstm, name in lstms:
        theirs[f"{name}/kernel"] = lstm.weight_ih_l0.detach().numpy().T
        theirs[f"{name}/recurrent_kernel"] = lstm.weight_hh_l0.detach().numpy().T
        theirs[f"{name}/bias"] = lstm.bias_ih_l0.detach().numpy()
    assert set(theirs) == set(weights)
    moved = worst = 0.0
    for name, value in theirs.items():
        mine = weights[name].numpy()
        np.testing.assert_allclose(mine, value, rtol=0, atol=5e-6, err_msg=name)
        worst = max(worst, float(np.abs(mine - value).max()))
        moved = max(moved, float(np.abs(mine - before[name]).max()))
    assert moved > 5e-3
    print(f"largest |kerasrl - RecurrentPPO| weight difference after the update: {worst:.1e} (moved up to {moved:.1e})")


def step_recorder(env):
    """``env`` wrapped to keep, per ``step``, the observation acted on, the action the env
    received, the reward, the next observation and the end flags (``.steps``)."""
    import gymnasium

    class StepRecorder(gymnasium.Wrapper):
        def __init__(self, inner):
            super().__init__(inner)
            self.steps, self._obs = [], None

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            self._obs = obs
            return obs, info

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.steps.append((self._obs, np.array(action, np.float32), float(reward), obs, terminated, truncated))
            self._obs = obs
            return obs, reward, terminated, truncated, info

    return StepRecorder(env)


def sb3_rollout_buffer(policy, steps: list[list[tuple]], actions_pre: np.ndarray, gamma: float, lambd: float,
                       episode_start: bool):
    """SB3's ``RolloutBuffer`` filled as ``PPO.collect_rollouts`` fills it from these transitions
    (``steps[env][t]``, envs in lockstep): SB3's own values and log-probs of the stored actions,
    ``γ·V(final obs)`` added to a truncated step's reward, the last next observation's value at the end."""
    import gymnasium
    from stable_baselines3.common.buffers import RolloutBuffer

    n_envs, n_steps = len(steps), len(steps[0])
    buf = RolloutBuffer(n_steps, gymnasium.spaces.Box(-np.inf, np.inf, (3,)), gymnasium.spaces.Box(-2, 2, (1,)),
                        device="cpu", gae_lambda=lambd, gamma=gamma, n_envs=n_envs)

    def value(obs):
        with torch.no_grad():
            return policy.predict_values(torch.tensor(np.asarray(obs, np.float32)))[:, 0]

    starts = np.full(n_envs, episode_start)
    for t in range(n_steps):
        obs = np.stack([steps[e][t][0] for e in range(n_envs)])
        with torch.no_grad():
            values, log_probs, _ = policy.evaluate_actions(torch.tensor(obs), torch.tensor(actions_pre[t]))
        rewards = np.array([steps[e][t][2] for e in range(n_envs)], np.float32)
        for e in range(n_envs):
            if steps[e][t][5] and not steps[e][t][4]:
                rewards[e] += gamma * float(value(steps[e][t][3][None])[0])
        buf.add(obs, actions_pre[t], rewards, starts, values[:, 0], log_probs)
        starts = np.array([steps[e][t][4] or steps[e][t][5] for e in range(n_envs)])
    last = value(np.stack([steps[e][-1][3] for e in range(n_envs)]))
    buf.compute_returns_and_advantage(last_values=last, dones=starts)
    return buf


def test_pendulum_rollouts_match_stable_baselines3_rollout_buffer(tmp_path):
    """The buffer the learner gets from a real ``pendulum_sb3`` run (4 Pendulum envs of 50-step
    episodes, rollouts of 4 × 128 steps, so a rollout ends inside an episode and the next goes on
    with it) holds what SB3's ``RolloutBuffer`` holds for the same transitions: the env got the
    stored action clipped at ±2; old log-probs, values, returns and the normalised advantages
    are SB3's (its own policy, given kerasrl's weights, its own GAE). Gymnasium's reset step,
    which carries no transition, is the one difference: kerasrl's rollouts hold fewer rows."""
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from kerasrl.settings import RunContext, read_yaml
    from kerasrl.trainers import TrainerController, create_trainers

    torch.set_num_threads(1)
    n_envs, n_steps, gamma, lambd = 4, 128, 0.9, 0.95
    recorders = [step_recorder(gymnasium.make("Pendulum-v1", max_episode_steps=50)) for _ in range(n_envs)]
    vec = gymnasium.vector.SyncVectorEnv([lambda r=r: r for r in recorders])
    manager = SimpleEnvManager(GymnasiumEnv(vec, seed=3, behavior_name="Pendulum"))
    keys = {"buffer_size": n_envs * n_steps - 1, "time_horizon": n_steps, "max_steps": 2 * n_envs * n_steps,
            "jit_compile": False, "summary_freq": 10**6}
    config = {"default": {**read_yaml(config_path("pendulum_sb3"))["default"], **keys}}
    context = RunContext(summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=3)
    trainer = create_trainers(config, manager.behavior_specs, context)["Pendulum"]
    learner = trainer.learner
    weights = {v.path.split("/", 1)[1]: v for v in learner.actor_critic.trainable_variables}
    model = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1), policy_kwargs={"activation_fn": torch.nn.Tanh},
                device="cpu")
    policy = model.policy
    seen, rollouts = [0] * n_envs, []
    update = learner.fused_update

    def spy(buffer, *args, **kwargs):
        copy_into_sb3(linear_pairs(policy, "mu"), weights)  # the weights the rollout was acted with
        with torch.no_grad():
            policy.log_std.copy_(torch.tensor(weights["log_std"].numpy()))
        steps = [r.steps[s:] for r, s in zip(recorders, seen)]
        seen[:] = [len(r.steps) for r in recorders]
        rows = {tuple(o): i for i, o in enumerate(np.asarray(buffer["vector_obs"]).tolist())}
        index = np.array([[rows[tuple(np.asarray(st[0], np.float32).tolist())] for st in env] for env in steps]).T
        actions_pre = np.asarray(buffer["actions_pre"])[index]
        theirs = sb3_rollout_buffer(policy, steps, actions_pre, gamma, lambd, episode_start=not rollouts)
        rollouts.append((dict(buffer), index, steps, actions_pre, theirs))
        return update(buffer, *args, **kwargs)

    learner.fused_update = spy
    TrainerController({"Pendulum": trainer}, str(tmp_path / "m"), str(tmp_path / "s"), "p", save_freq=10**6,
                      training_seed=3).start_learning(manager)

    assert len(rollouts) == 2
    for ours, index, steps, actions_pre, theirs in rollouts:
        assert len(ours["vector_obs"]) == index.size == n_envs * len(steps[0]) < n_envs * n_steps
        assert any(st[5] for env in steps for st in env)  # an episode was truncated inside the rollout
        received = np.array([[st[1][0] for st in env] for env in steps]).T
        np.testing.assert_allclose(received, np.clip(actions_pre[..., 0], -2, 2), atol=1e-6)
        assert (np.abs(actions_pre) > 2).any()
        np.testing.assert_allclose(np.asarray(ours["action_log_probs"])[index, 0], theirs.log_probs, atol=2e-5)
        np.testing.assert_allclose(np.asarray(ours["extrinsic_value_estimates"])[index], theirs.values, atol=2e-5)
        np.testing.assert_allclose(np.asarray(ours["extrinsic_returns"])[index], theirs.returns, rtol=1e-5, atol=1e-4)
        raw = theirs.advantages
        np.testing.assert_allclose(np.asarray(ours["advantages"])[index], (raw - raw.mean()) / raw.std(), atol=1e-4)


def test_lockstep_run_matches_stable_baselines3():
    """``benchmarks/lockstep_sb3.py`` over a real ``pendulum_sb3`` run's first two updates: SB3's
    own ``collect_rollouts`` and ``train`` beside kerasrl's run, from the same weights, noise, env
    states and mini-batch order, agree on every compared quantity (observations, stored actions,
    log-probs, values, returns, advantages, learning rate, each step's clip fraction and gradient
    norm, losses, weights) to float rounding, Adam's state carried across the update included."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "lockstep_sb3.py"
    spec = importlib.util.spec_from_file_location("lockstep_sb3", path)
    lockstep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lockstep)

    torch.set_num_threads(1)
    rows = lockstep.lockstep(0, 2, keep_partial=False, free=False, own_adam=False)
    assert len(rows) == 2
    assert lockstep.first_divergence(rows, 1e-4) is None
    for n, diffs, _ in rows:
        assert n < 4096  # Gymnasium's reset steps store no transition (the one structural difference)
        assert diffs["clip_step"] == -1 and diffs["weights"] < 1e-5


def test_recurrent_lockstep_batches_match_sb3_contrib_recurrent_ppo(tmp_path):
    """``benchmarks/lockstep_recurrent.py`` over a real run's first updates: every batch kerasrl's
    ``lstm_mlp_critic`` (with RecurrentPPO's action bias and mini-batches) collects equals what
    RecurrentPPO's own code computes on the same transitions with the same weights (the LSTM
    state each step started from, old log-probabilities, values, advantages, returns) to float
    rounding; every transition is trained on once, in order; the updates hold fewer than 256
    transitions because each episode end takes a reset step that stores none."""
    pytest.importorskip("sb3_contrib", reason="sb3-contrib is not installed")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "lockstep_recurrent.py"
    spec = importlib.util.spec_from_file_location("lockstep_recurrent", path)
    lockstep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lockstep)

    records, logs = lockstep.run_kerasrl(7, 2600, False, str(tmp_path))
    rows = list(lockstep.lockstep(records, logs, 7, 2600, False, 1e-4))
    assert len(rows) == 10
    assert [r["bad"] for r in rows] == [[]] * 10
    assert all(r["rows"] < 256 for r in rows)
    held = sum(r["rows"] for r in rows)
    ends = sum(t[3] or t[4] for log in logs for t in log)
    assert 0 < 2560 - held <= ends  # one reset step per episode end, none elsewhere
    assert any(np.abs(r["batch"]["memory"]).max() > 0.01 for r in records)  # real memories were compared
