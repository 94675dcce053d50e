"""SAC's actor as the ONNX model of the ML-Agents Unity package's inference: the contract's names
and constants, the same actions as the SAC policy (onnxruntime), and the file a ``kerasrl-learn``
SAC run and ``kerasrl export`` write."""
from __future__ import annotations

import dataclasses
import logging
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from kerasrl.cli import main
from kerasrl.cli.tools import main as tools_main
from kerasrl.exception import TrainerError
from kerasrl.export import export_policy
from kerasrl.fields import Field
from kerasrl.sac.learner import SACLearner
from kerasrl.sac.networks import SACNetworks
from kerasrl.sac.policy import SACPolicy
from kerasrl.settings import TrainerSettings
from kerasrl.spec import BehaviorSpec
from kerasrl.unity_export import UNITY_MODEL_VERSION, UnityInferencePolicy, save_unity_onnx

onnx = pytest.importorskip("onnx", reason="the Unity ONNX export needs kerasrl[onnx]")
ort = pytest.importorskip("onnxruntime", reason="the Unity ONNX export is checked with onnxruntime")
pytest.importorskip("tf2onnx", reason="the Unity ONNX export needs kerasrl[onnx]")

SMALL = {"trainer": "sac", "batch_size": 16, "buffer_size": 500, "hidden_units": 16, "num_layers": 2,
         "normalize": True, "time_horizon": 8, "summary_freq": 50}
CONTINUOUS = BehaviorSpec(((4,),), "continuous", (2,))
DISCRETE = BehaviorSpec(((3,), (2,)), "discrete", (3, 2))  # two vector observations, branches of 3 and 2
CAMERA = BehaviorSpec(((3,), (20, 24, 3)), "continuous", (2,))
UNITY_PAGE = Path(__file__).resolve().parents[1] / "docs" / "unity.md"


def _networks(spec: BehaviorSpec) -> SACNetworks:
    nets = SACLearner.for_behavior(spec, TrainerSettings.from_dict(SMALL), seed=3, max_steps=100).networks
    assert nets.normalizer is not None
    nets.normalizer.update(np.random.default_rng(1).normal(3.0, 2.0, (100, spec.vector_observation_size)))
    return nets


def _observations(spec: BehaviorSpec, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(3.0, 2.0, (n, *s)).astype(np.float32) if len(s) == 1 else rng.random((n, *s), np.float32)
            for s in spec.observation_shapes]


def _run(path: str, spec: BehaviorSpec, obs: list[np.ndarray], mask=None) -> dict[str, np.ndarray]:
    """The Unity file's outputs: images fed channels first, as the package feeds them."""
    feeds = {f"obs_{i}": o if o.ndim == 2 else o.transpose(0, 3, 1, 2) for i, o in enumerate(obs)}
    if mask is not None:
        feeds["action_masks"] = mask
    session = ort.InferenceSession(path)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _policy_actions(nets: SACNetworks, obs: list[np.ndarray], mask=None) -> np.ndarray:
    """The deterministic action of the SAC policy that acts during training (numpy, or compiled with cameras)."""
    policy = SACPolicy(nets, deterministic=True)
    return policy.actions(policy.inputs(obs), mask)


def _shapes(path: str) -> tuple[dict, dict]:
    graph = onnx.load(path).graph

    def dims(v) -> list:
        return [d.dim_value or None for d in v.type.tensor_type.shape.dim]

    return {i.name: dims(i) for i in graph.input}, {o.name: dims(o) for o in graph.output}


def test_continuous_actions_are_the_squashed_gaussians(tmp_path):
    nets = _networks(CONTINUOUS)
    path = save_unity_onnx(nets, str(tmp_path / "c.unity.onnx"))
    inputs, outputs = _shapes(path)
    assert inputs == {"obs_0": [None, 4]}
    assert outputs == {"version_number": [1], "memory_size": [1], "continuous_actions": [None, 2],
                       "deterministic_continuous_actions": [None, 2], "continuous_action_output_shape": [1]}
    obs = _observations(CONTINUOUS, 32)
    out = _run(path, CONTINUOUS, obs)
    assert out["version_number"].tolist() == [float(UNITY_MODEL_VERSION)] and out["memory_size"].tolist() == [0.0]
    assert out["continuous_action_output_shape"].tolist() == [2.0]
    np.testing.assert_allclose(out["deterministic_continuous_actions"], _policy_actions(nets, obs), atol=1e-5)
    # sampled: tanh(μ + σ·noise), so atanh of many draws for one observation has mean μ and deviation σ
    one = [np.repeat(obs[0][:1], 4000, axis=0)]
    drawn = np.arctanh(np.clip(_run(path, CONTINUOUS, one)["continuous_actions"], -1 + 1e-6, 1 - 1e-6))
    mu, log_std = (t.numpy()[0] for t in nets.actor(nets.observe(tf.constant(one[0][:1]))))
    np.testing.assert_allclose(drawn.mean(axis=0), mu, atol=0.1)
    np.testing.assert_allclose(drawn.std(axis=0), np.exp(log_std), rtol=0.1)


def test_the_sampled_and_deterministic_actions_share_one_actor_pass(tmp_path):
    """The Unity file computes the actor once: as many matrix products as the plain ONNX file,
    which gives the deterministic action alone (discrete: both actions read the same logits)."""
    paths = export_policy(_networks(DISCRETE), str(tmp_path), "Agent", onnx=True)

    def matmuls(path: str) -> int:
        return sum(n.op_type in ("MatMul", "Gemm") for n in onnx.load(path).graph.node)

    assert matmuls(paths["unity_onnx"]) == matmuls(paths["onnx"]) == SMALL["num_layers"] + 1


def test_discrete_actions_respect_the_mask(tmp_path):
    nets = _networks(DISCRETE)
    path = save_unity_onnx(nets, str(tmp_path / "d.unity.onnx"))
    inputs, outputs = _shapes(path)
    assert inputs == {"obs_0": [None, 3], "obs_1": [None, 2], "action_masks": [None, 5]}
    assert set(outputs) == {"version_number", "memory_size", "discrete_actions", "deterministic_discrete_actions",
                            "discrete_action_output_shape"}
    obs = _observations(DISCRETE, 64)
    mask = np.ones((64, 5), np.float32)
    mask[:, 0] = 0.0  # never action 0 of branch 0
    mask[:32, 4] = 0.0  # the first half never takes action 1 of branch 1
    out = _run(path, DISCRETE, obs, mask)
    assert out["version_number"].tolist() == [3.0] and out["memory_size"].tolist() == [0.0]
    assert out["discrete_action_output_shape"].tolist() == [3.0, 2.0]
    best = out["deterministic_discrete_actions"]
    assert best.dtype == np.int64 and out["discrete_actions"].dtype == np.int64
    np.testing.assert_array_equal(best, _policy_actions(nets, obs, mask))
    for actions in (out["discrete_actions"], best):
        assert actions.shape == (64, 2) and (actions[:, 0] != 0).all() and (actions[:32, 1] == 0).all()
    # sampled: many draws for one observation take each allowed action as often as its probability
    one = [np.repeat(o[:1], 4000, axis=0) for o in obs]
    drawn = _run(path, DISCRETE, one, np.repeat(mask[-1:], 4000, axis=0))["discrete_actions"]
    probs = nets.act({Field.VECTOR_OBS: tf.constant(np.concatenate([o[:1] for o in obs], 1)),
                      Field.ACTION_MASK: tf.constant(mask[-1:])}, None)[1].numpy()[0]
    frequencies = np.concatenate([np.bincount(drawn[:, 0], minlength=3), np.bincount(drawn[:, 1], minlength=2)]) / 4000
    np.testing.assert_allclose(frequencies, probs, atol=0.03)


def test_camera_policy_takes_images_channels_first(tmp_path):
    nets = _networks(CAMERA)
    path = save_unity_onnx(nets, str(tmp_path / "v.unity.onnx"))
    inputs, _ = _shapes(path)
    assert inputs == {"obs_0": [None, 3], "obs_1": [None, 3, 20, 24]}
    obs = _observations(CAMERA, 16)
    out = _run(path, CAMERA, obs)
    assert out["continuous_action_output_shape"].tolist() == [2.0] and out["memory_size"].tolist() == [0.0]
    np.testing.assert_allclose(out["deterministic_continuous_actions"], _policy_actions(nets, obs), atol=1e-5)
    assert np.abs(out["continuous_actions"]).max() <= 1.0


def test_camera_only_discrete_policy(tmp_path):
    """No vector observation: the image is ``obs_0``, the mask comes after it."""
    spec = BehaviorSpec(((36, 36, 1),), "discrete", (3,))
    nets = SACLearner.for_behavior(spec, TrainerSettings.from_dict(SMALL), seed=3, max_steps=100).networks
    path = save_unity_onnx(nets, str(tmp_path / "v.unity.onnx"))
    assert _shapes(path)[0] == {"obs_0": [None, 1, 36, 36], "action_masks": [None, 3]}
    obs = _observations(spec, 16)
    mask = np.ones((16, 3), np.float32)
    mask[:8, 2] = 0.0
    out = _run(path, spec, obs, mask)
    np.testing.assert_array_equal(out["deterministic_discrete_actions"], _policy_actions(nets, obs, mask))
    assert (out["discrete_actions"][:8] != 2).all() and out["discrete_action_output_shape"].tolist() == [3.0]


def test_a_recurrent_sac_policy_is_refused_in_one_line(tmp_path, caplog):
    """Recurrent SAC is refused when configured; a recurrent SAC model reaching the export gets no
    Unity file, and one line saying why."""
    nets = _networks(CONTINUOUS)
    nets.network_settings = dataclasses.replace(nets.network_settings, use_recurrent=True)
    with pytest.raises(TrainerError, match=r"^Cannot export for Unity: recurrent SAC policies are not exported"):
        UnityInferencePolicy(nets)
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        paths = export_policy(nets, str(tmp_path), "Walker", onnx=True)
    assert "unity_onnx" not in paths and "onnx" in paths and not (tmp_path / "Walker.unity.onnx").exists()
    (line,) = [r.getMessage() for r in caplog.records if "unity.onnx" in r.getMessage()]
    assert line == "Walker: no Walker.unity.onnx: recurrent SAC policies are not exported for Unity's inference yet."


def test_sac_networks_on_hybrid_actions_are_refused(tmp_path):
    """SAC refuses hybrid actions when a run starts; networks built on them anyway get no Unity file."""
    nets = SACNetworks(BehaviorSpec(((4,),), "hybrid", (2, 3, 2)), ["extrinsic"], seed=0)
    with pytest.raises(TrainerError, match=r"^Cannot export for Unity: SAC does not act on hybrid actions"):
        save_unity_onnx(nets, str(tmp_path / "h.unity.onnx"))
    assert not (tmp_path / "h.unity.onnx").exists()


def test_kerasrl_learn_and_kerasrl_export_write_it(tmp_path, capsys):
    """A tiny masked discrete SAC run writes the Unity file at its end; ``kerasrl export`` writes it
    again from the checkpoint: both act as the run's exported actor, masks respected."""
    cfg = tmp_path / "sac.yaml"
    cfg.write_text("default:\n  trainer: sac\n  batch_size: 16\n  buffer_size: 200\n  hidden_units: 16\n"
                   "  num_layers: 1\n  time_horizon: 8\n  summary_freq: 50\n")
    assert main([str(cfg), "--env", "MultiBranchMasked", "--seed", "2", "--results-dir", str(tmp_path),
                 "--run-id", "r", "--steps", "60"]) == 0
    (folder,) = (tmp_path / "r" / "models").iterdir()
    unity = folder / f"{folder.name}.unity.onnx"
    assert unity.is_file()
    shutil.copy(unity, tmp_path / "at_end.onnx")
    unity.unlink()
    capsys.readouterr()
    assert tools_main(["export", str(tmp_path / "r")]) == 0
    assert str(unity) in capsys.readouterr().out and unity.is_file()
    feeds = {"obs_0": np.random.default_rng(0).normal(0.0, 1.0, (40, 1)).astype(np.float32),
             "action_masks": np.ones((40, 5), np.float32)}
    feeds["action_masks"][:, 1] = 0.0  # branch 0 never "stays" (as the environment masks it)
    feeds["action_masks"][::2, 4] = 0.0  # every other row: branch 1 may take only action 0
    best, sampled = ort.InferenceSession(str(unity)).run(["deterministic_discrete_actions", "discrete_actions"], feeds)
    at_end = ort.InferenceSession(str(tmp_path / "at_end.onnx")).run(["deterministic_discrete_actions"], feeds)[0]
    np.testing.assert_array_equal(best, at_end)
    plain = ort.InferenceSession(str(folder / f"{folder.name}.onnx"))  # the SAC actor's deterministic function
    action = plain.run(["action"], {Field.VECTOR_OBS: feeds["obs_0"], Field.ACTION_MASK: feeds["action_masks"]})[0]
    np.testing.assert_array_equal(best, action)
    for actions in (best, sampled):
        assert (actions[:, 0] != 1).all() and (actions[::2, 1] == 0).all()


@pytest.mark.skipif(not UNITY_PAGE.is_file(), reason="docs/unity.md is not in this tree (an installed package)")
def test_unity_page_sac_block_runs(tmp_path, monkeypatch, capsys):
    """docs/unity.md's SAC example, on the run its comment names trained for 300 steps: what it
    prints, and its deterministic action is the run's SAC actor's (its plain ONNX file's)."""
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", UNITY_PAGE.read_text(), re.S) if "unity.onnx" in b]
    command = re.search(r"# the run of: kerasrl-learn (.*)\n", block).group(1)
    monkeypatch.chdir(tmp_path)
    assert main([*command.split(), "--steps", "300"]) == 0
    capsys.readouterr()
    namespace: dict = {}
    exec(compile(block, str(UNITY_PAGE), "exec"), namespace)  # noqa: S102 - the page's own code
    assert capsys.readouterr().out.splitlines() == ["['obs_0']", "[3.] [0.]"]
    action = namespace["action"]
    plain = ort.InferenceSession("results/pendulum-sac/models/Pendulum-v1/Pendulum-v1.onnx")
    expected = plain.run(["action"], {Field.VECTOR_OBS: np.array([[1.0, 0.0, 0.0]], np.float32)})[0]
    assert action.shape == (1, 1) and abs(float(action[0, 0])) < 1.0
    np.testing.assert_allclose(action, expected, atol=1e-5)
