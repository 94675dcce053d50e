"""Curricula: lesson progression, config errors, lessons saved and resumed."""
import csv
import json
import os

import pytest

from kerasrl.cli import build_parser, main
from kerasrl.cli.train import EnvParameters
from kerasrl.curriculum import Curriculum, CurriculumError, MetaCurriculum, MetaCurriculumError, load_lessons, save_lessons
from kerasrl.trainers import TrainerController

LESSONS = {"measure": "reward", "thresholds": [10.0, 20.0], "min_lesson_length": 3, "signal_smoothing": False,
           "parameters": {"length": [0.5, 0.7, 0.9], "masspole": [0.1, 0.2, 0.3]}}


def write(folder, name="Ball.json", **changes):
    folder.mkdir(exist_ok=True)
    data = {**LESSONS, **changes}
    path = folder / name
    path.write_text(json.dumps(data))
    return str(path)


def test_reward_measure_advances_one_lesson_per_threshold(tmp_path):
    c = Curriculum(write(tmp_path))
    assert c.behavior_name == "Ball" and c.max_lesson_num == 2 and c.get_config() == {"length": 0.5, "masspole": 0.1}
    assert not c.increment_lesson(10.0)  # strictly above the threshold
    assert not c.increment_lesson(float("nan"))
    assert c.increment_lesson(10.5) and c.lesson_num == 1 and c.get_config() == {"length": 0.7, "masspole": 0.2}
    assert not c.increment_lesson(15.0)
    assert c.increment_lesson(25.0) and c.lesson_num == 2
    assert not c.increment_lesson(1e9) and c.lesson_num == 2  # the last lesson stays
    c.lesson_num = 7
    assert c.lesson_num == 2 and c.get_config(lesson=-3) == {"length": 0.5, "masspole": 0.1}


def test_zero_measure_counts_and_smoothing_lags(tmp_path):
    c = Curriculum(write(tmp_path, thresholds=[-1.0], parameters={"length": [1, 2]}))
    assert c.increment_lesson(0.0)  # ML-Agents 0.9 ignored a measure of 0; fixed
    s = Curriculum(write(tmp_path, signal_smoothing=True))
    assert not s.increment_lesson(12.0)  # 0.25 * 0 + 0.75 * 12 = 9 <= 10
    assert s.smoothing_value == pytest.approx(9.0)
    assert s.increment_lesson(12.0)  # 0.25 * 9 + 0.75 * 12 = 11.25 > 10
    assert s.smoothing_value == pytest.approx(11.25) and s.lesson_num == 1


@pytest.mark.parametrize("changes, words", [
    ({"measure": "speed"}, ["measure", "speed"]),
    ({"thresholds": "high"}, ["thresholds", "high"]),
    ({"min_lesson_length": -1}, ["min_lesson_length", "-1"]),
    ({"signal_smoothing": "yes"}, ["signal_smoothing", "yes"]),
    ({"parameters": {"length": [1, 2]}}, ["length", "3 values"]),
    ({"parameters": {"length": [1, "a", 2]}}, ["length", "non-numeric"]),
    ({"parameters": {"length": [1, float("nan"), 2]}}, ["length"]),
    ({"min_lesson_lenght": 3}, ["unknown keys", "min_lesson_lenght"]),
    ({"measure": "progress", "thresholds": [0.6, 0.4]}, ["thresholds", "[0.6, 0.4]", "progress"]),
])
def test_invalid_fields_name_file_key_and_value(tmp_path, changes, words):
    path = write(tmp_path, **changes)
    with pytest.raises(CurriculumError) as e:
        Curriculum(path)
    assert path in str(e.value) and all(w in str(e.value) for w in words), e.value
    assert "\n" not in str(e.value)


def test_missing_field_unknown_parameter_and_bad_files(tmp_path):
    data = dict(LESSONS)
    del data["thresholds"]
    (tmp_path / "A.json").write_text(json.dumps(data))
    with pytest.raises(CurriculumError, match=r"A\.json does not contain a thresholds field"):
        Curriculum(str(tmp_path / "A.json"))
    with pytest.raises(CurriculumError, match="masspole.*not present in the environment's reset parameters"):
        Curriculum(write(tmp_path), default_reset_parameters={"length": 0.5})
    (tmp_path / "B.json").write_text("{not json")
    with pytest.raises(CurriculumError, match=r"error decoding .*B\.json"):
        Curriculum(str(tmp_path / "B.json"))
    with pytest.raises(CurriculumError, match=r"C\.json could not be opened"):
        Curriculum(str(tmp_path / "C.json"))
    with pytest.raises(MetaCurriculumError, match="is not a folder: --curriculum names a folder"):
        MetaCurriculum(str(tmp_path / "A.json"))
    (tmp_path / "nothing").mkdir()
    with pytest.raises(MetaCurriculumError, match="holds no .json"):
        MetaCurriculum(str(tmp_path / "nothing"))


def test_meta_curriculum_min_lesson_length_and_state(tmp_path):
    folder = tmp_path / "cur"
    write(folder, "Ball.json")
    write(folder, "Wall.json", measure="progress", thresholds=[0.5], min_lesson_length=0,
          parameters={"height": [1.0, 2.0]})
    meta = MetaCurriculum(str(folder))
    with pytest.raises(MetaCurriculumError, match="Wall.json.*'Wall'"):
        meta.check_behaviors({"Ball": None})
    changed = meta.increment_lessons({"Ball": 50.0, "Wall": 0.6}, reward_buff_sizes={"Ball": 2, "Wall": 0})
    assert changed == {"Wall": True}  # Ball has seen 2 < min_lesson_length 3 episodes
    assert meta.increment_lessons({"Ball": 50.0}, reward_buff_sizes={"Ball": 3}) == {"Ball": True}
    assert meta.get_config() == {"length": 0.7, "masspole": 0.2, "height": 2.0}
    save_lessons(meta, str(tmp_path / "models"), {"Ball": 10})
    fresh = MetaCurriculum(str(folder))
    assert load_lessons(fresh, str(tmp_path / "models")) and fresh.lesson_nums == {"Ball": 1, "Wall": 1}
    assert not load_lessons(fresh, str(tmp_path / "none"))


class _Trainer:
    def __init__(self, max_steps=100):
        from collections import deque

        self.reward_buffer, self.step, self.get_max_steps, self.ended = deque(maxlen=3), 0, max_steps, 0

    @property
    def get_step(self):
        return self.step

    def end_episode(self):
        self.ended += 1


class _Env:
    def __init__(self):
        self.configs = []

    def reset(self, config=None, train_mode=True):
        self.configs.append(config)


def test_controller_advances_lessons_resets_with_their_parameters_and_clears_rewards(tmp_path):
    folder = tmp_path / "cur"
    write(folder, "Ball.json")
    write(folder, "Wall.json", measure="progress", thresholds=[0.5], min_lesson_length=0, parameters={"height": [1, 2]})
    trainers = {"Ball": _Trainer(), "Wall": _Trainer()}
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path), "r", 100,
                           meta_curriculum=MetaCurriculum(str(folder)))
    env = _Env()
    tc._reset_env(env)
    assert env.configs == [{"length": 0.5, "masspole": 0.1, "height": 1.0}]
    trainers["Ball"].reward_buffer.extend([30.0, 30.0])  # two episodes: fewer than min_lesson_length
    trainers["Wall"].step = 40
    tc.reset_env_if_ready(env, 0)
    assert len(env.configs) == 1
    trainers["Wall"].step = 51  # progress 0.51 > 0.5
    tc.reset_env_if_ready(env, 0)
    assert env.configs[-1]["height"] == 2.0 and trainers["Ball"].ended == 1
    assert list(trainers["Ball"].reward_buffer) == [30.0, 30.0]  # only the advanced behavior's buffer is cleared
    trainers["Ball"].reward_buffer.append(30.0)
    tc.reset_env_if_ready(env, 0)
    assert env.configs[-1]["length"] == 0.7 and len(trainers["Ball"].reward_buffer) == 0


def test_cli_lesson_goes_to_csv_is_saved_and_resumed(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 32\n  buffer_size: 64\n  hidden_units: 8\n  summary_freq: 100\n")
    folder = tmp_path / "cur"
    write(folder, "CartPole-v1.json", measure="progress", thresholds=[0.5, 2.0], min_lesson_length=0,
          parameters={"length": [0.5, 0.6, 0.7]})
    base = [str(cfg), "--env", "CartPole-v1", "--num-envs", "2", "--seed", "1", "--results-dir", str(tmp_path),
            "--run-id", "c", "--curriculum", str(folder)]
    assert main(base + ["--steps", "300"]) == 0
    saved = json.loads((tmp_path / "c" / "models" / "lessons.json").read_text())
    assert saved["lessons"]["CartPole-v1"]["lesson"] == 1
    with open(tmp_path / "c" / "CartPole-v1.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["Environment/Lesson"]) for r in rows] == [0.0, 1.0, 1.0]
    assert float(rows[-1]["Environment/Parameter/length"]) == pytest.approx(0.6)
    capsys.readouterr()
    assert main(base + ["--steps", "400", "--resume"]) == 0
    assert "Resumed the curricula at lessons {'CartPole-v1': 1}" in capsys.readouterr().out
    # progress = step / max_steps: 302/400 > 0.5 but < 2, so the resumed lesson stays 1
    assert json.loads((tmp_path / "c" / "models" / "lessons.json").read_text())["lessons"]["CartPole-v1"]["lesson"] == 1
    args = build_parser().parse_args(base + ["--resume", "--lesson", "2"])
    params = EnvParameters.from_args(args)
    kwargs = params.controller_kwargs(args, str(tmp_path / "c" / "models"), seed=0)
    assert kwargs["meta_curriculum"].lesson_nums == {"CartPole-v1": 2}  # --lesson wins over the saved
    with pytest.raises(MetaCurriculumError, match="has 3 lessons"):  # a lesson past the last is refused
        EnvParameters.from_args(build_parser().parse_args(base + ["--resume", "--lesson", "5"]))
    assert main(base + ["--run-id", "e", "--curriculum", str(tmp_path / "no-such-dir")]) == 2
    assert "no-such-dir is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()  # nothing written for a bad curriculum
    assert main(base[:-2] + ["--run-id", "e", "--lesson", "1"]) == 2
    assert "--lesson 1: needs --curriculum" in capsys.readouterr().err


def test_decreasing_reward_thresholds_are_allowed(tmp_path):
    assert Curriculum(write(tmp_path, thresholds=[20.0, 10.0])).thresholds == [20.0, 10.0]  # harder lessons pay less


def test_a_saved_lesson_the_curriculum_no_longer_has_is_an_error(tmp_path):
    write(tmp_path / "lessons")
    meta = MetaCurriculum(str(tmp_path / "lessons"))
    meta.lesson_nums = {"Ball": 2}
    save_lessons(meta, str(tmp_path / "models"), {"Ball": 100})
    write(tmp_path / "lessons", thresholds=[10.0], parameters={"length": [0.5, 0.7]})
    shorter = MetaCurriculum(str(tmp_path / "lessons"))
    with pytest.raises(CurriculumError, match=r"saved lesson 2 of Ball is not a lesson of .*Ball\.json \(0 to 1\).*--lesson"):
        load_lessons(shorter, str(tmp_path / "models"))
    assert shorter.lesson_nums == {"Ball": 0}


def test_resume_takes_the_lessons_of_the_save_the_restored_checkpoint_belongs_to(tmp_path):
    write(tmp_path / "lessons")
    meta, models = MetaCurriculum(str(tmp_path / "lessons")), str(tmp_path / "models")
    for step, lesson in ((100, 0), (200, 1), (300, 2)):
        meta.lesson_nums = {"Ball": lesson}
        save_lessons(meta, models, {"Ball": step})
    fresh = MetaCurriculum(str(tmp_path / "lessons"))
    assert load_lessons(fresh, models) and fresh.lesson_nums == {"Ball": 2}  # without steps: the newest
    for restored, lesson in ((300, 2), (200, 1), (250, 1), (100, 0)):  # an older checkpoint; a crash between writes
        assert load_lessons(fresh, models, {"Ball": restored}) and fresh.lesson_nums == {"Ball": lesson}
    with pytest.raises(CurriculumError, match=r"all of steps after the checkpoint's \{'Ball': 50\}.*--lesson"):
        load_lessons(fresh, models, {"Ball": 50})
    for step in range(400, 2000, 100):  # only the latest saves are kept
        save_lessons(meta, models, {"Ball": step})
    with open(os.path.join(models, "lessons.json")) as f:
        assert [e["steps"]["Ball"] for e in json.load(f)["history"]] == list(range(1000, 2000, 100))
