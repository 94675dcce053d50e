"""PPO maths against hand-computed values: returns, GAE, decays, distributions, normalizer."""
import math

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.common.gae import gae_and_returns, segmented_gae_and_returns
from kerasrl.models.distributions import EPSILON, ClippedGaussian, MaskedMultiCategorical
from kerasrl.models.normalizer import Normalizer
from kerasrl.ppo.schedules import BETA_END, LR_END, linear_decay, ppo_schedules
from kerasrl.settings import PPOSettings


def discount_rewards(r, gamma, value_next):
    """Reference: ``out[t] = r[t] + γ · out[t+1]`` with ``out[T] = value_next`` (float64 recurrence, float32 out)."""
    out, running = np.zeros(len(r)), float(value_next)
    for t in range(len(r) - 1, -1, -1):
        running = float(r[t]) + gamma * running
        out[t] = running
    return out.astype(np.float32)


def get_gae(rewards, values, value_next=0.0, gamma=0.99, lambd=0.95):
    return gae_and_returns(rewards, values, value_next, gamma, lambd)[0]


def test_discount_rewards_by_hand():
    out = discount_rewards(np.array([1.0, 2.0, 3.0]), gamma=0.5, value_next=4.0)
    # t=2: 3 + 0.5*4 = 5; t=1: 2 + 0.5*5 = 4.5; t=0: 1 + 0.5*4.5 = 3.25
    np.testing.assert_allclose(out, [3.25, 4.5, 5.0])


def test_gae_by_hand():
    r = np.array([1.0, 0.0, 2.0])
    v = np.array([0.5, 1.0, 1.5])
    gamma, lam, v_next = 0.9, 0.8, 2.0
    d0 = 1.0 + 0.9 * 1.0 - 0.5  # 1.4
    d1 = 0.0 + 0.9 * 1.5 - 1.0  # 0.35
    d2 = 2.0 + 0.9 * 2.0 - 1.5  # 2.3
    a2 = d2
    a1 = d1 + 0.72 * a2
    a0 = d0 + 0.72 * a1
    np.testing.assert_allclose(get_gae(r, v, v_next, gamma, lam), [a0, a1, a2], rtol=1e-6)


def test_gae_lambda_one_equals_returns_minus_values():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=20), rng.normal(size=20)
    adv = get_gae(r, v, value_next=0.7, gamma=0.97, lambd=1.0)
    np.testing.assert_allclose(adv, discount_rewards(r, 0.97, 0.7) - v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 33])
def test_gae_kernel_matches_numpy_deltas_and_float64_recurrence(n):
    """The Cython kernel: float32 TD errors, γλ recurrence in float64, returns = advantages + values."""
    rng = np.random.default_rng(n)
    r = rng.normal(size=n).astype(np.float32)
    v = rng.normal(size=n).astype(np.float32)
    gamma, lam, v_next = 0.98, 0.8, 0.37
    deltas = r + np.float32(gamma) * np.append(v[1:], np.float32(v_next)) - v
    expected = discount_rewards(deltas, gamma * lam, 0.0)
    adv, ret = gae_and_returns(r, v, v_next, gamma, lam)
    assert adv.dtype == ret.dtype == np.float32 and adv.shape == ret.shape == (n,)
    np.testing.assert_array_equal(adv, expected)
    np.testing.assert_array_equal(ret, adv + v)


def test_segmented_gae_equals_gae_of_each_trajectory():
    """One call over consecutive trajectories (an empty one included) gives each one's own GAE."""
    rng = np.random.default_rng(5)
    ends, values_next = [4, 4, 11, 12], [0.3, -1.0, 0.0, 2.5]
    r = rng.normal(size=12).astype(np.float32)
    v = rng.normal(size=12).astype(np.float32)
    adv, ret = segmented_gae_and_returns(r, v, ends, values_next, 0.97, 0.9)
    start = 0
    for end, v_next in zip(ends, values_next):
        expected_adv, expected_ret = gae_and_returns(r[start:end], v[start:end], v_next, 0.97, 0.9)
        np.testing.assert_array_equal(adv[start:end], expected_adv)
        np.testing.assert_array_equal(ret[start:end], expected_ret)
        start = end
    for bad_ends, match in (([4, 3, 12], "must grow"), ([4, 11], "cover 11 of the 12")):
        with pytest.raises(ValueError, match=match):
            segmented_gae_and_returns(r, v, bad_ends, [0.0] * len(bad_ends))


def test_gae_rejects_length_mismatch():
    with pytest.raises(ValueError, match="differ"):
        get_gae(np.zeros(3), np.zeros(4))


def test_linear_decays():
    assert linear_decay(1.0, 0.0, 0, 100) == 1.0
    assert linear_decay(1.0, 0.0, 50, 100) == pytest.approx(0.5)
    assert linear_decay(1.0, 0.0, 500, 100) == 0.0
    hp = PPOSettings(learning_rate=3e-4, epsilon=0.2, beta=5e-3)
    s = ppo_schedules(hp, step=25, max_steps=100)
    assert s["learning_rate"] == pytest.approx((3e-4 - LR_END) * 0.75 + LR_END)
    assert s["epsilon"] == pytest.approx((0.2 - hp.epsilon_end) * 0.75 + hp.epsilon_end)
    assert s["beta"] == pytest.approx((5e-3 - BETA_END) * 0.75 + BETA_END)
    end = ppo_schedules(hp, step=1000, max_steps=100)
    assert end == pytest.approx({"learning_rate": LR_END, "epsilon": 0.1, "beta": 1e-5})


def test_masked_multicategorical_probabilities_and_log_probs():
    logits = tf.constant([[0.0, 1.0, 2.0, 0.5, -0.5]])
    masks = tf.constant([[1.0, 0.0, 1.0, 1.0, 1.0]])
    dist = MaskedMultiCategorical(logits, masks, [3, 2])
    p = tf.nn.softmax(logits[0, :3]).numpy()
    raw = (p + EPSILON) * np.array([1.0, 0.0, 1.0])
    expected0 = raw / raw.sum()
    np.testing.assert_allclose(dist.branch_probs[0].numpy()[0], expected0, rtol=1e-6)
    assert dist.branch_probs[0].numpy()[0, 1] == 0.0
    lp = dist.branch_log_prob(tf.constant([[1, 0]])).numpy()[0]
    assert lp[0] == pytest.approx(math.log(EPSILON), rel=1e-5)
    q = tf.nn.softmax(logits[0, 3:]).numpy()
    assert lp[1] == pytest.approx(math.log((q[0] + EPSILON) / (q + EPSILON).sum() + EPSILON), rel=1e-5)
    assert dist.log_prob(tf.constant([[2, 1]])).numpy()[0] == pytest.approx(
        math.log(expected0[2] + EPSILON) + math.log((q[1] + EPSILON) / (q + EPSILON).sum() + EPSILON), rel=1e-5
    )
    ent = -(expected0 * np.log(expected0 + EPSILON)).sum()
    qn = (q + EPSILON) / (q + EPSILON).sum()
    ent += -(qn * np.log(qn + EPSILON)).sum()
    assert dist.entropy().numpy()[0] == pytest.approx(ent, rel=1e-5)


def test_masked_sampling_never_takes_masked_actions():
    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(size=(2000, 4)).astype(np.float32) * 3)
    masks = np.ones((2000, 4), np.float32)
    masks[:, 0] = 0
    masks[::2, 3] = 0
    dist = MaskedMultiCategorical(logits, tf.constant(masks), [4])
    u = np.maximum(rng.random((2000, 1), dtype=np.float32), 1e-7)
    a = dist.sample(tf.constant(u)).numpy()[:, 0]
    assert (masks[np.arange(2000), a] == 1).all()
    # extreme draws close to 0 and 1 stay within the allowed set
    edge = dist.sample(tf.constant(np.full((2000, 1), 1 - 1e-7, np.float32))).numpy()[:, 0]
    assert (masks[np.arange(2000), edge] == 1).all()


def test_sampling_follows_the_probabilities():
    logits = tf.constant([[0.0, math.log(3.0)]] * 20000)
    dist = MaskedMultiCategorical(logits, tf.ones([20000, 2]), [2])
    u = np.random.default_rng(0).random((20000, 1)).astype(np.float32)
    a = dist.sample(tf.constant(u)).numpy()
    assert a.mean() == pytest.approx(0.75, abs=0.015)


def test_clipped_gaussian_log_prob_and_entropy():
    mu = tf.constant([[0.5, -1.0]])
    log_sigma_sq = tf.constant([0.2, -0.4])
    dist = ClippedGaussian(mu, log_sigma_sq)
    pre = tf.constant([[1.0, 5.0]])
    sigma = np.sqrt(np.exp([0.2, -0.4]))
    expected = [
        -0.5 * ((1.0 - 0.5) / sigma[0]) ** 2 - 0.5 * math.log(2 * math.pi) - math.log(sigma[0]),
        -0.5 * ((5.0 + 1.0) / sigma[1]) ** 2 - 0.5 * math.log(2 * math.pi) - math.log(sigma[1]),
    ]
    np.testing.assert_allclose(dist.dim_log_prob(pre).numpy()[0], expected, rtol=1e-5)
    assert dist.log_prob(pre).numpy()[0] == pytest.approx(sum(expected), rel=1e-5)
    ent = 0.5 * np.mean(np.log(2 * math.pi * math.e) + np.array([0.2, -0.4]))
    assert dist.entropy().numpy()[0] == pytest.approx(ent, rel=1e-6)
    np.testing.assert_allclose(ClippedGaussian.squash(pre).numpy(), [[1.0 / 3.0, 1.0]])
    noise = tf.constant([[1.0, -2.0]])
    np.testing.assert_allclose(dist.sample_pre(noise).numpy(), [[0.5 + sigma[0], -1.0 - 2 * sigma[1]]], rtol=1e-6)


def test_normalizer_matches_numpy_statistics():
    rng = np.random.default_rng(3)
    data = rng.normal(loc=[1.0, -2.0, 10.0], scale=[0.5, 2.0, 3.0], size=(999, 3))
    norm = Normalizer(3)
    for chunk in np.array_split(data, [1, 7, 300, 301, 650]):
        norm.update(chunk)
    np.testing.assert_allclose(norm.running_mean.numpy(), data.mean(0), rtol=1e-9)
    np.testing.assert_allclose(norm.variance, data.var(0), rtol=1e-9)
    assert float(norm.count.numpy()) == 999
    x = data[:5].astype(np.float32)
    expected = np.clip((x - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), -5, 5)
    np.testing.assert_allclose(norm(tf.constant(x)).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_normalizer_clips_and_inference_does_not_update():
    norm = Normalizer(1)
    norm.update(np.array([[0.0], [1.0], [2.0]]))
    before = norm.running_mean.numpy().copy()
    out = norm(tf.constant([[1000.0], [-1000.0]])).numpy()
    np.testing.assert_allclose(out, [[5.0], [-5.0]])
    np.testing.assert_array_equal(norm.running_mean.numpy(), before)
    with pytest.raises(ValueError, match="NaN"):
        norm.update(np.array([[np.nan]]))


def test_epsilon_end_is_configurable():
    hp = PPOSettings(learning_rate=1e-3, epsilon=0.2, beta=0.0, epsilon_end=0.0)
    assert ppo_schedules(hp, step=50, max_steps=100)["epsilon"] == pytest.approx(0.1)
    assert ppo_schedules(hp, step=100, max_steps=100)["epsilon"] == 0.0


def test_beta_end_sets_where_the_entropy_bonus_decays_to():
    """ML-Agents decays the entropy bonus to 1e-5; ``beta_end: <beta>`` keeps it constant (SB3)."""
    from kerasrl.settings import PPOSettings

    constant = PPOSettings(beta=0.01, beta_end=0.01)
    assert [ppo_schedules(constant, s, 1000)["beta"] for s in (0, 500, 1000)] == pytest.approx([0.01] * 3)
    assert ppo_schedules(PPOSettings(beta=0.01), 1000, 1000)["beta"] == pytest.approx(BETA_END)
    assert BETA_END == pytest.approx(1e-5)


def test_advantages_are_normalised_over_the_real_rows_only():
    """Sequence padding (masks 0) neither shifts nor scales the real rows' advantages and stays 0;
    without padding the result is the plain normalisation over the buffer."""
    from kerasrl.ppo.trainer import normalized_advantages

    rng = np.random.default_rng(0)
    real = (rng.normal(size=40) + 2.0).astype(np.float32)
    padded = np.concatenate([real[:25], np.zeros(7, np.float32), real[25:], np.zeros(17, np.float32)])
    masks = np.concatenate([np.ones(25), np.zeros(7), np.ones(15), np.zeros(17)]).astype(np.float32)
    out = normalized_advantages(padded, masks)
    assert out.dtype == np.float32
    kept = out[masks > 0]
    assert abs(kept.mean()) < 1e-6 and abs(kept.std() - 1.0) < 1e-5
    np.testing.assert_array_equal(out[masks == 0], 0.0)
    np.testing.assert_allclose(kept, normalized_advantages(real, np.ones(40, np.float32)), rtol=1e-6)
    np.testing.assert_allclose(normalized_advantages(real, np.ones(40)), (real - real.mean()) / (real.std() + 1e-10))
