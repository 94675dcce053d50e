"""Soft Actor-Critic (``trainer: sac``): networks, losses, learner, replay buffer and numpy acting."""
