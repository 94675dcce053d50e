"""One name per piece of data, from the environment to the loss.

The same names key the policy's outputs, the agent buffers and the update buffer (where the
ML-Agents 0.9 names are kept: ``vector_obs``, ``visual_obs{j}``, ``action_mask``,
``actions_pre``, ``{signal}_rewards``, ...), the GAE step, the actor-critic's inputs and the
learner's batch. There is no renaming layer between them.
"""
from __future__ import annotations

import functools
from typing import Any, Callable


def _numbered(pattern: str, doc: str) -> Callable[[Any], str]:
    """The name of a per-camera or per-reward-signal field: ``pattern`` filled with its index or name."""

    @functools.cache  # a handful of names, looked up at every step
    def name(which: Any) -> str:
        return pattern.format(which)

    name.__doc__ = doc
    return name


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
    #: The next step's allowed actions (discrete SAC's soft value of the next state).
    NEXT_ACTION_MASK = "next_action_mask"
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
    #: The agent's group (ML-Agents' ``group_id``; 0 = in no group) when the step's rewards came;
    #: stored only when the environment reports groups (``StepResult.has_groups``).
    GROUP_ID = "group_id"
    #: The reward the agent's group earned at the step (``StepResult.group_reward``), apart from
    #: ``ENVIRONMENT_REWARDS``; stored only with ``GROUP_ID``. PPO and SAC do not train on it.
    GROUP_REWARD = "group_reward"
    #: Groupmate status (ML-Agents' ``GroupmateStatus``), stored only when the environment reports
    #: groups: for each of the agent's groupmates that acted at the same step (at most the
    #: processor's ``max_groupmates``, padded), their vector observations ``[n, M, V]``, their
    #: actions as sent ``[n, M, action_size]`` and ``GROUPMATE_MASK`` ``[n, M]`` (1 = a groupmate, 0 =
    #: padding: absent, left the group, or no group).
    GROUPMATE_VECTOR_OBS = "groupmate_vector_obs"
    GROUPMATE_ACTIONS = "groupmate_actions"
    GROUPMATE_MASK = "groupmate_mask"
    #: 1 where the agent's episode and every groupmate's ended in a terminal state at this step (the
    #: whole group is done: no bootstrap); stored with the groupmate status.
    GROUP_DONE = "group_done"
    #: The episode a demonstration row belongs to (0, 1, ... in row order; ``kerasrl.demos``).
    EPISODE_ID = "episode_id"
    #: The advantage the policy loss uses (mean over the reward signals).
    ADVANTAGES = "advantages"
    DISCOUNTED_RETURNS = "discounted_returns"

    visual_obs = staticmethod(_numbered("visual_obs{}", "Camera ``i``'s observations ``[n, h, w, c]`` (model input)."))
    groupmate_visual_obs = staticmethod(_numbered("groupmate_visual_obs{}", "The groupmates' camera ``i`` ``[n, M, h, w, c]``."))
    next_visual_obs = staticmethod(_numbered("next_visual_obs{}", "Camera ``i``'s next observations."))
    rewards = staticmethod(_numbered("{}_rewards", "The reward signal's scaled reward."))
    value_estimates = staticmethod(_numbered("{}_value_estimates", "The signal's value head when the step was taken."))
    baseline_estimates = staticmethod(_numbered("{}_baseline_estimates",
                                                "MA-POCA's counterfactual baseline of the signal at the step."))
    returns = staticmethod(_numbered("{}_returns", "GAE's λ-returns of the signal (its value head's target)."))
    advantage = staticmethod(_numbered("{}_advantage", "GAE's advantage of the signal."))
