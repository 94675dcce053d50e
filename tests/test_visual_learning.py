"""PPO learns the visual Simple1D task with each visual encoder; the
encoders' convolutions follow ``conv_style``.

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
import tensorflow as tf

from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import VisualSimple1DEnvironment
from kerasrl.exception import TrainerConfigError
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
    side = max(VisualEncoder.MIN_SIZE[encoder], 2) if size is None else size  # the environment's images are >= 2 wide
    env = VisualSimple1DEnvironment(use_discrete=True, seed=seed, image_shape=(side, side, 1), bright=bright)
    manager = SimpleEnvManager(env)
    config = {"default": dict(CONFIG["default"], vis_encode_type=encoder, **(overrides or {}))}
    context = RunContext.in_results_dir(str(tmp_path), "visual", keep_checkpoints=1, seed=seed)
    # The reward buffer keeps the last LAST_EPISODES returns (without a curriculum, one).
    caps = {name: LAST_EPISODES for name in manager.behavior_specs}
    trainers = create_trainers(load_trainer_config(config), manager.behavior_specs, context, caps)
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


def conv_kernels(encoder):
    return [c.kernel.numpy() for c in encoder.convs]


@pytest.mark.parametrize("encoder", ["simple", "nature_cnn"])
def test_ml_agents_convolutions_ignore_activation_and_initializer(encoder):
    """``conv_style: mlagents`` (the default): ELU and Glorot-uniform whatever the network keys say
    (ML-Agents 0.9's convolutions are fixed); the dense layer after them follows the keys."""
    enc = VisualEncoder(encoder, 8, 1, seed=3, activation="relu", initializer="orthogonal")
    enc(tf.zeros([1, 36, 36, 1]))
    assert all(c.activation is tf.nn.elu for c in enc.convs)
    for c in enc.convs:
        fan_in, fan_out = np.prod(c.kernel.shape[:-1]), c.kernel.shape[-1]
        assert np.abs(c.kernel.numpy()).max() <= math.sqrt(6 / (fan_in + fan_out)) + 1e-6  # Glorot-uniform's bound
    dense = enc.dense.dense[0]
    x = tf.random.normal([2, dense.kernel.shape[0]])
    np.testing.assert_allclose(dense(x), tf.nn.relu(x @ dense.kernel + dense.bias), atol=1e-6)


def test_network_convolutions_follow_activation_and_initializer():
    """``conv_style: network``: the convolutions use ``activation`` and ``initializer`` (orthogonal,
    gain √2: the kernel, as a fan-in × filters matrix, has orthogonal columns of norm √2), as SB3's NatureCNN."""
    enc = VisualEncoder("nature_cnn", 8, 1, seed=3, activation="tanh", initializer="orthogonal", conv_style="network")
    enc(tf.zeros([1, 36, 36, 1]))
    assert all(c.activation is tf.tanh for c in enc.convs)
    for kernel in conv_kernels(enc):
        m = kernel.reshape(-1, kernel.shape[-1])
        np.testing.assert_allclose(m.T @ m, 2.0 * np.eye(m.shape[1]), atol=1e-4)
    same = VisualEncoder("nature_cnn", 8, 1, seed=3, activation="tanh", initializer="orthogonal", conv_style="network")
    same(tf.zeros([1, 36, 36, 1]))
    for a, b in zip(conv_kernels(enc), conv_kernels(same)):
        np.testing.assert_array_equal(a, b)  # seeded


def test_bad_conv_style_is_a_one_line_config_error():
    with pytest.raises(TrainerConfigError, match=r"conv_style.*'nchw'"):
        load_trainer_config({"default": {"conv_style": "nchw"}})
