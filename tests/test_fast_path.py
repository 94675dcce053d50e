"""Fast by default: without kerasrl's extra keys, the path measured fastest is chosen in
``kerasrl.fast_path`` and logged; an explicit key wins."""
import logging

import pytest

from kerasrl.envs.base import BehaviorSpec
from kerasrl.fast_path import XLA_FASTER, policy_kind
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.learner import PPOLearner
from kerasrl.ppo.policy import PPOPolicy
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
        policy = PPOPolicy(spec, model)
    assert learner.use_xla == (kind in XLA_FASTER) == (kind != "cnn")  # XLA's CPU convolutions are slow
    assert policy.inference == ("tf" if kind == "lstm" else "numpy")  # the numpy mirror has simple/nature_cnn convs
    text = caplog.text
    how = "compiled with" if kind != "cnn" else "without"
    assert f"ac_{kind}: PPO update {how} XLA (the fastest measured for a {kind} policy)" in text
    assert f"ac_{kind}: acting with the {'compiled TF' if kind == 'lstm' else 'numpy mirror'} policy" in text


def test_explicit_keys_win(caplog):
    model = ActorCritic(VECTOR, ["extrinsic"], NetworkSettings(hidden_units=8), seed=0, name="ac_explicit")
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        assert PPOLearner(model, PPOSettings(jit_compile=False)).use_xla is False
        assert PPOPolicy(VECTOR, model, inference="tf").inference == "tf"
    assert "ac_explicit: PPO update without XLA (jit_compile is set)" in caplog.text
    assert "ac_explicit: acting with the compiled TF policy (inference is set)" in caplog.text
