"""Configs in the shapes ML-Agents' ``config/`` folder has held over its releases, written small for
the case each covers: 0.4–0.7's keys before reward signals (``gamma``, ``use_curiosity``) and the
``imitation`` trainer name, and 0.14–0.16's one-file ``--curriculum``."""
import textwrap

import pytest
import yaml

from kerasrl.cli import build_parser, tools
from kerasrl.cli.env_parameters import EnvParameters
from kerasrl.curriculum import CurriculumError, MetaCurriculum
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import load_trainer_config
from kerasrl.settings.legacy import LEGACY_LAYOUT

#: A 0.7-style config: discount and curiosity as top-level keys, ``default`` inherited.
PRE_REWARD_SIGNALS = """
default:
    trainer: ppo
    gamma: 0.99
    use_curiosity: false
    curiosity_strength: 0.01
    curiosity_enc_size: 128
    batch_size: 64
    buffer_size: 640
Seeker:
    gamma: 0.95
    use_curiosity: true
Explorer:
    use_curiosity: true
    curiosity_enc_size: 32
Plain:
    batch_size: 32
Alias: Seeker
Student:
    trainer: imitation
    brain_to_imitate: Teacher
    batches_per_epoch: 4
"""


def _load(tmp_path, text, name="trainer_config.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_trainer_config(str(path))


def _signals(settings):
    return {name: (s.strength, s.gamma, getattr(s, "encoding_size", None)) for name, s in settings.reward_signals.items()}


def test_0_7s_gamma_and_use_curiosity_load_as_each_sections_reward_signals(tmp_path):
    config = _load(tmp_path, PRE_REWARD_SIGNALS)
    assert config.layout == LEGACY_LAYOUT
    assert _signals(config.default) == {"extrinsic": (1.0, 0.99, None)}
    assert _signals(config.sections["Seeker"]) == {"extrinsic": (1.0, 0.95, None), "curiosity": (0.01, 0.95, 128)}
    assert _signals(config.sections["Explorer"]) == {"extrinsic": (1.0, 0.99, None), "curiosity": (0.01, 0.99, 32)}
    assert _signals(config.sections["Plain"]) == {"extrinsic": (1.0, 0.99, None)}
    assert config.sections["Plain"].hyperparameters.batch_size == 32
    assert _signals(config.sections["Alias"]) == _signals(config.sections["Seeker"])


def test_0_5s_imitation_trainer_is_todays_online_bc(tmp_path):
    student = _load(tmp_path, PRE_REWARD_SIGNALS).sections["Student"]
    assert student.trainer == "online_bc"
    assert (student.behavioral_cloning.brain_to_imitate, student.behavioral_cloning.batches_per_epoch) == ("Teacher", 4)


def test_a_0_7_config_is_the_same_settings_as_its_0_8_reward_signals_form(tmp_path):
    old = _load(tmp_path, PRE_REWARD_SIGNALS)
    new = _load(tmp_path, """
        default:
            trainer: ppo
            batch_size: 64
            buffer_size: 640
            reward_signals:
                extrinsic: {strength: 1.0, gamma: 0.99}
        Seeker:
            reward_signals:
                extrinsic: {strength: 1.0, gamma: 0.95}
                curiosity: {strength: 0.01, gamma: 0.95, encoding_size: 128}
        """, "new.yaml")
    assert old.sections["Seeker"] == new.sections["Seeker"] and old.default == new.default


def test_a_stray_gamma_beside_reward_signals_is_still_ignored_as_0_8_did(tmp_path):
    config = _load(tmp_path, """
        default:
            reward_signals:
                extrinsic: {strength: 1.0, gamma: 0.9}
        Walker:
            gamma: 0.995
        """)
    assert config.layout != LEGACY_LAYOUT
    assert config.sections["Walker"].reward_signals["extrinsic"].gamma == 0.9


def test_upgrade_config_writes_a_0_7_config_in_todays_layout(tmp_path):
    old = tmp_path / "trainer_config.yaml"
    old.write_text(textwrap.dedent(PRE_REWARD_SIGNALS))
    assert tools.main(["upgrade-config", str(old), str(tmp_path / "new.yaml")]) == 0
    upgraded = yaml.safe_load((tmp_path / "new.yaml").read_text())
    seeker = upgraded["behaviors"]["Seeker"]["reward_signals"]
    assert seeker["curiosity"]["gamma"] == 0.95 and seeker["extrinsic"]["gamma"] == 0.95
    assert load_trainer_config(str(tmp_path / "new.yaml")).sections["Seeker"] == \
        load_trainer_config(str(old)).sections["Seeker"]


@pytest.mark.parametrize("line, key", [("use_curiosity: maybe", "use_curiosity"), ("gamma: 1.5", "gamma"),
                                       ("curiosity_enc_size: 0", "curiosity_enc_size"),
                                       ("curiosity_strength: '0.1'", "curiosity_strength")])
def test_a_bad_0_7_value_is_one_line_naming_the_key_as_written(tmp_path, line, key):
    with pytest.raises(TrainerConfigError) as e:
        _load(tmp_path, f"default:\n    use_curiosity: true\nSeeker:\n    {line}\n")
    message = str(e.value)
    assert "\n" not in message and "reward_signals" not in message
    assert message.startswith(f"{key} in section Seeker") and LEGACY_LAYOUT in message


#: ML-Agents 0.14–0.16's ``--curriculum``: one YAML file of behavior → curriculum (a folder of JSON files before).
CURRICULUM_FILE = """
Jumper:
  measure: progress
  thresholds: [0.1, 0.3]
  min_lesson_length: 100
  signal_smoothing: true
  parameters:
    wall_height: [1.5, 2.0, 4.0]
Runner:
    measure: reward
    thresholds: [5]
    min_lesson_length: 10
    signal_smoothing: false
    parameters:
      speed: [1, 2]
"""


def test_0_14s_one_yaml_curriculum_file_is_read_as_the_folder_of_json_files(tmp_path):
    path = tmp_path / "curricula.yaml"
    path.write_text(CURRICULUM_FILE)
    args = build_parser().parse_args(["x.yaml", "--curriculum", str(path), "--lesson", "1"])
    meta = EnvParameters.from_args(args).meta_curriculum
    assert set(meta.curricula) == {"Jumper", "Runner"}
    assert meta.curricula["Jumper"].parameters == {"wall_height": [1.5, 2.0, 4.0]}
    assert (meta.curricula["Runner"].measure, meta.curricula["Runner"].thresholds) == ("reward", [5.0])


def test_upgrade_config_takes_a_0_14_curriculum_file(tmp_path):
    (tmp_path / "curricula.yaml").write_text(CURRICULUM_FILE)
    (tmp_path / "old.yaml").write_text("default:\n    trainer: ppo\nJumper:\n    max_steps: 1000\n")
    assert tools.main(["upgrade-config", str(tmp_path / "old.yaml"), str(tmp_path / "new.yaml"),
                       "--curriculum", str(tmp_path / "curricula.yaml")]) == 0
    parameters = yaml.safe_load((tmp_path / "new.yaml").read_text())["environment_parameters"]
    assert [lesson["value"] for lesson in parameters["wall_height"]["curriculum"]] == [1.5, 2.0, 4.0]


def test_a_behavior_of_a_curriculum_file_that_is_no_mapping_is_one_line_naming_it(tmp_path):
    path = tmp_path / "curricula.yaml"
    path.write_text("Jumper: [0.1, 0.3]\n")
    with pytest.raises(CurriculumError) as e:
        MetaCurriculum(str(path))
    assert "\n" not in str(e.value) and "behavior Jumper" in str(e.value) and "curricula.yaml" in str(e.value)


#: Keys of ML-Agents' research branches that no release read, each in a small config of its shape.
UNRELEASED = {
    "a trainer type": ("behaviors:\n  Ball:\n    trainer_type: mappo\n", ["mappo", "behavior Ball"]),
    "a hyperparameter": ("behaviors:\n  Ball:\n    trainer_type: sac\n    hyperparameters:\n      mede: true\n",
                         ["mede", "behavior Ball", "hyperparameters"]),
    "a network key": ("behaviors:\n  Ball:\n    network_settings:\n      n_modes: 8\n",
                      ["n_modes", "behavior Ball", "network_settings"]),
    "a reward signal": ("behaviors:\n  Ball:\n    reward_signals:\n      preference: {gamma: 0.99, strength: 1.0}\n",
                        ["preference", "behavior Ball"]),
    "a block": ("behaviors:\n  Ball: {}\nagent_parameters:\n  Ball: {speed: 1.0}\n", ["agent_parameters"]),
}


@pytest.mark.parametrize("case", sorted(UNRELEASED))
def test_a_research_branchs_key_is_refused_in_one_line_naming_it_and_the_layout(tmp_path, case):
    text, words = UNRELEASED[case]
    with pytest.raises(TrainerConfigError) as e:
        _load(tmp_path, text, "research.yaml")
    message = str(e.value)
    assert "\n" not in message and "today's ML-Agents layout" in message and "research.yaml" in message
    assert all(word in message for word in words), message
