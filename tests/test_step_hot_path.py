"""The per-step fast paths keep their behaviour: StepResult's checks and conversions, and the
controller's direct calls for trainers with Trainer's default per-behavior hooks."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kerasrl.exception import EnvironmentException
from kerasrl.spec import StepResult
from kerasrl.trainers.trainer import Trainer, own_behavior_only


def _result(**overrides: Any) -> StepResult:
    fields: dict[str, Any] = dict(agent_ids=np.arange(3), observations=[np.zeros((3, 2), np.float32)],
                                  rewards=np.zeros(3, np.float32), terminated=np.zeros(3, bool),
                                  truncated=np.zeros(3, bool))
    fields.update(overrides)
    return StepResult(**fields)


def test_arrays_of_the_right_kind_are_kept_as_they_are() -> None:
    ids, obs, rewards = np.arange(3), np.ones((3, 2), np.float32), np.ones(3, np.float32)
    terminated, truncated = np.zeros(3, bool), np.ones(3, bool)
    r = StepResult(ids, [obs], rewards, terminated, truncated)
    assert r.agent_ids is ids and r.observations[0] is obs and r.rewards is rewards
    assert r.terminated is terminated and r.truncated is truncated
    assert len(r) == 3 and type(len(r)) is int and r.done.tolist() == [True] * 3


@pytest.mark.parametrize("name, value, dtype", [
    ("agent_ids", [[4], [5], [6]], np.int64),
    ("agent_ids", np.array([4, 5, 6], np.int32), np.int64),
    ("rewards", [1, 2, 3], np.float32),
    ("rewards", np.array([1.0, 2.0, 3.0], ">f4"), np.float32),  # non-native byte order
    ("rewards", np.array([[1.0], [2.0], [3.0]], np.float64), np.float32),
    ("terminated", [0, 1, 0], np.bool_),
    ("truncated", np.array([0, 1, 0], np.int8), np.bool_),
])
def test_other_inputs_are_converted_to_1d_columns(name: str, value: Any, dtype: type) -> None:
    column = getattr(_result(**{name: value}), name)
    assert column.dtype == np.dtype(dtype) and column.dtype.isnative and column.shape == (3,)
    np.testing.assert_array_equal(column, np.asarray(value).reshape(-1).astype(dtype))


def test_observations_are_converted_to_float32() -> None:
    r = _result(observations=[np.ones((3, 2), np.float64), [[1, 2]] * 3, np.ones((3, 2), ">f4")])
    assert all(o.dtype == np.float32 and o.dtype.isnative and o.shape == (3, 2) for o in r.observations)


@pytest.mark.parametrize("name, value, message", [
    ("rewards", np.zeros(2, np.float32), "StepResult.rewards has 2 rows for 3 agents."),
    ("terminated", np.zeros(4, bool), "StepResult.terminated has 4 rows for 3 agents."),
    ("truncated", [True], "StepResult.truncated has 1 rows for 3 agents."),
    ("observations", [np.zeros((2, 2), np.float32)], r"StepResult.observations\[0\] has shape \(2, 2\) for 3 agents."),
    ("observations", [np.float32(1)], r"StepResult.observations\[0\] has shape \(\) for 3 agents."),
])
def test_rows_that_do_not_match_are_one_clear_error(name: str, value: Any, message: str) -> None:
    with pytest.raises(EnvironmentException, match=message):
        _result(**{name: value})


class _Plain(Trainer):
    pass


class _OwnHooks(Trainer):
    def increment_behavior_steps(self, steps: Any) -> None:
        pass


class _NotATrainer:
    pass


def test_own_behavior_only_is_for_the_default_hooks() -> None:
    assert own_behavior_only(Trainer) and own_behavior_only(_Plain)
    assert not own_behavior_only(_OwnHooks) and not own_behavior_only(_NotATrainer)
