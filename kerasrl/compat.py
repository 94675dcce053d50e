"""ML-Agents 0.9's names, kept where its users meet them.

kerasrl says "behavior" throughout; scripts written for ML-Agents 0.9 read a trainer's
``brain_name``, an env manager's ``external_brains``, a step's ``current_all_brain_info`` and a
meta-curriculum's ``brains_to_curriculums``. Each class that had such a name is decorated with
:func:`mlagents_names`, which adds the old name as an alias of the new one; this table is the
one place that lists them. (Config keys, TensorBoard keys and the buffer API keep ML-Agents'
names as they are: they are the names, not aliases.)
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

#: Per class name: ML-Agents 0.9's attribute name → kerasrl's.
ALIASES: dict[str, dict[str, str]] = {
    "Trainer": {"brain_name": "behavior_name"},
    "EnvManager": {"external_brains": "behavior_specs"},
    "StepInfo": {"previous_all_brain_info": "previous", "current_all_brain_info": "current",
                 "brain_name_to_action_info": "action_infos"},
    "MetaCurriculum": {"brains_to_curriculums": "curricula"},
}
#: Per function name: ML-Agents 0.9's keyword → kerasrl's.
KEYWORD_ALIASES: dict[str, dict[str, str]] = {
    "initialize_trainers": {"external_brains": "behavior_specs"},
}

T = TypeVar("T", bound=type)
F = TypeVar("F", bound=Callable[..., Any])


def _alias(new: str, settable: bool) -> property:
    def get(self: Any) -> Any:
        return getattr(self, new)

    def put(self: Any, value: Any) -> None:
        setattr(self, new, value)

    return property(get, put if settable else None, doc=f"ML-Agents 0.9's name of ``{new}``.")


def mlagents_names(settable: bool = True) -> Callable[[T], T]:
    """Class decorator: the class's ML-Agents 0.9 names (:data:`ALIASES`) as aliases of its own
    (read-only for immutable classes, ``settable=False``)."""
    def decorate(cls: T) -> T:
        for old, new in ALIASES[cls.__name__].items():
            setattr(cls, old, _alias(new, settable))
        return cls

    return decorate


def mlagents_keywords(func: F) -> F:
    """Function decorator: the function's ML-Agents 0.9 keyword names (:data:`KEYWORD_ALIASES`)
    accepted for its own (giving both is a ``TypeError`` naming them, as Python's own would be)."""
    renamed = KEYWORD_ALIASES[func.__name__]

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        for old, new in renamed.items():
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{func.__name__}() got both {new} and {old} (its ML-Agents 0.9 name)")
                kwargs[new] = kwargs.pop(old)
        return func(*args, **kwargs)

    return call  # type: ignore[return-value]
