"""Input that used to be accepted silently: each is one clear line naming the bad thing, or a
documented behaviour."""
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import pytest

import kerasrl
from kerasrl.callbacks import FitProgress
from kerasrl.cli.tools import main as tools_main
from kerasrl.configs import config_source
from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.samplers import SamplerException, load_sampler_file
from kerasrl.settings import load_trainer_config

ROOT = Path(__file__).resolve().parents[1]
TINY = "default:\n  batch_size: 16\n  buffer_size: 64\n  hidden_units: 8\n  summary_freq: 100\n"


def learn(tmp_path, *args):
    """``kerasrl-learn`` in a subprocess on Simple1D for a few hundred steps: (status, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the launcher's own setting
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "kerasrl.cli", *args, "--env", "Simple1D", "--steps", "200",
                           "--results-dir", str(tmp_path / "results"), "--run-id", "r"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


#: TensorFlow's own start-up lines (its oneDNN banner, absl's notice), which the launcher does not own.
TF_LOG = re.compile(r"^(WARNING: All log messages before absl|[IWE]\d{4} )")


def one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip() and not TF_LOG.match(line)]
    assert len(lines) == 1, err
    return lines[0]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


CURRICULUM = ('{"measure": "progress", "thresholds": [0.3, 0.6], "min_lesson_length": 1, "signal_smoothing": false,'
              ' "parameters": {"length": [0.3, 0.5, 0.8]}}')

CLI_CASES = {
    "empty config": ({"cfg.yaml": ""}, ["cfg.yaml"], ["cfg.yaml", "empty"]),
    "duplicate key": ({"cfg.yaml": TINY + "  batch_size: 32\n"}, ["cfg.yaml"], ["cfg.yaml", "'batch_size'", "twice"]),
    "string for an int": ({"cfg.yaml": TINY + '  num_epoch: "3"\n'}, ["cfg.yaml"], ["num_epoch", "'3'", "string"]),
    "progress-every 0": ({"cfg.yaml": TINY}, ["cfg.yaml", "--progress-every", "0"], ["--progress-every", ">= 1"]),
    "tf-threads -1": ({"cfg.yaml": TINY}, ["cfg.yaml", "--tf-threads", "-1"], ["--tf-threads", "-1"]),
    "lesson past the last": ({"cfg.yaml": TINY, "cur/Simple1D.json": CURRICULUM},
                             ["cfg.yaml", "--curriculum", "cur", "--lesson", "9"], ["Lesson 9", "3 lessons"]),
    "misspelled shipped config": ({}, ["cartpole_zo"], ["cartpole_zo", "did you mean cartpole_zoo"]),
    "sampler entry": ({"cfg.yaml": TINY, "s.yaml": "resampling-interval: 100\nlength: {min_value: 1}\n"},
                      ["cfg.yaml", "--sampler", "s.yaml"], ["s.yaml", "length"]),
}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_cli_refuses_with_one_line(tmp_path, case):
    files, args, fragments = CLI_CASES[case]
    for name, text in files.items():
        write(tmp_path, name, text)
    status, out, err = learn(tmp_path, *args)
    assert status == 2, (out, err)
    line = one_error_line(err)
    for fragment in fragments:
        assert fragment in line, line
    assert not (tmp_path / "results" / "r").exists()  # refused before the run folder is made


def test_int_and_float_keys_refuse_quoted_numbers_but_keep_yaml_exponents(tmp_path):
    with pytest.raises(TrainerConfigError, match=r"batch_size in section default .* not a string.*'256'"):
        load_trainer_config(write(tmp_path, "a.yaml", 'default:\n  batch_size: "256"\n  buffer_size: 512\n'))
    with pytest.raises(TrainerConfigError, match=r"learning_rate .* not a string.*'0.001'"):
        load_trainer_config(write(tmp_path, "b.yaml", 'default:\n  learning_rate: "0.001"\n'))
    config = load_trainer_config(write(tmp_path, "c.yaml", "default:\n  learning_rate: 1e-4\n  max_steps: 5.0e5\n"))
    assert config.default.hyperparameters.learning_rate == 1e-4 and config.default.max_steps == 500_000


def test_duplicate_keys_are_refused_at_any_depth(tmp_path):
    text = "default:\n  reward_signals:\n    extrinsic: {strength: 1.0, gamma: 0.9, gamma: 0.99}\n"
    with pytest.raises(TrainerConfigError, match=r"x.yaml has the key 'gamma' twice \(again on line 3\)"):
        load_trainer_config(write(tmp_path, "x.yaml", text))
    with pytest.raises(TrainerConfigError, match="has the key 'default' twice"):
        load_trainer_config(write(tmp_path, "y.yaml", "default: {}\ndefault: {}\n"))


def test_demo_path_is_relative_to_the_config_file_when_it_is_there(tmp_path, monkeypatch):
    write(tmp_path, "configs/demos/expert.demo", "")
    body = ("default:\n  pretraining: {demo_path: demos/expert.demo, strength: 0.5, steps: 100}\n"
            "  reward_signals:\n    extrinsic: {strength: 1.0, gamma: 0.99}\n"
            "    gail: {strength: 0.1, gamma: 0.99, demo_path: demos/expert.demo}\n"
            "Other:\n  trainer: offline_bc\n  batches_per_epoch: 2\n  demo_path: demos/elsewhere.demo\n")
    monkeypatch.chdir(tmp_path)
    config = load_trainer_config(write(tmp_path, "configs/bc.yaml", body))
    there = str(tmp_path / "configs" / "demos" / "expert.demo")
    assert config.default.pretraining.demo_path == there
    assert config.default.reward_signals["gail"].demo_path == there
    # not under the config's folder: as written, relative to the working directory
    assert config.settings_for("Other").behavioral_cloning.demo_path == "demos/elsewhere.demo"


def test_a_config_name_close_to_a_shipped_one_is_suggested(tmp_path):
    with pytest.raises(TrainerConfigError, match="did you mean cartpole_zoo"):
        config_source("cartpole_zo")
    assert config_source("cartpole_zoo").endswith("cartpole_zoo.yaml")
    assert config_source(str(tmp_path / "cartpole_zo.yaml")) == str(tmp_path / "cartpole_zo.yaml")  # a path: as is


def test_sampler_errors_name_the_file(tmp_path):
    path = write(tmp_path, "s.yaml", "resampling-interval: 100\nlength: {sampler-type: nope}\n")
    with pytest.raises(SamplerException, match=f"sampler file {path}"):
        load_sampler_file(path)


def test_python_env_error_names_the_argument_not_the_flag():
    with pytest.raises(TrainerError) as error:
        kerasrl.PPO("NoSuchEnv-v0")
    message = str(error.value)
    assert message.startswith("env NoSuchEnv-v0: ") and "--env" not in message


def test_plot_to_an_unwritable_file_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "B.csv").write_text("Step,Environment/Cumulative Reward\n100,1.0\n")
    assert tools_main(["plot", str(run), "-o", "/proc/x.png"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "/proc/x.png" in line


class Interrupt(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


def test_fit_interrupted_says_where_it_saved(tmp_path, capsys):
    agent = kerasrl.PPO("Simple1D", seed=3, batch_size=16, buffer_size=64, hidden_units=8)
    with pytest.raises(KeyboardInterrupt):
        agent.fit(500, callbacks=[Interrupt()], verbose=0)
    err = capsys.readouterr().err
    assert f"the checkpoint is in {agent.context.model_path}" in err
    saved = [name for _, _, names in os.walk(agent.context.model_path) for name in names]
    assert any(name.endswith(".index") for name in saved), saved
    agent.close()


def test_fit_verbose_must_be_keras_s(tmp_path):
    agent = kerasrl.PPO("Simple1D", seed=3, batch_size=16, buffer_size=64, hidden_units=8,
                        run_dir=str(tmp_path / "r"))
    with pytest.raises(TrainerError, match="verbose must be 0, 1, 2 or 'auto', got 3"):
        agent.fit(100, verbose=3)
    agent.close()


def test_fit_progress_lines_follow_the_summary_period(capsys):
    """``verbose=2`` (and 1 off a terminal): a line each time a summary period is crossed, and
    one where training stopped, not one per update."""
    progress = FitProgress(1000, 250, verbose=2)
    progress.start(0)
    for step in range(100, 1001, 100):
        progress.on_epoch_end(step // 100, {"step": float(step), "episode_reward_mean": 1.0, "loss": 0.5, "fps": 9.0})
    progress.on_train_end({"step": 1000.0})
    steps = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert steps == ["step=300", "step=500", "step=800", "step=1000"]


@pytest.mark.parametrize("mistake", ["config key", "curriculum", "sampler"])
def test_file_errors_come_before_tensorflow_loads(tmp_path, mistake):
    """A mistake in the trainer config, the curriculum or the sampler file needs no TensorFlow:
    its one line comes before TensorFlow is imported (seconds sooner)."""
    (tmp_path / "cfg.yaml").write_text("default:\n  batch_sise: 16\n" if mistake == "config key" else TINY)
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "Simple1D.json").write_text('{"measure": "reward", "thresholds": [1]}')
    (tmp_path / "s.yaml").write_text("length: {sampler-type: uniform, min_value: 1, max_value: 2}\n")
    flags = {"config key": [], "curriculum": ["--curriculum", "lessons"], "sampler": ["--sampler", "s.yaml"]}[mistake]
    code = ("import sys\nfrom kerasrl.cli.main import main\nstatus = main(sys.argv[1:])\n"
            "print('tensorflow loaded' if 'tensorflow' in sys.modules else 'no tensorflow')\nsys.exit(status)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code, "cfg.yaml", "--env", "Simple1D", *flags], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and done.stdout.strip() == "no tensorflow", (done.stdout, done.stderr)
    assert {"config key": "batch_sise", "curriculum": "Simple1D.json", "sampler": "resampling"}[mistake] in done.stderr
