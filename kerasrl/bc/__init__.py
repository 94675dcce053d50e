"""Behavioral cloning: the BC module inside PPO (``pretraining``) and the ``offline_bc`` / ``online_bc`` trainers."""
from kerasrl.bc.learner import BCLearner, imitation_batch
from kerasrl.bc.module import BCModule

__all__ = ["BCLearner", "BCModule", "imitation_batch"]
