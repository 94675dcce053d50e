"""How reset parameters (a curriculum lesson's, a sampler's draws) reach a Gymnasium environment.

The rule, for each Gymnasium env behind a ``GymnasiumEnv`` (every copy of a ``SyncVectorEnv``;
a native vector env such as CartPole's is one target): its ``set_reset_parameters(dict)`` if it
has one (on the outermost env or on ``unwrapped``), else each parameter is set as an attribute
of that name on ``unwrapped`` when the attribute exists (so ``length`` or ``masspole`` of
CartPole can be a lesson parameter), else an error names the parameter and the environment.
Nothing is set unless every parameter can be. The values apply from the next reset on and stay
until changed. Other kerasrl ``Environment``s receive the parameters in ``reset(config)``.
"""
from __future__ import annotations

from typing import Any, Mapping

from gymnasium.vector import VectorEnv

from kerasrl.envs.base import EnvironmentException


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


def apply_gymnasium_parameters(env: Any, params: Mapping[str, float], label: str) -> None:
    """Apply ``params`` to ``env`` (a Gymnasium env or vector env) by the module's rule."""
    targets = parameter_targets(env)
    setters = [_setter(t) for t in targets]
    for target, setter in zip(targets, setters):
        if setter is not None:
            continue
        base = getattr(target, "unwrapped", target)
        for name in params:
            if not hasattr(base, name):
                raise EnvironmentException(
                    f"The reset parameter {name!r} cannot be set on {label}: its unwrapped env "
                    f"({type(base).__name__}) has no attribute {name!r} and no set_reset_parameters method.")
    for target, setter in zip(targets, setters):
        if setter is not None:
            setter(dict(params))
            continue
        base = getattr(target, "unwrapped", target)
        for name, value in params.items():
            setattr(base, name, value)


def check_reset_parameters(params: Mapping[str, float] | None, known: Mapping[str, float], label: str) -> None:
    """For environments that take parameters through ``reset(config)``: each must be one of ``known``."""
    for name in params or {}:
        if name not in known:
            raise EnvironmentException(f"The reset parameter {name!r} is not a parameter of {label} "
                                       f"(its reset parameters: {sorted(known)}).")
