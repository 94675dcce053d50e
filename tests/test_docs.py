"""The documentation site builds strictly, and its generated references hold every settings key and
every command-line flag, with the real defaults (docs/hooks/reference.py makes them from the code)."""
import dataclasses
import html
import importlib.util
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from kerasrl.settings import REWARD_SIGNAL_SETTINGS, TrainerSettings, key_groups
from kerasrl.settings.checks import _Checked, setting

ROOT = Path(__file__).resolve().parents[1]
docs_tree = pytest.mark.skipif(not (ROOT / "mkdocs.yml").is_file(), reason="no docs/ beside the tests (installed kerasrl)")


def _reference_module():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as CI builds it (``mkdocs build --strict``) into a scratch folder."""
    pytest.importorskip("mkdocs", reason="the docs extra (MkDocs) is not installed")
    pytest.importorskip("material", reason="the docs extra (mkdocs-material) is not installed")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra (mkdocstrings[python]) is not installed")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _settings_classes() -> list[type]:
    return _reference_module()._settings_classes()


def _value_fields(cls: type) -> list[dataclasses.Field]:
    hints = typing.get_type_hints(cls)
    return [f for f in dataclasses.fields(cls)
            if not _reference_module()._is_group(hints[f.name]) and "group" not in f.metadata]


@docs_tree
def test_the_settings_classes_are_found_generically():
    classes = _settings_classes()
    assert TrainerSettings in classes and all(cls in classes for cls in REWARD_SIGNAL_SETTINGS.values())
    assert all(issubclass(cls, _Checked) for cls in classes)


@docs_tree
def test_configuration_reference_has_every_key_with_its_default(site):
    page = (site / "reference" / "configuration" / "index.html").read_text()
    rows = {html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r"<tr>(.*?)</tr>", page, re.S)}
    cells = [[c.strip() for c in re.split(r"\n+", row.strip())] for row in rows]
    keys = {c[0] for c in cells}
    for key in key_groups():
        assert key in keys or f"## {key}" in _text(site / "reference" / "configuration" / "index.html") \
            or key in ("reward_signals", "pretraining", "self_play", "behavioral_cloning"), \
            f"config key {key} missing from the reference"
    assert "reward_signals" in page and "pretraining" in page
    for cls in _settings_classes():
        for f in _value_fields(cls):
            assert f.name in keys, f"{cls.__name__}.{f.name} missing from the configuration reference"
    for name in REWARD_SIGNAL_SETTINGS:
        assert f'id="{name}"' in page, f"reward signal {name} has no section"
    flat = TrainerSettings().to_dict()
    by_key: dict[str, list[list[str]]] = {}
    for c in cells:
        if len(c) == 5:
            by_key.setdefault(c[0], []).append(c)
    for key, default in flat.items():  # a key of a section (a reward signal's or pretraining's may share its name)
        if key_groups().get(key) is not None and not isinstance(default, dict):
            shown = [row[2] for row in by_key[key]]
            assert _reference_module()._yaml(default) in shown, f"{key}: the page says {shown}, settings say {default!r}"
    assert [row[3] for row in by_key["lambd"]] == ["in [0, 1]"] * 2  # PPO's and MA-POCA's
    assert by_key["trainer"][0][3] == "ppo, sac, offline_bc, online_bc, poca"
    assert by_key["gamma"][0][1:4] == ["float", "required", "in [0, 1]"]


@docs_tree
def test_cli_reference_has_every_flag(site):
    text = _text(site / "reference" / "cli" / "index.html")
    for command, parser in _reference_module().cli_parsers().items():
        assert f"{command}" in text
        parsers = [parser] + [sub for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
                              for sub in a.choices.values()]
        for p in parsers:
            for action in p._actions:
                for flag in action.option_strings or [action.metavar or action.dest]:
                    if flag not in ("-h", "--help"):
                        assert flag in text, f"{command}: {flag} missing from the command-line reference"


@docs_tree
def test_api_reference_renders_the_public_api(site):
    api = "".join((site / "reference" / "api" / page / "index.html").read_text()
                  for page in ("training", "environments", "utilities"))
    for name in ("kerasrl.api.PPO", "kerasrl.api.PPO.fit", "kerasrl.api.load", "kerasrl.callbacks.Callback",
                 "kerasrl.envs.gym_adapter.GymnasiumEnv", "kerasrl.envs.subprocess_env_manager.SubprocessEnvManager",
                 "kerasrl.buffer.AgentBuffer", "kerasrl.timers.hierarchical_timer", "kerasrl.export.export_run"):
        assert f'id="{name}"' in api, f"{name} is not in the API reference"
    assert ":class:" not in api and ":func:" not in api  # Sphinx roles of the docstrings are dropped


@docs_tree
def test_a_settings_field_without_a_meaning_fails_the_build():
    reference = _reference_module()

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Undocumented(_Checked):
        """Settings with one undocumented key."""

        size: int = setting(3)

    with pytest.raises(ValueError, match="Undocumented.size has no doc"):
        reference._table(Undocumented)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class NoDocstring(_Checked):
        size: int = setting(3, doc="a size")

    with pytest.raises(ValueError, match="NoDocstring has no docstring"):
        reference._summary(NoDocstring)
