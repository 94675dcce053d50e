"""MA-POCA (``trainer: poca``): PPO's clipped policy loss with a centralised critic that gives each
agent of a group a counterfactual baseline, so that a cooperative group learns from its group
reward, agents that leave the group early included."""
