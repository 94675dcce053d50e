"""The ONNX model for the ML-Agents Unity package's inference: names, layouts and constants of
its contract, and the same actions as the Keras policy (onnxruntime)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.exception import TrainerError
from kerasrl.export import ExportedPolicy, export_policy
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.settings import NetworkSettings
from kerasrl.spec import BehaviorSpec
from kerasrl.unity_export import UnityInferencePolicy, save_unity_onnx

onnx = pytest.importorskip("onnx", reason="the Unity ONNX export needs kerasrl[onnx]")
ort = pytest.importorskip("onnxruntime", reason="the Unity ONNX export is checked with onnxruntime")
pytest.importorskip("tf2onnx", reason="the Unity ONNX export needs kerasrl[onnx]")

DISCRETE = BehaviorSpec(((3,), (20, 24, 3), (2,)), "discrete", (3, 2))
CONTINUOUS = BehaviorSpec(((4,),), "continuous", (2,))
HYBRID = BehaviorSpec(((4,),), "hybrid", (2, 3, 2))  # 2 continuous actions, branches of 3 and 2


def _model(spec: BehaviorSpec) -> ActorCritic:
    model = ActorCritic(spec, network=NetworkSettings(hidden_units=16, normalize=True), seed=3)
    model.normalizer.update(np.random.default_rng(1).normal(3.0, 2.0, (100, spec.vector_observation_size))
                            .astype(np.float32))
    return model


def _shape(value_info) -> list:
    return [d.dim_value or None for d in value_info.type.tensor_type.shape.dim]


def _observations(spec: BehaviorSpec, n: int, rng) -> list[np.ndarray]:
    return [rng.normal(3.0, 2.0, (n, *s)).astype(np.float32) if len(s) == 1 else rng.random((n, *s), np.float32)
            for s in spec.observation_shapes]


def test_discrete_contract_and_actions(tmp_path):
    model = _model(DISCRETE)
    path = save_unity_onnx(model, str(tmp_path / "b.unity.onnx"))
    graph = onnx.load(path).graph
    assert {i.name: _shape(i) for i in graph.input} == {
        "obs_0": [None, 3], "obs_1": [None, 3, 20, 24], "obs_2": [None, 2], "action_masks": [None, 5]}
    assert {o.name for o in graph.output} == {"version_number", "memory_size", "discrete_actions",
                                              "deterministic_discrete_actions", "discrete_action_output_shape"}
    rng = np.random.default_rng(0)
    obs = _observations(DISCRETE, 64, rng)
    mask = np.ones((64, 5), np.float32)
    mask[:, 0] = 0.0  # never action 0 of branch 0
    mask[:32, 4] = 0.0  # the first half never takes action 1 of branch 1
    session = ort.InferenceSession(path)
    feeds = {"obs_0": obs[0], "obs_1": obs[1].transpose(0, 3, 1, 2), "obs_2": obs[2], "action_masks": mask}
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    assert out["version_number"].tolist() == [3.0] and out["memory_size"].tolist() == [0.0]
    assert out["discrete_action_output_shape"].tolist() == [3.0, 2.0]
    assert out["discrete_actions"].dtype == np.int64 and out["discrete_actions"].shape == (64, 2)
    keras = ExportedPolicy(model).deterministic(tf.constant(np.concatenate([obs[0], obs[2]], 1)), tf.constant(obs[1]),
                                                tf.constant(mask))
    np.testing.assert_array_equal(out["deterministic_discrete_actions"], keras["action"].numpy())
    for actions in (out["discrete_actions"], out["deterministic_discrete_actions"]):
        assert (actions[:, 0] != 0).all() and (actions[:32, 1] == 0).all()


def test_continuous_contract_and_actions(tmp_path):
    model = _model(CONTINUOUS)
    path = save_unity_onnx(model, str(tmp_path / "c.unity.onnx"))
    graph = onnx.load(path).graph
    assert {i.name: _shape(i) for i in graph.input} == {"obs_0": [None, 4]}
    session = ort.InferenceSession(path)
    obs = _observations(CONTINUOUS, 32, np.random.default_rng(0))
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"obs_0": obs[0]})))
    assert out["continuous_action_output_shape"].tolist() == [2.0] and out["version_number"].tolist() == [3.0]
    keras = ExportedPolicy(model).deterministic(tf.constant(obs[0]))["action"].numpy()
    np.testing.assert_allclose(out["deterministic_continuous_actions"], keras, atol=1e-5)
    sampled = out["continuous_actions"]
    assert sampled.shape == (32, 2) and (np.abs(sampled) <= 1.0).all()
    assert not np.allclose(sampled, keras)  # drawn, not the mean


def test_hybrid_contract_has_both_kinds_of_actions(tmp_path):
    model = _model(HYBRID)
    path = save_unity_onnx(model, str(tmp_path / "h.unity.onnx"))
    graph = onnx.load(path).graph
    assert {i.name: _shape(i) for i in graph.input} == {"obs_0": [None, 4], "action_masks": [None, 5]}
    outputs = {o.name: _shape(o) for o in graph.output}
    assert outputs == {"version_number": [1], "memory_size": [1], "continuous_actions": [None, 2],
                       "deterministic_continuous_actions": [None, 2], "continuous_action_output_shape": [1],
                       "discrete_actions": [None, 2], "deterministic_discrete_actions": [None, 2],
                       "discrete_action_output_shape": [2]}
    obs = _observations(HYBRID, 32, np.random.default_rng(0))
    mask = np.ones((32, 5), np.float32)
    mask[:, 1] = mask[:, 2] = 0.0  # branch 0 may take only action 0
    session = ort.InferenceSession(path)
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"obs_0": obs[0], "action_masks": mask})))
    assert out["continuous_action_output_shape"].tolist() == [2.0]
    assert out["discrete_action_output_shape"].tolist() == [3.0, 2.0]
    assert out["version_number"].tolist() == [3.0] and out["memory_size"].tolist() == [0.0]
    keras = ExportedPolicy(model).deterministic(tf.constant(obs[0]), tf.constant(mask))["action"].numpy()
    np.testing.assert_allclose(out["deterministic_continuous_actions"], keras[:, :2], atol=1e-5)
    np.testing.assert_array_equal(out["deterministic_discrete_actions"], keras[:, 2:].astype(np.int64))
    assert out["discrete_actions"].dtype == np.int64 and (out["discrete_actions"][:, 0] == 0).all()
    assert ((out["discrete_actions"] >= 0) & (out["discrete_actions"] < [3, 2])).all()
    assert np.abs(out["continuous_actions"]).max() <= 1.0
    assert not np.allclose(out["continuous_actions"], keras[:, :2])  # drawn, not the mean


def test_export_policy_writes_it_beside_the_others_but_not_for_recurrent_policies(tmp_path):
    paths = export_policy(_model(CONTINUOUS), str(tmp_path / "a"), "Walker", onnx=True)
    assert paths["unity_onnx"].endswith("Walker.unity.onnx")
    recurrent = ActorCritic(BehaviorSpec(((3,),), "discrete", (3,)),
                            network=NetworkSettings(hidden_units=16, use_recurrent=True, memory_size=16), seed=1)
    assert "unity_onnx" not in export_policy(recurrent, str(tmp_path / "b"), "Memory", onnx=True)
    with pytest.raises(TrainerError, match="recurrent policies are not exported for Unity"):
        UnityInferencePolicy(recurrent)


def test_export_policy_writes_a_hybrid_policy_in_every_form(tmp_path):
    """SavedModel, ONNX and Unity ONNX of a hybrid policy act alike: the continuous actions, then
    the branch indices."""
    model = _model(HYBRID)
    paths = export_policy(model, str(tmp_path), "Hybrid", onnx=True)
    obs = _observations(HYBRID, 16, np.random.default_rng(2))[0]
    mask = np.ones((16, 5), np.float32)
    mask[:, 0] = 0.0  # branch 0 never takes action 0
    expected = model.act(model.acting_inputs([obs], mask), np.zeros((16, 4), np.float32), True)[Field.ACTIONS].numpy()
    saved = tf.saved_model.load(paths["savedmodel"]).signatures["deterministic"]
    np.testing.assert_allclose(saved(vector_obs=tf.constant(obs), action_mask=tf.constant(mask))["action"].numpy(),
                               expected, atol=1e-5)
    onnx_action = ort.InferenceSession(paths["onnx"]).run(["action"], {"vector_obs": obs, "action_mask": mask})[0]
    np.testing.assert_allclose(onnx_action, expected, atol=1e-5)
    unity = ort.InferenceSession(paths["unity_onnx"])
    cont, disc = unity.run(["deterministic_continuous_actions", "deterministic_discrete_actions"],
                           {"obs_0": obs, "action_masks": mask})
    np.testing.assert_allclose(cont, expected[:, :2], atol=1e-5)
    np.testing.assert_array_equal(disc, expected[:, 2:].astype(np.int64))
    assert (disc[:, 0] != 0).all()
