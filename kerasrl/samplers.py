"""Environment-parameter samplers for generalisation training (ML-Agents 0.9's sampler files).

A sampler file is YAML: a positive integer ``resampling-interval`` (environment steps, every
agent's step counted, as every other step count) and one entry per reset parameter::

    resampling-interval: 5000
    mass: {sampler-type: uniform, min_value: 0.5, max_value: 10}
    gravity: {sampler-type: gaussian, mean: 9.8, st_dev: 0.5}
    scale: {sampler-type: multirange_uniform, intervals: [[0.75, 1], [2, 3]]}

Every parameter is drawn again at each resampling, from its own seeded generator.
"""
from __future__ import annotations

import inspect
import math
import os
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import yaml

from kerasrl.exception import TrainerError
from kerasrl.step_history import entry_at, read_entries, write_entry


class SamplerException(TrainerError):
    """A sampler file or entry is invalid; the message names the parameter and key."""


def _finite(name: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SamplerException(f"The {key} of the {name} parameter must be a finite number, got {value!r}.")
    return float(value)


#: A sampler's seed: an int, or several (``numpy.random.RandomState`` mixes them), or None (unseeded).
Seed = Union[int, Sequence[int], None]


class Sampler:
    """Draws one float per call; ``name`` is the parameter's (for error messages)."""

    def __init__(self, name: str, seed: Seed) -> None:
        self.name = name
        self.rng = np.random.RandomState(seed)

    def sample_parameter(self) -> float:
        raise NotImplementedError


class UniformSampler(Sampler):
    """Uniform in ``[min_value, max_value)``."""

    def __init__(self, name: str, seed: Seed, min_value: Any, max_value: Any, **_: Any) -> None:
        super().__init__(name, seed)
        self.min_value = _finite(name, "min_value", min_value)
        self.max_value = _finite(name, "max_value", max_value)
        if self.max_value < self.min_value:
            raise SamplerException(f"The {name} parameter's max_value {max_value} is below its min_value {min_value}.")

    def sample_parameter(self) -> float:
        return float(self.rng.uniform(self.min_value, self.max_value))


class GaussianSampler(Sampler):
    """Normal with ``mean`` and standard deviation ``st_dev``."""

    def __init__(self, name: str, seed: Seed, mean: Any, st_dev: Any, **_: Any) -> None:
        super().__init__(name, seed)
        self.mean = _finite(name, "mean", mean)
        self.st_dev = _finite(name, "st_dev", st_dev)
        if self.st_dev < 0:
            raise SamplerException(f"The st_dev of the {name} parameter must be >= 0, got {st_dev}.")

    def sample_parameter(self) -> float:
        return float(self.rng.normal(self.mean, self.st_dev))


class MultiRangeUniformSampler(Sampler):
    """An interval ``[a, b]`` of ``intervals`` chosen with probability ∝ ``b - a``, then uniform in it."""

    def __init__(self, name: str, seed: Seed, intervals: Any, **_: Any) -> None:
        super().__init__(name, seed)
        if not isinstance(intervals, (list, tuple)) or not intervals or not all(
                isinstance(i, (list, tuple)) and len(i) == 2 for i in intervals):
            raise SamplerException(f"The intervals of the {name} parameter must be a non-empty list of [min, max] "
                                   f"pairs, got {intervals!r}.")
        self.intervals = [(_finite(name, "intervals", a), _finite(name, "intervals", b)) for a, b in intervals]
        widths = np.array([b - a for a, b in self.intervals])
        if (widths < 0).any() or widths.sum() <= 0:
            raise SamplerException(f"The intervals of the {name} parameter need max >= min and a total width > 0, "
                                   f"got {intervals!r}.")
        self.probabilities = widths / widths.sum()

    def sample_parameter(self) -> float:
        k = self.rng.choice(len(self.intervals), p=self.probabilities)
        low, high = self.intervals[k]
        return float(self.rng.uniform(low, high))


class ConstantSampler(Sampler):
    """Always ``value`` (a parameter fixed for the run: ML-Agents' ``constant`` sampler)."""

    def __init__(self, name: str, seed: Seed, value: Any, **_: Any) -> None:
        super().__init__(name, seed)
        self.value = _finite(name, "value", value)

    def sample_parameter(self) -> float:
        return self.value


_BUILT_IN = (UniformSampler, GaussianSampler, MultiRangeUniformSampler, ConstantSampler)


class SamplerFactory:
    """``sampler-type`` name → sampler class; ``register_sampler`` adds types."""

    NAME_TO_CLASS: dict[str, type[Sampler]] = {
        "uniform": UniformSampler,
        "gaussian": GaussianSampler,
        "multirange_uniform": MultiRangeUniformSampler,
        "constant": ConstantSampler,
    }

    @staticmethod
    def register_sampler(name: str, sampler_cls: type[Sampler]) -> None:
        SamplerFactory.NAME_TO_CLASS[name] = sampler_cls

    @staticmethod
    def init_sampler_class(name: str, param_name: str, params: Mapping[str, Any], seed: Optional[int] = None) -> Sampler:
        """The ``name`` sampler of ``param_name``; a built-in type refuses a key it does not take."""
        if not isinstance(name, str) or name not in SamplerFactory.NAME_TO_CLASS:
            raise SamplerException(f"The sampler-type {name!r} of the {param_name} parameter is not one of "
                                   f"{sorted(SamplerFactory.NAME_TO_CLASS)}.")
        cls = SamplerFactory.NAME_TO_CLASS[name]
        if cls in _BUILT_IN:
            known = [p for p in inspect.signature(cls).parameters.values()
                     if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name not in ("name", "seed")]
            unknown = sorted(str(k) for k in params if k not in {p.name for p in known})
            if unknown:
                raise SamplerException(f"The {param_name} parameter's {name} sampler has unknown keys {unknown} "
                                       f"(it takes sampler-type and {[p.name for p in known]}).")
        try:
            inspect.signature(cls).bind(param_name, seed, **params)
        except TypeError as e:
            raise SamplerException(f"The {param_name} parameter's {name} sampler got wrong arguments "
                                   f"{sorted(params)}: {e}.") from e
        return cls(param_name, seed, **params)


class SamplerManager:
    """One sampler per reset parameter of ``reset_param_dict`` (a sampler file without its
    ``resampling-interval``). Parameter ``i`` (in file order) draws from seed ``seed + i``."""

    def __init__(self, reset_param_dict: Optional[Mapping[str, Any]], seed: Optional[int] = None) -> None:
        self.reset_param_dict = dict(reset_param_dict or {})
        self.samplers: dict[str, Sampler] = {}
        #: ``sample_all`` calls so far: a resumed run draws on from where its checkpoint was saved.
        self.draws = 0
        for i, (param_name, cur) in enumerate(self.reset_param_dict.items()):
            if not isinstance(param_name, str):
                raise SamplerException(f"The parameter name {param_name!r} must be a string.")
            if not isinstance(cur, Mapping):
                raise SamplerException(f"The {param_name} parameter's entry must be a mapping with a sampler-type, "
                                       f"got {cur!r}.")
            if "sampler-type" not in cur:
                raise SamplerException(f"'sampler_type' argument hasn't been supplied for the {param_name} parameter")
            args = {k: v for k, v in cur.items() if k != "sampler-type"}
            self.samplers[param_name] = SamplerFactory.init_sampler_class(
                cur["sampler-type"], param_name, args, None if seed is None else seed + i)

    def is_empty(self) -> bool:
        return not self.samplers

    def sample_all(self) -> dict[str, float]:
        self.draws += 1
        return {name: sampler.sample_parameter() for name, sampler in self.samplers.items()}

    def fast_forward(self, draws: int) -> None:
        """Draw (and drop) until ``draws`` draws are done, as the run being resumed had."""
        while self.draws < draws:
            self.sample_all()


#: Beside the checkpoints: how many draws the samplers had made at each save.
SAMPLER_FILE = "sampler.json"


def episode_sampler(name: str, kind: str, values: Sequence[float], seed: Seed) -> Sampler:
    """The sampler of an ``environment_parameters`` sampler sent as ``(kind, values)`` (the flat
    values of :func:`kerasrl.settings.environment_parameters.sampler_values`), seeded ``seed``."""
    if kind == "uniform":
        return UniformSampler(name, seed, *values)
    if kind == "gaussian":
        return GaussianSampler(name, seed, *values)
    if kind == "multirangeuniform":
        return MultiRangeUniformSampler(name, seed, [list(values[i:i + 2]) for i in range(0, len(values), 2)])
    if kind == "constant":
        return ConstantSampler(name, seed, *values)
    raise SamplerException(f"The {name} parameter's sampler type {kind!r} is not one of uniform, gaussian, "
                           "multirangeuniform, constant.")


def save_draws(manager: SamplerManager, model_path: str, steps: Mapping[str, int]) -> None:
    """Record the draws made so far with the trainers' steps (``{model_path}/sampler.json``, atomic)."""
    write_entry(os.path.join(model_path, SAMPLER_FILE), steps, "draws", manager.draws)


def resume_draws(manager: SamplerManager, model_path: str, steps: Mapping[str, int]) -> bool:
    """Fast-forward ``manager`` to one draw before those of the save the restored checkpoint (at
    ``steps``) belongs to, so that the resumed run's first reset draws the parameters in use at
    that save and the later ones follow as in a run never stopped; False when none was saved."""
    path = os.path.join(model_path, SAMPLER_FILE)
    try:
        entry = entry_at(read_entries(path, "draws"), steps)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SamplerException(f"The saved sampler state {path} cannot be read: {e}.") from e
    if entry is None:
        return False
    manager.fast_forward(max(int(entry["draws"]) - 1, 0))
    return True


def split_interval(config: Mapping[str, Any], where: str) -> tuple[dict[str, Any], int]:
    """``(parameter → sampler entry, resampling-interval)`` of a sampler mapping (a sampler file's,
    or a config's ``parameter_randomization`` block); ``where`` names it in errors."""
    config = dict(config)
    if "resampling-interval" not in config:
        raise SamplerException(f"Resampling interval was not specified in {where}. Please specify it with the "
                               "'resampling-interval' key.")
    interval = config.pop("resampling-interval")
    if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
        raise SamplerException(f"Specified resampling-interval is not valid in {where}: {interval!r}. Please provide "
                               "a positive integer value for resampling-interval.")
    return config, interval


def load_sampler_file(path: str, seed: Optional[int] = None) -> tuple[SamplerManager, int]:
    """The sampler manager and resampling interval of the YAML file ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except OSError as e:
        raise SamplerException(f"The sampler file {path} could not be opened: {e.strerror or e}.") from e
    except yaml.YAMLError as e:
        raise SamplerException(f"The sampler file {path} is not valid YAML: {' '.join(str(e).split())}") from e
    if not isinstance(config, dict):
        raise SamplerException(f"The sampler file {path} must hold a mapping of parameter -> sampler.")
    config, interval = split_interval(config, f"the sampler file {path}")
    try:
        return SamplerManager(config, seed), interval
    except SamplerException as e:
        raise SamplerException(f"In the sampler file {path}: {e}") from e
