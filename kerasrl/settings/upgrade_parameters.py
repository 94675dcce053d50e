"""ML-Agents 0.17–0.19's ``curriculum`` and ``parameter_randomization`` blocks written as today's
``environment_parameters`` (``kerasrl upgrade-config``), as ML-Agents' own upgrade script does.

A behavior's curriculum becomes, for each of its parameters, a ``curriculum`` of lessons whose
``completion_criteria`` name the behavior and carry the curriculum's measure, threshold,
``min_lesson_length`` and ``signal_smoothing`` (the last lesson has none). A sampler becomes
``sampler_type`` and ``sampler_parameters``; its ``resampling-interval`` has no place in today's
layout (a Unity scene draws each episode), so it is dropped and the caller says so. The
``--curriculum`` folders and ``--sampler`` files of ML-Agents 0.x are read into those blocks first.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from kerasrl.curriculum import Curriculum, MetaCurriculum
from kerasrl.exception import TrainerConfigError
from kerasrl.samplers import SamplerManager, split_interval
from kerasrl.settings.config import read_yaml

#: kerasrl's (and ML-Agents 0.x's) sampler-type names → today's sampler_type.
SAMPLER_TYPES = {"uniform": "uniform", "gaussian": "gaussian", "multirange_uniform": "multirangeuniform",
                 "constant": "constant"}


def environment_parameters(run_options: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``run_options`` with its ``curriculum`` and ``parameter_randomization`` blocks as one
    ``environment_parameters`` block (unchanged when it has neither)."""
    out = dict(run_options)
    curriculum, randomization = out.pop("curriculum", None), out.pop("parameter_randomization", None)
    if curriculum is None and randomization is None:
        return out
    if out.get("environment_parameters") is not None:
        raise TrainerConfigError(f"{source} has environment_parameters beside curriculum or parameter_randomization: "
                                 "give the parameters in environment_parameters only.")
    parameters = samplers(randomization, source) if randomization is not None else {}
    for name, lessons in (curricula(curriculum, source) if curriculum is not None else {}).items():
        if name in parameters:
            raise TrainerConfigError(f"{source}: the parameter {name} is in more than one curriculum or also in "
                                     "parameter_randomization; today's layout gives a parameter once.")
        parameters[name] = lessons
    out["environment_parameters"] = parameters
    return out


def curricula(block: Any, source: str) -> dict[str, Any]:
    """Each parameter of the ``curriculum`` block (behavior → 0.x curriculum) as today's lessons."""
    if not isinstance(block, Mapping):
        raise TrainerConfigError(f"The curriculum block of {source} must map behaviors to curricula, got {block!r}.")
    out: dict[str, Any] = {}
    for behavior, data in block.items():
        where = f"the curriculum block of {source} (behavior {behavior})"
        if not isinstance(data, Mapping):
            raise TrainerConfigError(f"{where} must be a mapping, got {data!r}.")
        c = Curriculum(where, data=data, behavior_name=str(behavior))  # checked as kerasrl-learn checks it
        for name, values in c.parameters.items():
            if name in out:
                raise TrainerConfigError(f"{source}: the parameter {name} is in the curricula of two behaviors; "
                                         "today's layout gives a parameter one curriculum.")
            out[name] = {"curriculum": [_lesson(c, i, value) for i, value in enumerate(values)]}
    return out


def _lesson(c: Curriculum, index: int, value: float) -> dict[str, Any]:
    lesson: dict[str, Any] = {"name": f"Lesson{index}", "value": value}
    if index < len(c.thresholds):
        lesson["completion_criteria"] = {"behavior": c.behavior_name, "measure": c.measure,
                                         "threshold": c.thresholds[index], "min_lesson_length": c.min_lesson_length,
                                         "signal_smoothing": c.smoothing}
    return lesson


def samplers(block: Any, source: str) -> dict[str, Any]:
    """Each sampler of the ``parameter_randomization`` block as ``sampler_type`` and
    ``sampler_parameters`` (a constant as its value)."""
    where = f"the parameter_randomization block of {source}"
    if not isinstance(block, Mapping):
        raise TrainerConfigError(f"{where} must be a mapping, got {block!r}.")
    entries, _ = split_interval(block, where)
    SamplerManager(entries)  # checked as kerasrl-learn checks it
    out: dict[str, Any] = {}
    for name, entry in entries.items():
        kind = entry["sampler-type"]
        if kind not in SAMPLER_TYPES:
            raise TrainerConfigError(f"{where}: the sampler-type {kind!r} of {name} has no counterpart in today's "
                                     f"layout (it takes {', '.join(SAMPLER_TYPES)}).")
        parameters = {k: v for k, v in entry.items() if k != "sampler-type"}
        out[str(name)] = parameters["value"] if kind == "constant" else \
            {"sampler_type": SAMPLER_TYPES[kind], "sampler_parameters": parameters}
    return out


def dropped_interval(run_options: Mapping[str, Any]) -> Any:
    """The ``resampling-interval`` the upgrade drops (None when there is none)."""
    block = run_options.get("parameter_randomization")
    return block.get("resampling-interval") if isinstance(block, Mapping) else None


def with_parameter_files(run_options: Mapping[str, Any], curriculum: Optional[str], sampler: Optional[str],
                         source: str) -> dict[str, Any]:
    """``run_options`` with a ``--curriculum`` folder (one JSON file per behavior) as its
    ``curriculum`` block and a ``--sampler`` file as its ``parameter_randomization`` block, as
    ML-Agents' upgrade script takes them; a config that has environment parameters already keeps
    them alone (one line says so)."""
    given = [k for k in ("environment_parameters", "curriculum", "parameter_randomization") if run_options.get(k)]
    if given and (curriculum or sampler):
        raise TrainerConfigError(f"{source} has {given[0]} already: give the environment's parameters there or as "
                                 "--curriculum and --sampler files, not both.")
    out = dict(run_options)
    if curriculum:
        out["curriculum"] = {name: {"measure": c.measure, "thresholds": c.thresholds,
                                    "min_lesson_length": c.min_lesson_length, "signal_smoothing": c.smoothing,
                                    "parameters": c.parameters}
                             for name, c in MetaCurriculum(curriculum).curricula.items()}
    if sampler:
        out["parameter_randomization"] = read_yaml(sampler)
    return out
