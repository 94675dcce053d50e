"""kerasrl's SAC gradient step computes what Stable-Baselines3's ``SAC.train`` computes.

Same initial weights (kerasrl's copied into SB3's actor, critics and target critics), same
mini-batch, same Gaussian noise for the policy's samples at the batch and at the next
observations: after one gradient step (entropy coefficient, critics, actor, then the soft
target update) every weight agrees to float rounding. Runs only where ``stable_baselines3``
(and torch) are installed: it is the reference we compare against, not a dependency.

``test_update_directions`` needs no peer: it fails on a wrong sign in any of the three losses
or on a missing or wrong target update.
"""
import numpy as np
import pytest
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.sac.learner import NEXT_NOISE, NOISE, REWARDS, SACLearner
from kerasrl.settings import TrainerSettings
from kerasrl.spec import BehaviorSpec

OBS, ACT, BATCH, HIDDEN = 3, 2, 64, 32


def make_learner(**keys):
    settings = TrainerSettings.from_dict({"trainer": "sac", "hidden_units": HIDDEN, "num_layers": 2,
                                          "activation": "relu", "batch_size": BATCH, "learning_rate": 1e-3, **keys})
    return SACLearner.for_behavior(BehaviorSpec(((OBS,),), "continuous", (ACT,)), settings, seed=3, max_steps=1000)


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    return {Field.VECTOR_OBS: rng.standard_normal((BATCH, OBS), dtype=np.float32),
            Field.NEXT_VECTOR_OBS: rng.standard_normal((BATCH, OBS), dtype=np.float32),
            Field.ACTIONS: rng.uniform(-1, 1, (BATCH, ACT)).astype(np.float32),
            REWARDS: rng.standard_normal((BATCH, 1), dtype=np.float32),
            Field.TERMINATED: (rng.random(BATCH) < 0.2).astype(np.float32),
            NOISE: rng.standard_normal((BATCH, ACT), dtype=np.float32),
            NEXT_NOISE: rng.standard_normal((BATCH, ACT), dtype=np.float32)}


def one_step(learner, batch):
    return learner.update({k: v[None] for k, v in batch.items()}, 1, learner.hyperparameters.learning_rate)


def numpy_weights(layers):
    return [w.numpy().copy() for layer in layers for w in layer.weights]


def test_sac_step_matches_stable_baselines3():
    sb3 = pytest.importorskip("stable_baselines3", reason="stable_baselines3 is not installed")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    gymnasium = pytest.importorskip("gymnasium")
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    learner = make_learner()
    nets = learner.networks

    class Spaces(gymnasium.Env):  # only the spaces matter: SB3 never steps it here
        observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (ACT,), np.float32)

    model = sb3.SAC("MlpPolicy", Spaces(), learning_rate=1e-3, batch_size=BATCH, tau=0.005, gamma=0.99, learning_starts=0,
                    policy_kwargs={"net_arch": [HIDDEN, HIDDEN]}, seed=0, device="cpu")
    model.set_logger(configure(None, []))

    def linears(module):
        return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]

    def copy(keras_layers, torch_linears):
        dense = [d for layer in keras_layers for d in layer]
        assert len(dense) == len(torch_linears)
        with torch.no_grad():
            for d, lin in zip(dense, torch_linears):
                lin.weight.copy_(torch.tensor(d.kernel.numpy().T))
                lin.bias.copy_(torch.tensor(d.bias.numpy()))

    actor = model.actor
    copy([nets.actor.body.dense, [nets.actor.mu, nets.actor.log_std]],
         linears(actor.latent_pi) + [actor.mu, actor.log_std])
    for i, (critic, target) in enumerate(zip(nets.critics, nets.targets)):
        copy([critic.body.dense, [critic.head]], linears(model.critic.q_networks[i]))
        copy([target.body.dense, [target.head]], linears(model.critic_target.q_networks[i]))

    batch = make_batch()
    t = {k: torch.tensor(v) for k, v in batch.items()}
    model.replay_buffer.sample = lambda *a, **k: ReplayBufferSamples(
        t[Field.VECTOR_OBS], t[Field.ACTIONS], t[Field.NEXT_VECTOR_OBS], t[Field.TERMINATED][:, None], t[REWARDS], None)
    noises = [t[NOISE], t[NEXT_NOISE]]  # SB3 samples at the batch first, then at the next observations
    original = torch.distributions.Normal.rsample
    torch.distributions.Normal.rsample = lambda self, shape=(): self.loc + self.scale * noises.pop(0)
    try:
        model.train(gradient_steps=1, batch_size=BATCH)
    finally:
        torch.distributions.Normal.rsample = original
    assert not noises
    one_step(learner, batch)

    def check(keras_layers, torch_linears, what):
        dense = [d for layer in keras_layers for d in layer]
        for d, lin in zip(dense, torch_linears):
            np.testing.assert_allclose(d.kernel.numpy(), lin.weight.detach().numpy().T, rtol=1e-4, atol=2e-6, err_msg=what)
            np.testing.assert_allclose(d.bias.numpy(), lin.bias.detach().numpy(), rtol=1e-4, atol=2e-6, err_msg=what)

    check([nets.actor.body.dense, [nets.actor.mu, nets.actor.log_std]],
          linears(actor.latent_pi) + [actor.mu, actor.log_std], "actor")
    for i, (critic, target) in enumerate(zip(nets.critics, nets.targets)):
        check([critic.body.dense, [critic.head]], linears(model.critic.q_networks[i]), f"critic {i}")
        check([target.body.dense, [target.head]], linears(model.critic_target.q_networks[i]), f"target {i}")
    np.testing.assert_allclose(nets.log_ent_coef.numpy(), model.log_ent_coef.detach().numpy(), rtol=1e-5, atol=1e-7)


def test_update_directions():
    """Each loss moves its parameters the right way, and the targets follow by ``tau``."""
    learner = make_learner(tau=0.25)
    nets = learner.networks
    batch = make_batch(1)
    obs = tf.constant(batch[Field.VECTOR_OBS])
    _, log_pi = nets.sample(obs, tf.constant(batch[NOISE]))
    gap = float(np.mean(log_pi.numpy()) + nets.target_entropy[0])
    log_alpha = nets.log_ent_coef.numpy().copy()
    targets_before = numpy_weights(nets.targets)
    first = one_step(learner, batch)
    # α rises when the policy's entropy is below the target (log π + H̄ > 0), falls otherwise
    assert np.sign(nets.log_ent_coef.numpy()[0] - log_alpha[0]) == np.sign(gap)
    # soft update: target ← (1 − τ) target + τ critic, with the critics after their step
    expected = [0.75 * t + 0.25 * c for t, c in zip(targets_before, numpy_weights(nets.critics))]
    for got, want in zip(numpy_weights(nets.targets), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert any(not np.allclose(t, c) for t, c in zip(numpy_weights(nets.targets), numpy_weights(nets.critics)))
    for _ in range(30):
        last = one_step(learner, batch)
    assert last["critic_loss"] < first["critic_loss"]
    assert last["actor_loss"] < first["actor_loss"]
