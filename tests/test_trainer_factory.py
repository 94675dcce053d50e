"""Building trainers from a trainer config: ML-Agents 0.9's signature, run context, errors."""
from types import SimpleNamespace

import pytest

from kerasrl.exception import TrainerConfigError, TrainerError, UnityTrainerException
from kerasrl.ppo.trainer import PPOTrainer
from kerasrl.settings import RunContext, TrainerSettings, load_trainer_config
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers import create_trainers, initialize_trainers

SPEC = BehaviorSpec(((3,),), "discrete", (2,))
SMALL = {"hidden_units": 8, "num_layers": 1}


def init(config, tmp_path, brains=None, **kw):
    return initialize_trainers(config, brains or {"Brain": SPEC}, str(tmp_path / "s"), "run", str(tmp_path / "m"),
                               keep_checkpoints=3, train_model=True, load_model=False, seed=1, **kw)


def test_seed_signature_defaults_and_paths(tmp_path):
    t = init({"default": SMALL}, tmp_path)["Brain"]
    assert isinstance(t, PPOTrainer)
    assert t.summary_path == f"{tmp_path / 's'}/run_Brain"
    assert t.model_path == f"{tmp_path / 'm'}/Brain"
    assert t.saver.keep == 3
    assert t.settings.hyperparameters.batch_size == TrainerSettings().hyperparameters.batch_size
    assert t.parameters["batch_size"] == 1024 and t.parameters["hidden_units"] == 8


def test_each_behavior_gets_its_section_or_default(tmp_path):
    cfg = {"default": SMALL, "Brain": "Other", "Other": {**SMALL, "batch_size": 32, "buffer_size": 64}}
    trainers = init(cfg, tmp_path, brains={"Brain": SPEC, "Plain": SPEC})
    assert trainers["Brain"].settings.hyperparameters.batch_size == 32
    assert trainers["Plain"].settings.hyperparameters.batch_size == 1024
    assert cfg["Brain"] == "Other" and "summary_path" not in cfg["default"]  # nothing written into the config


def test_max_steps_override_is_run_context_not_settings(tmp_path):
    t = init({"default": {**SMALL, "max_steps": 500}}, tmp_path, max_steps=40)["Brain"]
    assert t.get_max_steps == 40 and t.learner.max_steps == 40
    assert t.settings.max_steps == 500 and t.parameters["max_steps"] == 40


def test_misspelled_section_is_an_error_naming_the_behaviors(tmp_path):
    with pytest.raises(TrainerConfigError, match="Brian.*Brain"):
        init({"default": SMALL, "Brian": {"batch_size": 32}}, tmp_path)


def test_curiosity_and_gail_signals_are_made_with_their_value_heads(tmp_path):
    cfg = {"default": {**SMALL, "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99},
                                                   "curiosity": {"strength": 0.02, "gamma": 0.99,
                                                                 "encoding_size": 64}}}}
    trainer = init(cfg, tmp_path)["Brain"]
    assert type(trainer.reward_signals["curiosity"]).__name__ == "CuriosityRewardSignal"
    assert set(trainer.learner.actor_critic.value_heads) == {"extrinsic", "curiosity"}
    missing = str(tmp_path / "nowhere.demo")
    cfg["default"]["reward_signals"] = {"gail": {"strength": 1.0, "gamma": 0.99, "demo_path": missing}}
    with pytest.raises(UnityTrainerException, match="nowhere.demo"):
        init(cfg, tmp_path)


def test_pretraining_with_a_missing_demo_names_the_file(tmp_path):
    missing = str(tmp_path / "x.demo")
    cfg = {"default": {**SMALL, "pretraining": {"demo_path": missing, "strength": 0.5, "steps": 100}}}
    with pytest.raises(TrainerError, match=missing):
        init(cfg, tmp_path)


def test_multi_gpu_without_a_gpu_is_an_error_not_dropped(tmp_path):
    with pytest.raises(TrainerError, match="multi_gpu=True trains the learners on every visible GPU"):
        init({"default": SMALL}, tmp_path, multi_gpu=True)


def test_meta_curriculum_sets_the_reward_buffer_length(tmp_path):
    curriculum = SimpleNamespace(curricula={"Brain": SimpleNamespace(min_lesson_length=7)})
    t = init({"default": SMALL}, tmp_path, meta_curriculum=curriculum)["Brain"]
    assert t.reward_buffer.maxlen == 7


def test_yaml_path_and_built_config_are_accepted(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("default:\n  hidden_units: 8\n  adam_epsilon: 1e-5\n  adam_epsilon_style: torch\n")
    context = RunContext.in_results_dir(str(tmp_path), "r", seed=0)
    for config in (str(path), load_trainer_config(str(path))):
        opt = create_trainers(config, {"Brain": SPEC}, context)["Brain"].learner.optimizer
        assert opt.epsilon == pytest.approx(1e-5) and opt.epsilon_style == "torch"


def test_a_run_whose_files_hold_a_team_suffix_resumes_under_the_names_used_now(tmp_path, caplog):
    """Files of a run written when they still named a behavior ``X?team=0`` (checkpoints,
    TensorBoard folder, metrics CSV) are renamed on resume, and the run continues from its step."""
    import logging

    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.trainers import TrainerController

    name = "Simple1D?team=0"
    config = {"default": {"batch_size": 16, "buffer_size": 32, "hidden_units": 8, "summary_freq": 32}}

    def start(load: bool, max_steps: int):
        env = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=0, behavior_name=name))
        trainers = initialize_trainers(config, env.behavior_specs, str(tmp_path / "s"), "r", str(tmp_path / "m"),
                                       keep_checkpoints=2, train_model=True, load_model=load, seed=0,
                                       max_steps=max_steps)
        return env, trainers

    env, trainers = start(False, 64)
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**6).start_learning(env)
    step = trainers[name].get_step
    renamed = {tmp_path / "m" / "Simple1D_team_0": tmp_path / "m" / name,
               tmp_path / "s" / "r_Simple1D_team_0": tmp_path / "s" / f"r_{name}",
               tmp_path / "s" / "r_Simple1D_team_0.csv": tmp_path / "s" / f"r_{name}.csv"}
    for new, old in renamed.items():
        new.rename(old)  # as such a run left them
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        env, trainers = start(True, step + 64)
    assert trainers[name].get_step == step
    assert all(new.exists() and not old.exists() for new, old in renamed.items())
    assert caplog.text.count("Renamed ") == 3
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**6).start_learning(env)
    assert trainers[name].get_step >= step + 64
    rows = (tmp_path / "s" / "r_Simple1D_team_0.csv").read_text().splitlines()
    assert len(rows) >= 2
