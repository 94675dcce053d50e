"""Trainers: the base classes, the agent processor, the controller, the factory, stats and checkpoints."""
from kerasrl.trainers.controller import TrainerController
from kerasrl.trainers.factory import create_trainer, create_trainers, initialize_trainers
from kerasrl.trainers.rl_trainer import RLTrainer
from kerasrl.trainers.trainer import Trainer

__all__ = ["RLTrainer", "Trainer", "TrainerController", "create_trainer", "create_trainers", "initialize_trainers"]
