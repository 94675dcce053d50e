"""One acting path: ``PPO.predict``, the exported SavedModel, ``ActorCriticPolicy`` / ``BCPolicy`` (compiled
TF and numpy mirror) and ``ActorCritic.act`` choose the same action for the same inputs, weights
and noise, deterministic or sampled."""
import numpy as np
import pytest
import tensorflow as tf

import kerasrl
from kerasrl.bc.trainer import BCPolicy
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.envs.base import StepResult
from kerasrl.export import export_policy
from kerasrl.fields import Field

RECURRENT = dict(use_recurrent=True, memory_size=16, sequence_length=4)
#: A built-in environment and the network keys of each case.
CASES = {
    "discrete": ("MultiBranchMasked", dict(normalize=True)),
    "continuous": ("Simple1DContinuous", dict(normalize=True)),
    "continuous_sb3": ("Simple1DContinuous", dict(gaussian_style="sb3", log_std_init=-0.5, action_scale=2.0)),
    "recurrent": ("Simple1D", RECURRENT),
    "recurrent_continuous": ("Simple1DContinuous", RECURRENT),
    "visual": ("VisualSimple1D", dict(vis_encode_type="simple")),
}
N = 16
INFERENCE = ("tf", "numpy")


@pytest.fixture(scope="module", params=sorted(CASES))
def agent(request, tmp_path_factory):
    """A PPO agent whose weights and normalizer are moved away from their initial values."""
    env, network = CASES[request.param]
    ppo = kerasrl.PPO(env, seed=4, run_dir=str(tmp_path_factory.mktemp(request.param)), hidden_units=16, **network)
    model = ppo.actor_critic
    rng = np.random.default_rng(0)
    for w in model.trainable_weights:  # spread the logits: no near-ties between the paths' round-offs
        w.assign(w.numpy() + rng.normal(scale=0.5, size=w.shape).astype(np.float32))
    if model.normalizer is not None:
        model.normalizer.update(rng.normal(2.0, 3.0, (50, model.vector_size)).astype(np.float32))
    yield ppo
    ppo.close()


def step_results(spec, steps=2, seed=1):
    """``steps`` results of the same ``N`` agents (random observations; random masks, one action
    of every branch allowed at least)."""
    rng = np.random.default_rng(seed)
    results = []
    for _ in range(steps):
        obs = [rng.normal(size=(N, *s)).astype(np.float32) for s in spec.observation_shapes]
        mask = None
        if spec.is_discrete:
            mask = (rng.random((N, spec.action_mask_size)) < 0.5).astype(np.float32)
            for start, b in zip(np.cumsum([0, *spec.discrete_branches[:-1]]), spec.discrete_branches):
                mask[np.arange(N), start + rng.integers(0, b, N)] = 1.0
        results.append(StepResult(np.arange(N), obs, np.zeros(N), np.zeros(N, bool), np.zeros(N, bool), mask))
    return results


def reference_deterministic(model, inputs):
    """The definition, from the model's raw outputs: per branch the argmax of the masked
    probabilities; for continuous actions ``clip(μ, −s, s) / s``."""
    out = model({k: tf.constant(v) for k, v in inputs.items()})
    if not model.is_discrete:
        return np.clip(out["mu"].numpy(), -model.action_scale, model.action_scale) / model.action_scale
    logits, actions, start = out["logits"].numpy(), [], 0
    for b in model.branches:
        z = logits[:, start:start + b]
        p = np.exp(z - z.max(-1, keepdims=True))
        actions.append(((p / p.sum(-1, keepdims=True) + 1e-7) * inputs[Field.ACTION_MASK][:, start:start + b]).argmax(-1))
        start += b
    return np.stack(actions, -1)


def assert_same_actions(actual, expected, model, what):
    if model.is_discrete:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=what)


def act(model, inputs, noise, deterministic=False):
    """``ActorCritic.act`` with numpy in and out."""
    out = model.act({k: tf.constant(v) for k, v in inputs.items()}, tf.constant(noise), deterministic)
    return {k: v.numpy() for k, v in out.items()}


def test_deterministic_action_is_the_same_on_every_path(agent, tmp_path):
    model, spec = agent.actor_critic, agent.spec
    result = step_results(spec, steps=1)[0]
    inputs = model.acting_inputs(result.observations, result.action_mask)
    expected = reference_deterministic(model, inputs)
    paths = {"predict": agent.predict(result.observations, result.action_mask, deterministic=True),
             "ActorCritic.act": act(model, inputs, np.zeros((N, spec.action_size), np.float32), True)[Field.ACTIONS]}
    signature = tf.saved_model.load(export_policy(model, str(tmp_path), "b", onnx=False)["savedmodel"])
    paths["SavedModel"] = signature.signatures["deterministic"](**{k: tf.constant(v) for k, v in inputs.items()})[
        "action"].numpy()
    for inference in INFERENCE:
        paths[f"ActorCriticPolicy {inference}"] = ActorCriticPolicy(spec, model, inference=inference,
                                                    deterministic=True).get_action(result).action
        if spec.is_continuous:
            paths[f"BCPolicy {inference}"] = BCPolicy(spec, model, inference=inference).get_action(result).action
    for what, actions in paths.items():
        assert_same_actions(actions, expected, model, what)


def test_stochastic_action_with_the_same_noise_is_the_same(agent, monkeypatch):
    """Over two steps (recurrent: the memory and previous action carried), with the noise of the
    policy's seeded generator; and ``predict(deterministic=False)`` with the noise of its generator."""
    model, spec = agent.actor_critic, agent.spec
    results = step_results(spec)
    policies = {inference: ActorCriticPolicy(spec, model, seed=7, inference=inference) for inference in INFERENCE}
    if spec.is_discrete:  # BC samples discrete actions as PPO does
        policies.update({f"BC {inference}": BCPolicy(spec, model, seed=7, inference=inference) for inference in INFERENCE})
    rng = np.random.default_rng(7)
    memory = prev = None
    for result in results:
        inputs = model.acting_inputs(result.observations, result.action_mask, memory, prev)
        expected = act(model, inputs, model.draw_noise(rng, N))
        for what, policy in policies.items():
            assert_same_actions(policy.get_action(result).action, expected[Field.ACTIONS], model, what)
        if model.use_recurrent:
            memory = expected[Field.MEMORY_OUT]
            prev = expected[Field.ACTIONS] if model.uses_prev_action else None
    result = results[0]
    inputs = model.acting_inputs(result.observations, result.action_mask)
    seeded = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda seed=11: seeded(seed))
    expected = act(model, inputs, model.draw_noise(seeded(11), N))[Field.ACTIONS]
    assert_same_actions(agent.predict(result.observations, result.action_mask, deterministic=False), expected, model,
                        "predict")


def test_numpy_mirror_acts_deterministically_as_actor_critic(agent):
    """Every output of the deterministic ``act`` (actions, log-probs, entropy, values, memory),
    whatever the noise; a deterministic policy draws none."""
    model, spec = agent.actor_critic, agent.spec
    result = step_results(spec, steps=1)[0]
    policy = ActorCriticPolicy(spec, model, inference="numpy", deterministic=True)
    inputs = policy.model_inputs(result)
    assert not policy.draw_noise(N).any()
    noise = model.draw_noise(np.random.default_rng(3), N)
    expected = act(model, inputs, noise, True)
    out = policy.numpy_model.act(inputs, noise, True)
    assert set(out) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(out[key], value, rtol=1e-4, atol=1e-5, err_msg=key)


def test_acting_inputs_default_to_all_allowed_and_zero_memory(agent):
    model, spec = agent.actor_critic, agent.spec
    result = step_results(spec, steps=1)[0]
    inputs = model.acting_inputs(result.observations)
    assert sorted(inputs) == sorted(model.input_signature())
    if spec.is_discrete:
        assert (inputs[Field.ACTION_MASK] == 1).all() and inputs[Field.ACTION_MASK].shape == (N, spec.action_mask_size)
    if model.use_recurrent:
        assert not inputs[Field.MEMORY].any() and inputs[Field.MEMORY].shape == (N, model.memory_size)
    policy_inputs = ActorCriticPolicy(spec, model, inference="tf").model_inputs(
        StepResult(result.agent_ids, result.observations, result.rewards, result.terminated, result.truncated))
    assert sorted(policy_inputs) == sorted(inputs)
    for key, value in inputs.items():
        np.testing.assert_array_equal(policy_inputs[key], value, err_msg=key)


@pytest.mark.parametrize("inference", INFERENCE)
def test_an_episode_after_a_done_step_starts_from_zero_memory_and_action(inference):
    """The step after an agent's episode ends (terminated or truncated) is the first of its next
    episode: its memory and previous action are zeros, as at the very first step, while the other
    agents keep theirs (the memory used to be one LSTM step on the final observation)."""
    from kerasrl.envs.base import BehaviorSpec
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.settings import NetworkSettings

    spec = BehaviorSpec(((3,),), "discrete", (3,))
    model = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=8, **RECURRENT), seed=2)
    policy = ActorCriticPolicy(spec, model, seed=1, inference=inference)
    obs = [np.full((3, 3), 0.7, np.float32)]

    def step(terminated=(False,) * 3, truncated=(False,) * 3):
        return policy.evaluate(StepResult(np.arange(3), obs, np.zeros(3), np.array(terminated), np.array(truncated)))

    step()
    before = step(terminated=(True, False, False), truncated=(False, True, False))
    after = step()
    assert not after[Field.MEMORY][:2].any() and not after[Field.PREV_ACTION][:2].any()
    np.testing.assert_array_equal(after[Field.MEMORY][2], before[Field.MEMORY_OUT][2])
    np.testing.assert_array_equal(after[Field.PREV_ACTION][2], before[Field.ACTIONS][2])
    assert np.abs(before[Field.MEMORY_OUT][:2]).max() > 1e-3  # what the next episode used to start from
