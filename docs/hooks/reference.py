"""MkDocs hook: the configuration and command-line references, generated at build time.

The configuration reference is read from the settings classes of ``kerasrl.settings`` (every
field's type, default, value check and one-line meaning, the ``doc`` of ``setting(...)``); the
command-line reference from the argparse parsers of ``kerasrl-learn`` and ``kerasrl``. Nothing
is listed by hand, so a key or flag added to the code appears in the site, and a settings field
without a meaning fails the build.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Iterable, Optional

CONFIG_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"


# -- configuration reference ---------------------------------------------------------------
def _settings_classes() -> list[type]:
    """Every checked settings dataclass defined in a module of ``kerasrl.settings``, in module order."""
    import kerasrl.settings as package
    from kerasrl.settings.checks import _Checked

    found: list[type] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (obj.__module__ == module.__name__ and dataclasses.is_dataclass(obj) and issubclass(obj, _Checked)
                    and obj not in found):
                found.append(obj)
    return found


def _base_type(hint: Any) -> tuple[Any, bool]:
    """``(type, optional)`` of a field's type hint (``Optional[int]`` is ``(int, True)``)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return hint, False


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if (value == 0 or 1e-3 <= abs(value) < 1e6) else f"{value:.1e}"
    return str(value)


def _allowed(check: Optional[Any], base: Any) -> str:
    """The values a field accepts, in words: what its check says of a value out of every range."""
    if base is bool:
        return "`true`, `false`"
    if check is None:
        return "any string" if base is str else "any"
    probes: Iterable[Any] = ("\x00",) if base is str else (-math.inf, math.inf)
    for probe in probes:
        try:
            problem = check(probe)
        except TypeError:
            continue
        if problem:
            text = problem.removeprefix("must be ")
            if text.startswith("one of ["):
                return ", ".join(f"`{c}`" for c in ast.literal_eval(text.removeprefix("one of ")))
            return text
    return "any"


def _is_group(hint: Any) -> bool:
    """A field that holds other settings (a settings class, or a mapping of them), not a value."""
    base, _ = _base_type(hint)
    return dataclasses.is_dataclass(base) or typing.get_origin(base) in (dict, typing.Mapping, Mapping)


def _field_rows(cls: type) -> list[str]:
    """One Markdown table row per value field: key, type, default, allowed values, meaning."""
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if _is_group(hints[f.name]) or "group" in f.metadata:
            continue
        doc = f.metadata.get("doc", "")
        if not doc:
            raise ValueError(f"{cls.__module__}.{cls.__name__}.{f.name} has no doc: give it one in setting(..., doc=...)")
        base, optional = _base_type(hints[f.name])
        kind = base.__name__ + (" or null" if optional else "")
        default = "required" if f.default is dataclasses.MISSING else f"`{_yaml(f.default)}`"
        meaning = doc.replace("|", "\\|")
        rows.append(f"| `{f.name}` | {kind} | {default} | {_allowed(f.metadata.get('check'), base)} | {meaning} |")
    return rows


def _table(cls: type) -> str:
    head = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    return "\n".join(head + _field_rows(cls))


def _summary(cls: type) -> str:
    doc = cls.__dict__.get("__doc__") or ""
    if not doc or doc.startswith(f"{cls.__name__}("):  # none, or the signature dataclass writes in its place
        raise ValueError(f"{cls.__module__}.{cls.__name__} has no docstring: say what its keys configure")
    return " ".join(inspect.cleandoc(doc).split())


def config_reference() -> str:
    """The configuration reference page (Markdown)."""
    from kerasrl.settings import REWARD_SIGNAL_SETTINGS, TrainerSettings

    hints = typing.get_type_hints(TrainerSettings)
    out = [
        "# Configuration reference",
        "",
        "Generated from the settings classes in `kerasrl/settings/` when the site is built: every key a "
        "trainer config section accepts, with its type, its default, the values it accepts and its meaning. "
        "The format (the `default` section, per-behavior sections, aliases) and how loading checks a config "
        "are in [Trainer configs](../guides/configuration.md). *required* keys have no default; `null` means "
        "the default is chosen as the meaning says.",
        "",
        "## Trainer",
        "",
        f"`{TrainerSettings.__name__}`: {_summary(TrainerSettings)} These keys sit directly in a section.",
        "",
        _table(TrainerSettings),
    ]
    covered = {TrainerSettings}
    nested: list[tuple[str, type, bool]] = []  # (key, class, optional)
    for f in dataclasses.fields(TrainerSettings):
        base, optional = _base_type(hints[f.name])
        if dataclasses.is_dataclass(base):
            nested.append((f.name, base, optional))
    for key, cls, optional in nested:
        covered.add(cls)
        if optional:
            alias = " (or `behavioral_cloning:`, its later name)" if key == "pretraining" else ""
            where = f"These keys go in a `{key}:` mapping of the section{alias} (absent: off)."
        else:
            where = f"These keys sit directly in a section (the `{key}` group of `{TrainerSettings.__name__}`)."
        out += ["", f"## `{key}`", "", f"`{cls.__name__}`: {_summary(cls)} {where}", "", _table(cls)]
    out += _trainer_type_sections(covered)
    default_signals = ", ".join(f"`{name}` ({', '.join(f'{k}: {_yaml(v)}' for k, v in dataclasses.asdict(s).items())})"
                                for name, s in TrainerSettings().reward_signals.items())
    out += ["", "## `reward_signals`", "",
            "A mapping of signal names to their keys; each signal has its own value head, discount and GAE, and the "
            f"advantage is their mean. Default: {default_signals}. See [Reward signals](../guides/reward-signals.md)."]
    for name, cls in REWARD_SIGNAL_SETTINGS.items():
        covered.add(cls)
        out += ["", f"### `{name}`", "", f"`{cls.__name__}`. {_summary(cls)}", "", _table(cls)]
    others = [cls for cls in _settings_classes() if cls not in covered]
    if others:
        out += ["", "## Other settings", "",
                "Settings classes of `kerasrl.settings` used by other trainers or parts of a run."]
        for cls in others:
            out += ["", f"### `{cls.__name__}`", "", f"`{cls.__module__}`. {_summary(cls)}", "", _table(cls)]
    return "\n".join(out) + "\n"


def _trainer_type_sections(covered: set[type]) -> list[str]:
    """One section per registered trainer type: its hyper-parameters' table (a type whose keys are
    another's says so instead of repeating the table)."""
    from kerasrl.settings import trainer_types

    out = ["", "## Hyper-parameters of each trainer type", "",
           "These keys sit directly in a section; which ones it takes depends on its `trainer` (a registered trainer "
           "type, `kerasrl.trainer_types()`: see [Adding a trainer](../guides/adding-a-trainer.md)). A key of another "
           "type's hyper-parameters is an error in a section's own keys."]
    shown: dict[tuple[str, ...], str] = {}
    for name, entry in trainer_types().items():
        cls = entry.settings_cls
        covered.add(cls)
        keys = tuple(f.name for f in dataclasses.fields(cls))
        out += ["", f"### `{name}`", "", f"`{cls.__name__}`: {_summary(cls)}"]
        if keys in shown:
            out += ["", f"Its keys, defaults and checks are those of [`{shown[keys]}`](#{shown[keys]})."]
        else:
            shown[keys] = name
            out += ["", _table(cls)]
    return out


# -- command-line reference ----------------------------------------------------------------
def _flag_name(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            names += f" `{metavar}`" if isinstance(metavar, str) else ""
        return names
    return f"`{action.metavar or action.dest}`"


def _flag_default(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "off" if action.default in (False, None) else ""
    if not action.option_strings:
        return "required" if action.nargs not in ("?", "*") else ""
    if action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _flag_meaning(action: argparse.Action) -> str:
    text = (action.help or "").replace("|", "\\|")
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        text += f" (one of {', '.join(f'`{c}`' for c in action.choices)})"
    return text


def _parser_section(parser: argparse.ArgumentParser, level: str) -> list[str]:
    usage = parser.format_usage().strip().removeprefix("usage: ")
    out = ["", parser.description or "", "", "```text", usage, "```"]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if not actions:
            continue
        title = {"positional arguments": "arguments", "options": "options"}.get(group.title or "", group.title)
        out += ["", f"{level} {title}", "", "| flag | default | meaning |", "|---|---|---|"]
        out += [f"| {_flag_name(a)} | {_flag_default(a)} | {_flag_meaning(a)} |" for a in actions]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                out += ["", f"{level} `{parser.prog} {name}`", "", helps.get(name) or ""]
                out += _parser_section(sub, level + "#")[3:]
    return out


def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parsers of the two commands, by command name."""
    from kerasrl.cli.parser import build_parser
    from kerasrl.cli.tools import build_parser as build_tools_parser

    return {"kerasrl-learn": build_parser(), "kerasrl": build_tools_parser()}


def cli_reference() -> str:
    """The command-line reference page (Markdown)."""
    out = ["# Command-line reference", "",
           "Generated from the commands' argument parsers (`kerasrl/cli/`) when the site is built. "
           "Steps count every agent's step (with `--num-envs 8`, one step of all copies is 8 steps). "
           "A bad value is one line on stderr with exit status 2 ([Troubleshooting](../troubleshooting.md))."]
    for name, parser in cli_parsers().items():
        out += ["", f"## `{name}`"] + _parser_section(parser, "###")
    out += ["", "`examples/train_ppo.py` takes the flags of `kerasrl-learn`, with the trainer config as `--config` "
            "(default: the shipped `cartpole_zoo`) and its own defaults: `--steps 150000 --seed 0` and `--run-id` "
            "from the env (`cartpole_ppo`, `lunarlander_ppo`)."]
    return "\n".join(out) + "\n"


# -- the hook ------------------------------------------------------------------------------
GENERATED = {CONFIG_PAGE: config_reference, CLI_PAGE: cli_reference}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site (they are never files in ``docs/``)."""
    from mkdocs.structure.files import File

    for path, make in GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files


_SPHINX_ROLE = re.compile(r":(?:func|class|meth|data|attr|mod|exc):(?=<code)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Drop the Sphinx roles (``:class:`X```) that kerasrl's docstrings use: the name stays as code."""
    return _SPHINX_ROLE.sub("", html)
