"""ML-Agents 0.9's names still read (and set) what kerasrl calls by its own names."""
import pytest

from kerasrl import compat
from kerasrl.curriculum import MetaCurriculum
from kerasrl.envs.env_manager import EnvManager, SimpleEnvManager, StepInfo
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.spec import BehaviorSpec
from kerasrl.trainers import initialize_trainers
from kerasrl.trainers.trainer import Trainer

CLASSES = {"Trainer": Trainer, "EnvManager": EnvManager, "StepInfo": StepInfo, "MetaCurriculum": MetaCurriculum}


def test_every_alias_in_the_table_is_on_its_class():
    assert set(compat.ALIASES) == set(CLASSES)
    for name, aliases in compat.ALIASES.items():
        for old in aliases:
            assert isinstance(getattr(CLASSES[name], old), property), (name, old)


def test_env_manager_and_step_info_old_names():
    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=0))
    assert manager.external_brains == manager.behavior_specs == {"Simple1D": manager.env.behavior_specs["Simple1D"]}
    (info,) = manager.reset()
    assert info.current_all_brain_info is info.current and info.previous_all_brain_info is None
    assert info.brain_name_to_action_info is info.action_infos is None


def test_a_trainers_brain_name_is_its_behavior_name(tmp_path):
    spec = BehaviorSpec(((3,),), "discrete", (2,))
    (trainer,) = initialize_trainers({"default": {"hidden_units": 8, "num_layers": 1}}, {"B": spec}, str(tmp_path / "s"),
                                     "run", str(tmp_path / "m"), keep_checkpoints=1, train_model=True,
                                     load_model=False, seed=1).values()
    assert trainer.brain_name == trainer.behavior_name == "B"
    trainer.brain_name = "C"
    assert trainer.behavior_name == "C"


def test_a_meta_curriculums_brains_to_curriculums_is_its_curricula():
    meta = MetaCurriculum.__new__(MetaCurriculum)  # the alias needs no lessons on disk
    meta.curricula = {"B": "lessons"}
    assert meta.brains_to_curriculums is meta.curricula
    meta.brains_to_curriculums = {}
    assert meta.curricula == {}


def test_initialize_trainers_takes_ml_agents_09s_keywords(tmp_path):
    """0.9's scripts call initialize_trainers(trainer_config=..., external_brains=..., ...)."""
    spec = BehaviorSpec(((3,),), "discrete", (2,))
    trainers = initialize_trainers(trainer_config={"default": {"hidden_units": 8, "num_layers": 1}},
                                   external_brains={"B": spec}, summaries_dir=str(tmp_path / "s"), run_id="run",
                                   model_path=str(tmp_path / "m"), keep_checkpoints=1, train_model=True,
                                   load_model=False, seed=1)
    assert list(trainers) == ["B"] and trainers["B"].spec == spec
    with pytest.raises(TypeError, match="got both behavior_specs and external_brains"):
        initialize_trainers({}, behavior_specs={"B": spec}, external_brains={"B": spec}, summaries_dir="s",
                            run_id="r", model_path="m", keep_checkpoints=1, train_model=True, load_model=False, seed=1)
