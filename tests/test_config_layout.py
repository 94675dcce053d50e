"""Today's ML-Agents config layout (``behaviors:``) and the flat 0.9-0.15 one load into the same
settings; the run blocks set kerasrl-learn's flags unless the command line gives them."""
import argparse
import re

import pytest
import yaml

import kerasrl
from kerasrl.cli import build_parser, main
from kerasrl.cli.run_options import apply_run_options, given_flags
from kerasrl.cli.train import checkpoint_plan
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import GAILSettings, PPOSettings, SACSettings, load_trainer_config

#: Every key of today's layout that kerasrl reads, for the project's own environments.
TODAY = """
default_settings:
  trainer_type: ppo
  hyperparameters:
    batch_size: 64
    buffer_size: 1024
    learning_rate: 3.0e-4
  network_settings:
    hidden_units: 64
behaviors:
  Simple1D:
    trainer_type: ppo
    hyperparameters:
      batch_size: 32
      beta: 0.01
      epsilon: 0.25
      lambd: 0.9
      num_epoch: 4
      learning_rate_schedule: linear
      beta_schedule: constant
      epsilon_schedule: linear
      shared_critic: true
    network_settings:
      normalize: true
      num_layers: 1
      vis_encode_type: simple
      goal_conditioning_type: hyper
      deterministic: false
      memory:
        memory_size: 32
        sequence_length: 8
    reward_signals:
      extrinsic:
        gamma: 0.95
        strength: 1.0
        network_settings:
          hidden_units: 16
      curiosity:
        strength: 0.02
        learning_rate: 1.0e-3
        network_settings:
          hidden_units: 48
      gail:
        strength: 0.01
        demo_path: demos/expert.demo
        use_actions: true
        use_vail: false
        learning_rate: 3.0e-4
    behavioral_cloning:
      demo_path: demos/expert.demo
      strength: 0.5
      steps: 10000
      batch_size: 32
      num_epoch: 2
      samples_per_update: 0
    keep_checkpoints: 3
    checkpoint_interval: 2000
    even_checkpoints: false
    init_path: null
    max_steps: 6000
    time_horizon: 32
    summary_freq: 1000
    threaded: false
  Pendulum-v1:
    trainer_type: sac
    hyperparameters:
      batch_size: 128
      buffer_size: 50000
      buffer_init_steps: 1000
      init_entcoef: 0.5
      save_replay_buffer: true
      tau: 0.01
      steps_per_update: 2
      reward_signal_steps_per_update: 4
      learning_rate_schedule: constant
    threaded: true
env_settings:
  env_path: Simple1D
  env_args: null
  base_port: 5005
  num_envs: 1
  num_areas: 1
  seed: 7
  max_lifetime_restarts: 10
  restarts_rate_limit_n: 1
  restarts_rate_limit_period_s: 60
engine_settings:
  width: 84
  height: 84
  quality_level: 5
  time_scale: 20
  target_frame_rate: -1
  capture_frame_rate: 60
  no_graphics: true
checkpoint_settings:
  run_id: today
  initialize_from: null
  load_model: false
  resume: false
  force: false
  train_model: false
  inference: false
  results_dir: results
torch_settings:
  device: null
debug: false
"""


@pytest.fixture
def today(tmp_path):
    path = tmp_path / "today.yaml"
    path.write_text(TODAY)
    return path


def test_every_key_of_todays_layout_reaches_the_settings(today):
    config = load_trainer_config(today)
    assert config.layout == "today's ML-Agents layout"
    s = config.sections["Simple1D"]
    hp = s.hyperparameters
    assert isinstance(hp, PPOSettings) and (hp.batch_size, hp.buffer_size) == (32, 1024)  # default_settings merged in
    assert (hp.beta, hp.beta_end) == (0.01, 0.01)  # beta_schedule: constant
    assert (hp.epsilon, hp.epsilon_end) == (0.25, 0.1)  # epsilon_schedule: linear, to ML-Agents' 0.1
    assert (hp.lambd, hp.num_epoch, hp.learning_rate) == (0.9, 4, 3.0e-4)
    net = s.network
    assert (net.hidden_units, net.num_layers, net.normalize) == (64, 1, True)
    assert (net.use_recurrent, net.memory_size, net.sequence_length) == (True, 32, 8)
    assert net.separate_value_network is False  # shared_critic: true
    assert s.reward_signals["extrinsic"].gamma == 0.95
    curiosity = s.reward_signals["curiosity"]
    assert (curiosity.encoding_size, curiosity.gamma, curiosity.learning_rate) == (48, 0.99, 1.0e-3)
    gail = s.reward_signals["gail"]
    assert isinstance(gail, GAILSettings) and gail.use_actions and gail.encoding_size == 128
    assert s.pretraining is not None and (s.pretraining.strength, s.pretraining.num_epoch) == (0.5, 2)
    assert (s.keep_checkpoints, s.checkpoint_interval, s.max_steps, s.time_horizon) == (3, 2000, 6000, 32)
    sac = config.sections["Pendulum-v1"]
    assert isinstance(sac.hyperparameters, SACSettings) and sac.threaded
    assert (sac.hyperparameters.tau, sac.hyperparameters.reward_signal_steps_per_update) == (0.01, 4.0)
    assert sac.max_steps == 500_000 and sac.summary_freq == 50_000  # today's defaults where the file says nothing
    assert sac.network.hidden_units == 64  # from default_settings
    assert set(config.run_options) == {"env_settings", "engine_settings", "checkpoint_settings", "torch_settings",
                                       "debug"}


def test_a_behavior_without_a_block_trains_with_default_settings(today):
    config = load_trainer_config(today)
    other = config.settings_for("CartPole-v1")
    assert other.hyperparameters.batch_size == 64 and other.network.hidden_units == 64


def test_even_checkpoints_spread_keep_checkpoints_over_max_steps():
    config = load_trainer_config({"behaviors": {"B": {"max_steps": 10_000, "keep_checkpoints": 4,
                                                      "even_checkpoints": True}}})
    assert config.sections["B"].checkpoint_interval == 2_500


@pytest.mark.parametrize("change, words", [
    ({"hyperparameters": {"tau": 0.1}}, ["Unknown key tau in hyperparameters of behavior B", "today's ML-Agents layout"]),
    ({"network_settings": {"hiden_units": 3}}, ["hiden_units", "did you mean hidden_units"]),
    ({"reward_signals": {"curiosity": {"learning_rate": -1}}},
     ["reward_signals.curiosity", "learning_rate", "behavior B", "-1"]),
    ({"network_settings": {"deterministic": True}}, ["deterministic", "not supported"]),
    ({"hyperparameters": {"beta_schedule": "cosine"}}, ["beta_schedule", "constant or linear"]),
    ({"trainer_type": "dqn"}, ["trainer", "must be one of", "'dqn'"]),
])
def test_errors_name_the_layout_the_behavior_and_the_key(change, words):
    with pytest.raises(TrainerConfigError) as e:
        load_trainer_config({"behaviors": {"B": change}})
    assert "\n" not in str(e.value)
    for word in words:
        assert word in str(e.value), str(e.value)


def test_an_unknown_block_names_todays_layout():
    with pytest.raises(TrainerConfigError, match=r"Unknown block engine_setting in .* \(today's ML-Agents layout\): "
                                                 r"did you mean engine_settings\?"):
        load_trainer_config({"behaviors": {"B": {}}, "engine_setting": {}})


def test_self_play_is_read_and_trains_by_self_play(tmp_path):
    from kerasrl.trainers.self_play import SelfPlayTrainer

    config = load_trainer_config({"behaviors": {"Striker": {"self_play": {"save_steps": 50000, "window": 5}},
                                                "Simple1D": {"max_steps": 100}}})
    assert config.sections["Striker"].self_play.window == 5 and config.sections["Striker"].self_play.team_change == 250000
    env = kerasrl.SimpleEnvManager(kerasrl.Simple1DEnvironment(True, seed=0))
    context = kerasrl.RunContext.in_results_dir(str(tmp_path), "r", seed=0)
    trainers = kerasrl.create_trainers({"behaviors": {"Simple1D": {"self_play": {}}}, "default_settings": {}},
                                       env.behavior_specs, context)
    assert isinstance(trainers["Simple1D"], SelfPlayTrainer)  # more in tests/test_self_play.py
    env.close()


def test_the_flat_layouts_later_blocks_load():
    """0.10-0.15 files: behavioral_cloning (pretraining's later name), self_play in a section no
    environment uses, reward_signal_steps_per_update, play_against_current_self_ratio."""
    config = load_trainer_config({
        "default": {"trainer": "ppo", "behavioral_cloning": {"demo_path": "x.demo", "strength": 0.5, "steps": 100}},
        "Tennis": {"self_play": {"play_against_current_self_ratio": 0.7, "save_steps": 1000}},
        "Walker": {"trainer": "sac", "reward_signal_steps_per_update": 10, "steps_per_update": 10}})
    assert config.default.pretraining.strength == 0.5
    assert config.sections["Tennis"].self_play.play_against_latest_model_ratio == 0.7
    assert config.sections["Walker"].hyperparameters.agent_steps_per_signal_update == 10
    with pytest.raises(TrainerConfigError, match="both pretraining and behavioral_cloning"):
        load_trainer_config({"default": {"pretraining": {"demo_path": "x", "strength": 1, "steps": 0},
                                         "behavioral_cloning": {"demo_path": "x", "strength": 1, "steps": 0}}})


def _args(argv):
    parser = build_parser()
    return parser, parser.parse_args(argv)


def test_run_blocks_set_the_flags_the_command_line_leaves_out(today):
    config = load_trainer_config(today)
    parser, args = _args([str(today), "--run-id", "mine", "--time-scale", "5"])
    apply_run_options(args, parser, config.run_options, given_flags(parser, [str(today), "--run-id", "mine",
                                                                              "--time-scale", "5"]), config.source)
    assert args.env == "Simple1D" and args.seed == 7 and args.num_envs == 1 and args.no_graphics is True
    assert args.run_id == "mine" and args.time_scale == 5.0  # the command line wins
    assert args.results_dir == "results" and args.base_port == 5005


def test_a_bad_run_block_value_is_one_line_naming_it(today):
    parser, args = _args([str(today)])
    with pytest.raises(TrainerConfigError, match=r"engine_settings.width in f: 'wide' is not a valid value"):
        apply_run_options(args, parser, {"engine_settings": {"width": "wide"}}, set(), "f")
    with pytest.raises(TrainerConfigError, match="Unknown key widht in engine_settings of f"):
        apply_run_options(args, parser, {"engine_settings": {"widht": 3}}, set(), "f")


def test_checkpoint_interval_and_keep_checkpoints_set_the_runs_plan(today):
    config = load_trainer_config(today)
    assert checkpoint_plan(argparse.Namespace(save_freq=None, keep_checkpoints=None), config) == (2000, 3)
    assert checkpoint_plan(argparse.Namespace(save_freq=500, keep_checkpoints=9), config) == (500, 9)
    flat = load_trainer_config({"default": {}})
    assert checkpoint_plan(argparse.Namespace(save_freq=None, keep_checkpoints=None), flat) == (100_000, 5)


@pytest.mark.slow
def test_kerasrl_learn_trains_todays_layout_with_no_env_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load(TODAY)
    data["behaviors"] = {"Simple1D": {"trainer_type": "ppo", "hyperparameters": {"batch_size": 16, "buffer_size": 64},
                                      "network_settings": {"hidden_units": 16}, "max_steps": 300,
                                      "checkpoint_interval": 200}}
    data["engine_settings"] = {}
    path = tmp_path / "today.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main([str(path), "--progress-every", "100"]) == 0
    out = capsys.readouterr().out
    assert "PPO on Simple1D" in out and "seed 7" in out
    assert re.search(r"^final steps=301 ", out, re.M), out
    models = tmp_path / "results" / "today" / "models" / "Simple1D"
    assert (models / "model-200.index").exists() and (models / "model-301.index").exists()


def test_the_config_argument_may_be_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--env", "Simple1D", "--steps", "64", "--run-id", "bare", "--progress-every", "64"]) == 0
    assert "final steps=" in capsys.readouterr().out


def test_a_behavior_of_another_type_takes_default_settings_without_its_hyperparameters():
    config = load_trainer_config({"default_settings": {"trainer_type": "ppo",
                                                       "hyperparameters": {"beta": 0.01, "batch_size": 256}},
                                  "behaviors": {"Walker": {"trainer_type": "sac", "hyperparameters": {"tau": 0.02}}}})
    walker = config.sections["Walker"].hyperparameters
    assert isinstance(walker, SACSettings) and walker.tau == 0.02 and walker.batch_size == 256  # beta left out


def test_a_run_folders_configuration_yaml_trains_again_unchanged(tmp_path):
    """The record kerasrl-learn writes (command line, seed, every behavior's resolved settings)
    loads as a trainer config with those settings."""
    from kerasrl.cli.run_folder import record_run

    config = load_trainer_config({"default": {"batch_size": 32, "buffer_size": 64, "max_steps": 999},
                                  "Other": {"trainer": "sac", "tau": 0.02}})

    class Stub:
        def __init__(self, settings):
            self.parameters, self.get_max_steps = settings.to_dict(), settings.max_steps

    args = argparse.Namespace(results_dir=str(tmp_path), run_id="r", argv=["kerasrl-learn", "x.yaml"], inference=False)
    (tmp_path / "r").mkdir()
    context = kerasrl.RunContext.in_results_dir(str(tmp_path), "r", seed=3)
    record_run(args, context, {"Simple1D": Stub(config.default), "Other": Stub(config.sections["Other"])})
    again = load_trainer_config(tmp_path / "r" / "configuration.yaml")
    assert again.settings_for("Simple1D") == config.default
    assert again.settings_for("Other") == config.sections["Other"]


WALL = {"behavior": "Wall", "measure": "progress", "threshold": 0.5, "signal_smoothing": False}


def _lessons(values, criteria=WALL):
    return {"curriculum": [{"name": f"L{i}", "value": v, **({"completion_criteria": criteria} if i < len(values) - 1
                                                             else {})} for i, v in enumerate(values)]}


def test_environment_parameters_become_lessons_and_fixed_parameters():
    from kerasrl.cli.env_parameters import EnvParameters

    block = {"big_wall": _lessons([0.0, 4.0, 8.0]), "small_wall": _lessons([1.5, 2.0, 2.5]), "gravity": 9.8,
             "mass": {"sampler_type": "constant", "sampler_parameters": {"value": 2.0}},
             "wind": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 1, "max_value": 2}}}
    params = EnvParameters.from_args(_args(["x.yaml"])[1], {"environment_parameters": block}, "f")
    # a sampler is drawn each episode, by any environment (tests/test_env_parameter_samplers.py)
    assert params.per_episode["wind"].kind == "uniform" and params.per_episode["wind"].parameters["max_value"] == 2
    (curriculum,) = params.meta_curriculum.curricula.values()
    assert curriculum.behavior_name == "Wall" and curriculum.measure == "progress"
    assert curriculum.thresholds == [0.5, 0.5] and not curriculum.smoothing
    assert curriculum.get_config(2) == {"big_wall": 8.0, "small_wall": 2.5}
    assert params.sampler_config == {"gravity": {"sampler-type": "constant", "value": 9.8},
                                     "mass": {"sampler-type": "constant", "value": 2.0}}


@pytest.mark.parametrize("block, words", [
    ({"a": _lessons([1, 2]), "b": _lessons([1, 2], {**WALL, "threshold": 0.7})}, ["a and b", "different criteria"]),
    ({"a": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 3, "max_value": 2}}}, ["min_value 3"]),
    ({"a": {"curriculum": [{"name": "L0", "value": 1}, {"name": "L1", "value": 2}]}}, ["lesson L0 needs completion"]),
    ({"a": _lessons([1, 2], {"behavior": "W", "measure": "steps"})}, ["measure must be one of"]),
])
def test_environment_parameters_kerasrl_cannot_apply_are_one_line(block, words):
    from kerasrl.cli.env_parameters import EnvParameters

    with pytest.raises(kerasrl.TrainerError) as e:
        EnvParameters.from_args(_args(["x.yaml"])[1], {"environment_parameters": block}, "f")
    assert "\n" not in str(e.value)
    for word in words:
        assert word in str(e.value), str(e.value)


@pytest.mark.slow
def test_kerasrl_learn_applies_environment_parameters(tmp_path, capsys, monkeypatch):
    """A lesson of today's layout advances and its value, and a constant, reach the environment."""
    import csv

    monkeypatch.chdir(tmp_path)
    config = {"behaviors": {"CartPole-v1": {"hyperparameters": {"batch_size": 32, "buffer_size": 64},
                                            "network_settings": {"hidden_units": 8}, "summary_freq": 100}},
              "environment_parameters": {"length": _lessons([0.5, 0.6], {**WALL, "behavior": "CartPole-v1"}),
                                         "masscart": 1.5}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main([str(path), "--env", "CartPole-v1", "--num-envs", "2", "--steps", "300", "--seed", "1",
                 "--run-id", "c"]) == 0
    with open(tmp_path / "results" / "c" / "CartPole-v1.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[0]["Environment/Lesson"]) == 0.0 and float(rows[-1]["Environment/Lesson"]) == 1.0
    assert float(rows[-1]["Environment/Parameter/length"]) == pytest.approx(0.6)
    assert float(rows[-1]["Environment/Parameter/masscart"]) == pytest.approx(1.5)



#: A config of ML-Agents 0.17–0.19: today's behaviors, with the curriculum and parameter_randomization
#: blocks that environment_parameters later replaced.
TRANSITIONAL = {
    "behaviors": {"CartPole-v1": {"trainer_type": "ppo", "hyperparameters": {"batch_size": 32, "buffer_size": 64}}},
    "curriculum": {"CartPole-v1": {"measure": "progress", "thresholds": [0.1, 0.3], "min_lesson_length": 100,
                                   "signal_smoothing": True, "parameters": {"length": [0.5, 0.6, 0.7]}}},
    "parameter_randomization": {"resampling-interval": 5000,
                                "masscart": {"sampler-type": "uniform", "min_value": 0.5, "max_value": 2.0},
                                "gravity": {"sampler-type": "multirange_uniform", "intervals": [[7, 10], [15, 20]]}},
}


def test_the_transitional_blocks_of_0_17_load_as_curriculum_and_sampler_files_do():
    from kerasrl.cli.env_parameters import EnvParameters

    config = load_trainer_config(TRANSITIONAL)
    assert set(config.run_options) == {"curriculum", "parameter_randomization"}
    params = EnvParameters.from_args(_args(["x.yaml"])[1], config.run_options, "f")
    (curriculum,) = params.meta_curriculum.curricula.values()
    assert curriculum.behavior_name == "CartPole-v1" and curriculum.thresholds == [0.1, 0.3]
    assert curriculum.get_config(1) == {"length": 0.6}
    assert params.resampling_interval == 5000
    assert set(params.sampler_config) == {"masscart", "gravity"}
    assert params.sampler_config["gravity"]["sampler-type"] == "multirange_uniform"


@pytest.mark.parametrize("change, words", [
    ({"parameter_randomization": {"mass": {"sampler-type": "uniform", "min_value": 1, "max_value": 2}}},
     ["Resampling interval was not specified", "parameter_randomization block of f"]),
    ({"parameter_randomization": {"resampling-interval": 10, "mass": {"sampler-type": "dice"}}},
     ["parameter_randomization block of f", "dice"]),
    ({"curriculum": {"CartPole-v1": {"measure": "steps", "thresholds": [0.1], "min_lesson_length": 1,
                                     "signal_smoothing": True, "parameters": {"length": [0.5, 0.6]}}}},
     ["curriculum block of f (behavior CartPole-v1)", "measure must be one of"]),
    ({"environment_parameters": {"length": 0.5}}, ["environment_parameters and curriculum and parameter_randomization"]),
])
def test_the_transitional_blocks_report_their_errors_in_one_line(change, words):
    from kerasrl.cli.env_parameters import EnvParameters

    config = load_trainer_config({**TRANSITIONAL, **change})
    with pytest.raises(kerasrl.TrainerError) as e:
        EnvParameters.from_args(_args(["x.yaml"])[1], config.run_options, "f")
    assert "\n" not in str(e.value)
    for word in words:
        assert word in str(e.value), str(e.value)


def test_the_transitional_blocks_and_the_flags_are_not_both_taken(tmp_path):
    from kerasrl.cli.env_parameters import EnvParameters

    sampler = tmp_path / "s.yaml"
    sampler.write_text("resampling-interval: 10\n")
    args = _args(["x.yaml", "--sampler", str(sampler)])[1]
    with pytest.raises(kerasrl.TrainerError, match="has curriculum and parameter_randomization: .* --sampler, not both"):
        EnvParameters.from_args(args, load_trainer_config(TRANSITIONAL).run_options, "f")


def test_the_python_api_reads_todays_layout_with_its_algorithm_as_the_default_type(tmp_path, caplog):
    path = tmp_path / "today.yaml"
    path.write_text(yaml.safe_dump({"behaviors": {"Pendulum-v1": {"hyperparameters": {"tau": 0.01, "batch_size": 32}}},
                                    "env_settings": {"num_envs": 2}}))
    agent = kerasrl.SAC("Pendulum-v1", config=str(path), seed=0)
    try:
        assert agent.settings.trainer == "sac" and agent.settings.hyperparameters.tau == 0.01
        assert agent.settings.max_steps == 500_000  # today's default, not the flat layout's
        assert f"config file {path}: the Python API leaves out env_settings" in caplog.text
    finally:
        agent.close()


def test_the_python_api_names_the_config_file_in_its_errors(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("default:\n  batch_size: -3\n")
    with pytest.raises(kerasrl.TrainerError, match=f"^batch_size in section default of config file {path} must be"):
        kerasrl.PPO("CartPole-v1", config=str(path))
    with pytest.raises(kerasrl.TrainerError, match="^batch_size in section default of kerasrl.PPO's config must be"):
        kerasrl.PPO("CartPole-v1", config={"default": {"batch_size": -3}})
