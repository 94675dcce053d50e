"""Regenerate the Python modules of ``unity_protocol.proto`` (needs ``pip install grpcio-tools``).

Run from anywhere: ``python3 tools/generate_protos.py [OUT_DIR]``. Without ``OUT_DIR`` the
checked-in ``unity_protocol_pb2.py`` (with its ``.pyi`` types) and ``unity_protocol_pb2_grpc.py`` in ``kerasrl/protos/``
are rewritten; tests/test_unity_protos.py regenerates into a temporary folder and compares.
"""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROTO = "kerasrl/protos/unity_protocol.proto"


def generate(out_dir: pathlib.Path) -> None:
    """Write the ``_pb2`` and ``_pb2_grpc`` modules into ``out_dir/kerasrl/protos``."""
    from grpc_tools import protoc

    (out_dir / "kerasrl" / "protos").mkdir(parents=True, exist_ok=True)
    code = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                        f"--pyi_out={out_dir}",
                        str(ROOT / PROTO)])
    if code != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {code})")


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
