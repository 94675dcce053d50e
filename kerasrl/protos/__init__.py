"""The wire format of Unity players built with the ML-Agents package (Communication API 1.5.x),
and the messages of its demonstration files (``.demo``; ``kerasrl.demo_format``).

``unity_protocol.proto`` is the source; ``unity_protocol_pb2.py`` (with its ``.pyi`` types) and
``unity_protocol_pb2_grpc.py`` are generated from it by ``tools/generate_protos.py`` and checked
in (tests/test_unity_protos.py checks that they are current).
"""
