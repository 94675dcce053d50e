"""The PPO learner: both drivers agree, the loss matches a hand computation, the model builds right."""
import numpy as np
import pytest
import tensorflow as tf

from kerasrl.envs.base import BehaviorSpec
from kerasrl.exception import TrainerConfigError
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.ppo.learner import PPOLearner
from kerasrl.ppo.loss import ppo_loss
from kerasrl.settings import NetworkSettings, PPOSettings

DISCRETE = BehaviorSpec(((4,),), "discrete", (3, 2))
CONTINUOUS = BehaviorSpec(((4,),), "continuous", (2,))


def make_batch(learner: PPOLearner, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    batch = {}
    for key, spec in learner.batch_signature().items():
        shape = [n if d is None else d for d in spec.shape]
        if key == "actions":
            batch[key] = np.stack([rng.integers(0, b, n) for b in learner.actor_critic.branches], 1).astype(np.int32)
        elif key == "prev_action":
            batch[key] = np.zeros(shape, np.int32)
        elif key in ("masks", "action_mask"):
            batch[key] = np.ones(shape, np.float32)
        else:
            batch[key] = rng.normal(size=shape).astype(np.float32)
    return batch


def make_learner(spec: BehaviorSpec, recurrent: bool = False, seed: int = 3, **ppo_keys) -> PPOLearner:
    network = NetworkSettings(hidden_units=16, num_layers=2, normalize=True, use_recurrent=recurrent, memory_size=8,
                              sequence_length=4)
    model = ActorCritic(spec, ["extrinsic", "curiosity"], network, seed=seed)
    return PPOLearner(model, PPOSettings(learning_rate=1e-3, epsilon=0.2, beta=1e-2, **ppo_keys), max_steps=1000)


@pytest.mark.parametrize("spec,recurrent", [(DISCRETE, False), (CONTINUOUS, False), (DISCRETE, True), (CONTINUOUS, True)])
def test_fused_and_minibatch_drivers_agree(spec, recurrent):
    a, b = make_learner(spec, recurrent), make_learner(spec, recurrent)
    for wa, wb in zip(a.actor_critic.weights, b.actor_critic.weights):
        np.testing.assert_array_equal(wa.numpy(), wb.numpy())
    batch = make_batch(a, 96)
    ma = a.fused_update(batch, num_epoch=3, batch_size=32, seed=7)
    mb = b.minibatch_update(batch, num_epoch=3, batch_size=32, seed=7)
    for k in ma:
        assert ma[k] == pytest.approx(mb[k], rel=1e-4, abs=1e-5)
    for wa, wb in zip(a.actor_critic.trainable_weights, b.actor_critic.trainable_weights):
        np.testing.assert_allclose(wa.numpy(), wb.numpy(), rtol=1e-4, atol=1e-5)
    assert int(a.optimizer.iterations.numpy()) == int(b.optimizer.iterations.numpy()) == 9
    # The fused call hands back the new weights (for the numpy policy) exactly as the variables hold them.
    assert a.latest_weights is not None and b.latest_weights is None
    for w, v in zip(a.latest_weights, a.actor_critic.trainable_variables):
        np.testing.assert_array_equal(w, v.numpy())
    initial = [x.numpy() for x in make_learner(spec, recurrent).actor_critic.trainable_weights]
    changed = any(not np.allclose(w.numpy(), w0) for w, w0 in zip(a.actor_critic.trainable_weights, initial))
    assert changed


def test_loss_matches_hand_computation():
    learner = make_learner(DISCRETE)
    batch = make_batch(learner, 10, seed=1)
    tensors = {k: tf.constant(v) for k, v in batch.items()}
    model = learner.actor_critic
    loss, metrics = ppo_loss(model, tensors, tf.constant(0.2), tf.constant(0.01), ["extrinsic", "curiosity"])
    log_prob, entropy, values = model.evaluate_actions(tensors, tensors["actions"])
    lp, ent = log_prob.numpy(), entropy.numpy()
    r = np.exp(lp - batch["action_log_probs"].sum(axis=-1))
    adv = batch["advantages"]
    pl = -np.mean(np.minimum(r * adv, np.clip(r, 0.8, 1.2) * adv))
    vls = []
    for name in ("extrinsic", "curiosity"):
        v, old, ret = values[name].numpy(), batch[f"{name}_value_estimates"], batch[f"{name}_returns"]
        vc = old + np.clip(v - old, -0.2, 0.2)
        vls.append(np.mean(np.maximum((ret - v) ** 2, (ret - vc) ** 2)))
    vl = np.mean(vls)
    assert metrics["policy_loss"].numpy() == pytest.approx(pl, rel=1e-5)
    assert metrics["value_loss"].numpy() == pytest.approx(vl, rel=1e-5)
    assert loss.numpy() == pytest.approx(pl + 0.5 * vl - 0.01 * ent.mean(), rel=1e-5)
    weighed, _ = ppo_loss(model, tensors, tf.constant(0.2), tf.constant(0.01), ["extrinsic", "curiosity"],
                          value_coef=0.835671)
    assert weighed.numpy() == pytest.approx(pl + 0.835671 * vl - 0.01 * ent.mean(), rel=1e-5)


def test_vf_coef_reaches_the_update():
    """``vf_coef: 0`` leaves the value heads untouched by an update; the default moves them."""
    moved = {}
    for coef in (0.0, 0.5):
        learner = make_learner(DISCRETE, vf_coef=coef)
        heads = learner.actor_critic.value_heads
        before = [w.numpy() for head in heads.values() for w in head.trainable_weights]
        learner.minibatch_update(make_batch(learner, 32), num_epoch=1, batch_size=32, seed=1)
        after = [w.numpy() for head in heads.values() for w in head.trainable_weights]
        moved[coef] = any(not np.array_equal(a, b) for a, b in zip(before, after))
    assert moved == {0.0: False, 0.5: True}


def test_padding_rows_are_masked_out():
    learner = make_learner(CONTINUOUS)
    batch = make_batch(learner, 8, seed=2)
    t = {k: tf.constant(v) for k, v in batch.items()}
    loss_a, _ = ppo_loss(learner.actor_critic, t, tf.constant(0.2), tf.constant(0.0), ["extrinsic", "curiosity"])
    padded = {k: np.concatenate([v, v[:3] * 0 + 50]) for k, v in batch.items()}
    padded["masks"] = np.concatenate([np.ones(8, np.float32), np.zeros(3, np.float32)])
    t2 = {k: tf.constant(v) for k, v in padded.items()}
    loss_b, _ = ppo_loss(learner.actor_critic, t2, tf.constant(0.2), tf.constant(0.0), ["extrinsic", "curiosity"])
    assert loss_a.numpy() == pytest.approx(loss_b.numpy(), rel=1e-5)


def test_schedules_drive_optimizer_and_clip():
    learner = make_learner(DISCRETE)
    values = learner.set_schedules(500)
    assert float(learner.optimizer.learning_rate.numpy()) == pytest.approx(values["learning_rate"], rel=1e-6)
    assert float(learner.clip_epsilon.numpy()) == pytest.approx(0.15)


def test_model_config_errors_name_the_key():
    with pytest.raises(TrainerConfigError, match="memory_size"):
        NetworkSettings(use_recurrent=True, memory_size=6)
    with pytest.raises(TrainerConfigError, match="memory_size"):
        NetworkSettings(use_recurrent=True, memory_size=0)
    with pytest.raises(TrainerConfigError, match="vis_encode_type"):
        NetworkSettings(vis_encode_type="vgg")
    with pytest.raises(ModelConfigError, match="too small"):
        ActorCritic(BehaviorSpec(((10, 10, 3),), "discrete", (2,)), ["extrinsic"],
                    NetworkSettings(vis_encode_type="nature_cnn"))
    with pytest.raises(ModelConfigError, match="reward signal"):
        ActorCritic(DISCRETE, [])


@pytest.mark.parametrize("encoder", ["simple", "nature_cnn", "resnet"])
def test_visual_and_vector_observations_build(encoder):
    spec = BehaviorSpec(((36, 36, 3), (40, 40, 1), (5,)), "continuous", (3,))
    model = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=8, num_layers=1, vis_encode_type=encoder),
                        seed=0)
    out = model.act(model.dummy_inputs(2), tf.zeros([2, 3]))
    assert out["actions"].shape == (2, 3)
    assert np.all(np.abs(out["actions"].numpy()) <= 1.0)


def test_same_seed_same_weights():
    a, b = make_learner(DISCRETE, seed=11), make_learner(DISCRETE, seed=11)
    c = make_learner(DISCRETE, seed=12)
    wa = [w.numpy() for w in a.actor_critic.trainable_weights]
    assert all(np.array_equal(x, w.numpy()) for x, w in zip(wa, b.actor_critic.trainable_weights))
    assert not all(np.array_equal(x, w.numpy()) for x, w in zip(wa, c.actor_critic.trainable_weights))


def test_orthogonal_initializer_option():
    model = ActorCritic(CONTINUOUS, ["extrinsic"], NetworkSettings(hidden_units=16, num_layers=2, initializer="orthogonal"),
                        seed=0)
    kernel = model.body.vector.dense[1].weights[0].numpy()  # 16 × 16 hidden layer, gain √2
    np.testing.assert_allclose(kernel.T @ kernel, 2.0 * np.eye(16), atol=1e-4)
    mu = model.mu.weights[0].numpy()
    assert np.abs(mu).max() < 0.05
    with pytest.raises(TrainerConfigError, match="initializer"):
        NetworkSettings(initializer="glorot")


def test_torch_initializer_option_is_torchs_linear_default():
    from kerasrl.models.encoders import kernel_initializer

    for role in ("hidden", "action", "value"):
        kernel = kernel_initializer("torch", role, seed=0)((256, 64)).numpy()
        bound = 1.0 / np.sqrt(256)  # torch.nn.Linear(256, 64): U(−1/√256, 1/√256)
        assert np.abs(kernel).max() <= bound and np.abs(kernel).max() > 0.95 * bound
        assert kernel.std() == pytest.approx(bound / np.sqrt(3.0), rel=0.05)
    assert NetworkSettings(initializer="torch").initializer == "torch"


def test_clip_by_global_norm_is_pytorchs():
    from kerasrl.ppo.learner import clip_by_global_norm

    rng = np.random.default_rng(0)
    grads = [rng.normal(size=s).astype(np.float32) for s in ((4, 3), (3,), (2, 2))]
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    clipped = clip_by_global_norm([tf.constant(g) for g in grads], 0.5)
    for g, c in zip(grads, clipped):
        np.testing.assert_allclose(c.numpy(), g * 0.5 / (norm + 1e-6), rtol=1e-6)
    untouched = clip_by_global_norm([tf.constant(g) for g in grads], float(norm) * 2)
    for g, c in zip(grads, untouched):
        np.testing.assert_array_equal(c.numpy(), g)


@pytest.mark.parametrize("spec", [DISCRETE, CONTINUOUS])
def test_a_buffer_shorter_than_batch_size_is_padded_with_masked_rows(spec):
    """Every collected row is used, the padding changes nothing, and the shape stays batch_size."""
    batch = make_batch(make_learner(spec), 40, seed=4)
    padded, exact = make_learner(spec), make_learner(spec)
    m1 = padded.fused_update(batch, num_epoch=3, batch_size=64, seed=0)
    m2 = exact.fused_update(batch, num_epoch=3, batch_size=40, seed=0)
    assert (3, 64) in padded._traced_shapes
    for k in m1:
        assert m1[k] == pytest.approx(m2[k], rel=1e-4, abs=1e-6)
    for a, b in zip(padded.actor_critic.trainable_variables, exact.actor_critic.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="empty"):
        padded.fused_update({k: v[:0] for k, v in batch.items()}, num_epoch=1, batch_size=64, seed=0)
