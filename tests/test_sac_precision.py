"""SAC's ``dtype_policy: mixed_bfloat16``: hidden layers and camera encoders compute in bfloat16,
weights, heads, losses and the numpy actor stay float32, and the networks act and learn as the
float32 ones do, within bfloat16's rounding."""
import numpy as np
import pytest
import tensorflow as tf
from test_sac import run

from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.models.encoders import VisualEncoder
from kerasrl.sac.learner import NEXT_NOISE, NOISE, REWARDS, SACLearner
from kerasrl.sac.networks import SACConfigError
from kerasrl.sac.policy import SACPolicy
from kerasrl.settings import TrainerSettings, load_trainer_config
from kerasrl.spec import BehaviorSpec

SMALL = {"trainer": "sac", "batch_size": 32, "buffer_size": 5000, "hidden_units": 32, "num_layers": 2,
         "learning_rate": 3e-3, "time_horizon": 8, "summary_freq": 500}
BF16 = {"dtype_policy": "mixed_bfloat16"}


def learner(spec, **keys):
    return SACLearner.for_behavior(spec, TrainerSettings.from_dict({**SMALL, **keys}), seed=0, max_steps=100)


def batch(nets, rng, steps=2, rows=32):
    """A stacked learning batch of random transitions, ``steps`` mini-batches of ``rows``."""
    out = {}
    for key, spec in nets.input_signature().items():
        if key == Field.MEMORY:
            continue
        shape = (steps, rows, *spec.shape[1:])
        value = rng.random(shape, dtype=np.float32) if key != Field.ACTION_MASK else np.ones(shape, np.float32)
        nxt = {Field.VECTOR_OBS: Field.NEXT_VECTOR_OBS, Field.ACTION_MASK: Field.NEXT_ACTION_MASK}.get(key)
        out[key] = value
        out[nxt or Field.next_visual_obs(int(key[len(Field.visual_obs("")):]))] = value[:, ::-1].copy()
    width = len(nets.branches) or nets.action_size
    if nets.is_discrete:
        out[Field.ACTIONS] = rng.integers(0, min(nets.branches), (steps, rows, width)).astype(np.int32)
    else:
        out[Field.ACTIONS] = rng.uniform(-1, 1, (steps, rows, width)).astype(np.float32)
    out[REWARDS] = rng.normal(size=(steps, rows, 1)).astype(np.float32)
    out[Field.TERMINATED] = np.zeros((steps, rows), np.float32)
    out[NOISE] = rng.random((steps, rows, width), dtype=np.float32)
    out[NEXT_NOISE] = rng.random((steps, rows, width), dtype=np.float32)
    return out


def copy_weights(src, dst):
    for s, d in zip(src.weights, dst.weights):
        d.assign(s)


def test_hidden_layers_compute_in_bfloat16_and_the_rest_stays_float32():
    spec = BehaviorSpec(((5,),), "continuous", (2,))
    nets = learner(spec, normalize=True, **BF16).networks
    assert {v.dtype for v in nets.trainable_weights} == {"float32"}
    for net in (nets.actor, *nets.critics, *nets.targets):
        assert [d.compute_dtype for d in net.body.dense] == ["bfloat16", "bfloat16"]
        assert net.body(tf.zeros([1, int(net.body.dense[0].kernel.shape[0])])).dtype == tf.bfloat16
    assert {h.compute_dtype for h in (nets.actor.mu, nets.actor.log_std, nets.critics[0].head)} == {"float32"}
    obs = np.random.default_rng(0).normal(size=(9, 5)).astype(np.float32)
    action, squashed = nets.act({Field.VECTOR_OBS: tf.constant(obs)}, tf.zeros([9, 2]))
    assert action.dtype == squashed.dtype == tf.float32


def test_mixed_bfloat16_acts_and_learns_as_float32_within_its_rounding():
    spec = BehaviorSpec(((5,),), "continuous", (2,))
    full, mixed = learner(spec), learner(spec, **BF16)
    copy_weights(full.networks, mixed.networks)
    obs = np.random.default_rng(1).normal(size=(64, 5)).astype(np.float32)
    inputs = {Field.VECTOR_OBS: tf.constant(obs)}
    want, got = full.networks.act(inputs, None)[0].numpy(), mixed.networks.act(inputs, None)[0].numpy()
    assert 0 < np.abs(got - want).max() < 0.02  # bfloat16 keeps 8 bits of mantissa: close, not equal
    # The numpy actor computes in float32 from the same (float32) weights: the float32 networks' actions.
    np.testing.assert_allclose(SACPolicy(mixed.networks, deterministic=True).actions(obs, None), want,
                               rtol=1e-5, atol=1e-6)
    stacked = batch(full.networks, np.random.default_rng(2))
    metrics_full, metrics_mixed = full.update(stacked, 2, 3e-3), mixed.update(stacked, 2, 3e-3)
    for name in ("critic_loss", "q_value"):
        assert metrics_mixed[name] == pytest.approx(metrics_full[name], rel=0.05, abs=0.02), name
    moved = [np.abs(a.numpy() - b.numpy()).max() for a, b in zip(full.networks.actor_variables,
                                                                 mixed.networks.actor_variables)]
    # Two Adam steps move a weight by up to 2·lr = 0.006: the mixed update went the float32 one's way.
    assert max(moved) < 0.01


@pytest.mark.parametrize("encoder,discrete", [("simple", True), ("resnet", False)])
def test_camera_encoders_compute_in_bfloat16_and_the_networks_train(encoder, discrete):
    side = VisualEncoder.MIN_SIZE[encoder]
    spec = BehaviorSpec(((side, side, 2), (3,)), "discrete" if discrete else "continuous",
                        (3, 2) if discrete else (2,))
    sac = learner(spec, vis_encode_type=encoder, hidden_units=16, num_layers=1, **BF16)
    nets = sac.networks
    assert nets.actor.visual[0].dense.dense[0].compute_dtype == "bfloat16"
    before = [v.numpy() for v in nets.critic_variables]
    metrics = sac.update(batch(nets, np.random.default_rng(3), rows=8), 2, 1e-3)
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert all(not np.array_equal(b, v.numpy()) for b, v in zip(before, nets.critic_variables))
    rng = np.random.default_rng(4)
    inputs = {k: tf.constant(rng.random((3, *s.shape[1:]), dtype=np.float32)) for k, s in nets.input_signature().items()}
    action = nets.act(inputs, None)[0].numpy()
    assert action.shape == (3, 2)


def test_exported_mixed_actor_acts_as_the_networks(tmp_path):
    from kerasrl.export import export_policy, onnx_available

    nets = learner(BehaviorSpec(((4,),), "continuous", (2,)), **BF16).networks
    paths = export_policy(nets, str(tmp_path), "Agent", onnx=onnx_available())
    obs = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    # The files compute in float32, as the numpy actor does: its actions, to float rounding.
    want = SACPolicy(nets, deterministic=True).actions(obs, None)
    loaded = tf.saved_model.load(paths["savedmodel"])
    np.testing.assert_allclose(loaded.signatures["deterministic"](vector_obs=tf.constant(obs))["action"].numpy(), want,
                               rtol=1e-5, atol=1e-6)
    if not onnx_available():
        pytest.skip("tf2onnx is not installed (optional extra kerasrl[onnx]); the SavedModel was checked")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (optional extra kerasrl[onnx])")
    session = ort.InferenceSession(paths["onnx"])
    result = dict(zip([o.name for o in session.get_outputs()], session.run(None, {Field.VECTOR_OBS: obs})))
    np.testing.assert_allclose(result["action"], want, rtol=1e-5, atol=1e-6)


def test_bad_or_unsupported_dtype_policies_are_one_line():
    with pytest.raises(TrainerConfigError) as e:
        load_trainer_config({"default": {**SMALL, "dtype_policy": "float16"}})
    assert "dtype_policy" in str(e.value) and "float16" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TrainerConfigError, match="dtype_policy"):  # a SAC key: PPO refuses it
        load_trainer_config({"default": {"trainer": "ppo", **BF16}})
    with pytest.raises(SACConfigError) as e:
        learner(BehaviorSpec(((4,),), "continuous", (1,)), use_recurrent=True, **BF16)
    assert "dtype_policy mixed_bfloat16 is not available with use_recurrent" in str(e.value)


@pytest.mark.slow
def test_mixed_bfloat16_sac_solves_simple1d(tmp_path):
    trainer = run(Simple1DEnvironment(use_discrete=False, seed=1337), tmp_path,
                  {**SMALL, **BF16, "max_steps": 1500, "buffer_init_steps": 100}, seed=1337)
    recent = list(trainer.reward_buffer)
    assert recent and np.mean(recent) > 0.9, recent


def test_the_fit_api_takes_the_policy_and_a_saved_model_keeps_it(tmp_path):
    import kerasrl

    agent = kerasrl.SAC("Pendulum-v1", config="sac_pendulum", seed=0, run_dir=str(tmp_path / "run"), batch_size=32,
                        hidden_units=32, buffer_init_steps=50, time_horizon=16, dtype_policy="mixed_bfloat16")
    history = agent.fit(150, verbose=0)
    assert np.isfinite(history.history["critic_loss"]).all()
    assert agent.trainer is not None and agent.trainer.networks.actor.body.dense[0].compute_dtype == "bfloat16"
    observations = np.random.default_rng(6).standard_normal((4, 3)).astype(np.float32)
    loaded = kerasrl.load(agent.save(str(tmp_path / "sac.keras")))
    assert loaded.settings.hyperparameters.dtype_policy == "mixed_bfloat16"
    np.testing.assert_allclose(loaded.predict(observations), agent.predict(observations), rtol=1e-6)
    agent.close()
