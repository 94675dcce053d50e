"""Proximal Policy Optimization: the loss, the learner that trains the actor-critic, the acting
policy and the schedules."""
