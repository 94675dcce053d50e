"""Behavioral cloning: the BC module inside PPO (``pretraining``), its learner, and the
``offline_bc`` / ``online_bc`` trainers."""
