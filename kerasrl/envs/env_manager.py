"""Env managers: drive environments with the current policies and hand back StepInfos (as ML-Agents 0.9's)."""
from __future__ import annotations

import abc
from typing import Mapping, NamedTuple, Optional, Protocol

from kerasrl.compat import mlagents_names
from kerasrl.envs.base import BehaviorSpec, Environment, EnvironmentException, StepResult
from kerasrl.spec import ActionInfo
from kerasrl.timers import hierarchical_timer


class Policy(Protocol):
    def get_action(self, step_result: StepResult) -> ActionInfo: ...


@mlagents_names(settable=False)
class StepInfo(NamedTuple):
    """One environment step: the results before it, after it, and the actions taken in between."""

    previous: Optional[dict[str, StepResult]]
    current: dict[str, StepResult]
    action_infos: Optional[dict[str, ActionInfo]]


@mlagents_names(settable=False)
class EnvManager(abc.ABC):
    """Steps one or more environments with registered policies."""

    def __init__(self) -> None:
        self.policies: dict[str, Policy] = {}

    def set_policy(self, behavior_name: str, policy: Policy) -> None:
        self.policies[behavior_name] = policy

    def decide_actions(self, current: Mapping[str, StepResult]) -> dict[str, ActionInfo]:
        """One call of each behavior's policy, for all of its agents in ``current``."""
        action_infos: dict[str, ActionInfo] = {}
        for name, result in current.items():
            policy = self.policies.get(name)
            if policy is None:
                raise KeyError(f"No policy registered for behavior '{name}'; call set_policy first.")
            action_infos[name] = policy.get_action(result)
        return action_infos

    @abc.abstractmethod
    def step(self) -> list[StepInfo]:
        """Advance every environment one step with the current policies."""

    @abc.abstractmethod
    def reset(self, config: Optional[Mapping[str, float]] = None, train_mode: bool = True) -> list[StepInfo]:
        """Reset every environment."""

    @property
    @abc.abstractmethod
    def behavior_specs(self) -> dict[str, BehaviorSpec]:
        """Behavior name → spec."""

    @property
    def reset_parameters(self) -> dict[str, float]:
        return {}

    def environment_stats(self) -> dict[str, list[float]]:
        """Statistics the environment itself recorded since the last call (a Unity scene's
        ``StatsRecorder``), key -> values to average; the trainers write them with their own."""
        return {}

    @abc.abstractmethod
    def close(self) -> None:
        """Close every environment."""


class SimpleEnvManager(EnvManager):
    """Synchronous manager of a single environment in this process."""

    def __init__(self, env: Environment, validate: Optional[bool] = None) -> None:
        super().__init__()
        self.env = env
        # By default every step is checked unless the environment checks its own results.
        self.validate = (not getattr(env, "validates_results", False)) if validate is None else bool(validate)
        self.previous_step: StepInfo = StepInfo(None, {}, None)

    def step(self) -> list[StepInfo]:
        current = self.previous_step.current
        with hierarchical_timer("SimpleEnvManager._take_step"):
            action_infos = self.decide_actions(current)
        if self.env.global_done:
            new_info = self.env.reset()
        else:
            with hierarchical_timer("env.step"):
                new_info = self.env.step({name: info.action for name, info in action_infos.items()})
        self._validate(new_info)
        self.previous_step = StepInfo(current, new_info, action_infos)
        return [self.previous_step]

    def _validate(self, info: Mapping[str, StepResult]) -> None:
        """Shapes against the specs, NaN/inf in observations and rewards: caught where they enter."""
        if not self.validate:
            return
        specs = self.env.behavior_specs
        for name, result in info.items():
            spec = specs.get(name)
            if spec is None:
                raise EnvironmentException(f"The environment returned a step for unknown behavior '{name}'.")
            result.validate(spec, name)

    def reset(self, config: Optional[Mapping[str, float]] = None, train_mode: bool = True) -> list[StepInfo]:
        info = self.env.reset(config)
        self._validate(info)
        self.previous_step = StepInfo(None, info, None)
        return [self.previous_step]

    @property
    def behavior_specs(self) -> dict[str, BehaviorSpec]:
        return dict(self.env.behavior_specs)

    @property
    def reset_parameters(self) -> dict[str, float]:
        return self.env.reset_parameters

    def environment_stats(self) -> dict[str, list[float]]:
        take = getattr(self.env, "take_environment_stats", None)
        return take() if take is not None else {}

    def close(self) -> None:
        self.env.close()
