"""The MuJoCo configs keep the RL-Zoo's constant learning rate, initialisation and reward normalisation."""
import pytest

from kerasrl.configs import config_path
from kerasrl.ppo.schedules import ppo_schedules
from kerasrl.settings import load_trainer_config


@pytest.mark.parametrize("name", ["halfcheetah_ppo", "hopper_ppo"])
def test_the_mujoco_configs_keep_their_learning_rate_and_normalise_rewards(name):
    settings = load_trainer_config(config_path(name)).settings_for("any")
    hp = settings.hyperparameters
    assert settings.network.initializer == "torch"  # the Zoo's ortho_init=False
    assert hp.learning_rate_schedule == "constant" and hp.normalize_rewards
    assert [ppo_schedules(hp, step, 1_000_000)["learning_rate"] for step in (0, 500_000, 1_000_000)] == \
        [hp.learning_rate] * 3


def test_the_learning_rate_decays_linearly_by_default():
    hp = load_trainer_config({"default": {"learning_rate": 1e-3}}).settings_for("any").hyperparameters
    rates = [ppo_schedules(hp, step, 100)["learning_rate"] for step in (0, 50, 100)]
    assert rates[0] == pytest.approx(1e-3) and rates[1] == pytest.approx(5e-4, rel=1e-6) and rates[2] < 1e-9
