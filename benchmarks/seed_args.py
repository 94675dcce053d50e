"""Command-line values shared by the seed-sweep benchmarks: ``--seeds`` and ``--set KEY=VALUE``."""
from __future__ import annotations

import sys
from typing import Any

import yaml


def parse_seeds(text: str) -> list[int]:
    """``401-405`` or ``1,5,9``."""
    if "-" in text:
        first, last = (int(v) for v in text.split("-"))
        return list(range(first, last + 1))
    return [int(v) for v in text.split(",")]


def parse_value(text: str) -> Any:
    """A YAML value (``true``, ``256``, ``minibatch``), with numbers such as ``1e-4`` (a string
    to YAML 1.1) read as floats."""
    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items as ``{KEY: value}``; exits with one line naming an item without ``=``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            sys.exit(f"--set needs KEY=VALUE, not {item!r}")
        out[key] = parse_value(value)
    return out


def apply_overrides(section: dict[str, Any], items: list[str]) -> None:
    """``KEY=VALUE`` into a trainer section, ``SIGNAL.KEY=VALUE`` into its reward signal
    ``SIGNAL``; exits with one line naming an unknown signal before changing anything."""
    overrides = parse_overrides(items)
    signals = section["reward_signals"]
    for key in overrides:
        signal, dot, _ = key.partition(".")
        if dot and signal not in signals:
            sys.exit(f"--set {key}: no reward signal {signal!r} (have {', '.join(signals)})")
    for key, value in overrides.items():
        signal, dot, name = key.partition(".")
        (signals[signal] if dot else section)[name if dot else key] = value
