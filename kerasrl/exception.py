"""Exceptions of the trainer stack (names kept from ML-Agents), and one-line error text."""
from __future__ import annotations

from typing import Optional


def one_line(text: object) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def describe(error: BaseException, limit: Optional[int] = None) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters when given."""
    message = one_line(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


class TrainerError(Exception):
    """Any error raised by the trainer stack."""


class UnityTrainerException(TrainerError):
    """A trainer was misconfigured or misused (ML-Agents' name, kept for familiarity)."""


class TrainerConfigError(UnityTrainerException, ValueError):
    """A trainer configuration is invalid; the message names the key."""


class UpdateThreadError(TrainerError):
    """A threaded trainer's update failed in its thread (the failure is the cause); raised in
    the acting thread, which then stops."""


class EnvironmentException(Exception):
    """Raised for a malformed spec, step result or action."""
