"""benchmarks/bench_decode.py, kerasrl's side: recorded player messages (64 agents with a vector
observation and action masks; 16 agents with a PNG camera sent channels first; agents that end an
episode and decide again in the same message) decode through UnityEnvironment's own path to
exactly what was encoded. With ML-Agents' virtualenv at hand (``KERASRL_MLAGENTS_VENV``, by
default /tmp/mlagents-venv) the benchmark's own check also compares against ML-Agents' decoder."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import bench_decode  # noqa: E402


@pytest.mark.parametrize("case", ["vector", "visual"])
def test_kerasrl_decodes_what_was_encoded(tmp_path, case):
    truths = bench_decode.record(str(tmp_path), 2)
    init, steps = bench_decode.recorded(str(tmp_path), case)
    decoder = bench_decode.KerasrlDecoder(init)
    _, agents, shape, _, branches, ending = bench_decode.CASES[case]
    for data, truth in zip(steps, truths[case]):
        decoded = decoder.arrays(data)
        bench_decode.compare(decoded, bench_decode.encoded_arrays(truth, case), case)
        assert decoded["decision_ids"].shape == (agents,) and decoded["terminal_ids"].shape == (ending,)
        assert decoded["terminal_truncated"].sum() == 1
        kerasrl_shape = shape if len(shape) == 1 else (shape[1], shape[2], shape[0])
        assert decoded["decision_obs"].shape == (agents, *kerasrl_shape)
        assert decoded["decision_obs"].dtype == np.float32
        if branches:
            assert decoded["decision_masks"].shape == (agents, sum(branches))
            assert not decoded["decision_masks"].all()  # some actions are masked


def test_compare_catches_a_difference():
    ours = {"decision_obs": np.zeros((2, 3), np.float32), "decision_ids": np.arange(2)}
    bench_decode.compare(ours, {"decision_obs": ours["decision_obs"] + 1e-7, "decision_ids": np.arange(2)}, "x")
    with pytest.raises(AssertionError, match="decision_ids"):
        bench_decode.compare(ours, {"decision_obs": ours["decision_obs"], "decision_ids": np.arange(1, 3)}, "x")


VENV = os.environ.get("KERASRL_MLAGENTS_VENV", "/tmp/mlagents-venv")


@pytest.mark.skipif(not os.path.exists(bench_decode.venv_python(VENV)),
                    reason=f"no virtualenv with mlagents-envs at {VENV} (set KERASRL_MLAGENTS_VENV; see benchmarks/README.md)")
def test_both_decoders_agree(tmp_path):
    bench_decode.record(str(tmp_path), 2)
    worker = bench_decode.Worker(bench_decode.venv_python(VENV), str(tmp_path))
    try:
        for case in bench_decode.CASES:
            init, _ = bench_decode.recorded(str(tmp_path), case)
            assert bench_decode.check_case(case, str(tmp_path), bench_decode.KerasrlDecoder(init), worker) <= 1e-6
    finally:
        worker.close()


def test_action_masks_and_a_ragged_vector_observation():
    from kerasrl.envs.unity.observations import action_masks, observation_arrays
    from kerasrl.exception import EnvironmentException
    from kerasrl.protos import unity_protocol_pb2 as pb

    infos = [pb.AgentInfoProto(id=1, action_mask=[False, True, False]), pb.AgentInfoProto(id=2, action_mask=[True] * 3)]
    np.testing.assert_array_equal(action_masks(infos, 3), [[1, 0, 1], [0, 0, 0]])
    infos.append(pb.AgentInfoProto(id=3))  # no mask: every action allowed
    np.testing.assert_array_equal(action_masks(infos, 3), [[1, 0, 1], [0, 0, 0], [1, 1, 1]])
    assert action_masks(infos, 3).dtype == np.float32 and action_masks([], 3).shape == (0, 3)
    vector = [pb.AgentInfoProto(observations=[pb.ObservationProto(shape=[2], float_data=pb.ObservationProto.FloatData(
        data=values))]) for values in ([1.5, 2.0], [3.0])]
    np.testing.assert_array_equal(observation_arrays(vector[:1], [(2,)], "B")[0], [[1.5, 2.0]])
    assert observation_arrays([], [(2,)], "B")[0].shape == (0, 2)
    with pytest.raises(EnvironmentException, match="Observation 0 of behavior 'B' does not have shape"):
        observation_arrays(vector, [(2,)], "B")
