"""The numpy mirror of visual policies (``simple`` / ``nature_cnn`` cameras) computes what the
compiled TF path computes, and ``inference: auto`` picks it for them (not for ``resnet``)."""
import numpy as np
import pytest
import tensorflow as tf

from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.envs.base import BehaviorSpec, StepResult
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.numpy_visual import NumpyVisualActorCritic, conv2d_valid
from kerasrl.settings import NetworkSettings

CASES = {
    # one camera, discrete, one shared stream, SB3's NatureCNN choices (the action layer's bias included)
    "nature_sb3": (BehaviorSpec(((36, 36, 1),), "discrete", (3,)),
                   dict(vis_encode_type="nature_cnn", conv_style="network", activation="relu",
                        initializer="orthogonal", separate_value_network=False, action_bias=True)),
    # ML-Agents' ELU convolutions, two cameras + a normalised vector, continuous: two streams
    "simple_mlagents": (BehaviorSpec(((4,), (20, 24, 3), (21, 20, 1)), "continuous", (2,)),
                        dict(vis_encode_type="simple", normalize=True)),
}


def model_for(case, seed=0):
    spec, network = CASES[case]
    model = ActorCritic(spec, ["extrinsic", "curiosity"], NetworkSettings(hidden_units=16, num_layers=1, **network),
                        seed=seed)
    rng = np.random.default_rng(seed)
    for w in model.trainable_weights:  # away from the small initial values, so that ELU's negative side shows
        w.assign(w.numpy() + rng.normal(scale=0.2, size=w.shape).astype(np.float32))
    if model.normalizer is not None:
        model.normalizer.update(rng.normal(loc=1.0, scale=2.0, size=(50, spec.vector_observation_size)))
    return spec, model


def observations(spec, n, rng):
    return [rng.random((n, *s), dtype=np.float32) if len(s) == 3 else rng.normal(size=(n, *s)).astype(np.float32)
            for s in spec.observation_shapes]


def test_conv2d_valid_equals_tf():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 21, 20, 2)).astype(np.float32)
    kernel = rng.normal(size=(4, 4, 2, 5)).astype(np.float32)
    bias = rng.normal(size=5).astype(np.float32)
    ours = conv2d_valid(x, kernel.reshape(-1, 5), bias, 4, 3)
    theirs = tf.nn.conv2d(x, kernel, 3, "VALID").numpy() + bias
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_numpy_visual_policy_equals_tf(case):
    spec, model = model_for(case)
    assert ActorCriticPolicy(spec, model).inference == "numpy"  # auto picks the mirror
    rng = np.random.default_rng(1)
    n = 32
    result = StepResult(np.arange(n), observations(spec, n, rng), np.zeros(n), np.zeros(n, bool), np.zeros(n, bool))
    a = ActorCriticPolicy(spec, model, seed=3, inference="numpy").evaluate(result)
    b = ActorCriticPolicy(spec, model, seed=3, inference="tf").evaluate(result)
    assert set(a) == set(b)
    if spec.is_discrete:
        agree = (a["actions"] == b["actions"]).all(axis=1)
        assert agree.mean() > 0.95  # a draw exactly at a CDF boundary may round differently
        np.testing.assert_allclose(a["action_log_probs"][agree], b["action_log_probs"][agree], rtol=1e-4, atol=1e-4)
    else:
        for key in ("actions", "actions_pre", "action_log_probs"):
            np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-4, err_msg=key)
    for key in ("entropy", "extrinsic_value_estimates", "curiosity_value_estimates"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-4, err_msg=key)
    assert np.std(b["extrinsic_value_estimates"]) > 1e-2  # the images matter: not a constant


def test_refresh_reads_new_weights_and_resnet_stays_on_tf():
    spec, model = model_for("nature_sb3")
    mirror = NumpyVisualActorCritic(model)
    rng = np.random.default_rng(2)
    inputs = {"visual_obs0": rng.random((4, 36, 36, 1), dtype=np.float32), "action_mask": np.ones((4, 3), np.float32)}
    before = mirror.values(inputs)["extrinsic_value_estimates"]
    conv = model.body.visual[0].convs[0]
    conv.kernel.assign(conv.kernel * 2.0)
    mirror.refresh()
    after = mirror.values(inputs)["extrinsic_value_estimates"]
    expected = model.values({k: tf.constant(v) for k, v in inputs.items()})["extrinsic_value_estimates"].numpy()
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, expected, rtol=1e-4, atol=1e-4)
    resnet = ActorCritic(BehaviorSpec(((15, 15, 1),), "discrete", (2,)), ["extrinsic"],
                         NetworkSettings(hidden_units=8, vis_encode_type="resnet"), seed=0)
    assert not NumpyVisualActorCritic.supports(resnet)
    assert ActorCriticPolicy(resnet.spec, resnet).inference == "tf"
