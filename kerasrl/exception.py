"""Exceptions of the trainer stack (names kept from ML-Agents)."""


class TrainerError(Exception):
    """Any error raised by the trainer stack."""


class UnityTrainerException(TrainerError):
    """A trainer was misconfigured or misused (ML-Agents' name, kept for familiarity)."""


class TrainerConfigError(UnityTrainerException, ValueError):
    """A trainer configuration is invalid; the message names the key."""


class EnvironmentException(Exception):
    """Raised for a malformed spec, step result or action."""
