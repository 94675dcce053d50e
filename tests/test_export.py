"""Export: SavedModel (TensorFlow) and ONNX (onnxruntime) give the Keras policy's deterministic actions."""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.export import export_policy, onnx_available
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.settings import NetworkSettings
from kerasrl.spec import BehaviorSpec

CASES = {
    "masked": (BehaviorSpec(((5,),), "discrete", (3, 4)), NetworkSettings(hidden_units=16, normalize=True)),
    "continuous": (BehaviorSpec(((4,),), "continuous", (2,)), NetworkSettings(hidden_units=16, normalize=True)),
    "lstm": (BehaviorSpec(((3,),), "discrete", (3,)),
             NetworkSettings(hidden_units=16, use_recurrent=True, memory_size=16, sequence_length=4)),
    "lstm_sb3": (BehaviorSpec(((3,),), "discrete", (3,)),
                 NetworkSettings(hidden_units=16, use_recurrent=True, memory_size=16, sequence_length=4,
                                 separate_value_network=True, recurrent_style="sb3", normalize=True)),
    "lstm_mlp_critic": (BehaviorSpec(((3,),), "discrete", (3,)),
                        NetworkSettings(hidden_units=16, use_recurrent=True, memory_size=16, sequence_length=4,
                                        recurrent_style="sb3", critic_memory=False, normalize=True)),
}


def model_and_inputs(case, n=64):
    spec, network = CASES[case]
    model = ActorCritic(spec, network=network, seed=3)
    rng = np.random.default_rng(0)
    size = spec.vector_observation_size
    if model.normalizer is not None:  # statistics far from (0, 1), so a missing normalizer would show
        model.normalizer.update((rng.normal(3.0, 2.0, (200, size))).astype(np.float32))
    inputs = {"vector_obs": rng.normal(3.0, 2.0, (n, size)).astype(np.float32)}
    if spec.is_discrete:
        mask = (rng.random((n, sum(spec.action_shape))) < 0.6).astype(np.float32)
        for start, b in zip(np.cumsum((0,) + spec.action_shape[:-1]), spec.action_shape):
            mask[np.arange(n), start + rng.integers(0, b, n)] = 1.0  # at least one action allowed per branch
        inputs["action_mask"] = mask
    if model.use_recurrent:
        inputs["memory"] = rng.normal(0, 0.5, (n, model.memory_size)).astype(np.float32)
    if model.uses_prev_action:
        inputs["prev_action"] = rng.integers(0, spec.action_shape[0], (n, len(spec.action_shape))).astype(np.int32)
    return model, inputs


def keras_deterministic(model, inputs):
    """The most likely action, from the Keras model's raw outputs with numpy."""
    out = model({k: tf.constant(v) for k, v in inputs.items()})
    if not model.is_discrete:
        return np.clip(out["mu"].numpy(), -3, 3) / 3, out
    logits, actions, start = out["logits"].numpy(), [], 0
    for b in model.branches:
        z = logits[:, start:start + b]
        p = np.exp(z - z.max(-1, keepdims=True))
        p = (p / p.sum(-1, keepdims=True) + 1e-7) * inputs["action_mask"][:, start:start + b]
        actions.append(p.argmax(-1))
        start += b
    return np.stack(actions, -1), out


@pytest.mark.parametrize("case", sorted(CASES))
def test_savedmodel_and_onnx_give_the_keras_deterministic_actions(tmp_path, case):
    model, inputs = model_and_inputs(case)
    expected, out = keras_deterministic(model, inputs)
    paths = export_policy(model, str(tmp_path), case)
    loaded = tf.saved_model.load(paths["savedmodel"])
    det = {k: v.numpy() for k, v in loaded.signatures["deterministic"](**{k: tf.constant(v) for k, v in inputs.items()}).items()}
    np.testing.assert_allclose(det["action"], expected, atol=1e-6)
    np.testing.assert_allclose(det["value_estimate"], out["values"]["extrinsic"].numpy(), atol=1e-5)
    if model.use_recurrent:
        np.testing.assert_allclose(det["recurrent_out"], out["memory_out"].numpy(), atol=1e-5)
    sto = loaded.signatures["stochastic"](**{k: tf.constant(v) for k, v in inputs.items()})
    action = sto["action"].numpy()
    if model.is_discrete:  # a sampled action is never a masked one
        offsets = np.cumsum((0,) + tuple(model.branches[:-1]))
        assert (inputs["action_mask"][np.arange(len(action))[:, None], action + offsets] == 1).all()
    else:
        assert np.abs(action).max() <= 1 and not np.allclose(action, expected)
    info = json.loads(open(paths["policy_json"]).read())
    assert info["memory_size"] == model.memory_size and info["is_continuous_control"] == int(not model.is_discrete)
    if not onnx_available():
        pytest.skip("tf2onnx is not installed (optional extra kerasrl[onnx]); the SavedModel was checked")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (optional extra kerasrl[onnx])")
    session = ort.InferenceSession(paths["onnx"])
    names = [o.name for o in session.get_outputs()]
    result = dict(zip(names, session.run(None, inputs)))
    np.testing.assert_allclose(result["action"], expected, atol=1e-6)
    if model.use_recurrent:
        np.testing.assert_allclose(result["recurrent_out"], out["memory_out"].numpy(), atol=1e-5)


@pytest.mark.slow
def test_kerasrl_export_run_dir_rebuilds_the_end_of_training_export(tmp_path, capsys):
    from kerasrl.cli import main
    from kerasrl.cli.tools import main as tool

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n  normalize: true\n")
    assert main([str(cfg), "--env", "MultiBranchMasked", "--steps", "80", "--seed", "1",
                 "--results-dir", str(tmp_path), "--run-id", "x"]) == 0
    folder = tmp_path / "x" / "models" / "MultiBranchMasked"
    first = folder / "MultiBranchMasked.savedmodel"
    assert first.is_dir() and (folder / "MultiBranchMasked.policy.json").exists()
    shutil.move(str(first), str(tmp_path / "first.savedmodel"))
    assert tool(["export", str(tmp_path / "x"), "--no-onnx"]) == 0
    assert str(first) in capsys.readouterr().out
    rng = np.random.default_rng(1)
    feed = {"vector_obs": tf.constant(rng.normal(size=(32, 1)).astype(np.float32)),
            "action_mask": tf.constant((rng.random((32, 5)) < 0.7).astype(np.float32) + np.eye(32, 5, dtype=np.float32))}
    signature = "deterministic"
    before = tf.saved_model.load(str(tmp_path / "first.savedmodel")).signatures[signature]
    after = tf.saved_model.load(str(first)).signatures[signature]
    assert {k: tuple(v.shape) for k, v in before.structured_input_signature[1].items()} == {"vector_obs": (None, 1),
                                                                                           "action_mask": (None, 5)}
    for key, value in before(**feed).items():
        np.testing.assert_allclose(after(**feed)[key].numpy(), value.numpy(), atol=1e-6)
    assert tool(["export", str(tmp_path / "nothing")]) == 2
    assert "is not a kerasrl run folder" in capsys.readouterr().err

    # The export needs what the run saved beside its checkpoints, not the environment: it works
    # when the recorded command line names an environment that cannot be made...
    record = json.loads((folder / "behavior.json").read_text())
    assert record["spec"] == {"observation_shapes": [[1]], "action_type": "discrete", "action_shape": [3, 2]}
    assert record["settings"]["hidden_units"] == 8 and record["seed"] == 1
    config = tmp_path / "x" / "configuration.yaml"
    config.write_text(config.read_text().replace("MultiBranchMasked", "NoSuchEnv-v0", 1))
    shutil.rmtree(first)
    assert tool(["export", str(tmp_path / "x"), "--no-onnx"]) == 0 and first.is_dir()
    # ...and a run folder written before checkpoints kept it falls back to that command line.
    (folder / "behavior.json").unlink()
    assert tool(["export", str(tmp_path / "x"), "--no-onnx"]) == 2
    assert "NoSuchEnv-v0" in capsys.readouterr().err
    config.write_text(config.read_text().replace("NoSuchEnv-v0", "MultiBranchMasked", 1))
    shutil.rmtree(first)
    assert tool(["export", str(tmp_path / "x"), "--no-onnx"]) == 0
    for key, value in before(**feed).items():
        np.testing.assert_allclose(tf.saved_model.load(str(first)).signatures[signature](**feed)[key].numpy(),
                                   value.numpy(), atol=1e-6)


def test_without_tf2onnx_the_savedmodel_is_written_and_asking_for_onnx_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    from kerasrl.exception import TrainerError

    real_import = builtins.__import__

    def no_tf2onnx(name, *args, **kwargs):
        if name.startswith("tf2onnx"):
            raise ImportError("No module named 'tf2onnx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tf2onnx)
    model, _ = model_and_inputs("continuous")
    paths = export_policy(model, str(tmp_path), "b")
    assert sorted(paths) == ["policy_json", "savedmodel"] and not os.path.exists(tmp_path / "b.onnx")
    with pytest.raises(TrainerError, match=r"kerasrl\[onnx\] \(pip install tf2onnx onnxruntime\)"):
        export_policy(model, str(tmp_path), "b", onnx=True)
