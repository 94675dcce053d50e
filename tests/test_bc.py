"""Behavioral cloning: the BC module's shape grid, its schedule, and refusals (kerasrl.bc)."""
import numpy as np
import pytest

from kerasrl import demos, recording
from kerasrl.bc.module import LOSS_STAT, BCModule
from kerasrl.envs.simple import Simple1DEnvironment, VisualSimple1DEnvironment
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.settings import BehavioralCloningSettings, NetworkSettings


def expert(discrete, visual):
    def act(obs):
        goal_right = (obs[0][:, 0, -1, :1] > 0) if visual else (obs > 0)
        if discrete:
            return goal_right.astype(np.int32)
        return np.where(goal_right, 1.0, -1.0).astype(np.float32)

    return act


def make_env(discrete, visual, seed=1):
    if visual:
        return VisualSimple1DEnvironment(discrete, seed=seed, image_shape=(20, 20, 1))
    return Simple1DEnvironment(discrete, seed=seed)


@pytest.fixture(scope="module")
def demo_paths(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demos")
    paths = {}
    for discrete in (True, False):
        for visual in (False, True):
            path = folder / f"{discrete}-{visual}.demo"
            recording.record(make_env(discrete, visual), expert(discrete, visual), 120, path)
            paths[discrete, visual] = str(path)
    return paths


def module_for(spec, path, recurrent, steps=0, **kwargs):
    network = NetworkSettings(hidden_units=16, num_layers=1, use_recurrent=recurrent, memory_size=16,
                              sequence_length=8)
    model = ActorCritic(spec, ["extrinsic"], network, seed=0)
    settings = BehavioralCloningSettings(demo_path=path, strength=1.0, steps=steps, **kwargs)
    return model, BCModule(model, spec, settings, policy_learning_rate=3e-3, default_batch_size=32,
                           default_num_epoch=2, seed=0)


@pytest.mark.parametrize("recurrent", [False, True], ids=["ff", "lstm"])
@pytest.mark.parametrize("visual", [False, True], ids=["vector", "visual"])
@pytest.mark.parametrize("discrete", [True, False], ids=["dc", "cc"])
def test_bc_update_shape_grid(discrete, visual, recurrent, demo_paths):
    spec = make_env(discrete, visual).behavior_specs["VisualSimple1D" if visual else "Simple1D"]
    model, bc = module_for(spec, demo_paths[discrete, visual], recurrent)
    before = [w.copy() for w in model.get_weights()]
    deterministic_before = float(bc.learner.loss(bc.data, None))
    losses = [bc.update(step=0)[LOSS_STAT] for _ in range(3)]
    assert all(np.isfinite(losses)) and losses[0] > 0
    assert float(bc.learner.loss(bc.data, None)) < deterministic_before
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_learning_rate_decays_to_zero_over_steps_and_then_no_update(demo_paths):
    spec = make_env(True, False).behavior_specs["Simple1D"]
    model, bc = module_for(spec, demo_paths[True, False], False, steps=100)
    assert bc.learning_rate(0) == pytest.approx(3e-3)
    assert bc.learning_rate(50) == pytest.approx(1.5e-3)
    assert bc.learning_rate(100) == 0.0 and bc.learning_rate(500) == 0.0
    before = [w.copy() for w in model.get_weights()]
    assert bc.update(step=100) == {LOSS_STAT: 0.0}
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    _, constant = module_for(spec, demo_paths[True, False], False, steps=0)
    assert constant.learning_rate(10**9) == pytest.approx(3e-3)


def test_samples_per_update_caps_the_minibatches(demo_paths):
    spec = make_env(True, False).behavior_specs["Simple1D"]
    _, bc = module_for(spec, demo_paths[True, False], False, batch_size=16, num_epoch=1, samples_per_update=32)
    assert bc.max_batches == 2
    assert bc.learner.plan(bc.n_rows, bc.batch_size, bc.num_epoch, bc.max_batches, 0).shape == (2, 16)


def test_a_demo_for_another_spec_is_refused(demo_paths):
    spec = make_env(False, False).behavior_specs["Simple1D"]
    with pytest.raises(demos.DemoError, match="discrete actions .*continuous actions"):
        module_for(spec, demo_paths[True, False], False)
