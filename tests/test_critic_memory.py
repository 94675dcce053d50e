"""``critic_memory: false``: a recurrent policy whose critic is an MLP on the current observation
(sb3-contrib's ``enable_critic_lstm=False``), in the settings, the Keras model, its numpy mirror,
training with checkpoints and export."""
import numpy as np
import pytest
import tensorflow as tf
from test_export import keras_deterministic
from test_numpy_policy import SPECS, assert_acts_alike, trained_like

from kerasrl.bc.trainer import bc_model
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import MultiBranchMaskedEnvironment
from kerasrl.exception import TrainerConfigError
from kerasrl.export import export_policy
from kerasrl.fields import Field
from kerasrl.models.numpy_policy import NumpyActorCritic
from kerasrl.settings import NetworkSettings, RunContext, load_trainer_config
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers import TrainerController, create_trainers

NO_MEMORY = {"use_recurrent": True, "critic_memory": False}


def test_settings_default_implication_and_refusals():
    assert NetworkSettings().critic_memory is True
    assert NetworkSettings(**NO_MEMORY).separate_value_network is True  # implied when unset
    with pytest.raises(TrainerConfigError, match="critic_memory: false needs use_recurrent: true"):
        NetworkSettings(critic_memory=False)
    with pytest.raises(TrainerConfigError, match="critic_memory: false.*separate_value_network: false"):
        NetworkSettings(**NO_MEMORY, separate_value_network=False)


def test_todays_layout_reads_the_key_under_network_settings():
    config = {"behaviors": {"B": {"trainer_type": "ppo", "network_settings": {
        "memory": {"memory_size": 32, "sequence_length": 8}, "critic_memory": False}}}}
    network = load_trainer_config(config).settings_for("B").network
    assert network.use_recurrent and not network.critic_memory and network.separate_value_network


def inputs_for(spec, model, n, rng, memory=None):
    inputs = {Field.VECTOR_OBS: rng.normal(size=(n, spec.vector_observation_size)).astype(np.float32),
              Field.MEMORY: rng.normal(size=(n, model.memory_size)).astype(np.float32) if memory is None else memory}
    if spec.is_discrete:
        inputs[Field.ACTION_MASK] = np.ones((n, spec.action_mask_size), np.float32)
    if model.uses_prev_action:
        inputs[Field.PREV_ACTION] = np.stack([rng.integers(0, b, n) for b in spec.discrete_branches], 1).astype(np.int32)
    return inputs


@pytest.mark.parametrize("style", ["mlagents", "sb3"])
def test_the_policy_holds_the_memory_and_the_value_ignores_it(style):
    spec = SPECS["discrete"]
    model = trained_like(spec, memory_size=24, recurrent_style=style, **NO_MEMORY)
    assert model.body.lstm.units == 12 and model.value_body.lstm is None
    assert model.uses_prev_action == (style == "mlagents")
    rng = np.random.default_rng(0)
    a = inputs_for(spec, model, 8, rng)
    b = {**a, Field.MEMORY: rng.normal(size=a[Field.MEMORY].shape).astype(np.float32)}
    if model.uses_prev_action:  # the previous action is the policy's too
        b[Field.PREV_ACTION] = (a[Field.PREV_ACTION] + 1) % np.asarray(spec.discrete_branches, np.int32)
    out_a, out_b = model(a), model(b)
    assert out_a[Field.MEMORY_OUT].shape == (8, 24)
    for name in ("extrinsic", "gail"):
        np.testing.assert_array_equal(out_a["values"][name].numpy(), out_b["values"][name].numpy())
    assert not np.allclose(out_a["logits"].numpy(), out_b["logits"].numpy())


def test_sequences_give_every_row_its_own_value():
    """Over sequences the policy's LSTM runs from each sequence's memory; the value of a row
    is its value alone."""
    spec = SPECS["continuous"]
    model = trained_like(spec, memory_size=16, **NO_MEMORY)
    rng = np.random.default_rng(1)
    rows = inputs_for(spec, model, 12, rng)
    seqs = {**rows, Field.MEMORY: rows[Field.MEMORY][::4]}
    _, _, values = model.evaluate_actions(seqs, rng.normal(size=(12, spec.action_size)).astype(np.float32),
                                           sequence_length=4)
    np.testing.assert_allclose(values["extrinsic"].numpy(), model(rows)["values"]["extrinsic"].numpy(), atol=1e-6)


#: The mirror's layouts: narrow (block-diagonal kernels), wide (stacked); with the LSTM on the
#: observations, the first layer stacked where the LSTM is as wide as the observations.
CASES = {"discrete": (SPECS["discrete"], "mlagents", {}),
         "continuous-wide": (SPECS["continuous"], "mlagents", {"hidden_units": 128}),
         "sb3-discrete": (SPECS["discrete"], "sb3", {}),
         "sb3-continuous-wide": (SPECS["continuous"], "sb3", {"hidden_units": 128}),
         "sb3-stacked-first": (BehaviorSpec(((8,),), "discrete", (3,)), "sb3", {"hidden_units": 128, "memory_size": 16})}


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_mirror_equals_the_keras_model(case):
    spec, style, extra = CASES[case]
    model = trained_like(spec, recurrent_style=style, **{"memory_size": 24, **extra}, **NO_MEMORY)
    mirror = NumpyActorCritic(model)
    if case == "sb3-stacked-first":  # the LSTM's 8 outputs beside the 8 observations: one stacked kernel
        assert mirror.layers[0][0].ndim == 3
    rng = np.random.default_rng(2)
    n, memory = 16, None
    for _ in range(2):  # the first step's memory fed back
        inputs = inputs_for(spec, model, n, rng, memory)
        noise = (np.maximum(rng.random((n, spec.action_size), dtype=np.float32), 1e-7) if spec.is_discrete
                 else rng.standard_normal((n, spec.action_size), dtype=np.float32))
        tf_out, np_out = assert_acts_alike(model, mirror, spec, inputs, noise)
        np.testing.assert_allclose(mirror.values(inputs)["gail_value_estimates"], tf_out["gail_value_estimates"],
                                   rtol=1e-4, atol=1e-5)
        memory = np_out[Field.MEMORY_OUT]


SMALL = {"hidden_units": 16, "num_layers": 1, "batch_size": 16, "buffer_size": 32, "time_horizon": 16,
         "summary_freq": 50, "use_recurrent": True, "memory_size": 16, "sequence_length": 4, "critic_memory": False}


def trainer_for(tmp_path, env, max_steps, load_model=False):
    manager = SimpleEnvManager(env)
    context = RunContext.in_results_dir(str(tmp_path), "t", seed=3, max_steps=max_steps, load_model=load_model)
    trainers = create_trainers(load_trainer_config({"default": SMALL}), manager.behavior_specs, context)
    tc = TrainerController(trainers, context.model_path, context.summaries_dir, "t", save_freq=10**6, training_seed=3)
    return tc, manager, next(iter(trainers.values()))


def test_recurrent_ppo_trains_saves_and_resumes(tmp_path):
    tc, manager, trainer = trainer_for(tmp_path, MultiBranchMaskedEnvironment(seed=1), 100)
    tc.start_learning(manager)
    assert trainer.last_update_metrics, "no update ran"
    trainer.save_model()
    model = trainer.learner.actor_critic
    assert model.value_body.lstm is None and model.body.lstm.units == 8
    saved = {v.path: v.numpy() for v in model.weights}
    tc, manager, restored = trainer_for(tmp_path, MultiBranchMaskedEnvironment(seed=2), 200, load_model=True)
    assert restored.get_step == trainer.get_step
    for v in restored.learner.actor_critic.weights:
        np.testing.assert_array_equal(v.numpy(), saved[v.path], err_msg=v.path)
    tc.start_learning(manager)
    assert restored.get_step > trainer.get_step


@pytest.mark.parametrize("style", ["mlagents", "sb3"])
def test_savedmodel_export_gives_the_keras_actions_values_and_memory(tmp_path, style):
    spec = SPECS["discrete"]
    model = trained_like(spec, memory_size=16, recurrent_style=style, **NO_MEMORY)
    inputs = inputs_for(spec, model, 32, np.random.default_rng(3))
    expected, out = keras_deterministic(model, inputs)
    loaded = tf.saved_model.load(export_policy(model, str(tmp_path), style)["savedmodel"])
    det = loaded.signatures["deterministic"](**{k: tf.constant(v) for k, v in inputs.items()})
    np.testing.assert_allclose(det["action"].numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(det["value_estimate"].numpy(), out["values"]["extrinsic"].numpy(), atol=1e-5)
    np.testing.assert_allclose(det["recurrent_out"].numpy(), out[Field.MEMORY_OUT].numpy(), atol=1e-5)


def test_a_bc_trainer_with_critic_memory_false_builds_its_one_stream_policy():
    """BC has no critic: its one-stream model takes the key as given (it once raised the error of
    ``separate_value_network: false``, a key the user never set)."""
    spec = SPECS["discrete"]
    config = {"default": {"trainer": "offline_bc", "demo_path": "unused.demo", "batches_per_epoch": 1, "use_recurrent": True,
                          "memory_size": 24, "sequence_length": 4, "critic_memory": False}}
    settings = load_trainer_config(config).settings_for("B")
    model, _ = bc_model("B", spec, settings, seed=0)
    assert model.value_body is None and model.memory_size == 24
