"""Proximal Policy Optimization: loss, learner, acting policy, trainer."""
from kerasrl.ppo.gae import discount_rewards, get_gae
from kerasrl.ppo.schedules import linear_decay, ppo_schedules

__all__ = ["discount_rewards", "get_gae", "linear_decay", "ppo_schedules"]
