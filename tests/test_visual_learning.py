"""PPO learns the visual Simple1D task with each visual encoder (behaviour.md §8.1, §16).

``VisualSimple1DEnvironment`` shows the goal (−1 / +1) only as an image: the left or right half
lit. A policy that ignores the image reaches the rewarded side half the time, so its expected
return is ≈ −0.01 (chance); the optimum is 1.001. With a small network, discrete actions, the
encoder's minimum image size and a fixed seed, every encoder must end well above chance within
3000 steps (each case takes ~5–12 s on a 2-core CPU). A blind control (all-dark images, so the
goal cannot be seen) checks that the same score bar is not reachable without the image.
"""
import math

import numpy as np
import pytest

from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import VisualSimple1DEnvironment
from kerasrl.models.encoders import VIS_ENCODE_TYPES, VisualEncoder
from kerasrl.settings import RunContext, load_trainer_config
from kerasrl.trainers import TrainerController, create_trainers

SEED = 1337
LAST_EPISODES = 10  # the score is the mean return of the last LAST_EPISODES completed episodes
PASS_SCORE = 0.5  # chance ≈ −0.01, optimum 1.001

CONFIG = {"default": {"batch_size": 32, "buffer_size": 128, "hidden_units": 32, "learning_rate": 3.0e-3,
                      "max_steps": 3000, "num_layers": 1, "summary_freq": 500}}


def train_visual(encoder, tmp_path, seed=SEED, bright=1.0, overrides=None, size=None):
    """Train PPO (discrete actions) on a ``size``² visual Simple1D (default: the encoder's minimum).

    Returns the trainer, whose ``reward_buffer`` holds the last ``LAST_EPISODES`` returns
    (newest first) and whose ``summary_log`` holds the per-summary means.
    """
    side = VisualEncoder.MIN_SIZE[encoder] if size is None else size
    env = VisualSimple1DEnvironment(use_discrete=True, seed=seed, image_shape=(side, side, 1), bright=bright)
    manager = SimpleEnvManager(env)
    config = {"default": dict(CONFIG["default"], vis_encode_type=encoder, **(overrides or {}))}
    context = RunContext.in_results_dir(str(tmp_path), "visual", keep_checkpoints=1, seed=seed)
    # The reward buffer keeps the last LAST_EPISODES returns (without a curriculum, one).
    caps = {name: LAST_EPISODES for name in manager.external_brains}
    trainers = create_trainers(load_trainer_config(config), manager.external_brains, context, caps)
    tc = TrainerController(trainers, context.model_path, context.summaries_dir, "visual", save_freq=10**9,
                           train=True, training_seed=seed)
    tc.start_learning(manager)
    return trainers[env.behavior_name]


def score_of(trainer):
    recent = list(trainer.reward_buffer)
    assert len(recent) == LAST_EPISODES, f"only {len(recent)} episodes completed"
    score = float(np.mean(recent))
    assert not math.isnan(score)
    return score, recent


@pytest.mark.slow
@pytest.mark.parametrize("encoder", VIS_ENCODE_TYPES)
def test_visual_encoder_learns(encoder, tmp_path):
    trainer = train_visual(encoder, tmp_path)
    assert trainer.policy.model.vis_encode_type == encoder
    assert trainer.get_step >= CONFIG["default"]["max_steps"]
    score, recent = score_of(trainer)
    assert score > PASS_SCORE, (
        f"{encoder}: mean of the last {LAST_EPISODES} returns {score:.3f} "
        f"({[round(r, 3) for r in recent]}); per-summary means {trainer.summary_log}"
    )


@pytest.mark.slow
def test_blind_visual_policy_stays_near_chance(tmp_path):
    """Control: with all-dark images the goal is invisible, and the same run stays below the bar."""
    trainer = train_visual("simple", tmp_path, bright=0.0)
    score, recent = score_of(trainer)
    assert score < PASS_SCORE, f"blind policy scored {score:.3f} ({recent}): the bar does not need the image"
