"""kerasrl.settings: typed, frozen trainer settings loaded strictly from ML-Agents' YAML."""
import copy
import dataclasses
import logging
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from kerasrl.configs import config_path
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import (
    BehavioralCloningSettings,
    CuriositySettings,
    GAILSettings,
    NetworkSettings,
    PPOSettings,
    RewardSignalSettings,
    RunContext,
    TrainerConfig,
    TrainerSettings,
    key_groups,
    load_trainer_config,
    trainer_config_from_dict,
)

DATA = Path(__file__).resolve().parent / "data"
SHIPPED = Path(config_path("trainer_config"))  # the installed package's sample configs
ZOO = Path(config_path("cartpole_zoo"))
MLAGENTS_0_9 = DATA / "mlagents_0_9_trainer_config.yaml"
MLAGENTS_0_9_GAIL = DATA / "mlagents_0_9_gail_config.yaml"


def write_yaml(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def raises_config_error(*fragments: str):
    """``pytest.raises`` matching the first fragment; check the others with ``assert_names``."""
    return pytest.raises(TrainerConfigError, match=re.escape(fragments[0]))


def assert_names(error: pytest.ExceptionInfo, *fragments: str) -> None:
    message = str(error.value)
    assert "\n" not in message, f"not one line: {message!r}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


# -- the shipped configs --------------------------------------------------------------------
def test_shipped_default_section_is_the_built_in_defaults():
    assert load_trainer_config(SHIPPED).default == TrainerSettings()
    assert load_trainer_config(SHIPPED).default == load_trainer_config(None).default


def test_shipped_default_section_has_only_known_keys():
    section = yaml.safe_load(SHIPPED.read_text())["default"]
    assert set(section) <= set(key_groups())


def test_cartpole_zoo_loads():
    s = load_trainer_config(ZOO).default
    assert isinstance(s.hyperparameters.adam_epsilon, float) and s.hyperparameters.adam_epsilon == 1e-5
    assert s.hyperparameters.adam_epsilon_style == "torch"
    assert s.hyperparameters.max_grad_norm == 0.5
    assert (s.hyperparameters.batch_size, s.hyperparameters.buffer_size) == (256, 255)
    assert s.network.initializer == "orthogonal" and s.network.separate_value_network is True
    assert s.reward_signals["extrinsic"].gamma == 0.98


# -- ML-Agents 0.9's configs load unchanged ---------------------------------------------------
@pytest.mark.parametrize("path", [MLAGENTS_0_9, MLAGENTS_0_9_GAIL], ids=lambda p: p.name)
def test_mlagents_0_9_config_loads_unchanged(path):
    config = load_trainer_config(path)
    raw = yaml.safe_load(path.read_text())
    assert list(config.sections) == list(raw)
    for name, settings in config.sections.items():
        assert settings == TrainerSettings.from_dict(settings.to_dict(), name)


def test_mlagents_0_9_resolved_values():
    config = load_trainer_config(MLAGENTS_0_9)
    push = config.settings_for("PushBlockLearning")
    assert push.hyperparameters.batch_size == 128 and push.network.hidden_units == 256
    assert push.hyperparameters.learning_rate == config.default.hyperparameters.learning_rate == 3e-4
    assert push.max_steps == 50_000 and isinstance(push.max_steps, int)

    pyramids = config.settings_for("PyramidsLearning")
    assert set(pyramids.reward_signals) == {"extrinsic", "curiosity"}
    curiosity = pyramids.reward_signals["curiosity"]
    assert isinstance(curiosity, CuriositySettings)
    assert (curiosity.strength, curiosity.gamma, curiosity.encoding_size) == (0.02, 0.99, 256)

    ball = config.settings_for("3DBallLearning")
    assert ball.network.normalize is True and ball.hyperparameters.lambd == 0.99
    assert ball.hyperparameters.beta == 0.001 and ball.time_horizon == 1000

    # "1e6" (no dot) is a string to YAML 1.1 and an int here.
    assert config.settings_for("WalkerLearning").max_steps == 2_000_000
    assert config.settings_for("TennisLearning").max_steps == 200_000
    assert config.settings_for("StrikerLearning").hyperparameters.learning_rate == 1e-3

    hallway = config.settings_for("HallwayLearning").network
    assert hallway.use_recurrent and hallway.memory_size == 256 and hallway.sequence_length == 64


def test_behavior_reward_signals_replace_the_default_block():
    config = load_trainer_config(MLAGENTS_0_9)
    walker = config.settings_for("WalkerLearning").reward_signals
    assert dict(walker) == {"extrinsic": RewardSignalSettings(strength=1.0, gamma=0.995)}
    gail = load_trainer_config(MLAGENTS_0_9_GAIL)
    crawler = gail.settings_for("CrawlerStaticLearning").reward_signals
    assert set(crawler) == {"gail"}  # no extrinsic inherited from default
    assert isinstance(crawler["gail"], GAILSettings) and crawler["gail"].demo_path == "./demos/ExpertCrawlerSta.demo"


def test_mlagents_0_9_gail_pretraining():
    config = load_trainer_config(MLAGENTS_0_9_GAIL)
    pyramids = config.settings_for("PyramidsLearning")
    assert pyramids.pretraining == BehavioralCloningSettings(
        demo_path="./demos/ExpertPyramid.demo", strength=0.5, steps=10000)
    assert set(pyramids.reward_signals) == {"extrinsic", "curiosity", "gail"}
    assert pyramids.reward_signals["gail"].encoding_size == 128
    assert config.default.pretraining is None
    assert config.settings_for("HallwayLearning").reward_signals["gail"].strength == 0.1


def test_yaml_exponent_without_dot_becomes_a_float(tmp_path):
    path = write_yaml(tmp_path, "default:\n  learning_rate: 1e-5\n")
    assert yaml.safe_load(path.read_text())["default"]["learning_rate"] == "1e-5"  # what PyYAML reads
    learning_rate = load_trainer_config(path).default.hyperparameters.learning_rate
    assert isinstance(learning_rate, float) and learning_rate == 1e-5


# -- faulty configs -------------------------------------------------------------------------
def behavior(body: str, name: str = "PushBlockLearning") -> str:
    """A config of one behavior section holding ``body`` (flat ``key: value`` lines)."""
    return f"{name}:\n" + textwrap.indent(textwrap.dedent(body), "  ")


def default(body: str) -> str:
    return behavior(body, "default")


FAULTY = {
    "typo in default": (default("learning_rat: 3.0e-4"),
                        ["learning_rat", "default", "did you mean learning_rate"]),
    "typo in a behavior": (behavior("hiden_units: 64"),
                           ["hiden_units", "PushBlockLearning", "did you mean hidden_units"]),
    "bool as string": (default('normalize: "false"'), ["normalize", "'false'"]),
    "negative epsilon": (default("epsilon: -0.2"), ["epsilon", "-0.2"]),
    "lambd out of range": (default("lambd: 7"), ["lambd", "7"]),
    "negative beta": (default("beta: -1"), ["beta", "-1"]),
    "fractional batch_size": (default("batch_size: 256.9"), ["batch_size", "256.9"]),
    "batch_size in words": (default('batch_size: "sixty-four"'), ["batch_size", "sixty-four"]),
    "learning_rate in words": (default("learning_rate: fast"), ["learning_rate", "fast"]),
    "batch larger than buffer": (behavior("batch_size: 512\nbuffer_size: 256"),
                                 ["batch_size", "PushBlockLearning", "512"]),
    "buffer below default batch": (behavior("buffer_size: 256"), ["batch_size", "PushBlockLearning"]),
    "memory_size not divisible by 4": (behavior("use_recurrent: true\nmemory_size: 6"),
                                       ["memory_size", "PushBlockLearning", "6"]),
    "alias loop": ("A: B\nB: A\n", ["A -> B", "B -> A"]),
    "alias to a missing section": ("MyBehavior: PushBlok\n", ["MyBehavior", "PushBlok"]),
    "unknown trainer": (default("trainer: dqn"), ["trainer", "dqn"]),
    "offline_bc without demo_path": (default("trainer: offline_bc\nbatches_per_epoch: 10"),
                                     ["demo_path", "offline_bc", "default"]),
    "online_bc without batches_per_epoch": (behavior("trainer: online_bc\nbrain_to_imitate: Teacher"),
                                            ["batches_per_epoch", "online_bc", "PushBlockLearning"]),
    "online_bc without brain_to_imitate": (default("trainer: online_bc\nbatches_per_epoch: 10"),
                                           ["brain_to_imitate", "online_bc", "default"]),
    "unknown reward signal": (default("reward_signals:\n  curiosty: {strength: 0.02, gamma: 0.99}"),
                              ["curiosty", "did you mean curiosity"]),
    "missing reward-signal parameter": (default("reward_signals:\n  extrinsic: {strength: 1.0}"),
                                        ["gamma", "extrinsic"]),
    "unknown reward-signal parameter": (
        behavior("reward_signals:\n  extrinsic: {strength: 1.0, gamma: 0.99, gama: 0.9}"),
        ["gama", "extrinsic", "PushBlockLearning"]),
    "curiosity without encoding_size": (
        default("reward_signals:\n  curiosity: {strength: 0.02, gamma: 0.99}"), ["encoding_size", "curiosity"]),
    "empty reward_signals": (behavior("reward_signals: {}"), ["reward signals", "PushBlockLearning"]),
    "null reward_signals": (default("reward_signals:"), ["reward signals", "default"]),
    "nan learning_rate": (default("learning_rate: .nan"), ["learning_rate", "nan"]),
    "inf learning_rate": (default("learning_rate: .inf"), ["learning_rate", "inf"]),
    "section is a list": ("PushBlockLearning: [1, 2]\n", ["PushBlockLearning", "[1, 2]"]),
    "section is a number": ("PushBlockLearning: 5\n", ["PushBlockLearning", "5"]),
    "unknown vis_encode_type": (default("vis_encode_type: vgg"), ["vis_encode_type", "vgg"]),
    "unknown adam_epsilon_style": (default("adam_epsilon_style: numpy"), ["adam_epsilon_style", "numpy"]),
    "unknown recurrent_style": (default("recurrent_style: torch"), ["recurrent_style", "torch"]),
    "pretraining without demo_path": (behavior("pretraining: {strength: 0.5, steps: 10000}"),
                                      ["demo_path", "pretraining", "PushBlockLearning"]),
    "bool for a number": (default("max_steps: true"), ["max_steps", "True"]),
    "number for a bool": (default("use_recurrent: 1"), ["use_recurrent", "1"]),
}


@pytest.mark.parametrize("text, fragments", FAULTY.values(), ids=FAULTY.keys())
def test_faulty_config_names_the_key(tmp_path, text, fragments):
    with raises_config_error(*fragments) as error:
        load_trainer_config(write_yaml(tmp_path, text))
    assert_names(error, *fragments)


@pytest.mark.parametrize("text, fragments", FAULTY.values(), ids=FAULTY.keys())
def test_faulty_dict_config_fails_the_same(text, fragments):
    with raises_config_error(*fragments) as error:
        trainer_config_from_dict(yaml.safe_load(text))
    assert_names(error, *fragments)


def test_non_mapping_top_level_names_the_file(tmp_path):
    path = write_yaml(tmp_path, "- default\n- PushBlockLearning\n")
    with raises_config_error(str(path)) as error:
        load_trainer_config(path)
    assert_names(error, str(path), "mapping", "list")


def test_missing_file_names_the_path(tmp_path):
    path = tmp_path / "no_such_config.yaml"
    with raises_config_error(str(path)) as error:
        load_trainer_config(path)
    assert_names(error, str(path))


def test_malformed_yaml_names_the_path(tmp_path):
    path = write_yaml(tmp_path, "default:\n  batch_size: [1, 2\n  beta: 5.0e-3\n")
    with raises_config_error(str(path)) as error:
        load_trainer_config(path)
    assert_names(error, str(path), "YAML")


def test_empty_file_is_refused_naming_it(tmp_path):
    path = write_yaml(tmp_path, "")
    with raises_config_error(str(path), "empty"):
        load_trainer_config(path)
    assert load_trainer_config(None).default == TrainerSettings()  # no file at all: the defaults


# -- check_behaviors ------------------------------------------------------------------------
def config_of(*sections: str) -> TrainerConfig:
    return trainer_config_from_dict({"default": {}, **{s: {"hidden_units": 64} for s in sections}}, "test.yaml")


def test_misspelled_section_is_an_error_suggesting_the_behavior():
    with raises_config_error("CartPol-v1") as error:
        config_of("CartPol-v1").check_behaviors(["CartPole-v1", "Acrobot-v1"])
    assert_names(error, "CartPol-v1", "test.yaml", "CartPole-v1", "Acrobot-v1", "did you mean CartPole-v1")


def test_lone_section_differing_only_in_case_suggests_the_behavior():
    with raises_config_error("CARTPOLE-V1") as error:
        config_of("CARTPOLE-V1").check_behaviors(["CartPole-v1", "Acrobot-v1"])
    assert_names(error, "matches no behavior", "did you mean CartPole-v1?")


def one_warning(caplog: pytest.LogCaptureFixture) -> str:
    """The one warning kerasrl logged, which must be one line."""
    [record] = [r for r in caplog.records if r.name == "kerasrl"]
    assert record.levelno == logging.WARNING and "\n" not in record.getMessage()
    return record.getMessage()


def test_sections_differing_only_in_case_warn_suggesting_the_behavior(caplog):
    """Sections shared across environments only warn, and the warning names the behavior a
    section meant when their names differ only in letter case, configured or not."""
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config_of("cartpole-v1", "Pendulum-v1").check_behaviors(["CartPole-v1"])
    message = one_warning(caplog)
    assert "Sections cartpole-v1, Pendulum-v1 of test.yaml match no behavior" in message
    assert "Section cartpole-v1: did you mean CartPole-v1?" in message
    assert "Pendulum-v1: did you mean" not in message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config_of("CartPole-v1", "CARTPOLE-V1").check_behaviors(["CartPole-v1", "Acrobot-v1"])
    assert "Section CARTPOLE-V1: did you mean CartPole-v1?" in one_warning(caplog)


def test_shared_config_warning_suggests_a_close_behavior_without_a_section(caplog):
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config_of("Cartpole-v0", "Pendulum-v1").check_behaviors(["CartPole-v1", "Acrobot-v1"])
    message = one_warning(caplog)
    assert "Section Cartpole-v0: did you mean CartPole-v1?" in message
    assert "Pendulum-v1: did you mean" not in message


def test_single_section_matching_nothing_is_an_error():
    with raises_config_error("PushBlockLearning") as error:
        config_of("PushBlockLearning").check_behaviors(["CartPole-v1"])
    assert_names(error, "PushBlockLearning", "matches no behavior", "CartPole-v1")


def test_shared_config_matching_nothing_only_warns(caplog):
    config = load_trainer_config(MLAGENTS_0_9)
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config.check_behaviors(["CartPole-v1"])
    [record] = [r for r in caplog.records if r.name == "kerasrl"]
    assert record.levelno == logging.WARNING
    for section in ("PushBlockLearning", "3DBallLearning", "BasicLearning"):
        assert section in record.getMessage()
    assert "CartPole-v1" in record.getMessage()
    assert "did you mean" not in record.getMessage()  # no section is close to CartPole-v1


def test_partly_matching_config_warns_about_the_rest(caplog):
    config = load_trainer_config(MLAGENTS_0_9)
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config.check_behaviors(["PushBlockLearning", "3DBallLearning"])
    [record] = [r for r in caplog.records if r.name == "kerasrl"]
    listed = re.match(r"Sections (.*?) of ", record.getMessage()).group(1).split(", ")
    assert "VisualPushBlockLearning" in listed and "3DBallHardLearning" in listed
    assert "PushBlockLearning" not in listed and "3DBallLearning" not in listed


def test_every_section_matching_is_silent(caplog):
    with caplog.at_level(logging.WARNING, logger="kerasrl"):
        config_of("A", "B").check_behaviors(["A", "B", "C"])
        load_trainer_config(None).check_behaviors(["CartPole-v1"])
    assert not [r for r in caplog.records if r.name == "kerasrl"]


# -- settings_for ----------------------------------------------------------------------------
def test_settings_for_own_section_else_default():
    config = load_trainer_config(MLAGENTS_0_9)
    assert config.settings_for("PushBlockLearning") is config.sections["PushBlockLearning"]
    assert config.settings_for("CartPole-v1") is config.default
    assert config.settings_for("CartPole-v1").network.hidden_units == 128


def test_settings_for_follows_aliases():
    raw = yaml.safe_load(MLAGENTS_0_9.read_text())
    config = trainer_config_from_dict({**raw, "MyBehavior": "Alias", "Alias": "PushBlockLearning"})
    assert config.settings_for("MyBehavior") == config.settings_for("PushBlockLearning")
    assert config.settings_for("MyBehavior").hyperparameters.batch_size == 128


# -- TrainerSettings ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["default", "PyramidsLearning", "HallwayLearning", "3DBallHardLearning"])
def test_round_trip(name):
    settings = load_trainer_config(MLAGENTS_0_9).sections[name]
    assert TrainerSettings.from_dict(settings.to_dict()) == settings


def test_round_trip_of_defaults_and_pretraining():
    assert TrainerSettings.from_dict(TrainerSettings().to_dict()) == TrainerSettings()
    pyramids = load_trainer_config(MLAGENTS_0_9_GAIL).sections["PyramidsLearning"]
    assert TrainerSettings.from_dict(pyramids.to_dict()) == pyramids
    assert "pretraining" not in TrainerSettings().to_dict()


@pytest.mark.parametrize("obj, attr", [
    (TrainerSettings(), "max_steps"), (NetworkSettings(), "hidden_units"), (PPOSettings(), "batch_size"),
    (RewardSignalSettings(strength=1.0, gamma=0.99), "gamma"), (RunContext(), "run_id"),
])
def test_settings_are_frozen(obj, attr):
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, attr, 1)


@pytest.mark.parametrize("build, fragments", [
    (lambda: NetworkSettings(hidden_units=0), ["hidden_units", "0"]),
    (lambda: NetworkSettings(use_recurrent=True, memory_size=6), ["memory_size", "6"]),
    (lambda: PPOSettings(batch_size=100, buffer_size=10), ["batch_size", "100"]),
    (lambda: PPOSettings(lambd=1.5), ["lambd", "1.5"]),
    (lambda: CuriositySettings(strength=0.1, gamma=0.99, encoding_size=0), ["encoding_size"]),
    (lambda: TrainerSettings(trainer="dqn"), ["trainer", "dqn"]),
], ids=["hidden_units", "memory_size", "batch_size", "lambd", "encoding_size", "trainer"])
def test_settings_built_in_python_are_checked(build, fragments):
    with raises_config_error(*fragments) as error:
        build()
    assert_names(error, *fragments)


def test_from_dict_takes_defaults_for_missing_keys():
    settings = TrainerSettings.from_dict({"hidden_units": 32, "max_steps": "1e3"})
    assert settings.network.hidden_units == 32 and settings.max_steps == 1000
    assert settings.hyperparameters == PPOSettings()


# -- RunContext -----------------------------------------------------------------------------
def test_run_context_paths_follow_mlagents():
    context = RunContext(run_id="run1", summaries_dir="out/summaries", model_path="out/models")
    assert context.summary_path("3DBallLearning") == "out/summaries/run1_3DBallLearning"
    assert context.behavior_model_path("3DBallLearning") == "out/models/3DBallLearning"


def test_run_context_in_results_dir():
    context = RunContext.in_results_dir("results", "cartpole", seed=3)
    assert Path(context.model_path) == Path("results/cartpole/models")
    assert Path(context.summaries_dir) == Path("results/cartpole/summaries")
    assert (context.run_id, context.seed) == ("cartpole", 3)


def test_max_steps_override_leaves_settings_alone():
    settings = load_trainer_config(MLAGENTS_0_9).settings_for("PushBlockLearning")
    before = copy.deepcopy(settings)
    assert RunContext().max_steps_for(settings) == 50_000
    assert RunContext(max_steps=123).max_steps_for(settings) == 123
    assert settings == before and settings.max_steps == 50_000


@pytest.mark.parametrize("kwargs, key", [({"keep_checkpoints": 0}, "keep_checkpoints"), ({"max_steps": 0}, "max_steps")])
def test_run_context_rejects_bad_values(kwargs, key):
    with raises_config_error(key) as error:
        RunContext(**kwargs)
    assert_names(error, key)


# -- load_trainer_config inputs -------------------------------------------------------------
def test_load_none_gives_defaults():
    config = load_trainer_config(None)
    assert config.default == TrainerSettings() and config.behavior_sections == []


def test_load_trainer_config_returns_a_built_config_unchanged():
    config = load_trainer_config(MLAGENTS_0_9)
    assert load_trainer_config(config) is config


def test_load_dict_does_not_modify_it():
    raw = yaml.safe_load(MLAGENTS_0_9_GAIL.read_text())
    raw["MyBehavior"] = "PyramidsLearning"
    before = copy.deepcopy(raw)
    config = load_trainer_config(raw)
    assert raw == before
    assert config.settings_for("MyBehavior") == config.settings_for("PyramidsLearning")


def test_load_accepts_str_and_path():
    assert load_trainer_config(str(MLAGENTS_0_9)) == load_trainer_config(MLAGENTS_0_9)


def test_documented_table_of_kerasrl_keys_matches_the_settings_defaults():
    """The trainer-config guide documents kerasrl's own keys with their defaults: they must be the real ones."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "configuration.md").read_text()
    table = page[page.index("## The keys kerasrl adds"):page.index("## How a config is checked")]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", table, re.M)
    assert len(rows) >= 10
    flat = TrainerSettings().to_dict()
    for key, default in rows:
        assert key in key_groups(), key
        text = default.strip()
        expected = yaml.safe_load(text.strip("`")) if text.startswith("`") else None
        assert flat[key] == expected, f"README says {key} defaults to {text}, settings say {flat[key]!r}"
