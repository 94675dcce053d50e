"""Curricula: lessons of environment parameters that advance with training progress (as in ML-Agents 0.9).

A curriculum is one JSON file per behavior in a folder (the behavior name is the file name up
to its first "."; ML-Agents 0.14–0.16's one YAML file of behavior → curriculum is read too), for
example ``CartPole-v1.json``::

    {"measure": "reward", "thresholds": [100, 300], "min_lesson_length": 10,
     "signal_smoothing": true, "parameters": {"length": [0.3, 0.5, 0.7]}}

``measure`` is ``progress`` (the trainer's step / max_steps), ``reward`` (the mean return of
the behavior's last ``min_lesson_length`` episodes) or ``Elo`` (the learning policy's rating, of a
behavior trained by self-play; its curriculum is named by the behavior without the team suffix,
``Name`` for ``Name?team=0``); the lesson advances when the (optionally
smoothed) measure exceeds ``thresholds[lesson]``. Each parameter has one value per lesson
(``len(thresholds) + 1``). ML-Agents 0.9's quirk of ignoring a measure of exactly 0 is fixed: 0 is a
measure like any other (only NaN, i.e. no data, is skipped).
"""
from __future__ import annotations

import json
import logging
import math
import os
from typing import Any, Callable, Mapping, Optional

import yaml

from kerasrl.compat import mlagents_names
from kerasrl.exception import TrainerError
from kerasrl.step_history import entry_at, read_entries, write_entry

logger = logging.getLogger("kerasrl")

REQUIRED_KEYS = ("parameters", "measure", "thresholds", "min_lesson_length", "signal_smoothing")
MEASURES = ("progress", "reward", "Elo")
#: The endings of ML-Agents 0.14–0.16's one-file ``--curriculum`` (a folder of JSON files before).
YAML_SUFFIXES = (".yaml", ".yml")


class CurriculumError(TrainerError):
    """A curriculum file is missing, unreadable or invalid; the message names the file and key."""


class MetaCurriculumError(TrainerError):
    """A curriculum folder is invalid (not a folder, empty, or a file for no behavior)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class Curriculum:
    """The lessons of one behavior, read from ``location``; ``default_reset_parameters`` (when
    given) are the environment's parameters, which every lesson parameter must be one of."""

    def __init__(self, location: str, default_reset_parameters: Optional[Mapping[str, float]] = None,
                 data: Optional[Mapping[str, Any]] = None, behavior_name: Optional[str] = None) -> None:
        """``data`` given: the curriculum itself (``location`` then only names it in messages)."""
        self.location = location
        self.behavior_name = behavior_name or os.path.basename(location).split(".")[0]
        data = self._read(location) if data is None else dict(data)
        for key in REQUIRED_KEYS:
            if key not in data:
                raise CurriculumError(f"{location} does not contain a {key} field.")
        unknown = sorted(str(k) for k in data if k not in REQUIRED_KEYS)
        if unknown:
            raise CurriculumError(f"{location}: unknown keys {unknown} (a curriculum has {list(REQUIRED_KEYS)}).")
        self.measure = self._check_measure(data["measure"])
        self.thresholds = self._check_thresholds(data["thresholds"])
        self.min_lesson_length = self._check_min_lesson_length(data["min_lesson_length"])
        if not isinstance(data["signal_smoothing"], bool):
            raise CurriculumError(f"{location}: signal_smoothing must be true or false, got {data['signal_smoothing']!r}.")
        self.smoothing = data["signal_smoothing"]
        self.parameters = self._check_parameters(data["parameters"], default_reset_parameters)
        self.max_lesson_num = len(self.thresholds)
        self.smoothing_value = 0.0
        self._lesson_num = 0

    @staticmethod
    def _read(location: str) -> dict[str, Any]:
        data = _load_file(location, json.load, json.JSONDecodeError)
        if not isinstance(data, dict):
            raise CurriculumError(f"{location} must hold a JSON object, got {type(data).__name__}.")
        return data

    def _check_measure(self, measure: Any) -> str:
        if measure not in MEASURES:
            raise CurriculumError(f"{self.location}: measure must be one of {list(MEASURES)}, got {measure!r}.")
        return str(measure)

    def _check_thresholds(self, thresholds: Any) -> list[float]:
        if not isinstance(thresholds, list) or not all(_is_number(t) for t in thresholds):
            raise CurriculumError(f"{self.location}: thresholds must be a list of finite numbers, got {thresholds!r}.")
        if self.measure == "progress" and any(b < a for a, b in zip(thresholds, thresholds[1:])):
            raise CurriculumError(f"{self.location}: thresholds must not decrease with measure progress (a lesson "
                                  f"would be skipped), got {thresholds!r}.")
        return [float(t) for t in thresholds]

    def _check_min_lesson_length(self, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise CurriculumError(f"{self.location}: min_lesson_length must be an integer >= 0, got {value!r}.")
        return value

    def _check_parameters(self, parameters: Any, defaults: Optional[Mapping[str, float]]) -> dict[str, list[float]]:
        if not isinstance(parameters, dict):
            raise CurriculumError(f"{self.location}: parameters must be an object of name -> list, got {parameters!r}.")
        lessons = len(self.thresholds) + 1
        for name, values in parameters.items():
            if defaults is not None and name not in defaults:
                raise CurriculumError(f"The parameter {name} in {self.location} is not present in the "
                                      f"environment's reset parameters ({sorted(defaults)}).")
            if not isinstance(values, list) or len(values) != lessons:
                raise CurriculumError(f"The parameter {name} in {self.location} must have {lessons} values "
                                      f"(one per lesson: len(thresholds) + 1), got {values!r}.")
            if not all(_is_number(v) for v in values):
                raise CurriculumError(f"The parameter {name} in {self.location} has a non-numeric or "
                                      f"non-finite value: {values!r}.")
        return {name: [float(v) for v in values] for name, values in parameters.items()}

    @property
    def lesson_num(self) -> int:
        return self._lesson_num

    @lesson_num.setter
    def lesson_num(self, lesson_num: int) -> None:
        self._lesson_num = max(0, min(int(lesson_num), self.max_lesson_num))

    def increment_lesson(self, measure_val: Optional[float]) -> bool:
        """Advance one lesson if the (smoothed) measure exceeds the current threshold."""
        if measure_val is None or math.isnan(measure_val) or not self.thresholds:
            return False
        if self.smoothing:
            measure_val = 0.25 * self.smoothing_value + 0.75 * measure_val
            self.smoothing_value = measure_val
        if self.lesson_num < self.max_lesson_num and measure_val > self.thresholds[self.lesson_num]:
            self.lesson_num += 1
            config = ", ".join(f"{k} -> {v}" for k, v in self.get_config().items())
            logger.info("%s lesson changed. Now in lesson %d: %s", self.behavior_name, self.lesson_num, config)
            return True
        return False

    def get_config(self, lesson: Optional[int] = None) -> dict[str, float]:
        """Parameter → value at ``lesson`` (clamped; default: the current lesson)."""
        lesson = self.lesson_num if lesson is None else max(0, min(int(lesson), self.max_lesson_num))
        return {name: values[lesson] for name, values in self.parameters.items()}


def _folder_curricula(folder: str, defaults: Optional[Mapping[str, float]]) -> list[Curriculum]:
    """The curricula of a folder's ``*.json`` files (ML-Agents 0.9–0.13's ``--curriculum``)."""
    if not os.path.isdir(folder):
        raise MetaCurriculumError(f"{folder} is not a folder: --curriculum names a folder with one JSON file per "
                                  "behavior, or one .yaml file of behavior -> curriculum (see the docs, Curricula and "
                                  "samplers).")
    files = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
    if not files:
        raise MetaCurriculumError(f"The curriculum folder {folder} holds no .json curriculum file.")
    return [Curriculum(os.path.join(folder, name), defaults) for name in files]


def _load_file(location: str, load: Callable[[Any], Any], decode_error: type[Exception]) -> Any:
    """``load`` of the file ``location`` (JSON or YAML), its failures as one-line curriculum errors."""
    try:
        with open(location, encoding="utf-8") as f:
            return load(f)
    except OSError as e:
        raise CurriculumError(f"The file {location} could not be opened: {e.strerror or e}.") from e
    except (UnicodeDecodeError, decode_error) as e:
        raise CurriculumError(f"There was an error decoding {location}: {' '.join(str(e).split())}") from e


def _yaml_curricula(path: str, defaults: Optional[Mapping[str, float]]) -> list[Curriculum]:
    """The curricula of one YAML file of behavior → curriculum (ML-Agents 0.14–0.16's ``--curriculum``)."""
    data = _load_file(path, yaml.safe_load, yaml.YAMLError)
    if not isinstance(data, dict) or not data:
        raise MetaCurriculumError(f"The curriculum file {path} must hold a mapping of behavior -> curriculum.")
    out = []
    for behavior, block in data.items():
        where = f"{path} (behavior {behavior})"
        if not isinstance(block, dict):
            raise CurriculumError(f"{where} must be a mapping of {list(REQUIRED_KEYS)}, got {block!r}.")
        out.append(Curriculum(where, defaults, data=block, behavior_name=str(behavior)))
    return out


@mlagents_names()
class MetaCurriculum:
    """One :class:`Curriculum` per ``*.json`` file of ``folder``, keyed by behavior name; or, when
    ``folder`` is a ``.yaml``/``.yml`` file, one per behavior of that file (ML-Agents 0.14–0.16's
    ``--curriculum`` file: behavior → the same keys as a JSON file's)."""

    def __init__(self, folder: str, default_reset_parameters: Optional[Mapping[str, float]] = None) -> None:
        if os.path.isfile(folder) and folder.endswith(YAML_SUFFIXES):
            curricula = _yaml_curricula(folder, default_reset_parameters)
        else:
            curricula = _folder_curricula(folder, default_reset_parameters)
        self.curricula: dict[str, Curriculum] = {}
        used: dict[str, str] = {}
        for curriculum in curricula:
            for param in curriculum.parameters:
                if param in used:
                    logger.warning("Two curricula (%s and %s) set the parameter %s; %s wins.",
                                   used[param], curriculum.behavior_name, param, curriculum.behavior_name)
                used[param] = curriculum.behavior_name
            self.curricula[curriculum.behavior_name] = curriculum

    @classmethod
    def of(cls, curricula: Mapping[str, Curriculum]) -> "MetaCurriculum":
        """A meta-curriculum of curricula made in Python (keyed by behavior name)."""
        meta = cls.__new__(cls)
        meta.curricula = dict(curricula)
        return meta

    def check_behaviors(self, behaviors: Any) -> None:
        """Every curriculum must be for one of ``behaviors`` (the environment's behavior names), or for
        a behavior's name without its team suffix (``Name`` for ``Name?team=1``; self-play's trainer)."""
        names = set(behaviors) | {str(b).split("?team=", 1)[0] for b in behaviors}
        for name, curriculum in self.curricula.items():
            if name not in names:
                raise MetaCurriculumError(f"The curriculum {curriculum.location} is for behavior {name!r}, which the "
                                          f"environment does not have (its behaviors: {sorted(behaviors)}).")

    @property
    def lesson_nums(self) -> dict[str, int]:
        return {name: c.lesson_num for name, c in self.curricula.items()}

    @lesson_nums.setter
    def lesson_nums(self, lesson_nums: Mapping[str, int]) -> None:
        for name, lesson in lesson_nums.items():
            if name in self.curricula:
                self.curricula[name].lesson_num = lesson

    def increment_lessons(self, measure_vals: Mapping[str, float],
                          reward_buff_sizes: Optional[Mapping[str, int]] = None) -> dict[str, bool]:
        """Try each curriculum with its measure; with ``reward_buff_sizes``, only those whose
        behavior finished at least ``min_lesson_length`` episodes. Returns {behavior: advanced}."""
        changed: dict[str, bool] = {}
        for name, value in measure_vals.items():
            curriculum = self.curricula.get(name)
            if curriculum is None:
                continue
            if reward_buff_sizes is not None and reward_buff_sizes.get(name, 0) < curriculum.min_lesson_length:
                continue
            changed[name] = curriculum.increment_lesson(value)
        return changed

    def check_lesson(self, lesson_num: int) -> None:
        """``lesson_num`` must be a lesson of every curriculum (0 to its number of lessons - 1)."""
        for curriculum in self.curricula.values():
            lessons = curriculum.max_lesson_num + 1
            if not 0 <= lesson_num < lessons:
                raise MetaCurriculumError(f"Lesson {lesson_num} does not exist: the curriculum {curriculum.location} "
                                          f"has {lessons} lessons (0 to {lessons - 1}).")

    def set_all_curriculums_to_lesson_num(self, lesson_num: int) -> None:
        """Start every curriculum at ``lesson_num`` (one that some curriculum lacks is an error)."""
        self.check_lesson(lesson_num)
        for curriculum in self.curricula.values():
            curriculum.lesson_num = lesson_num

    def get_config(self) -> dict[str, float]:
        """Every curriculum's current parameters, merged."""
        config: dict[str, float] = {}
        for curriculum in self.curricula.values():
            config.update(curriculum.get_config())
        return config

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: each behavior's lesson and smoothed measure."""
        return {name: {"lesson": c.lesson_num, "smoothing_value": c.smoothing_value}
                for name, c in self.curricula.items()}

    def load_state(self, state: Mapping[str, Any]) -> None:
        for name, entry in state.items():
            curriculum = self.curricula.get(name)
            if curriculum is not None:
                lesson = int(entry["lesson"])
                if not 0 <= lesson <= curriculum.max_lesson_num:
                    raise CurriculumError(f"The saved lesson {lesson} of {name} is not a lesson of {curriculum.location} "
                                          f"(0 to {curriculum.max_lesson_num}): pass --lesson N to choose one.")
                curriculum.lesson_num = lesson
                curriculum.smoothing_value = float(entry.get("smoothing_value", 0.0))


LESSONS_FILE = "lessons.json"


def save_lessons(meta_curriculum: MetaCurriculum, model_path: str, steps: Mapping[str, int]) -> str:
    """Write the lessons (with the trainers' steps they belong to) to ``{model_path}/lessons.json``
    atomically (a crash leaves the previous file whole), with those of the latest saves."""
    path = os.path.join(model_path, LESSONS_FILE)
    write_entry(path, steps, "lessons", meta_curriculum.state())
    return path


def load_lessons(meta_curriculum: MetaCurriculum, model_path: str, steps: Optional[Mapping[str, int]] = None) -> bool:
    """Restore the lessons saved in ``model_path``; False when the run saved none. With the
    restored trainers' ``steps``: the lessons of the newest save at or before them (the save the
    checkpoint belongs to, or the one before when a crash came between the two writes)."""
    path = os.path.join(model_path, LESSONS_FILE)
    try:
        entries = read_entries(path, "lessons")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise CurriculumError(f"The saved lessons {path} cannot be read: {e}.") from e
    if not entries:
        return False
    entry = entry_at(entries, steps)
    if entry is None:
        raise CurriculumError(f"The saved lessons {path} are all of steps after the checkpoint's {dict(steps or {})}: "
                              "pass --lesson N to choose the lesson.")
    try:
        meta_curriculum.load_state(entry["lessons"])
    except (ValueError, KeyError, TypeError) as e:
        raise CurriculumError(f"The saved lessons {path} cannot be read: {e}.") from e
    return True
