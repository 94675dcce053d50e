"""How reset parameters (a curriculum lesson's, a sampler's draws) reach a Gymnasium environment.

The rule, for each Gymnasium env behind a ``GymnasiumEnv`` (every copy of a ``SyncVectorEnv``;
a native vector env such as CartPole's is one target): its ``set_reset_parameters(dict)`` if it
has one (on the outermost env or on ``unwrapped``), else each parameter is set as an attribute
of that name on ``unwrapped`` when the attribute exists (so ``length`` or ``masspole`` of
CartPole can be a lesson parameter), else an error names the parameter and the environment.
Nothing is set unless every parameter can be. The values apply from the next reset on and stay
until changed. Other kerasrl ``Environment``s receive the parameters in ``reset(config)``.

A parameter that is a sampler (a :class:`~kerasrl.settings.environment_parameters.SampledValue`,
from a config's ``environment_parameters``) is drawn anew for each episode of each copy
(:class:`EpisodeDraws`): copy ``j`` of an env seeded ``s`` draws from a stream seeded by the
sampler's seed, ``s + j``, the step a resumed run starts at and the sampler itself, so a seeded
run draws the same values again and its copies (in one process or in worker processes alike)
draw apart.
"""
from __future__ import annotations

import random
import zlib
from typing import Any, Mapping, Optional, Sequence

from gymnasium.vector import VectorEnv

from kerasrl.envs.base import EnvironmentException
from kerasrl.samplers import Sampler, episode_sampler


def parameter_targets(env: Any) -> list[Any]:
    """The Gymnasium envs that parameters are applied to: each copy of a ``SyncVectorEnv``
    (anything with ``envs``), else the env itself."""
    copies = getattr(env, "envs", None)
    if isinstance(env, VectorEnv) and copies is not None:
        return list(copies)
    return [env]


def _setter(env: Any) -> Any:
    for candidate in (env, getattr(env, "unwrapped", env)):
        setter = getattr(candidate, "set_reset_parameters", None)
        if callable(setter):
            return setter
    return None


def check_gymnasium_parameters(env: Any, names: Sequence[str], label: str) -> None:
    """Every parameter of ``names`` can be set on every target of ``env`` (one line naming the first that cannot)."""
    for target in parameter_targets(env):
        if _setter(target) is not None:
            continue
        base = getattr(target, "unwrapped", target)
        for name in names:
            if not hasattr(base, name):
                raise EnvironmentException(
                    f"The reset parameter {name!r} cannot be set on {label}: its unwrapped env "
                    f"({type(base).__name__}) has no attribute {name!r} and no set_reset_parameters method.")


def set_parameters(target: Any, params: Mapping[str, float]) -> None:
    """Set ``params`` on one target (checked before) by the module's rule."""
    setter = _setter(target)
    if setter is not None:
        setter(dict(params))
        return
    base = getattr(target, "unwrapped", target)
    for name, value in params.items():
        setattr(base, name, value)


def apply_gymnasium_parameters(env: Any, params: Mapping[str, float], label: str) -> None:
    """Apply ``params`` to ``env`` (a Gymnasium env or vector env) by the module's rule; for an
    env that draws no per-episode values (a PettingZoo game), a sampled parameter is one line."""
    sampled = [name for name, value in params.items() if is_sampled(value)]
    if sampled:
        raise EnvironmentException(f"The reset parameter {sampled[0]!r} is a sampler, drawn anew each episode, which "
                                   f"{label} does not do: give it as a constant.")
    check_gymnasium_parameters(env, list(params), label)
    for target in parameter_targets(env):
        set_parameters(target, params)


def is_sampled(value: Any) -> bool:
    """Whether a reset parameter's value is a sampler (drawn per episode) rather than a value."""
    return getattr(value, "sampler", None) is not None


class EpisodeDraws:
    """The sampled parameters of an env's copies: one stream per copy and parameter (see the
    module doc). A parameter whose sampler is sent again keeps its streams; one no longer
    sampled is dropped."""

    def __init__(self, copies: int, seed: Optional[int]) -> None:
        base = random.SystemRandom().randrange(2 ** 32) if seed is None else seed
        self.keys = [(base + j) % 2 ** 32 for j in range(copies)]
        self.specs: dict[str, tuple[Any, ...]] = {}
        self.samplers: list[dict[str, Sampler]] = [{} for _ in self.keys]

    @property
    def active(self) -> bool:
        return bool(self.specs)

    def configure(self, params: Mapping[str, Any]) -> None:
        """Take the sampled parameters of a reset's ``params`` (the others are values)."""
        specs = {name: (*value.sampler, getattr(value, "offset", 0)) for name, value in params.items()
                 if is_sampled(value)}
        for name, spec in specs.items():
            if self.specs.get(name) == spec:
                continue
            kind, values, seed, offset = spec
            tag = zlib.crc32(repr((kind, tuple(values))).encode())
            for key, samplers in zip(self.keys, self.samplers):
                samplers[name] = episode_sampler(name, kind, values, [seed % 2 ** 32, key, offset % 2 ** 32, tag])
        for samplers in self.samplers:
            for name in set(samplers) - set(specs):
                del samplers[name]
        self.specs = specs

    def draw(self, copy: int) -> dict[str, float]:
        """Copy ``copy``'s values for its next episode."""
        return {name: sampler.sample_parameter() for name, sampler in self.samplers[copy].items()}


def check_reset_parameters(params: Mapping[str, float] | None, known: Mapping[str, float], label: str) -> None:
    """For environments that take parameters through ``reset(config)``: each must be one of ``known``."""
    for name in params or {}:
        if name not in known:
            raise EnvironmentException(f"The reset parameter {name!r} is not a parameter of {label} "
                                       f"(its reset parameters: {sorted(known)}).")
