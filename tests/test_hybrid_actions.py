"""Hybrid actions (continuous and discrete at once): the spec and its action arrays, the
actor-critic's two heads (TensorFlow and the numpy mirror alike), PPO's loss with summed
log-probabilities and entropies (checked against a hand computation), and the action features
that GAIL and curiosity take."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.envs.base import check_actions
from kerasrl.exception import EnvironmentException
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import EPSILON
from kerasrl.models.numpy_policy import NumpyActorCritic
from kerasrl.ppo.loss import ppo_loss
from kerasrl.rewards.model_signal import action_features
from kerasrl.settings import NetworkSettings
from kerasrl.spec import BehaviorSpec

SPEC = BehaviorSpec(((3,),), "hybrid", (2, 3, 2))  # 2 continuous actions, branches of 3 and 2


def _model(**network) -> ActorCritic:
    return ActorCritic(SPEC, network=NetworkSettings(hidden_units=8, **network), seed=2)


def _observations(n: int) -> list[np.ndarray]:
    return [np.random.default_rng(1).normal(size=(n, 3)).astype(np.float32)]


def test_the_spec_has_both_parts_and_round_trips():
    assert (SPEC.continuous_size, SPEC.discrete_branches, SPEC.action_size, SPEC.action_mask_size) == (2, (3, 2), 4, 5)
    assert SPEC.is_hybrid and not SPEC.is_discrete and not SPEC.is_continuous and SPEC.has_action_mask
    assert BehaviorSpec.from_dict(SPEC.to_dict()) == SPEC
    with pytest.raises(EnvironmentException, match=r"hybrid action shape must be \(continuous size, \*branch sizes\)"):
        BehaviorSpec(((3,),), "hybrid", (2,))


def test_hybrid_action_arrays_are_checked_column_by_column():
    ok = np.array([[0.5, -1.0, 2, 1], [0.0, 0.0, 0, 0]], np.float32)
    assert check_actions(SPEC, ok, 2, "B").dtype == np.float32
    for bad, match in (([0.5, 0.0, 3, 1], "fall outside branch sizes"), ([0.5, 0.0, 1.5, 1], "fall outside"),
                       ([np.nan, 0.0, 1, 1], "contain NaN")):
        with pytest.raises(EnvironmentException, match=f"behavior 'B'.*{match}|{match}.*'B'"):
            check_actions(SPEC, np.array([bad, ok[1]], np.float32), 2, "B")


def test_the_numpy_mirror_acts_as_the_keras_model():
    model = _model()
    mirror = NumpyActorCritic(model)
    inputs = model.acting_inputs(_observations(6))
    inputs[Field.ACTION_MASK] = np.array([[1, 0, 1, 1, 1]] * 6, np.float32)  # branch 0 never takes action 1
    noise = model.draw_noise(np.random.default_rng(0), 6)
    for deterministic in (False, True):
        keras_out = model.act(inputs, noise, deterministic)
        numpy_out = mirror.act(inputs, noise, deterministic)
        assert set(keras_out) == set(numpy_out)
        for key, value in keras_out.items():
            np.testing.assert_allclose(numpy_out[key], value.numpy(), atol=1e-5, err_msg=key)
        actions = numpy_out[Field.ACTIONS]
        assert actions.shape == (6, 4) and (np.abs(actions[:, :2]) <= 1).all() and (actions[:, 2] != 1).all()
        np.testing.assert_array_equal(numpy_out[Field.ACTIONS_PRE][:, 2:], actions[:, 2:])


def test_the_visual_numpy_mirror_acts_as_the_keras_model():
    from kerasrl.models.numpy_visual import NumpyVisualActorCritic

    spec = BehaviorSpec(((2,), (20, 20, 1)), "hybrid", (2, 3))
    model = ActorCritic(spec, network=NetworkSettings(hidden_units=8, vis_encode_type="simple"), seed=1)
    rng = np.random.default_rng(0)
    inputs = model.acting_inputs([rng.normal(size=(5, 2)).astype(np.float32), rng.random((5, 20, 20, 1), np.float32)])
    noise = model.draw_noise(rng, 5)
    for deterministic in (False, True):
        keras_out = model.act(inputs, noise, deterministic)
        numpy_out = NumpyVisualActorCritic(model).act(inputs, noise, deterministic)
        for key, value in keras_out.items():
            np.testing.assert_allclose(numpy_out[key], value.numpy(), atol=1e-5, err_msg=key)


def _hand_log_prob_and_entropy(model: ActorCritic, inputs: dict, pre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The joint log-probability and entropy, from the model's raw outputs, in plain numpy."""
    out = model(inputs)
    mu, log_var = out["mu"].numpy(), out["log_sigma_sq"].numpy()
    logits, mask = out["logits"].numpy(), inputs[Field.ACTION_MASK]
    log_prob = (-0.5 * (pre[:, :2] - mu) ** 2 / np.exp(log_var) - 0.5 * math.log(2 * math.pi) - 0.5 * log_var).sum(1)
    entropy = np.full(len(pre), 0.5 * np.mean(math.log(2 * math.pi * math.e) + log_var))  # ML-Agents: mean over dims
    start = 0
    for k, size in enumerate((3, 2)):
        z = logits[:, start:start + size]
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        raw = (p + EPSILON) * mask[:, start:start + size]
        p = raw / raw.sum(1, keepdims=True)
        log_prob += np.log(p[np.arange(len(pre)), pre[:, 2 + k].astype(int)] + EPSILON)
        entropy += -(p * np.log(p + EPSILON)).sum(1)
        start += size
    return log_prob, entropy


def test_ppo_loss_sums_the_log_probabilities_and_entropies_of_both_kinds():
    model = _model()
    n = 8
    rng = np.random.default_rng(3)
    inputs = model.acting_inputs(_observations(n))
    inputs[Field.ACTION_MASK] = np.array([[1, 1, 0, 1, 1]] * 4 + [[1, 1, 1, 0, 1]] * 4, np.float32)
    pre = np.concatenate([rng.normal(size=(n, 2)), rng.integers(0, 2, (n, 1)), np.ones((n, 1))], 1).astype(np.float32)
    old = rng.normal(-2.0, 0.3, (n, 4)).astype(np.float32)  # per column: dimensions, then branches
    advantages = rng.normal(size=n).astype(np.float32)
    returns, old_values = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    batch = {**inputs, Field.ACTIONS_PRE: pre, Field.ACTION_LOG_PROBS: old, Field.ADVANTAGES: advantages,
             Field.MASKS: np.ones(n, np.float32), Field.returns("extrinsic"): returns,
             Field.value_estimates("extrinsic"): old_values}
    epsilon, beta = 0.2, 0.01
    loss, metrics = ppo_loss(model, {k: tf.constant(v) for k, v in batch.items()}, tf.constant(epsilon),
                             tf.constant(beta), ["extrinsic"])

    log_prob, entropy = _hand_log_prob_and_entropy(model, inputs, pre)
    ratio = np.exp(log_prob - old.sum(1))
    policy_loss = -np.mean(np.minimum(ratio * advantages, np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantages))
    values = model(inputs)["values"]["extrinsic"].numpy()
    clipped = old_values + np.clip(values - old_values, -epsilon, epsilon)
    value_loss = np.mean(np.maximum((returns - values) ** 2, (returns - clipped) ** 2))
    np.testing.assert_allclose(metrics["entropy"].numpy(), entropy.mean(), rtol=1e-5)
    np.testing.assert_allclose(metrics["policy_loss"].numpy(), policy_loss, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(loss.numpy(), policy_loss + 0.5 * value_loss - beta * entropy.mean(), rtol=1e-4)
    # the loss reaches both heads
    with tf.GradientTape() as tape:
        loss, _ = ppo_loss(model, {k: tf.constant(v) for k, v in batch.items()}, tf.constant(epsilon),
                           tf.constant(beta), ["extrinsic"])
    grads = dict(zip([v.path for v in model.trainable_variables], tape.gradient(loss, model.trainable_variables)))
    for head in ("mu", "branch_0", "branch_1", "log_sigma_squared"):
        assert any(g is not None and np.abs(g.numpy()).sum() > 0 for path, g in grads.items() if head in path), head


def test_action_features_are_the_floats_then_one_hot_branches():
    actions = tf.constant([[0.5, -0.25, 2.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    np.testing.assert_allclose(action_features(actions, SPEC).numpy(),
                               [[0.5, -0.25, 0, 0, 1, 0, 1], [0.0, 1.0, 1, 0, 0, 1, 0]])


def _signal_rows(n: int, rng: np.random.Generator) -> dict:
    from tests.test_reward_signals import make_rows

    rows = make_rows(SPEC, n, rng)
    rows[Field.ACTIONS][:, 2:] = np.stack([rng.integers(0, b, n) for b in SPEC.discrete_branches], 1)
    return rows


@pytest.mark.parametrize("kind", ["curiosity", "gail"])
def test_curiosity_and_gail_take_both_kinds_of_actions(kind):
    from tests.test_reward_signals import as_buffer, make_signal

    rng = np.random.default_rng(4)
    options = {} if kind == "curiosity" else {"use_actions": True}
    signal = make_signal(kind, SPEC, NetworkSettings(), demo=(SPEC, as_buffer(_signal_rows(40, rng))), **options)
    rows = _signal_rows(24, rng)
    stats = signal.update(as_buffer(rows), n_sequences=2)
    assert set(stats) == set(signal.loss_names) and all(math.isfinite(v) for v in stats.values())
    rewards = signal.evaluate_batch({k: rows[k] for k in signal.batch_fields}).scaled_reward
    assert rewards.shape == (24,) and np.isfinite(rewards).all() and rewards.any()
    if kind == "curiosity":  # the inverse model: squared error of the continuous part + each branch's cross-entropy
        model, batch = signal.model, {k: tf.constant(v) for k, v in rows.items()}
        phi, phi_next = model.encode(batch, nxt=False), model.encode(batch, nxt=True)
        hidden = model.inverse_hidden(tf.concat([phi, phi_next], axis=-1))
        actions = rows[Field.ACTIONS]
        hand = ((model.inverse_out[0](hidden).numpy() - actions[:, :2]) ** 2).sum(1)
        for k, layer in enumerate(model.inverse_out[1:]):
            probs = tf.nn.softmax(layer(hidden)).numpy()
            hand -= np.log(probs[np.arange(24), actions[:, 2 + k].astype(int)] + 1e-10)
        got = model.inverse_loss(phi, phi_next, action_features(tf.constant(actions), SPEC)).numpy()
        np.testing.assert_allclose(got, hand, rtol=1e-5)


def test_behavioral_cloning_adds_the_squared_error_and_the_branches_negative_log_likelihood():
    from kerasrl.bc.actor_critic import ActorCriticImitator
    from kerasrl.bc.learner import BCLearner, imitation_batch
    from tests.test_reward_signals import as_buffer

    rng = np.random.default_rng(6)
    rows = _signal_rows(12, rng)
    rows[Field.ACTIONS][:, :2] *= 1.5  # the expert's continuous actions are clipped to [-1, 1]
    rows[Field.ACTION_MASK] = np.ones((12, 5), np.float32)
    rows[Field.EPISODE_ID] = np.zeros(12, np.int64)
    model = _model()
    batch = imitation_batch(SPEC, as_buffer(rows), model)
    learner = BCLearner(ActorCriticImitator(model, sample_noise=False), 1e-3)
    loss = learner.loss({k: tf.constant(v) for k, v in batch.items()}, None)
    out = model(model.acting_inputs([rows[Field.VECTOR_OBS]]))
    actions = rows[Field.ACTIONS]
    squashed = np.clip(out["mu"].numpy(), -3, 3) / 3
    hand = ((squashed - np.clip(actions[:, :2], -1, 1)) ** 2).mean(1)
    start = 0
    for k, size in enumerate(SPEC.discrete_branches):
        z = out["logits"].numpy()[:, start:start + size]
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        p = (p + EPSILON) / (p + EPSILON).sum(1, keepdims=True)
        hand -= np.log(p[np.arange(12), actions[:, 2 + k].astype(int)] + EPSILON)
        start += size
    np.testing.assert_allclose(loss.numpy(), hand.mean(), rtol=1e-5)


class _Recorder:
    """A one-step Gymnasium env that keeps the actions it is given."""

    def __new__(cls, space):
        import gymnasium
        from gymnasium import spaces

        class Env(gymnasium.Env):
            observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
            action_space = space
            taken: list = []

            def reset(self, *, seed=None, options=None):
                return np.zeros(2, np.float32), {}

            def step(self, action):
                Env.taken.append(action)
                return np.zeros(2, np.float32), 0.0, False, False, {}

        return Env()


def test_gymnasium_tuple_and_dict_action_spaces_are_hybrid_actions():
    import gymnasium
    from gymnasium import spaces

    from kerasrl.envs.gym_adapter import GymnasiumEnv

    box = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
    env = GymnasiumEnv(_Recorder(spaces.Tuple((box, spaces.Discrete(3, start=1)))))
    spec = env.behavior_specs[env.behavior_name]
    assert (spec.action_type.value, spec.action_shape) == ("hybrid", (2, 3))
    env.reset()
    env.step({env.behavior_name: np.array([[0.5, -1.0, 2.0]], np.float32)})
    action = type(env.env).taken[-1]
    np.testing.assert_allclose(action[0], [1.0, 0.0])
    assert action[1] == 3  # branch index 2 of Discrete(3, start=1)
    with pytest.raises(EnvironmentException, match="fall outside branch sizes"):
        env.step({env.behavior_name: np.array([[0.5, -1.0, 3.0]], np.float32)})

    space = spaces.Dict({"move": spaces.MultiDiscrete([2, 4]), "aim": spaces.Box(-1.0, 1.0, (1,), np.float32)})
    vector = gymnasium.vector.SyncVectorEnv([lambda: _Recorder(space)] * 2)
    env = GymnasiumEnv(vector)
    assert env.behavior_specs[env.behavior_name].action_shape == (1, 2, 4)
    env.reset()
    env.step({env.behavior_name: np.array([[0.25, 1, 3], [-0.5, 0, 2]], np.float32)})
    taken = [e.taken[-1] for e in vector.envs]
    assert [list(a) for a in taken] == [list(space.spaces)] * 2  # the space's own key order
    np.testing.assert_array_equal(taken[1]["move"], [0, 2])
    np.testing.assert_allclose(taken[0]["aim"], [0.25])

    with pytest.raises(EnvironmentException, match="must hold one Box and one Discrete or MultiDiscrete"):
        GymnasiumEnv(_Recorder(spaces.Tuple((box, box))))


def test_sac_refuses_hybrid_actions_in_one_line(tmp_path):
    from gymnasium import spaces

    import kerasrl
    from kerasrl.envs.gym_adapter import GymnasiumEnv
    from kerasrl.exception import TrainerError

    space = spaces.Tuple((spaces.Box(-1.0, 1.0, (1,), np.float32), spaces.Discrete(2)))
    env = GymnasiumEnv(_Recorder(space), behavior_name="Hybrid")
    with pytest.raises(TrainerError, match="^Behavior Hybrid has hybrid actions .* sac trainer does not take"):
        kerasrl.SAC(env, run_dir=str(tmp_path / "run"))
