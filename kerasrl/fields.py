"""One name per piece of data, from the environment to the loss.

The same names key the policy's outputs, the agent buffers and the update buffer (where the
ML-Agents 0.9 names are kept: ``vector_obs``, ``visual_obs{j}``, ``action_mask``,
``actions_pre``, ``{signal}_rewards``, ...), the GAE step, the actor-critic's inputs and the
learner's batch. There is no renaming layer between them.
"""
from __future__ import annotations


class Field:
    """Names of the per-step fields (constants) and of the per-camera / per-signal ones (methods)."""

    #: Vector observations, concatenated in spec order ``[n, V]`` (model input).
    VECTOR_OBS = "vector_obs"
    #: The next step's vector observations (stored for signals that need them, e.g. curiosity).
    NEXT_VECTOR_OBS = "next_vector_in"
    #: Actions sent to the environment: int branches (discrete) or clipped floats (continuous).
    ACTIONS = "actions"
    #: Continuous actions before clipping (what the Gaussian sampled).
    ACTIONS_PRE = "actions_pre"
    #: Log-probability of the taken action, per branch (discrete) or dimension (continuous).
    ACTION_LOG_PROBS = "action_log_probs"
    #: Allowed actions, 1 = allowed, ``[n, Σ branches]`` (discrete; model input).
    ACTION_MASK = "action_mask"
    #: Recurrent memory the policy acted with (model input); ``MEMORY_OUT`` is the next one.
    MEMORY = "memory"
    MEMORY_OUT = "memory_out"
    #: Previous action (recurrent discrete; model input).
    PREV_ACTION = "prev_action"
    #: Policy entropy at the step (statistics).
    ENTROPY = "entropy"
    #: 1 for a real row, 0 for padding.
    MASKS = "masks"
    DONE = "done"
    TERMINATED = "terminated"
    TRUNCATED = "truncated"
    ENVIRONMENT_REWARDS = "environment_rewards"
    #: The advantage the policy loss uses (mean over the reward signals).
    ADVANTAGES = "advantages"
    DISCOUNTED_RETURNS = "discounted_returns"

    @staticmethod
    def visual_obs(camera: int) -> str:
        """Camera ``camera``'s observations ``[n, h, w, c]`` (model input)."""
        return f"visual_obs{camera}"

    @staticmethod
    def next_visual_obs(camera: int) -> str:
        return f"next_visual_obs{camera}"

    @staticmethod
    def rewards(signal: str) -> str:
        """The reward signal's scaled reward."""
        return f"{signal}_rewards"

    @staticmethod
    def value_estimates(signal: str) -> str:
        """The value head of ``signal`` when the step was taken."""
        return f"{signal}_value_estimates"

    @staticmethod
    def returns(signal: str) -> str:
        """GAE's λ-returns of ``signal`` (the value head's target)."""
        return f"{signal}_returns"

    @staticmethod
    def advantage(signal: str) -> str:
        return f"{signal}_advantage"
