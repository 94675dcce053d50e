"""Adam with a choice of where its ε goes.

Keras (and TF1's ``AdamOptimizer``, which ML-Agents used) folds the bias corrections into the
step size and adds ε to the raw ``√v``::

    w -= lr·√(1−β₂ᵗ)/(1−β₁ᵗ) · m / (√v + ε)

PyTorch (and so Stable-Baselines3) adds ε to the bias-corrected ``√v̂``::

    w -= lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)

The two differ by a factor ``√(1−β₂ᵗ)`` on ε: early in training (small ``t``) and for weights
with tiny gradients (a policy head initialised at scale 0.01) that changes the updates a lot.
``epsilon_style="torch"`` reproduces PyTorch's update to float rounding, which is what it takes
to run an RL-Zoo configuration as Stable-Baselines3 does.
"""
from __future__ import annotations

from typing import Any

import keras
from keras import ops

from kerasrl.settings import ADAM_EPSILON_STYLES as EPSILON_STYLES

__all__ = ["Adam", "EPSILON_STYLES"]


@keras.saving.register_keras_serializable(package="kerasrl")
class Adam(keras.optimizers.Adam):
    """``keras.optimizers.Adam`` with ``epsilon_style``: ``"keras"`` (its own update) or ``"torch"``."""

    def __init__(self, learning_rate: Any = 1e-3, epsilon: float = 1e-7, epsilon_style: str = "keras",
                 **kwargs: Any) -> None:
        if epsilon_style not in EPSILON_STYLES:
            raise ValueError(f"Adam epsilon_style must be one of {EPSILON_STYLES}, got {epsilon_style!r}.")
        if not epsilon > 0.0 or epsilon == float("inf"):
            raise ValueError(f"Adam epsilon must be a positive finite number, got {epsilon!r}.")
        if epsilon_style == "torch" and kwargs.get("amsgrad"):
            raise ValueError("Adam epsilon_style='torch' does not support amsgrad.")
        super().__init__(learning_rate=learning_rate, epsilon=epsilon, **kwargs)
        self.epsilon_style = epsilon_style

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        if self.epsilon_style == "keras":
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        correction_1 = 1 - ops.power(ops.cast(self.beta_1, dtype), step)
        correction_2 = 1 - ops.power(ops.cast(self.beta_2, dtype), step)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        denominator = ops.add(ops.divide(ops.sqrt(v), ops.sqrt(correction_2)), self.epsilon)
        self.assign_sub(variable, ops.divide(ops.multiply(m, lr / correction_1), denominator))

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["epsilon_style"] = self.epsilon_style
        return config
