"""docs/unity.md: its config loads, its command lines parse, its runnable Python runs, and every
block that needs Unity says so."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from kerasrl.cli.parser import build_parser
from kerasrl.settings import load_trainer_config

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "unity.md").read_text()
FENCE = re.compile(r"(?:<!-- not run: (?P<reason>[^>]+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
BLOCKS = [(m["lang"], m["body"], m["reason"]) for m in FENCE.finditer(PAGE)]


def test_the_config_loads_and_a_team_behavior_finds_its_section(tmp_path):
    (body,) = [b for lang, b, _ in BLOCKS if lang == "yaml"]
    (tmp_path / "3dball.yaml").write_text(body)
    config = load_trainer_config(str(tmp_path / "3dball.yaml"))
    assert config.settings_for("3DBall?team=0").hyperparameters.batch_size == 64


def test_command_lines_parse_and_need_unity():
    lines = [line for lang, b, reason in BLOCKS if lang == "bash" for line in b.splitlines()]
    assert lines
    for lang, _, reason in BLOCKS:
        if lang == "bash":
            assert reason and "Unity" in reason
    for line in lines:
        args = build_parser().parse_args(shlex.split(line)[1:])
        assert args.env in ("builds/3DBall", "editor")


#: Blocks that another test runs after the training run they read (tests/test_doc_snippets.py's RUN_BY).
RUN_ELSEWHERE = ("Pendulum-v1.unity.onnx",)


def test_python_blocks_run_or_need_unity():
    runnable = [b for lang, b, reason in BLOCKS if lang == "python" and reason is None
                and not any(phrase in b for phrase in RUN_ELSEWHERE)]
    assert [reason for lang, _, reason in BLOCKS if lang == "python" and reason] == ["needs a Unity player build"]
    namespace: dict = {}
    for body in runnable:
        exec(compile(body, "docs/unity.md", "exec"), namespace)  # noqa: S102
    channel = namespace["channel"]
    assert len(channel.outgoing) == 1 and channel.outgoing[0].endswith(b"hello")
