"""SAC under MirroredStrategy on 2 logical CPUs equals one device on the same mini-batches.

As tests/test_distribute.py does for PPO, in a subprocess (logical devices are split before
TensorFlow starts): several gradient steps of one update, discrete (two branches, a masked
action, a normalizer), continuous (two reward signals) and visual (a camera and a vector
observation, ``simple`` encoders), give every network's weights —
actor, critics, targets, entropy coefficients — within 1e-5 of the one-device update (with
``dtype_policy: mixed_bfloat16``, within bfloat16's rounding), the
replicas bit-identical, the metrics equal; checkpoints cross between the strategies; a
``batch_size`` the replicas cannot share is refused; behavioral cloning (``pretraining``) on
the actor equals one device's too; ``kerasrl.SAC`` trains under the strategy.
"""
import pytest
from test_distribute import run_script

SAC_UPDATES = """
import kerasrl
from kerasrl.exception import TrainerError
from kerasrl.fields import Field
from kerasrl.sac.learner import NEXT_NOISE, NOISE, REWARDS, SACLearner
from kerasrl.settings import TrainerSettings
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers.checkpoint import CheckpointSaver

SIGNALS = {"extrinsic": {"gamma": 0.99, "strength": 1.0}, "curiosity": {"gamma": 0.9, "strength": 0.1, "encoding_size": 8}}
CASES = {
    "discrete": (BehaviorSpec(((4,),), "discrete", (3, 2)), {"normalize": True}),
    "continuous": (BehaviorSpec(((5,),), "continuous", (2,)), {"reward_signals": SIGNALS}),
    "visual": (BehaviorSpec(((20, 20, 1), (3,)), "continuous", (2,)), {"vis_encode_type": "simple"}),
    "mixed": (BehaviorSpec(((5,),), "continuous", (2,)), {"dtype_policy": "mixed_bfloat16"}),
}
#: How close the strategy's update comes to one device's: float rounding, or (bfloat16 hidden
#: layers, whose products round each replica's share of a gradient before the sum) a few Adam
#: steps of bfloat16 rounding apart.
TOLERANCE = {"mixed": 2e-2}
K, B = 4, 16

def build(case, mirrored, batch_size=B):
    spec, extra = CASES[case]
    settings = TrainerSettings.from_dict({"trainer": "sac", "batch_size": batch_size, "buffer_size": 1000,
                                          "hidden_units": 16, "learning_rate": 3e-3, "init_entcoef": 0.5, **extra})
    distribute.set_strategy(strategy if mirrored else None)
    try:
        if not mirrored:
            return SACLearner.for_behavior(spec, settings, seed=3, max_steps=100)
        with strategy.scope():
            return SACLearner.for_behavior(spec, settings, seed=3, max_steps=100)
    finally:
        distribute.set_strategy(strategy)

def stacked_batch(case, streams):
    spec, _ = CASES[case]
    rng = np.random.default_rng(5)
    size = spec.vector_observation_size
    b = {Field.VECTOR_OBS: rng.normal(1.0, 2.0, (K, B, size)).astype(np.float32),
         Field.NEXT_VECTOR_OBS: rng.normal(1.0, 2.0, (K, B, size)).astype(np.float32),
         REWARDS: rng.standard_normal((K, B, streams)).astype(np.float32),
         Field.TERMINATED: (rng.random((K, B)) < 0.2).astype(np.float32)}
    for j, shape in enumerate(spec.visual_observation_shapes):
        b[Field.visual_obs(j)] = rng.random((K, B, *shape), dtype=np.float32)
        b[Field.next_visual_obs(j)] = rng.random((K, B, *shape), dtype=np.float32)
    if spec.is_discrete:
        mask = np.ones((K, B, 5), np.float32)
        mask[..., 1] = 0.0  # action 1 of branch 0 is never allowed
        b[Field.ACTIONS] = np.stack([rng.choice([0, 2], (K, B)), rng.integers(0, 2, (K, B))], -1).astype(np.int32)
        b[Field.ACTION_MASK] = b[Field.NEXT_ACTION_MASK] = mask
    else:
        b[Field.ACTIONS] = rng.uniform(-1, 1, (K, B, 2)).astype(np.float32)
        b[NOISE] = rng.standard_normal((K, B, 2)).astype(np.float32)
        b[NEXT_NOISE] = rng.standard_normal((K, B, 2)).astype(np.float32)
    return b

for case in CASES:
    tol = TOLERANCE.get(case, 1e-5)
    single, mirrored = build(case, False), build(case, True)
    assert mirrored.replicas == N and single.replicas == 1
    nets = single.networks
    if nets.normalizer is not None:
        obs = np.random.default_rng(1).normal(1.0, 2.0, (50, 4))
        nets.normalizer.update(obs)
        mirrored.networks.normalizer.update(obs)
    batch = stacked_batch(case, len(nets.stream_names))
    initial = {v.path: v.numpy().copy() for v in nets.trainable_weights}
    for lr in (3e-3, 1e-3):  # two updates: the second starts from moved weights and Adam moments
        one = single.update(batch, 3, lr)
        two = mirrored.update(batch, 3, lr)
        for k in one:
            assert abs(one[k] - two[k]) < tol * max(1.0, abs(one[k])), (case, k, one[k], two[k])
    for a, b in zip(nets.weights, mirrored.networks.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=tol, err_msg=f"{case} {a.path}")
        vals = [c.numpy() for c in b.value.values]
        assert len(vals) == N and all(np.array_equal(vals[0], x) for x in vals[1:]), (case, b.path)
    for name, opt in mirrored.optimizers.items():
        assert int(opt.iterations.numpy()) == 6, (case, name)
    moved = {w.path: np.abs(w.numpy() - initial[w.path]).max() for w in nets.trainable_weights}
    assert all(m > 1e-6 for m in moved.values()), (case, moved)
    targets = [v.numpy() for v in nets.target_variables]
    critics = [v.numpy() for v in nets.critic_variables]
    assert max(np.abs(t - c).max() for t, c in zip(targets, critics)) > 1e-6  # the targets follow, slowly

    # Checkpoints: written under the strategy, restored on one device.
    folder = tempfile.mkdtemp()
    CheckpointSaver(folder, 1, model=mirrored.networks, **mirrored.optimizers).save(5, 6)
    fresh = build(case, False)
    CheckpointSaver(folder, 1, model=fresh.networks, **fresh.optimizers).restore()
    for a, b in zip(fresh.networks.weights, mirrored.networks.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

# Behavioral cloning (pretraining) on the actor: one update of several mini-batches.
from kerasrl import recording
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.sac.bc import sac_pretraining
from kerasrl.settings import BehavioralCloningSettings

demo = os.path.join(tempfile.mkdtemp(), "expert.demo")
recording.record(Simple1DEnvironment(False, seed=7), lambda o: np.where(o > 0, 1.0, -1.0).astype(np.float32), 80, demo)
pretraining = BehavioralCloningSettings(demo_path=demo, strength=1.0, steps=0, num_epoch=2)
CASES["simple1d"] = (Simple1DEnvironment(False, seed=1).behavior_specs["Simple1D"], {})
clones = []
for mirrored in (False, True):
    nets = build("simple1d", mirrored).networks
    distribute.set_strategy(strategy if mirrored else None)
    clones.append(sac_pretraining(nets, pretraining, 3e-3, 16, seed=4))
    distribute.set_strategy(strategy)
losses = [c.update(0) for c in clones]
assert abs(losses[0]["Losses/Pretraining Loss"] - losses[1]["Losses/Pretraining Loss"]) < 1e-5, losses
for a, b in zip(clones[0].learner.imitator.variables, clones[1].learner.imitator.variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-5, err_msg=f"bc {a.path}")
assert int(clones[1].optimizer.iterations.numpy()) == clones[0].batches_per_update > 1

try:
    build("discrete", True, batch_size=2 * N + 1)
except TrainerError as e:
    assert f"batch_size {2 * N + 1} cannot be split over {N} replicas" in str(e), e
else:
    raise AssertionError("a batch_size the replicas cannot share was accepted")

agent = kerasrl.SAC("Simple1D", seed=0, batch_size=16, buffer_size=500, hidden_units=8, time_horizon=8)
assert agent.trainer.learner.replicas == N
logs = agent.fit(200, verbose=0).history
assert logs["critic_loss"] and all(np.isfinite(logs["critic_loss"])), logs
agent.close()
print("SAC_OK")
"""


@pytest.mark.slow
def test_mirrored_sac_update_matches_single_device():
    run_script(SAC_UPDATES, 2, "SAC_OK")
