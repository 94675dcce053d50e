"""The numpy acting path computes what the compiled TF path computes, and is chosen automatically."""
import numpy as np
import pytest
import tensorflow as tf

from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.envs.base import BehaviorSpec, StepResult
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.numpy_policy import NumpyActorCritic
from kerasrl.settings import NetworkSettings

SPECS = {
    "discrete": BehaviorSpec(((3,), (2,)), "discrete", (3, 4, 2)),
    "continuous": BehaviorSpec(((5,),), "continuous", (3,)),
    "continuous_sb3": BehaviorSpec(((5,),), "continuous", (3,)),
    "discrete_bias": BehaviorSpec(((3,), (2,)), "discrete", (3, 4, 2)),
}
#: Stable-Baselines3's Gaussian (log σ, summed entropy) in the units of a Box of half-range 2.
SB3_GAUSSIAN = {"gaussian_style": "sb3", "log_std_init": -0.5, "action_scale": 2.0}
#: The network keys of each kind beyond the defaults.
KIND_NETWORK = {"continuous_sb3": SB3_GAUSSIAN, "discrete_bias": {"action_bias": True}}
KINDS = list(SPECS)


def trained_like(spec, normalize=True, seed=0, hidden_units=32, num_layers=2, **network):
    model = ActorCritic(spec, ["extrinsic", "gail"],
                        NetworkSettings(hidden_units=hidden_units, num_layers=num_layers, normalize=normalize, **network),
                        seed=seed)
    rng = np.random.default_rng(seed)
    scale = 0.3 * np.sqrt(32 / hidden_units)  # wider layers: smaller steps, activations of the same size
    for w in model.trainable_weights:  # move weights away from their small initial values
        w.assign(w.numpy() + rng.normal(scale=scale, size=w.shape).astype(np.float32))
    if normalize:
        model.normalizer.update(rng.normal(loc=2.0, scale=3.0, size=(50, spec.vector_observation_size)))
    return model


#: Network shapes of the mirror's two layouts: narrow streams as block-diagonal kernels, wide
#: separate streams (at least ``_STACK_WIDTH`` units) as stacked kernels.
WIDTHS = {"narrow": {}, "wide": {"hidden_units": 160, "num_layers": 3, "separate_value_network": True}}


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("kind", KINDS)
def test_numpy_forward_equals_tf(kind, width):
    spec = SPECS[kind]
    model = trained_like(spec, **WIDTHS[width], **KIND_NETWORK.get(kind, {}))
    mirror = NumpyActorCritic(model)
    if width == "wide":  # the streams' 2nd and 3rd layers as stacked kernels
        assert [k.ndim for k, _ in mirror.layers] == [2, 3, 3]
    rng = np.random.default_rng(1)
    n = 256
    inputs = {"vector_obs": rng.normal(scale=4.0, size=(n, spec.vector_observation_size)).astype(np.float32)}
    if spec.is_discrete:
        masks = (rng.random((n, spec.action_mask_size)) < 0.7).astype(np.float32)
        start = 0
        for b in spec.discrete_branches:  # keep at least one action allowed per branch
            masks[np.arange(n), start + rng.integers(0, b, n)] = 1.0
            start += b
        inputs["action_mask"] = masks
        noise = np.maximum(rng.random((n, spec.action_size), dtype=np.float32), 1e-7)
    else:
        noise = rng.standard_normal((n, spec.action_size), dtype=np.float32) * 3
    tf_out = {k: v.numpy() for k, v in model.act({k: tf.constant(v) for k, v in inputs.items()}, tf.constant(noise)).items()}
    np_out = mirror.act(inputs, noise)
    assert set(tf_out) == set(np_out)
    agree = (tf_out["actions"] == np_out["actions"]).all(axis=1) if spec.is_discrete else None
    if spec.is_discrete:
        assert agree.mean() > 0.99  # a draw exactly at a CDF boundary may round differently
        np.testing.assert_allclose(np_out["action_log_probs"][agree], tf_out["action_log_probs"][agree], rtol=1e-4, atol=1e-4)
        masked = np.concatenate(
            [inputs["action_mask"][:, sum(spec.discrete_branches[:k]):][np.arange(n), np_out["actions"][:, k]][:, None]
             for k in range(spec.action_size)], axis=1)
        assert (masked == 1).all()
    else:
        np.testing.assert_allclose(np_out["actions"], tf_out["actions"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np_out["actions_pre"], tf_out["actions_pre"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np_out["action_log_probs"], tf_out["action_log_probs"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np_out["entropy"], tf_out["entropy"], rtol=1e-4, atol=1e-5)
    for name in ("extrinsic", "gail"):
        np.testing.assert_allclose(np_out[f"{name}_value_estimates"], tf_out[f"{name}_value_estimates"], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mirror.values(inputs)[f"{name}_value_estimates"], tf_out[f"{name}_value_estimates"],
                                   rtol=1e-4, atol=1e-4)


def test_policy_chooses_numpy_where_a_mirror_exists_and_tf_otherwise():
    vec = ActorCritic(SPECS["discrete"], ["extrinsic"], NetworkSettings(hidden_units=8), seed=0)
    assert ActorCriticPolicy(SPECS["discrete"], vec).inference == "numpy"
    rec = ActorCritic(SPECS["discrete"], ["extrinsic"], NetworkSettings(hidden_units=8, use_recurrent=True, memory_size=8),
                      seed=0)
    assert ActorCriticPolicy(SPECS["discrete"], rec).inference == "numpy"
    vis_spec = BehaviorSpec(((20, 20, 1),), "discrete", (2,))  # resnet: not mirrored (tests/test_numpy_visual.py)
    vis = ActorCritic(vis_spec, ["extrinsic"], NetworkSettings(hidden_units=8, vis_encode_type="resnet"), seed=0)
    assert ActorCriticPolicy(vis_spec, vis).inference == "tf"
    with pytest.raises(ValueError, match="inference"):
        ActorCriticPolicy(SPECS["discrete"], vec, inference="gpu")


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_and_tf_policies_give_same_actions_under_same_seed(kind):
    spec = SPECS[kind]
    model = trained_like(spec, seed=4, **KIND_NETWORK.get(kind, {}))
    rng = np.random.default_rng(2)
    n = 64
    obs = [rng.normal(size=(n, s[0])).astype(np.float32) for s in spec.observation_shapes]
    result = StepResult(np.arange(n), obs, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool))
    a = ActorCriticPolicy(spec, model, seed=3, inference="numpy").get_action(result)
    b = ActorCriticPolicy(spec, model, seed=3, inference="tf").get_action(result)
    if spec.is_discrete:
        assert (a.action == b.action).mean() > 0.99
    else:
        np.testing.assert_allclose(a.action, b.action, rtol=1e-4, atol=1e-5)
    for name in ("extrinsic", "gail"):
        np.testing.assert_allclose(a.value[name], b.value[name], rtol=1e-4, atol=1e-4)


def test_refresh_picks_up_new_weights():
    model = trained_like(SPECS["continuous"], seed=5)
    mirror = NumpyActorCritic(model)
    x = {"vector_obs": np.ones((2, 5), np.float32)}
    before = mirror.values(x)["extrinsic_value_estimates"].copy()
    head = model.value_heads["extrinsic"]
    head.weights[1].assign(head.weights[1].numpy() + 1.0)
    np.testing.assert_array_equal(mirror.values(x)["extrinsic_value_estimates"], before)
    mirror.refresh()
    np.testing.assert_allclose(mirror.values(x)["extrinsic_value_estimates"], before + 1.0, rtol=1e-5)
    # Weights handed in (as the fused update returns them) are used instead of a read.
    given = [v.numpy() for v in model.trainable_variables]
    given[[id(v) for v in model.trainable_variables].index(id(head.weights[1]))] += 2.0
    mirror.refresh(given)
    np.testing.assert_allclose(mirror.values(x)["extrinsic_value_estimates"], before + 3.0, rtol=1e-5)
    with pytest.raises(ValueError, match="trainable_variables"):
        mirror.refresh(given[:-1])


def test_sampling_kernel_matches_masked_categorical_distribution():
    """The Cython kernel gives the TF distribution's actions, log-probs and entropy (3 branches, masks)."""
    from kerasrl._kernels import sample_masked_categorical
    from kerasrl.models.distributions import EPSILON, MaskedMultiCategorical

    rng = np.random.default_rng(3)
    branches = [3, 1, 5]
    n = 64
    logits = (rng.normal(size=(n, sum(branches))) * 3).astype(np.float32)
    masks = (rng.random((n, sum(branches))) < 0.6).astype(np.float32)
    start = 0
    for b in branches:
        masks[np.arange(n), start + rng.integers(0, b, n)] = 1.0
        start += b
    noise = np.maximum(rng.random((n, len(branches)), dtype=np.float32), np.float32(1e-7))
    actions = np.empty((n, len(branches)), np.int32)
    log_probs = np.empty((n, len(branches)), np.float32)
    entropy = np.empty(n, np.float32)
    sample_masked_categorical(logits, masks, noise, np.asarray(branches, np.int64), np.float32(EPSILON),
                              actions, log_probs, entropy)
    dist = MaskedMultiCategorical(tf.constant(logits), tf.constant(masks), branches)
    np.testing.assert_array_equal(actions, dist.sample(tf.constant(noise)).numpy())
    np.testing.assert_allclose(log_probs, dist.branch_log_prob(actions).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(entropy, dist.entropy().numpy(), rtol=1e-5, atol=1e-5)
    offsets = np.cumsum([0] + branches[:-1])
    assert (masks[np.arange(n)[:, None], offsets[None, :] + actions] == 1).all()
    with pytest.raises(ValueError, match="columns"):
        sample_masked_categorical(logits[:, :-1].copy(), masks[:, :-1].copy(), noise, np.asarray(branches, np.int64),
                                  np.float32(EPSILON), actions, log_probs, entropy)
    with pytest.raises(ValueError, match="output arrays"):
        sample_masked_categorical(logits, masks, noise, np.asarray(branches, np.int64), np.float32(EPSILON),
                                  actions[:-1].copy(), log_probs, entropy)


def test_gaussian_styles_clip_scale_and_entropy_as_documented():
    """ML-Agents' default: ``clip(pre, ±3) / 3``, log σ² variable, mean entropy; ``sb3`` with
    ``action_scale`` 2: ``clip(pre, ±2) / 2``, a log σ variable from ``log_std_init``, summed entropy."""
    spec = SPECS["continuous"]
    inputs = {"vector_obs": tf.zeros((4, 5))}
    noise = tf.constant(np.array([[-9.0, 0.0, 9.0]] * 3 + [[0.3, -0.6, 1.2]], np.float32))
    default = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=8), seed=0)
    assert NetworkSettings().gaussian_style == "mlagents" and default.action_scale == 3.0
    assert [w.name for w in default.trainable_weights if "sigma" in w.name or "std" in w.name] == ["log_sigma_squared"]
    sb3 = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=8, **SB3_GAUSSIAN), seed=0)
    np.testing.assert_allclose(sb3.log_std.numpy(), [-0.5] * 3)
    for model, scale, entropy in ((default, 3.0, 0.5 * np.log(2 * np.pi * np.e)),
                                  (sb3, 2.0, 3 * (0.5 * np.log(2 * np.pi * np.e) - 0.5))):
        out = {k: v.numpy() for k, v in model.act(inputs, noise).items()}
        np.testing.assert_allclose(out["actions"], np.clip(out["actions_pre"], -scale, scale) / scale, rtol=1e-6)
        assert out["actions"].min() == -1.0 and out["actions"].max() == 1.0
        np.testing.assert_allclose(out["entropy"], entropy, rtol=1e-5)


@pytest.mark.parametrize("key,value,problem", [("gaussian_style", "torch", "must be one of"),
                                               ("action_scale", 0, "must be > 0"),
                                               ("log_std_init", 50, "must be in")])
def test_bad_gaussian_keys_name_key_and_value(key, value, problem):
    from kerasrl.exception import TrainerConfigError
    from kerasrl.settings import TrainerSettings

    with pytest.raises(TrainerConfigError, match=f"{key} in .* {problem}.*, got {value!r}"):
        TrainerSettings.from_dict({key: value})


#: LSTM policies: discrete with separate policy/value streams (the ``lstm`` bench task's
#: layout), discrete with one shared stream, continuous (separate streams by default), each
#: also with the LSTM on the observations (``recurrent_style: sb3``, no previous action).
LSTM_CASES = {"discrete-separate": ("discrete", True, "mlagents"), "discrete-shared": ("discrete", False, "mlagents"),
              "continuous": ("continuous", None, "mlagents"),
              "sb3-discrete-separate": ("discrete", True, "sb3"), "sb3-discrete-shared": ("discrete", False, "sb3"),
              "sb3-continuous": ("continuous", None, "sb3"), "sb3-continuous-wide": ("continuous", True, "sb3"),
              "sb3-discrete-bias": ("discrete", True, "sb3")}


def lstm_model(kind, seed=0):
    spec_kind, separate, style = LSTM_CASES[kind]
    wide = {"hidden_units": 128} if kind.endswith("-wide") else {}  # stacked kernels after the LSTMs
    bias = {"action_bias": True} if kind.endswith("-bias") else {}
    return trained_like(SPECS[spec_kind], seed=seed, use_recurrent=True, memory_size=24,
                        separate_value_network=separate, recurrent_style=style, **wide, **bias), SPECS[spec_kind]


def assert_acts_alike(model, mirror, spec, inputs, noise):
    """The mirror's ``act`` equals the Keras model's on ``inputs`` and ``noise`` to float round-off
    (discrete actions: all but a draw at a CDF boundary); returns both outputs."""
    tf_out = {k: v.numpy() for k, v in model.act({k: tf.constant(v) for k, v in inputs.items()},
                                                 tf.constant(noise)).items()}
    np_out = mirror.act(inputs, noise)
    assert set(np_out) == set(tf_out)
    for key, value in tf_out.items():
        if key == "actions" and spec.is_discrete:
            assert (np_out[key] == value).mean() > 0.95  # a draw at a CDF boundary may round differently
            continue
        np.testing.assert_allclose(np_out[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
    return tf_out, np_out


@pytest.mark.parametrize("kind", list(LSTM_CASES))
def test_numpy_lstm_step_equals_tf(kind):
    """Two recurrent steps (the first step's memory fed back): actions, log-probs, entropy,
    values and memories as the TF model's, to float round-off."""
    model, spec = lstm_model(kind)
    mirror = NumpyActorCritic(model)
    rng = np.random.default_rng(1)
    n = 16
    memory = rng.normal(size=(n, model.memory_size)).astype(np.float32)
    for _ in range(2):
        inputs = {"vector_obs": rng.normal(scale=3.0, size=(n, spec.vector_observation_size)).astype(np.float32),
                  "memory": memory}
        if spec.is_discrete:
            inputs["action_mask"] = np.ones((n, spec.action_mask_size), np.float32)
            if model.uses_prev_action:
                inputs["prev_action"] = np.stack([rng.integers(0, b, n) for b in spec.discrete_branches],
                                                 1).astype(np.int32)
            noise = np.maximum(rng.random((n, spec.action_size), dtype=np.float32), 1e-7)
        else:
            noise = rng.standard_normal((n, spec.action_size), dtype=np.float32)
        tf_out, np_out = assert_acts_alike(model, mirror, spec, inputs, noise)
        values = mirror.values(inputs)
        np.testing.assert_allclose(values["memory_out"], tf_out["memory_out"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(values["gail_value_estimates"], tf_out["gail_value_estimates"], rtol=1e-4, atol=1e-5)
        memory = np_out["memory_out"]


@pytest.mark.parametrize("kind", ["discrete-separate", "sb3-discrete-separate"])
def test_numpy_and_tf_lstm_policies_act_alike_over_episodes(kind):
    """Through ``ActorCriticPolicy``: per-agent memories and previous actions kept, reset when an
    agent's episode ends, the same under both paths."""
    model, spec = lstm_model(kind, seed=2)
    policies = [ActorCriticPolicy(spec, model, seed=7, inference=mode) for mode in ("numpy", "tf")]
    rng = np.random.default_rng(3)
    n = 6
    for step in range(4):
        obs = [rng.normal(size=(n, s[0])).astype(np.float32) for s in spec.observation_shapes]
        done = np.zeros(n, bool)
        done[step % n] = step > 0
        result = StepResult(np.arange(n), obs, np.zeros(n), done, np.zeros(n, bool))
        a, b = (p.get_action(result) for p in policies)
        assert (a.action == b.action).mean() > 0.9
        np.testing.assert_allclose(a.memory, b.memory, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(a.value["extrinsic"], b.value["extrinsic"], rtol=1e-4, atol=1e-5)
        rows = np.arange(0, n, 2)
        np.testing.assert_allclose(policies[0].get_value_estimates(result, rows)["gail"],
                                   policies[1].get_value_estimates(result, rows)["gail"], rtol=1e-4, atol=1e-5)
    assert np.abs(a.memory).max() > 0  # memories were carried, not zeros
    assert ("prev_action" in policies[0].experience_fields) == model.uses_prev_action


def test_sb3_recurrent_style_puts_the_lstm_on_the_observations():
    """``recurrent_style: sb3``: each stream's LSTM reads the observations (no previous action)
    and its hidden layers read the LSTM's outputs, as sb3-contrib's ``MlpLstmPolicy``."""
    model, spec = lstm_model("sb3-discrete-separate")
    assert model.lstm_first and not model.uses_prev_action
    assert "prev_action" not in model.input_signature()
    for stream in (model.body, model.value_body):
        assert stream.lstm.cell.kernel.shape == (spec.vector_observation_size, 4 * model.memory_size // 4)
        assert stream.vector.dense[0].kernel.shape == (model.memory_size // 4, 32)
    with pytest.raises(ValueError, match="vector observations only"):
        ActorCritic(BehaviorSpec(((24, 24, 1),), "discrete", (2,)), ["extrinsic"],
                    NetworkSettings(use_recurrent=True, recurrent_style="sb3"))


def test_single_threaded_blas_respects_the_users_choice(monkeypatch):
    from kerasrl.models import numpy_policy

    monkeypatch.setattr(numpy_policy, "_blas_limited", False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert numpy_policy.single_threaded_blas() is False
    assert numpy_policy._blas_limited is False


def test_agent_table_looks_up_stores_and_resets_rows_by_agent_id():
    from kerasrl.common.policy import AgentTable

    table = AgentTable(2, np.float32)
    np.testing.assert_array_equal(table.get(np.array([5, 1])), np.zeros((2, 2)))
    table.set(np.array([5, 1]), np.array([[5, 5], [1, 1]], np.float32))
    table.set(np.array([3, 5]), np.array([[3, 3], [6, 6]], np.float32))
    assert len(table) == 3
    np.testing.assert_array_equal(table.get(np.array([1, 3, 5, 9])), [[1, 1], [3, 3], [6, 6], [0, 0]])
    np.testing.assert_array_equal(table.get(np.array([3, 5]), reset=np.array([True, False])), [[0, 0], [6, 6]])
    np.testing.assert_array_equal(table[3], [0, 0])  # a reset is stored
    with pytest.raises(KeyError):
        table[4]
    table.clear()
    assert not table


def test_refresh_picks_up_a_new_action_bias():
    """With ``action_bias`` the mirror's action probabilities follow the bias the update moved."""
    spec = SPECS["discrete_bias"]
    model = trained_like(spec, seed=6, action_bias=True)
    mirror = NumpyActorCritic(model)
    rng = np.random.default_rng(3)
    inputs = {"vector_obs": rng.normal(size=(16, 5)).astype(np.float32),
              "action_mask": np.ones((16, sum(spec.discrete_branches)), np.float32)}
    noise = rng.random((16, spec.action_size), dtype=np.float32)
    before = mirror.act(inputs, noise)["action_log_probs"].copy()
    bias = model.branch_logits[0].bias
    bias.assign(bias.numpy() + np.array([3.0, 0.0, -3.0], np.float32))
    mirror.refresh()
    tf_out, np_out = assert_acts_alike(model, mirror, spec, inputs, noise)
    assert np.abs(np_out["action_log_probs"] - before).max() > 0.1
