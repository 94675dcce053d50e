"""Visual SAC: the replay's camera next-observations, the encoders, acting, export, BC and learning."""
import re

import numpy as np
import pytest
import tensorflow as tf
from test_sac import run

from kerasrl import recording
from kerasrl.buffer import BufferException
from kerasrl.envs.simple import VisualSimple1DEnvironment
from kerasrl.exception import UnityTrainerException
from kerasrl.fields import Field
from kerasrl.models.encoders import VisualEncoder
from kerasrl.sac.bc import LOSS_STAT, sac_pretraining
from kerasrl.sac.learner import SACLearner
from kerasrl.sac.networks import SACConfigError
from kerasrl.sac.policy import SACPolicy
from kerasrl.sac.replay import VALID, ReplayBuffer
from kerasrl.sac.trainer import SACTrainer
from kerasrl.settings import BehavioralCloningSettings, RunContext, TrainerSettings
from kerasrl.spec import BehaviorSpec

NEXT_OF = {"next_frame": "frame"}


def trajectory(start, n):
    """``n`` transitions whose frames are numbered ``start …`` (each frame a 2×2 image of its
    number) and whose next frame is the following number."""
    frames = np.arange(start, start + n + 1, dtype=np.float32)[:, None, None] * np.ones((1, 2, 2), np.float32)
    return {"frame": frames[:-1].copy(), "next_frame": frames[1:].copy(), "t": np.arange(start, start + n, dtype=np.int64)}


def check_rows(batch):
    np.testing.assert_array_equal(batch["frame"][..., 0, 0], batch["t"])
    np.testing.assert_array_equal(batch["next_frame"][..., 0, 0], batch["t"] + 1)


def test_visual_next_observations_are_the_following_rows_and_stored_once(tmp_path):
    replay = ReplayBuffer(10, NEXT_OF)
    for start, n in [(0, 4), (100, 3), (200, 5), (300, 1)]:  # wraps around: 0-3 and 100-101 are overwritten
        replay.add(trajectory(start, n))
    assert "next_frame" not in replay.columns and replay.columns["frame"].shape == (10, 2, 2)
    assert len(replay) == 7  # 1 + 5 + 1 transitions, each trajectory's extra row not counted
    rng = np.random.default_rng(0)
    batch = replay.sample(rng, (500, 3))
    check_rows(batch)
    assert set(np.unique(batch["t"])) == {102, 200, 201, 202, 203, 204, 300}  # no extra row
    path = str(tmp_path / "replay.h5")
    replay.save(path)
    loaded = ReplayBuffer.load(path)
    assert loaded.next_of == NEXT_OF and len(loaded) == 7
    check_rows(loaded.sample(rng, (200,)))
    smaller = ReplayBuffer.load(path, capacity=4)  # the newest 4 rows: 203, 204, extra, 300, extra
    assert set(np.unique(smaller.sample(rng, (200,))["t"])) == {204, 300}
    assert smaller.columns[VALID].sum() == len(smaller) == 2


def test_visual_replay_refuses_rows_that_are_not_one_trajectory():
    replay = ReplayBuffer(10, NEXT_OF)
    rows = trajectory(0, 3)
    rows["next_frame"][0] += 5.0
    with pytest.raises(BufferException, match="next_frame"):
        replay.add(rows)
    with pytest.raises(BufferException, match="next_frame"):
        replay.add({k: v for k, v in trajectory(0, 3).items() if k != "next_frame"})


# -- networks, acting, export -------------------------------------------------------------
SMALL = {"trainer": "sac", "batch_size": 32, "buffer_size": 5000, "hidden_units": 16, "num_layers": 1,
         "learning_rate": 3e-3, "time_horizon": 8, "summary_freq": 500}


def visual_networks(encoder, discrete, vector=0, **keys):
    side = VisualEncoder.MIN_SIZE[encoder]
    shapes = ((side, side, 2),) + (((vector,),) if vector else ())
    spec = BehaviorSpec(shapes, "discrete" if discrete else "continuous", (3, 2) if discrete else (2,))
    settings = TrainerSettings.from_dict({**SMALL, "vis_encode_type": encoder, **keys})
    return SACLearner.for_behavior(spec, settings, seed=0, max_steps=100).networks


def camera_inputs(nets, n, seed=0):
    rng = np.random.default_rng(seed)
    inputs = {k: rng.random((n, *s.shape[1:]), dtype=np.float32) for k, s in nets.input_signature().items()}
    if Field.ACTION_MASK in inputs:
        inputs[Field.ACTION_MASK] = np.ones((n, 5), np.float32)
        inputs[Field.ACTION_MASK][::2, 0] = 0.0
    return inputs


@pytest.mark.parametrize("encoder,discrete", [("simple", True), ("nature_cnn", False), ("resnet", True)])
def test_each_encoder_acts_in_one_batched_call_as_the_networks(encoder, discrete):
    nets = visual_networks(encoder, discrete, vector=3 if encoder == "simple" else 0, normalize=True)
    assert all(len(net.visual) == 1 and net.visual[0].encode_type == encoder
               for net in (nets.actor, *nets.critics, *nets.targets))
    inputs = camera_inputs(nets, 7)
    want = nets.act({k: tf.constant(v) for k, v in inputs.items()}, None)[0].numpy()
    policy = SACPolicy(nets, deterministic=True)
    observations = [inputs[Field.visual_obs(0)]] + ([inputs[Field.VECTOR_OBS]] if Field.VECTOR_OBS in inputs else [])
    got = policy.actions(policy.inputs(observations), inputs.get(Field.ACTION_MASK))
    if discrete:
        np.testing.assert_array_equal(got, want)
        assert (got[::2, 0] != 0).all()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="cameras"):
        policy.forward(np.zeros((2, 3), np.float32))


def test_exported_visual_actor_acts_as_the_networks(tmp_path):
    from kerasrl.export import export_policy

    nets = visual_networks("simple", False, vector=3, normalize=True)
    nets.normalizer.update(np.random.default_rng(1).normal(2.0, 3.0, (50, 3)))
    paths = export_policy(nets, str(tmp_path), "Agent", onnx=False)
    loaded = tf.saved_model.load(paths["savedmodel"])
    inputs = {k: tf.constant(v) for k, v in camera_inputs(nets, 5).items()}
    out = loaded.signatures["deterministic"](**inputs)
    np.testing.assert_allclose(out["action"].numpy(), nets.act(inputs, None)[0].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("keys,words", [
    ({"use_recurrent": True, "recurrent_style": "sb3"}, "recurrent_style sb3 is not available with the sac trainer"),
    ({"vis_encode_type": "nature_cnn"}, "(20, 20, 2) is too small for vis_encode_type 'nature_cnn' (needs at least 36"),
])
def test_what_stays_refused_is_one_line(keys, words, tmp_path):
    spec = BehaviorSpec(((20, 20, 2),), "continuous", (1,))
    settings = TrainerSettings.from_dict({**SMALL, **keys})
    with pytest.raises(SACConfigError) as e:
        SACLearner.for_behavior(spec, settings, seed=0, max_steps=10)
    assert words in str(e.value) and "\n" not in str(e.value)
    context = RunContext(summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=0)
    with pytest.raises(UnityTrainerException, match=r"^Behavior Eye: .*" + re.escape(words)):
        SACTrainer("Eye", spec, settings, context)


# -- behavioral cloning from camera demonstrations -----------------------------------------
def image_expert(observations):
    """Moves towards the lit half: the goal is +1 when the right edge is lit."""
    return (observations[0][:, 0, -1, 0] > 0).astype(np.int32)[:, None]


def test_bc_from_camera_demonstrations_makes_the_actor_act_as_the_expert(tmp_path):
    env = VisualSimple1DEnvironment(True, seed=7, image_shape=(20, 20, 1))
    demo = str(tmp_path / "eye.demo")
    recording.record(env, image_expert, 200, demo)
    spec = next(iter(env.behavior_specs.values()))
    settings = TrainerSettings.from_dict(SMALL)
    nets = SACLearner.for_behavior(spec, settings, seed=0, max_steps=100).networks
    bc = sac_pretraining(nets, BehavioralCloningSettings(demo_path=demo, strength=1.0, steps=0, num_epoch=3),
                         settings.hyperparameters.learning_rate, 32, seed=0)
    images = bc.data[Field.visual_obs(0)].numpy()
    wanted = image_expert([images])
    policy = SACPolicy(nets, deterministic=True)
    before = policy.actions(policy.inputs([images]), None)
    losses = [bc.update(step=0)[LOSS_STAT] for _ in range(6)]
    after = policy.actions(policy.inputs([images]), None)
    assert losses[-1] < 0.5 * losses[0], losses
    assert (after == wanted).all() and not (before == wanted).all()


# -- learning -----------------------------------------------------------------------------
@pytest.mark.slow
def test_visual_sac_learns_the_visual_simple1d_task(tmp_path):
    """The goal is only in the image: a policy blind to it scores ≈ −0.01 (chance), the optimum 1.001.

    ``init_entcoef`` 0.1, in ML-Agents' typical range for discrete actions (0.05–0.5): from its
    default 1.0 the entropy bonus outweighs this task's rewards until the coefficient has fallen,
    and on some seeds the actor then turns deterministic before its encoder tells the goals apart
    (its softmax saturates and stops learning): 3 of 6 seeds solved within 3,000 steps, against
    6 of 6 within 1,500 from 0.1."""
    env = VisualSimple1DEnvironment(use_discrete=True, seed=1337, image_shape=(20, 20, 1))
    trainer = run(env, tmp_path, {**SMALL, "vis_encode_type": "simple", "max_steps": 1500, "buffer_init_steps": 100,
                                  "init_entcoef": 0.1, "save_replay_buffer": True}, seed=1337)
    returns = list(trainer.processor.recent_returns)[-10:]
    assert len(returns) == 10 and np.mean(returns) > 0.5, returns
    assert Field.next_visual_obs(0) not in trainer.replay.columns  # each frame held once
    # Within an episode the image does not change and each episode's goal is drawn anew: every
    # sampled next image is its transition's image only if the next rows never cross an episode.
    batch = trainer.replay.sample(np.random.default_rng(0), (2000,))
    np.testing.assert_array_equal(batch[Field.next_visual_obs(0)], batch[Field.visual_obs(0)])
    assert len(np.unique(batch[Field.visual_obs(0)][:, 0, -1, 0])) == 2  # both goals are there
    saved = ReplayBuffer.load(trainer._replay_path(trainer.step))  # the final checkpoint's replay
    assert saved.next_of == trainer.next_of and len(saved) == len(trainer.replay)
    for key, column in trainer.replay.chronological().items():
        np.testing.assert_array_equal(saved.chronological()[key], column)
