"""What ``--curriculum`` and ``--sampler`` name, or a config's ``environment_parameters`` (today's
ML-Agents layout), read and checked before TensorFlow loads and before the run folder is touched.

``environment_parameters`` become kerasrl's lessons and fixed parameters: a constant is set at
every reset; a behavior's curricula become one curriculum of that behavior, whose lessons advance
every parameter together (so its parameters' lessons must end on the same criteria). A sampler,
which ML-Agents draws anew each episode (a lesson's from the start of its lesson on), is sent as
one (a :class:`SampledValue`): a Unity scene draws it; a Gymnasium env draws it for each episode
of each copy (:mod:`kerasrl.envs.parameters`), from the run's seed (or the sampler's own) and,
on ``--resume``, the step the run resumes at. (A ``--sampler`` file draws every
``resampling-interval`` steps.)"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from kerasrl.curriculum import Curriculum, MetaCurriculum, load_lessons
from kerasrl.envs.registry import is_unity_env
from kerasrl.exception import TrainerError
from kerasrl.samplers import SamplerException, SamplerManager, load_sampler_file, resume_draws, split_interval
from kerasrl.settings.environment_parameters import (
    EnvironmentParameter,
    SampledValue,
    Sampler,
    read_environment_parameters,
    sampler_values,
)

#: The config blocks that set the environment's parameters: today's, and ML-Agents 0.17–0.19's two.
PARAMETER_BLOCKS = ("environment_parameters", "curriculum", "parameter_randomization")


@dataclass
class EnvParameters:
    """What ``--curriculum`` and ``--sampler`` give: lessons, sampler entries and interval."""

    meta_curriculum: Any = None
    sampler_config: Optional[dict[str, Any]] = None
    resampling_interval: Optional[int] = None
    #: Parameters drawn anew each episode (a config's non-constant samplers).
    per_episode: Optional[dict[str, Sampler]] = None
    #: Whether the environment is a Unity scene, which is given ``per_episode`` when it starts.
    unity: bool = False

    def episode_samplers(self, seed: int) -> tuple[tuple[str, str, tuple[float, ...], int], ...]:
        """``(key, kind, values, seed)`` for the scene; a sampler without a seed gets the run's + its index."""
        return tuple((name, sampler.kind, sampler_values(sampler), seed + i if sampler.seed is None else sampler.seed)
                     for i, (name, sampler) in enumerate((self.per_episode or {}).items()))

    @classmethod
    def from_args(cls, args: argparse.Namespace, blocks: Optional[Mapping[str, Any]] = None,
                  source: str = "the trainer config") -> "EnvParameters":
        """Read and check the files, or the config's ``environment_parameters`` (or the
        ``curriculum`` and ``parameter_randomization`` blocks of ML-Agents 0.17–0.19) in
        ``blocks``, before the run folder is touched."""
        given = {k: v for k, v in (blocks or {}).items() if k in PARAMETER_BLOCKS and v is not None}
        flags = [flag for flag in ("curriculum", "sampler") if getattr(args, flag, None)]
        if given and flags:
            raise TrainerError(f"{source} has {' and '.join(given)}: give the environment's parameters there or as "
                               f"--{' and --'.join(flags)}, not both.")
        if "environment_parameters" in given:
            older = sorted(set(given) - {"environment_parameters"})
            if older:
                raise TrainerError(f"{source} has environment_parameters and {' and '.join(older)}: give the "
                                   "parameters in environment_parameters only (today's form).")
            return cls.from_config(read_environment_parameters(given["environment_parameters"], source), source,
                                   unity=is_unity_env(getattr(args, "env", "")))
        if given:
            return cls._from_blocks(given.get("curriculum"), given.get("parameter_randomization"), source)
        if getattr(args, "lesson", None) is not None and (args.lesson < 0 or not args.curriculum):
            raise TrainerError(f"--lesson {args.lesson}: needs --curriculum and a lesson >= 0.")
        meta = MetaCurriculum(args.curriculum) if getattr(args, "curriculum", None) else None
        if meta is not None and args.lesson is not None:
            meta.check_lesson(args.lesson)
        if getattr(args, "sampler", None) is None:
            return cls(meta)
        sampler, interval = load_sampler_file(args.sampler)
        return cls(meta, sampler.reset_param_dict, interval)

    @classmethod
    def _from_blocks(cls, curriculum: Any, randomization: Any, source: str) -> "EnvParameters":
        """The ``curriculum`` block (behavior → lessons, as a 0.9–0.15 curriculum file) and the
        ``parameter_randomization`` block (as a sampler file) of ML-Agents 0.17–0.19."""
        meta = None
        if curriculum is not None:
            where = f"the curriculum block of {source}"
            curricula = {str(behavior): Curriculum(f"{where} (behavior {behavior})", data=_mapping(block, where),
                                                   behavior_name=str(behavior))
                         for behavior, block in _mapping(curriculum, where).items()}
            meta = MetaCurriculum.of(curricula)
        if randomization is None:
            return cls(meta)
        where = f"the parameter_randomization block of {source}"
        entries, interval = split_interval(_mapping(randomization, where), where)
        try:
            SamplerManager(entries)  # checked now, drawn from the run's seed later
        except SamplerException as e:
            raise SamplerException(f"In {where}: {e}") from e
        return cls(meta, entries, interval)

    @classmethod
    def from_config(cls, parameters: Mapping[str, EnvironmentParameter], source: str,
                    unity: bool = False) -> "EnvParameters":
        """Lessons, fixed parameters and per-episode samplers from a config's ``environment_parameters``."""
        fixed: dict[str, Any] = {}
        per_episode: dict[str, Sampler] = {}
        by_behavior: dict[str, list[EnvironmentParameter]] = {}
        for parameter in parameters.values():
            lesson = parameter.lessons[0]
            if lesson.completion_criteria is not None:
                by_behavior.setdefault(lesson.completion_criteria.behavior, []).append(parameter)
            elif lesson.value.constant is None:
                per_episode[parameter.name] = lesson.value
            else:
                fixed[parameter.name] = {"sampler-type": "constant", "value": lesson.value.constant}
        curricula = {behavior: _curriculum(behavior, group, source) for behavior, group in by_behavior.items()}
        return cls(MetaCurriculum.of(curricula) if curricula else None, fixed or None, None, per_episode or None,
                   unity)

    def reward_buff_caps(self) -> dict[str, int]:
        """Each curriculum's behavior keeps the returns of its last ``min_lesson_length`` episodes."""
        curricula = self.meta_curriculum.curricula if self.meta_curriculum is not None else {}
        return {name: c.min_lesson_length for name, c in curricula.items()}

    def controller_kwargs(self, args: argparse.Namespace, model_path: str, seed: int,
                          steps: Optional[Mapping[str, int]] = None) -> dict[str, Any]:
        """The controller's curriculum and sampler arguments; the lessons start at ``--lesson``,
        else (with ``--resume``) where the checkpoint the trainers restored (at ``steps``) left them."""
        meta = self.meta_curriculum
        offset = sum((steps or {}).values()) if args.load else 0  # a resumed run's draws go on from there
        if meta is not None:
            first = seed + len(self.per_episode or {})  # a lesson's sampler without a seed: the run's + its index
            for curriculum in meta.curricula.values():
                if isinstance(curriculum, LessonSamplers):
                    curriculum.seed, curriculum.offset, first = first, offset, first + len(curriculum.samplers)
            if args.lesson is not None:
                meta.set_all_curriculums_to_lesson_num(args.lesson)
            elif args.load and load_lessons(meta, model_path, steps):
                print(f"Resumed the curricula at lessons {meta.lesson_nums}.", flush=True)
        sampler = SamplerManager(self.sampler_config, seed) if self.sampler_config is not None else None
        if self.per_episode and not self.unity:  # the env draws them; they go with every reset
            sampler = EpisodeSamplerManager(self.sampler_config, seed, self.per_episode, offset)
        if sampler is not None and args.load and resume_draws(sampler, model_path, steps or {}):
            print(f"Resumed the samplers: the environment's draws go on from step {offset}." if self.per_episode
                  else f"Resumed the samplers: their next draw is number {sampler.draws + 1}.", flush=True)
        return {"meta_curriculum": meta, "sampler_manager": sampler,
                "resampling_interval": self.resampling_interval if sampler is not None else None}


class EpisodeSamplerManager(SamplerManager):
    """The fixed parameters of ``reset_param_dict`` and, with each of them, the ``per_episode``
    samplers as :class:`SampledValue` s, which the environment draws each episode (sampler ``i``
    seeded ``seed + i`` unless it has its own seed; ``offset``: the step a resumed run starts at)."""

    def __init__(self, reset_param_dict: Optional[Mapping[str, Any]], seed: int, per_episode: Mapping[str, Sampler],
                 offset: int = 0) -> None:
        super().__init__(reset_param_dict, seed)
        self.per_episode = {name: SampledValue(sampler, seed + i, offset)
                            for i, (name, sampler) in enumerate(per_episode.items())}

    def is_empty(self) -> bool:
        return super().is_empty() and not self.per_episode

    def sample_all(self) -> dict[str, float]:
        return {**super().sample_all(), **self.per_episode}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TrainerError(f"{where} must be a mapping, got {value!r}.")
    return value


class LessonSamplers(Curriculum):
    """A curriculum whose lessons' values may be samplers (``samplers``: parameter → each lesson's
    sampler or None): such a lesson's value is a :class:`SampledValue`, which the environment draws
    each episode, seeded by ``seed`` + the parameter's index unless the sampler has its own seed
    (``offset``: the step a resumed run starts at)."""

    def __init__(self, location: str, data: Mapping[str, Any], behavior_name: str,
                 samplers: Mapping[str, list[Optional[Sampler]]]) -> None:
        super().__init__(location, data=data, behavior_name=behavior_name)
        self.samplers = dict(samplers)
        self.seed = 0
        self.offset = 0

    def get_config(self, lesson: Optional[int] = None) -> dict[str, float]:
        config = super().get_config(lesson)
        lesson = self.lesson_num if lesson is None else max(0, min(int(lesson), self.max_lesson_num))
        for i, (name, per_lesson) in enumerate(self.samplers.items()):
            sampler = per_lesson[lesson]
            if sampler is not None:
                config[name] = SampledValue(sampler, self.seed + i, self.offset)
        return config


def _lesson_value(lesson: Any) -> float:
    """A lesson's constant, or its sampler (whose middle is its value in logs)."""
    value: float = SampledValue(lesson.value, 0) if lesson.value.constant is None else lesson.value.constant
    return value


def _curriculum(behavior: str, parameters: list[EnvironmentParameter], source: str) -> Curriculum:
    """One curriculum of ``behavior`` whose lessons set every parameter of ``parameters``."""
    first = parameters[0]
    criteria = [lesson.completion_criteria for lesson in first.lessons[:-1]]
    where = f"environment_parameters of {source}"
    for parameter in parameters[1:]:
        if [lesson.completion_criteria for lesson in parameter.lessons[:-1]] != criteria:
            raise TrainerError(f"{where}: the curricula of {first.name} and {parameter.name} (behavior {behavior}) end "
                               "their lessons on different criteria; kerasrl advances a behavior's parameters "
                               "together, so give them the same lessons and completion_criteria.")
    kinds = {(c.measure, c.min_lesson_length, c.signal_smoothing) for c in criteria if c is not None}
    if len(kinds) > 1:
        raise TrainerError(f"{where}: the lessons of {first.name} change measure, min_lesson_length or "
                           "signal_smoothing from lesson to lesson, which kerasrl's curricula keep for all lessons.")
    (measure, length, smoothing), = kinds
    values = {p.name: [_lesson_value(lesson) for lesson in p.lessons] for p in parameters}
    data = {"measure": measure, "thresholds": [c.threshold for c in criteria if c is not None],
            "min_lesson_length": length, "signal_smoothing": smoothing, "parameters": values}
    samplers = {p.name: [lesson.value if lesson.value.constant is None else None for lesson in p.lessons]
                for p in parameters}
    if any(s is not None for per_lesson in samplers.values() for s in per_lesson):
        return LessonSamplers(f"{where} (behavior {behavior})", data, behavior, samplers)
    return Curriculum(f"{where} (behavior {behavior})", data=data, behavior_name=behavior)
