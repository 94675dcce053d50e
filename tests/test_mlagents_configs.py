"""Configs as ML-Agents users have them, written for kerasrl's own environments: the full
``configuration.yaml`` that ``mlagents-learn`` writes into a run folder (every resolved key), 0.17's
drafts (a behavior's own ``curriculum``), and ``kerasrl upgrade-config`` of 0.17's
``curriculum`` / ``parameter_randomization`` blocks and of every shipped config."""
import glob
import json
import os

import pytest
import yaml

from kerasrl.cli import build_parser, tools
from kerasrl.cli.env_parameters import PARAMETER_BLOCKS, EnvParameters
from kerasrl.cli.run_options import apply_run_options, given_flags
from kerasrl.configs import config_source
from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.settings import load_trainer_config
from kerasrl.settings.upgrade import todays_layout

DATA = os.path.join(os.path.dirname(__file__), "data", "todays_layout")
RUN_FOLDER_CONFIG = os.path.join(DATA, "configuration.yaml")
SHIPPED = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(
    os.path.dirname(__file__), "..", "kerasrl", "configs", "*.yaml")))


def _applied(config, argv=("x.yaml",)):
    """``kerasrl-learn``'s flags as a config's run blocks set them (the command line's win)."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    apply_run_options(args, parser, config.run_options, given_flags(parser, list(argv)), config.source)
    return args


def _parameters(config, args):
    return EnvParameters.from_args(args, {k: v for k, v in config.run_options.items() if k in PARAMETER_BLOCKS},
                                   config.source)


def test_a_run_folders_configuration_yaml_loads_every_resolved_key_into_the_settings():
    config = load_trainer_config(RUN_FOLDER_CONFIG)
    assert config.layout == "today's ML-Agents layout"
    cartpole = config.settings_for("CartPole-v1")
    assert cartpole.trainer == "ppo" and cartpole.network.use_recurrent
    assert (cartpole.network.memory_size, cartpole.network.sequence_length, cartpole.network.hidden_units) == (32, 16, 64)
    assert cartpole.network.normalize and cartpole.hyperparameters.batch_size == 64
    assert cartpole.network.separate_value_network  # shared_critic: false
    signals = cartpole.reward_signals
    assert set(signals) == {"extrinsic", "curiosity", "rnd"}
    assert (signals["curiosity"].encoding_size, signals["curiosity"].strength) == (256, 0.02)
    assert (signals["rnd"].encoding_size, signals["rnd"].learning_rate) == (64, 1e-4)
    assert (cartpole.max_steps, cartpole.time_horizon, cartpole.keep_checkpoints) == (20000, 128, 5)
    pendulum = config.settings_for("Pendulum-v1")
    assert pendulum.trainer == "sac" and pendulum.threaded and pendulum.checkpoint_interval == 10000
    hp = pendulum.hyperparameters
    assert (hp.tau, hp.steps_per_update, hp.reward_signal_steps_per_update, hp.buffer_init_steps) == (0.01, 2.0, 2.0, 1000)
    gail = pendulum.reward_signals["gail"]
    assert gail.use_actions and gail.encoding_size == 32 and gail.demo_path.endswith("Pendulum.demo")
    assert (pendulum.pretraining.steps, pendulum.pretraining.strength) == (5000, 0.5)
    assert config.settings_for("GroupSimple1D").trainer == "poca"
    duel = config.settings_for("Duel1D")
    assert duel.self_play.team_change == 4000 and duel.self_play.window == 5
    assert duel.hyperparameters.beta_end == duel.hyperparameters.beta  # beta_schedule: constant


def test_a_run_folders_run_blocks_set_kerasrl_learns_flags():
    config = load_trainer_config(RUN_FOLDER_CONFIG)
    args = _applied(config)
    assert args.env == "CartPole-v1" and (args.base_port, args.num_envs, args.num_areas, args.seed) == (5105, 2, 1, 7)
    assert (args.max_lifetime_restarts, args.restarts_rate_limit_n, args.restarts_rate_limit_period_s) == (3, 2, 30)
    assert (args.width, args.height, args.quality_level, args.time_scale, args.no_graphics) == (84, 84, 5, 20.0, True)
    assert (args.run_id, args.force, args.results_dir, args.torch_device, args.debug) == \
        ("cartpole_today", True, "results", "cpu", False)
    assert _applied(config, ["x.yaml", "--env", "Pendulum-v1", "--seed", "3"]).env == "Pendulum-v1"


def test_a_run_folders_environment_parameters_load_as_constants_and_a_curriculum():
    """Resolved parameters are one-lesson curricula of seeded constant samplers, the last lesson's
    completion_criteria null."""
    config = load_trainer_config(RUN_FOLDER_CONFIG)
    params = _parameters(config, _applied(config))
    assert params.sampler_config == {"pole_length": {"sampler-type": "constant", "value": 0.5}}
    curriculum = params.meta_curriculum.curricula["CartPole-v1"]
    assert (curriculum.measure, curriculum.thresholds, curriculum.min_lesson_length) == ("progress", [0.2, 0.6], 10)
    assert curriculum.parameters == {"force_mag": [5.0, 7.5, 10.0]}


@pytest.mark.parametrize("value, ok", [(False, True), (None, True), (True, False)])
def test_no_graphics_monitor_is_read_as_false_and_true_is_one_line(value, ok):
    config = load_trainer_config({"behaviors": {"CartPole-v1": {}}, "engine_settings": {"no_graphics_monitor": value}})
    if ok:
        _applied(config)
        return
    with pytest.raises(TrainerConfigError, match=r"engine_settings.no_graphics_monitor .*not supported") as e:
        _applied(config)
    assert "\n" not in str(e.value)


DRAFT_CURRICULUM = {"measure": "progress", "thresholds": [0.1, 0.3], "min_lesson_length": 20,
                    "signal_smoothing": True, "parameters": {"goal": [1.0, 2.0, 3.0]}}


def test_a_behaviors_own_curriculum_of_0_17s_drafts_reads_as_the_top_level_block():
    config = load_trainer_config({"behaviors": {"Simple1D": {"trainer": "ppo", "batch_size": 32,
                                                             "curriculum": DRAFT_CURRICULUM}}})
    assert config.settings_for("Simple1D").hyperparameters.batch_size == 32
    assert config.run_options["curriculum"] == {"Simple1D": DRAFT_CURRICULUM}
    params = _parameters(config, _applied(config))
    assert params.meta_curriculum.curricula["Simple1D"].parameters == {"goal": [1.0, 2.0, 3.0]}
    with pytest.raises(TrainerConfigError, match="has one for Simple1D too"):
        load_trainer_config({"behaviors": {"Simple1D": {"curriculum": DRAFT_CURRICULUM}},
                             "curriculum": {"Simple1D": DRAFT_CURRICULUM}})


TRANSITIONAL = {
    "behaviors": {"Simple1D": {"trainer_type": "ppo", "hyperparameters": {"batch_size": 32, "buffer_size": 256}}},
    "curriculum": {"Simple1D": DRAFT_CURRICULUM},
    "parameter_randomization": {"resampling-interval": 500,
                                "mass": {"sampler-type": "uniform", "min_value": 0.5, "max_value": 2.0},
                                "scale": {"sampler-type": "multirange_uniform", "intervals": [[1, 2], [3, 4]]},
                                "speed": {"sampler-type": "constant", "value": 4.0}},
}


def test_upgrade_config_writes_0_17s_blocks_as_environment_parameters(tmp_path):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(TRANSITIONAL))
    assert tools.upgrade_config(str(old), str(new)).endswith(
        "The samplers' resampling-interval 500 has no place there: they are drawn each episode (by a Unity scene, or "
        "by each copy of a Gymnasium env); to draw every so many steps, keep the --sampler file.")
    written = yaml.safe_load(new.read_text())
    assert "curriculum" not in written and "parameter_randomization" not in written
    parameters = written["environment_parameters"]
    assert parameters["mass"] == {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.5, "max_value": 2.0}}
    assert parameters["scale"]["sampler_type"] == "multirangeuniform" and parameters["speed"] == 4.0
    assert [lesson["value"] for lesson in parameters["goal"]["curriculum"]] == [1.0, 2.0, 3.0]
    upgraded, original = load_trainer_config(new), load_trainer_config(old)
    assert upgraded.settings_for("Simple1D") == original.settings_for("Simple1D")
    # the lessons load as they did: the same behavior, measure, thresholds, lengths and values
    unity = ["x.yaml", "--env", "editor"]
    before = _parameters(original, _applied(original, unity)).meta_curriculum.curricula["Simple1D"]
    after_params = _parameters(upgraded, _applied(upgraded, unity))
    after = after_params.meta_curriculum.curricula["Simple1D"]
    assert (after.measure, after.thresholds, after.min_lesson_length, after.smoothing, after.parameters) == \
        (before.measure, before.thresholds, before.min_lesson_length, before.smoothing, before.parameters)
    # a Unity scene draws the samplers each episode; the constant is set at every reset
    kinds = {name: s.kind for name, s in after_params.per_episode.items()}
    assert kinds == {"mass": "uniform", "scale": "multirangeuniform"}
    assert after_params.sampler_config == {"speed": {"sampler-type": "constant", "value": 4.0}}


@pytest.mark.parametrize("change, words", [
    ({"environment_parameters": {"x": 1.0}}, "environment_parameters beside curriculum"),
    ({"parameter_randomization": {"resampling-interval": 5, "goal": {"sampler-type": "constant", "value": 1}}},
     "the parameter goal is in more than one"),
    ({"parameter_randomization": {"mass": {"sampler-type": "uniform"}}}, "Resampling interval was not specified"),
    ({"curriculum": {"Simple1D": {**DRAFT_CURRICULUM, "thresholds": [0.1]}}}, "curriculum block"),
])
def test_upgrading_0_17s_blocks_reports_errors_in_one_line(change, words):
    config = load_trainer_config({**TRANSITIONAL, **change})
    with pytest.raises(TrainerError, match=words) as e:
        todays_layout(config)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_config_upgraded_loads_into_the_same_settings(name):
    original = load_trainer_config(config_source(name))
    upgraded = load_trainer_config(todays_layout(original))
    assert upgraded.layout == "today's ML-Agents layout"
    assert upgraded.behavior_sections == original.behavior_sections
    for section in [*original.sections, "SomeBehaviorWithoutASection"]:
        assert upgraded.settings_for(section) == original.settings_for(section), section


def test_a_model_signals_network_settings_kerasrl_does_not_use_are_named_in_a_warning(caplog):
    """hidden_units sizes the signal's model; the other keys at ML-Agents' defaults say nothing (a
    run folder's configuration.yaml has them all), and one that differs is named, not applied silently."""
    with caplog.at_level("WARNING", logger="kerasrl"):
        config = load_trainer_config(RUN_FOLDER_CONFIG)
    warned = [r.getMessage() for r in caplog.records if "network_settings" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("reward_signals.rnd.network_settings of behavior CartPole-v1")
    assert "num_layers: 3 not used" in warned[0] and "\n" not in warned[0]
    assert config.settings_for("CartPole-v1").reward_signals["rnd"].encoding_size == 64


def test_upgrade_config_writes_curriculum_folders_and_sampler_files_as_environment_parameters(tmp_path):
    """ML-Agents 0.x's --curriculum folder and --sampler file go into the upgraded config, and its
    lessons load as the folder's did."""
    folder = tmp_path / "curricula"
    folder.mkdir()
    (folder / "Simple1D.json").write_text(json.dumps(DRAFT_CURRICULUM))
    sampler = tmp_path / "sampler.yaml"
    sampler.write_text(yaml.safe_dump(TRANSITIONAL["parameter_randomization"]))
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump({"Simple1D": {"trainer": "ppo", "batch_size": 32, "buffer_size": 256}}))
    assert tools.main(["upgrade-config", str(old), str(new), "--curriculum", str(folder), "--sampler", str(sampler)]) == 0
    upgraded = load_trainer_config(new)
    assert upgraded.settings_for("Simple1D") == load_trainer_config(old).settings_for("Simple1D")
    parameters = yaml.safe_load(new.read_text())["environment_parameters"]
    assert set(parameters) == {"goal", "mass", "scale", "speed"}
    flags = ["x.yaml", "--env", "editor", "--curriculum", str(folder)]
    before = EnvParameters.from_args(build_parser().parse_args(flags), {}, "f").meta_curriculum.curricula["Simple1D"]
    after = _parameters(upgraded, _applied(upgraded, ["x.yaml", "--env", "editor"])).meta_curriculum.curricula["Simple1D"]
    assert (after.measure, after.thresholds, after.min_lesson_length, after.parameters) == \
        (before.measure, before.thresholds, before.min_lesson_length, before.parameters)
    with pytest.raises(TrainerError, match="has environment_parameters already"):
        tools.upgrade_config(str(new), str(tmp_path / "again.yaml"), sampler=str(sampler))
