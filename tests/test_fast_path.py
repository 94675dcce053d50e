"""Fast by default: without kerasrl's extra keys, the path measured fastest is chosen in
``kerasrl.common.fast_path`` and logged; an explicit key wins."""
import logging

import numpy as np
import pytest

from kerasrl.common.fast_path import XLA_FASTER, policy_kind
from kerasrl.common.policy import ActorCriticPolicy
from kerasrl.envs.base import BehaviorSpec
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.learner import PPOLearner
from kerasrl.settings import NetworkSettings, PPOSettings, TrainerSettings

pytestmark = pytest.mark.default_fast_path  # the choice itself is under test

VECTOR = BehaviorSpec(((4,),), "discrete", (2,))
VISUAL = BehaviorSpec(((20, 20, 1),), "discrete", (2,))
NETWORKS = {
    "mlp": (VECTOR, {}),
    "lstm": (VECTOR, {"use_recurrent": True, "memory_size": 16, "sequence_length": 4}),
    "cnn": (VISUAL, {}),
}


def test_defaults_leave_the_choice_to_fast_path():
    assert PPOSettings().jit_compile is None
    assert TrainerSettings().inference == "auto"
    assert TrainerSettings.from_dict({"jit_compile": False}).hyperparameters.jit_compile is False


@pytest.mark.parametrize("kind", list(NETWORKS))
def test_default_is_the_measured_fastest_and_is_logged(kind, caplog):
    spec, network = NETWORKS[kind]
    model = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=8, **network), seed=0, name=f"ac_{kind}")
    assert policy_kind(model) == kind
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        learner = PPOLearner(model, PPOSettings())
        policy = ActorCriticPolicy(spec, model)
    assert learner.use_xla == (kind in XLA_FASTER) == (kind != "cnn")  # XLA's CPU convolutions are slow
    assert policy.inference == "numpy"  # vector MLP and LSTM mirrors; simple/nature_cnn convolutions
    text = caplog.text
    how = "compiled with" if kind != "cnn" else "without"
    assert f"ac_{kind}: PPO update {how} XLA (the fastest measured for a {kind} policy)" in text
    assert f"ac_{kind}: acting with the numpy mirror policy" in text


def test_explicit_keys_win(caplog):
    model = ActorCritic(VECTOR, ["extrinsic"], NetworkSettings(hidden_units=8), seed=0, name="ac_explicit")
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        assert PPOLearner(model, PPOSettings(jit_compile=False)).use_xla is False
        assert ActorCriticPolicy(VECTOR, model, inference="tf").inference == "tf"
    assert "ac_explicit: PPO update without XLA (jit_compile is set)" in caplog.text
    assert "ac_explicit: acting with the compiled TF policy (inference is set)" in caplog.text


def _zoo_learner(name: str, jit_compile: bool = True) -> PPOLearner:
    model = ActorCritic(VECTOR, ["extrinsic"], NetworkSettings(hidden_units=8, separate_value_network=True), seed=3,
                        name=name)
    return PPOLearner(model, PPOSettings(batch_size=32, buffer_size=31, num_epoch=2, jit_compile=jit_compile))


def _batch(rows: int) -> dict:
    rng = np.random.default_rng(1)
    return {
        "vector_obs": rng.normal(size=(rows, 4)).astype(np.float32),
        "action_mask": np.ones((rows, 2), np.float32),
        "actions": rng.integers(0, 2, (rows, 1)).astype(np.int32),
        "action_log_probs": np.full((rows, 1), -0.69, np.float32),
        "advantages": rng.normal(size=rows).astype(np.float32),
        "masks": np.ones(rows, np.float32),
        "extrinsic_returns": rng.normal(size=rows).astype(np.float32),
        "extrinsic_value_estimates": rng.normal(size=rows).astype(np.float32),
    }


def test_warm_up_compiles_the_real_update_ahead_and_changes_nothing():
    """The background warm-up moves no weight and leaves the optimizer as it was; the real
    update then reuses its trace (no retrace) and gives the same weights as a cold learner."""
    warm, cold = _zoo_learner("ac_warm"), _zoo_learner("ac_cold")
    before = [v.numpy() for v in warm.actor_critic.trainable_variables]
    optimizer_before = [v.numpy() for v in warm.optimizer.variables]
    assert warm.start_warm_up(32)
    assert not warm.start_warm_up(32)  # one at a time
    warm.wait_warm_up()
    assert warm._fused.experimental_get_tracing_count() == 1
    for a, v in zip(before, warm.actor_critic.trainable_variables):
        np.testing.assert_array_equal(a, v.numpy())
    for a, v in zip(optimizer_before, warm.optimizer.variables):
        np.testing.assert_array_equal(a, v.numpy())
    batch = _batch(32)
    warm.fused_update(batch, 2, 32, seed=5)
    cold.fused_update(batch, 2, 32, seed=5)
    assert warm._fused.experimental_get_tracing_count() == 1
    assert int(warm.optimizer.iterations.numpy()) == int(cold.optimizer.iterations.numpy()) == 2
    for a, b in zip(warm.actor_critic.trainable_variables, cold.actor_critic.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_warm_up_only_where_it_pays():
    model = ActorCritic(VECTOR, ["extrinsic"], NetworkSettings(hidden_units=8), seed=0, name="ac_nowarm")
    assert not PPOLearner(model, PPOSettings(jit_compile=False)).start_warm_up(64)
    assert not PPOLearner(model, PPOSettings(jit_compile=True, fused_update=False)).start_warm_up(64)


def test_a_buffer_with_a_mini_batch_fewer_reuses_the_compiled_update():
    """Rollouts whose length varies by a few rows (episode resets) drop or add the last
    mini-batch: the stack is padded to the most mini-batches seen, so no new compilation,
    and the padding changes nothing (the weights of an unpadded update, which runs without XLA
    here to save a compilation: float round-off apart)."""
    padded, plain = _zoo_learner("ac_padded"), _zoo_learner("ac_plain", jit_compile=False)
    padded.fused_update(_batch(64), 2, 32, seed=5)  # 2 mini-batches per epoch
    plain.fused_update(_batch(64), 2, 32, seed=5)
    padded.fused_update(_batch(40), 2, 32, seed=6)  # 1 per epoch, padded to 2
    assert padded._fused.experimental_get_tracing_count() == 1
    assert int(padded.optimizer.iterations.numpy()) == 6
    plain._stack_size = 0  # unpadded
    plain.fused_update(_batch(40), 2, 32, seed=6)
    assert plain._fused.experimental_get_tracing_count() == 2
    for a, b in zip(padded.actor_critic.trainable_variables, plain.actor_critic.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_a_training_run_compiles_its_update_once_ahead(tmp_path):
    """The trainer starts the warm-up at its first step, sized so that the run's updates (whose
    sequence counts vary with the episodes that end) all reuse its one compilation."""
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import MultiBranchMaskedEnvironment
    from kerasrl.settings import RunContext, load_trainer_config
    from kerasrl.trainers import TrainerController, create_trainers

    manager = SimpleEnvManager(MultiBranchMaskedEnvironment(seed=1))
    context = RunContext.in_results_dir(str(tmp_path), "t", seed=3, max_steps=200)
    config = {"hidden_units": 8, "num_layers": 1, "batch_size": 16, "buffer_size": 32, "time_horizon": 16,
              "use_recurrent": True, "memory_size": 8, "sequence_length": 4, "num_epoch": 2, "summary_freq": 10**6,
              "jit_compile": True}
    trainer = next(iter(create_trainers(load_trainer_config({"default": config}), manager.behavior_specs,
                                        context).values()))
    started = []
    original = trainer.learner.start_warm_up
    trainer.learner.start_warm_up = lambda rows: started.append(rows) or original(rows)
    TrainerController({trainer.behavior_name: trainer}, context.model_path, context.summaries_dir, "t", save_freq=10**6,
                      training_seed=3).start_learning(manager)
    assert trainer.learner.use_xla and trainer.update_count >= 3
    assert started == [trainer.expected_update_rows(1)] == [36 + 4]
    assert trainer.learner._fused.experimental_get_tracing_count() == 1
