"""``environment_parameters`` of today's ML-Agents layout, read and checked: per parameter a
constant, a sampler (``sampler_type`` and ``sampler_parameters``), or a ``curriculum`` of lessons,
each with a value (a constant or a sampler) and, but for the last, the ``completion_criteria``
that end it. Every error names the parameter and the lesson.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from kerasrl.exception import TrainerConfigError

#: Sampler type → its parameters and their defaults (ML-Agents' keys).
SAMPLER_PARAMETERS: dict[str, dict[str, Any]] = {
    "uniform": {"min_value": 0.0, "max_value": 1.0},
    "gaussian": {"mean": 1.0, "st_dev": 1.0},
    "multirangeuniform": {"intervals": [[0.0, 1.0]]},
    "constant": {"value": 0.0},
}
MEASURES = ("progress", "reward", "Elo")
CRITERIA_DEFAULTS: dict[str, Any] = {"measure": "reward", "min_lesson_length": 0, "signal_smoothing": True,
                                     "threshold": 0.0, "require_reset": False}


@dataclass(frozen=True)
class Sampler:
    """A value drawn from a distribution (``constant``: always ``value``); ``seed`` None: the run's."""

    kind: str
    parameters: Mapping[str, Any]
    seed: Optional[int] = None

    @property
    def constant(self) -> Optional[float]:
        return float(self.parameters["value"]) if self.kind == "constant" else None


def sampler_values(sampler: Sampler) -> tuple[float, ...]:
    """The floats the environment-parameters side channel sends for ``sampler`` (a multirangeuniform
    sampler's intervals flattened)."""
    if sampler.kind == "multirangeuniform":
        return tuple(float(v) for pair in sampler.parameters["intervals"] for v in pair)
    return tuple(float(sampler.parameters[k]) for k in SAMPLER_PARAMETERS[sampler.kind])


class SampledValue(float):
    """An environment parameter that is a sampler: a float (the sampler's middle, for logs) that
    carries ``sampler = (kind, values, seed)``. A Unity scene given it draws the parameter each
    episode (:meth:`kerasrl.envs.unity.UnityEnvironment.reset`); a Gymnasium env draws it for each
    episode of each copy (:mod:`kerasrl.envs.parameters`), from streams seeded also by ``offset``
    (the step a resumed run starts at, so that it draws on rather than repeating its first draws)."""

    sampler: tuple[str, tuple[float, ...], int]
    offset: int

    def __new__(cls, sampler: Sampler, seed: int, offset: int = 0) -> "SampledValue":
        values = sampler_values(sampler)
        middle = values[0] if sampler.kind == "gaussian" else sum(values) / len(values)
        value = super().__new__(cls, middle)
        value.sampler = (sampler.kind, values, seed if sampler.seed is None else sampler.seed)
        value.offset = int(offset)
        return value

    def __reduce__(self) -> Any:  # through a worker process's pipe with its sampler
        return _sampled_value, (float(self), self.sampler, self.offset)


def _sampled_value(value: float, sampler: tuple[str, tuple[float, ...], int], offset: int = 0) -> SampledValue:
    out = float.__new__(SampledValue, value)
    out.sampler = sampler
    out.offset = offset
    return out


@dataclass(frozen=True)
class CompletionCriteria:
    """When a lesson ends: ``behavior``'s ``measure`` (smoothed) above ``threshold``, after at least
    ``min_lesson_length`` episodes."""

    behavior: str
    measure: str = "reward"
    min_lesson_length: int = 0
    signal_smoothing: bool = True
    threshold: float = 0.0
    require_reset: bool = False


@dataclass(frozen=True)
class Lesson:
    name: str
    value: Sampler
    completion_criteria: Optional[CompletionCriteria] = None


@dataclass(frozen=True)
class EnvironmentParameter:
    """One parameter: a single lesson without criteria, or a curriculum of lessons."""

    name: str
    lessons: list[Lesson] = field(default_factory=list)


def read_environment_parameters(block: Any, source: str) -> dict[str, EnvironmentParameter]:
    """``environment_parameters`` as typed parameters."""
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise TrainerConfigError(f"environment_parameters in {source} must map parameter names to values.")
    return {str(name): _parameter(str(name), value, f"environment parameter {name} of {source}")
            for name, value in block.items()}


def _parameter(name: str, value: Any, where: str) -> EnvironmentParameter:
    if isinstance(value, Mapping) and "curriculum" in value:
        if set(value) != {"curriculum"}:
            raise TrainerConfigError(f"{where}: a curriculum is the only key beside it, got {sorted(value)}.")
        lessons = value["curriculum"]
        if not isinstance(lessons, list) or not lessons:
            raise TrainerConfigError(f"{where}: curriculum must be a list of lessons.")
        read = [_lesson(entry, i, f"{where}, lesson {i}") for i, entry in enumerate(lessons)]
        missing = [lesson.name for lesson in read[:-1] if lesson.completion_criteria is None]
        if missing:
            raise TrainerConfigError(f"{where}: lesson {missing[0]} needs completion_criteria (only the last may "
                                     "leave them out).")
        return EnvironmentParameter(name, read)
    return EnvironmentParameter(name, [Lesson(name, _sampler(value, where))])


def _lesson(entry: Any, index: int, where: str) -> Lesson:
    if isinstance(entry, Mapping) and len(entry) == 1 and isinstance(next(iter(entry.values())), Mapping) \
            and "value" in next(iter(entry.values())):  # the older form: - LessonName: {value: ...}
        name, body = next(iter(entry.items()))
        entry = {"name": name, **body}
    if not isinstance(entry, Mapping) or "value" not in entry:
        raise TrainerConfigError(f"{where}: a lesson is a mapping with a value, got {entry!r}.")
    unknown = sorted(set(entry) - {"name", "value", "completion_criteria"})
    if unknown:
        raise TrainerConfigError(f"{where}: unknown key {unknown[0]} (a lesson has name, value, completion_criteria).")
    criteria = entry.get("completion_criteria")
    return Lesson(str(entry.get("name", f"lesson{index}")), _sampler(entry["value"], where),
                  _criteria(criteria, where) if criteria is not None else None)


def _sampler(value: Any, where: str) -> Sampler:
    if _is_number(value):
        return Sampler("constant", {"value": float(value)})
    if not isinstance(value, Mapping) or "sampler_type" not in value:
        raise TrainerConfigError(f"{where}: a value is a number or a sampler (sampler_type, sampler_parameters), "
                                 f"got {value!r}.")
    kind = value["sampler_type"]
    if kind not in SAMPLER_PARAMETERS:
        raise TrainerConfigError(f"{where}: sampler_type must be one of {list(SAMPLER_PARAMETERS)}, got {kind!r}.")
    given = dict(value.get("sampler_parameters") or {})
    seed = given.pop("seed", None)
    unknown = sorted(set(given) - set(SAMPLER_PARAMETERS[kind]))
    if unknown:
        raise TrainerConfigError(f"{where}: unknown sampler parameter {unknown[0]} of a {kind} sampler "
                                 f"(it takes {', '.join(SAMPLER_PARAMETERS[kind])}).")
    parameters = {**SAMPLER_PARAMETERS[kind], **given}
    _check_sampler(kind, parameters, where)
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TrainerConfigError(f"{where}: a sampler's seed must be an integer, got {seed!r}.")
    return Sampler(str(kind), parameters, None if seed is None or seed < 0 else seed)


def _check_sampler(kind: str, parameters: Mapping[str, Any], where: str) -> None:
    if kind == "multirangeuniform":
        intervals = parameters["intervals"]
        if not isinstance(intervals, list) or not intervals or not all(
                isinstance(i, list) and len(i) == 2 and all(map(_is_number, i)) and i[0] <= i[1] for i in intervals):
            raise TrainerConfigError(f"{where}: intervals must be a list of [min, max] pairs, got {intervals!r}.")
        return
    bad = [k for k, v in parameters.items() if not _is_number(v)]
    if bad:
        raise TrainerConfigError(f"{where}: {bad[0]} must be a finite number, got {parameters[bad[0]]!r}.")
    if kind == "uniform" and parameters["min_value"] > parameters["max_value"]:
        raise TrainerConfigError(f"{where}: min_value {parameters['min_value']} is above max_value "
                                 f"{parameters['max_value']}.")


def _criteria(value: Any, where: str) -> CompletionCriteria:
    if not isinstance(value, Mapping) or "behavior" not in value:
        raise TrainerConfigError(f"{where}: completion_criteria must be a mapping naming a behavior, got {value!r}.")
    unknown = sorted(set(value) - set(CRITERIA_DEFAULTS) - {"behavior"})
    if unknown:
        raise TrainerConfigError(f"{where}: unknown completion_criteria key {unknown[0]} "
                                 f"(known: behavior, {', '.join(CRITERIA_DEFAULTS)}).")
    criteria = CompletionCriteria(**{**CRITERIA_DEFAULTS, **value})
    if criteria.measure not in MEASURES:
        raise TrainerConfigError(f"{where}: measure must be one of {list(MEASURES)}, got {criteria.measure!r}.")
    if not _is_number(criteria.threshold) or not isinstance(criteria.min_lesson_length, int) \
            or criteria.min_lesson_length < 0 or not isinstance(criteria.signal_smoothing, bool) \
            or not isinstance(criteria.require_reset, bool):
        raise TrainerConfigError(f"{where}: completion_criteria has a value of the wrong kind: {dict(value)!r}.")
    if criteria.measure == "progress" and not 0.0 <= criteria.threshold <= 1.0:
        raise TrainerConfigError(f"{where}: a progress threshold is a share of max_steps in [0, 1], got "
                                 f"{criteria.threshold}.")
    return criteria


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
