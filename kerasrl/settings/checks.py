"""The building blocks of every settings class: fields with a default, a value check and a
meaning (:func:`setting`), and the strict conversion of raw YAML values into them.

A wrong type or an out-of-range value is a ``TrainerConfigError`` naming the key and the
value; YAML's ``1e-5`` (read as a string) becomes a number here, once.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import types
import typing
from dataclasses import field
from typing import Any, Callable, Mapping, Optional, Union

from kerasrl.exception import TrainerConfigError

Check = Callable[[Any], Optional[str]]


def at_least(low: float) -> Check:
    return lambda v: None if v >= low else f"must be >= {low}"


def positive(v: float) -> Optional[str]:
    return None if v > 0 else "must be > 0"


def unit_interval(v: float) -> Optional[str]:
    return None if 0.0 <= v <= 1.0 else "must be in [0, 1]"


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {list(choices)}"


def setting(default: Any = dataclasses.MISSING, check: Optional[Check] = None, doc: str = "") -> Any:
    """A settings field with its default, its value check and a one-line meaning."""
    return field(default=default, metadata={"check": check, "doc": doc})


class _Checked:
    """Settings built directly in Python are checked as those read from a config are."""

    def __post_init__(self) -> None:
        for name, (f, hint) in _fields(type(self)).items():
            if "check" in f.metadata:
                object.__setattr__(self, name, _convert(type(self).__name__, f, hint, getattr(self, name)))
        self._check()

    def _check(self) -> None:
        """Checks that span several fields."""


# -- value conversion ---------------------------------------------------------------------
def _fail(where: str, key: str, value: Any, what: str) -> TrainerConfigError:
    return TrainerConfigError(f"{key} in {where} {what}, got {value!r}.")


def _as_float(where: str, key: str, value: Any) -> float:
    """``value`` as a plain ``float``; NumPy scalars (from a grid search, ``np.linspace``) are numbers too."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise _fail(where, key, value, "must be a number")
    if isinstance(value, str) and "e" not in value.lower():
        # PyYAML leaves only exponent forms (``1e-5``, ``5.0e5``) as strings: this one was quoted
        raise _fail(where, key, value, "must be a number, not a string (write it without quotes)")
    try:
        number = float(value)  # YAML 1.1 reads ``1e-5`` (no dot) as a string
    except ValueError:
        raise _fail(where, key, value, "must be a number") from None
    if not math.isfinite(number):
        raise _fail(where, key, value, "must be a finite number")
    return number


def _as_int(where: str, key: str, value: Any) -> int:
    """``value`` as a plain ``int`` (so settings dump to YAML/JSON), e.g. from ``np.int64``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    number = _as_float(where, key, value)  # ML-Agents writes ``max_steps: 5.0e5``
    if not number.is_integer():
        raise _fail(where, key, value, "must be a whole number")
    return int(number)


def _as_bool(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        kind = " (a string: write true or false without quotes)" if isinstance(value, str) else ""
        raise _fail(where, key, value, f"must be true or false{kind}")
    return value


def _as_str(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(where, key, value, "must be a string")
    return value


def _as_bool_or_auto(where: str, key: str, value: Any) -> Union[bool, str]:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if not isinstance(value, bool):
        raise _fail(where, key, value, "must be true, false or auto")
    return value


_CONVERTERS: dict[Any, Callable[[str, str, Any], Any]] = {int: _as_int, float: _as_float, bool: _as_bool, str: _as_str,
                                                          Union[bool, str]: _as_bool_or_auto}


def _convert(where: str, f: dataclasses.Field, hint: Any, value: Any) -> Any:
    """``value`` for field ``f`` (type ``hint``) converted and checked; errors name key and value."""
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (Union, types.UnionType) and type(None) in args
    if value is None:
        if optional:
            return None
        raise _fail(where, f.name, value, "must be given a value")
    base = next(a for a in args if a is not type(None)) if optional else hint
    converted = _CONVERTERS[base](where, f.name, value)
    check = f.metadata.get("check")
    problem = check(converted) if check is not None else None
    if problem:
        raise _fail(where, f.name, value, problem)
    return converted


_HINTS: dict[type, dict[str, Any]] = {}


def _fields(cls: type) -> dict[str, tuple[dataclasses.Field, Any]]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return {f.name: (f, _HINTS[cls][f.name]) for f in dataclasses.fields(cls)}


def _closest(key: str, known: Any) -> str:
    match = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    return f": did you mean {match[0]}?" if match else f" (known: {', '.join(sorted(map(str, known)))})"


def _build(cls: type, where: str, raw: Mapping[str, Any], what: str) -> Any:
    """A settings dataclass from ``raw``: unknown and missing keys are errors naming them."""
    fields = _fields(cls)
    for key in raw:
        if key not in fields:
            raise TrainerConfigError(f"Unknown parameter {key} for {what} in {where}{_closest(key, fields)}")
    missing = [n for n, (f, _) in fields.items() if n not in raw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise TrainerConfigError(f"The hyper-parameter {missing[0]} could not be found for {what} in {where}.")
    return cls(**{k: _convert(where, fields[k][0], fields[k][1], v) for k, v in raw.items()})


def _mapping(where: str, key: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(where, key, value, "must be a mapping of names to parameters")
    return value
