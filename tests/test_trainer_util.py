"""Config resolution (behaviour.md §2.1) and its errors."""
import pytest

from kerasrl.config import DEFAULT_TRAINER_CONFIG, load_config, with_defaults
from kerasrl.envs.base import BehaviorSpec
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.ppo.trainer import PPOTrainer
from kerasrl.trainer_util import initialize_trainers, resolve_trainer_config

SPEC = BehaviorSpec(((3,),), "discrete", (2,))


def base_config(**overrides):
    cfg = {"default": dict(DEFAULT_TRAINER_CONFIG, hidden_units=8, num_layers=1)}
    cfg.update(overrides)
    return cfg


def init(config, tmp_path, brains=None, **kw):
    return initialize_trainers(config, brains or {"Brain": SPEC}, str(tmp_path / "s"), "run", str(tmp_path / "m"),
                               keep_checkpoints=3, train_model=True, load_model=kw.get("load", False), seed=1)


def test_default_section_with_paths(tmp_path):
    trainers = init(base_config(), tmp_path)
    t = trainers["Brain"]
    assert isinstance(t, PPOTrainer)
    assert t.parameters["summary_path"] == f"{tmp_path / 's'}/run_Brain"
    assert t.parameters["model_path"] == f"{tmp_path / 'm'}/Brain"
    assert t.parameters["keep_checkpoints"] == 3
    assert t.parameters["batch_size"] == 1024


def test_brain_section_overrides_shallowly_and_aliases_are_followed():
    cfg = base_config(
        Brain="Other",
        Other="Third",
        Third={"batch_size": 32, "reward_signals": {"extrinsic": {"strength": 2.0, "gamma": 0.9}}},
    )
    params = resolve_trainer_config(cfg, "Brain")
    assert params["batch_size"] == 32
    assert params["reward_signals"] == {"extrinsic": {"strength": 2.0, "gamma": 0.9}}
    assert params["buffer_size"] == DEFAULT_TRAINER_CONFIG["buffer_size"]
    assert resolve_trainer_config(cfg, "Unknown")["batch_size"] == 1024
    assert cfg["default"]["batch_size"] == 1024


def test_alias_errors():
    with pytest.raises(TrainerConfigError, match="Missing"):
        resolve_trainer_config(base_config(Brain="Missing"), "Brain")
    with pytest.raises(TrainerConfigError, match="loop"):
        resolve_trainer_config(base_config(Brain="A", A="Brain"), "Brain")
    with pytest.raises(TrainerConfigError, match="default"):
        resolve_trainer_config({"Brain": {}}, "Brain")


def test_missing_key_is_named(tmp_path):
    cfg = base_config()
    del cfg["default"]["lambd"]
    with pytest.raises(UnityTrainerException, match="The hyper-parameter lambd could not be found for the PPOTrainer trainer of brain Brain"):
        init(cfg, tmp_path)


def test_unknown_trainer_type(tmp_path):
    cfg = base_config()
    cfg["default"]["trainer"] = "sac2"
    with pytest.raises(UnityTrainerException, match="unknown trainer type for brain Brain"):
        init(cfg, tmp_path)


def test_reward_signal_errors(tmp_path):
    cfg = base_config()
    cfg["default"]["reward_signals"] = {}
    with pytest.raises(UnityTrainerException, match="No reward signals were defined"):
        init(cfg, tmp_path)
    cfg["default"]["reward_signals"] = {"telepathy": {"strength": 1.0, "gamma": 0.9}}
    with pytest.raises(UnityTrainerException, match="Unknown reward signal type telepathy"):
        init(cfg, tmp_path)
    cfg["default"]["reward_signals"] = {"extrinsic": {"strength": 1.0}}
    with pytest.raises(UnityTrainerException, match="gamma could not be found"):
        init(cfg, tmp_path)
    cfg["default"]["reward_signals"] = {"extrinsic": {"strength": 1.0, "gamma": 0.9, "colour": 3}}
    with pytest.raises(UnityTrainerException, match="Unknown parameters given for reward signal extrinsic"):
        init(cfg, tmp_path)


def test_recurrent_memory_size_error_names_key(tmp_path):
    cfg = base_config()
    cfg["default"].update(use_recurrent=True, memory_size=10)
    with pytest.raises(UnityTrainerException, match="memory_size"):
        init(cfg, tmp_path)


def test_load_config_errors(tmp_path):
    with pytest.raises(TrainerConfigError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("default: [unclosed\n")
    with pytest.raises(TrainerConfigError, match="bad.yaml"):
        load_config(bad)
    good = tmp_path / "good.yaml"
    good.write_text("default:\n  batch_size: 7\n")
    assert with_defaults(load_config(good))["default"]["batch_size"] == 7
    assert with_defaults(load_config(good))["default"]["lambd"] == 0.95


@pytest.mark.parametrize("key,value", [("adam_epsilon", "tiny"), ("adam_epsilon", 0), ("adam_epsilon", True),
                                       ("adam_epsilon_style", "pytorch")])
def test_adam_settings_errors_name_the_key(tmp_path, key, value):
    cfg = base_config()
    cfg["default"][key] = value
    with pytest.raises(UnityTrainerException, match=f"hyper-parameter {key} of brain Brain"):
        init(cfg, tmp_path)


def test_adam_settings_reach_the_optimizer(tmp_path):
    cfg = base_config()
    cfg["default"].update(adam_epsilon="1e-5", adam_epsilon_style="torch")  # PyYAML reads 1e-5 as a string
    opt = init(cfg, tmp_path)["Brain"].learner.optimizer
    assert opt.epsilon == pytest.approx(1e-5) and opt.epsilon_style == "torch"
