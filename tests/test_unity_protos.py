"""The checked-in protocol modules: current with the .proto, importable under the installed
protobuf, and wire-compatible with the field numbers Unity players use."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from kerasrl.protos import unity_protocol_pb2 as pb

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATED = ("unity_protocol_pb2.py", "unity_protocol_pb2.pyi", "unity_protocol_pb2_grpc.py")


def test_generated_modules_are_current(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (pip install grpcio-tools) regenerates the protos")
    # protoc runs in its own process: its compiler and the protobuf already loaded here do not mix.
    subprocess.run([sys.executable, str(ROOT / "tools" / "generate_protos.py"), str(tmp_path)], check=True)
    for name in GENERATED:
        fresh = (tmp_path / "kerasrl" / "protos" / name).read_text()
        checked_in = (ROOT / "kerasrl" / "protos" / name).read_text()
        assert fresh == checked_in, f"kerasrl/protos/{name} is stale: run python3 tools/generate_protos.py"


def _field_numbers(message: type) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}


def test_wire_facts() -> None:
    """Names and numbers a player built with the ML-Agents package puts on the wire."""
    assert pb.DESCRIPTOR.package == "communicator_objects"
    service = pb.DESCRIPTOR.services_by_name["UnityToExternalProto"]
    assert service.methods_by_name["Exchange"].full_name == "communicator_objects.UnityToExternalProto.Exchange"
    assert _field_numbers(pb.AgentInfoProto) == {
        "reward": 7, "done": 8, "max_step_reached": 9, "id": 10, "action_mask": 11, "observations": 13,
        "group_id": 14, "group_reward": 15}
    assert _field_numbers(pb.AgentActionProto) == {
        "vector_actions_deprecated": 1, "value": 4, "continuous_actions": 6, "discrete_actions": 7}
    assert _field_numbers(pb.UnityRLInputProto) == {"agent_actions": 1, "command": 4, "side_channel": 5}
    assert _field_numbers(pb.UnityRLOutputProto) == {"agentInfos": 2, "side_channel": 3}
    assert _field_numbers(pb.UnityRLInitializationOutputProto) == {
        "name": 1, "communication_version": 2, "log_path": 3, "brain_parameters": 5, "package_version": 7,
        "capabilities": 8}
    assert _field_numbers(pb.UnityRLInitializationInputProto) == {
        "seed": 1, "communication_version": 2, "package_version": 3, "capabilities": 4, "num_areas": 5}
    assert _field_numbers(pb.BrainParametersProto)["action_spec"] == 9
    assert _field_numbers(pb.ObservationProto)["float_data"] == 4
    assert pb.CommandProto.Value("RESET") == 1 and pb.CompressionTypeProto.Value("PNG") == 1
    # demonstration files (kerasrl.demo_format)
    assert _field_numbers(pb.DemonstrationMetaProto) == {
        "api_version": 1, "demonstration_name": 2, "number_steps": 3, "number_episodes": 4, "mean_reward": 5}
    assert _field_numbers(pb.AgentInfoActionPairProto) == {"agent_info": 1, "action_info": 2}


def test_round_trip_bytes() -> None:
    """A message survives serialization; a known encoding pins the wire layout of one agent."""
    info = pb.AgentInfoProto(reward=0.5, done=True, id=3)
    assert info.SerializeToString() == b"\x3d\x00\x00\x00\x3f\x40\x01\x50\x03"
    message = pb.UnityMessageProto()
    message.header.status = 200
    message.unity_output.rl_output.agentInfos["Ball?team=0"].value.append(info)
    again = pb.UnityMessageProto.FromString(message.SerializeToString())
    assert again.unity_output.rl_output.agentInfos["Ball?team=0"].value[0].id == 3
