"""Behavioral cloning, written once: its learner, the ``pretraining`` module that PPO, POCA and
SAC run between their updates (each passing its policy in as an imitator), and the
``offline_bc`` / ``online_bc`` trainers."""
