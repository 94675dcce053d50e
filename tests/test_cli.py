"""The command line and the main job's summary line; Gymnasium CartPole is learned."""
import json
import os
import re
import runpy
import subprocess
import sys

import numpy as np
import pytest

from kerasrl.cli import build_parser, main, tools
from kerasrl.cli.run_folder import FAILED_START, LOCK, MARKER, MARKER_TEXT, REPLACED, RETURNS
from kerasrl.cli.train import run_training
from kerasrl.configs import available_configs, config_path
from tests.process_tools import free_ports

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FINAL = re.compile(r"^final steps=(\d+) mean_return=(\S+) steps_per_sec=(\S+) wall_s=(\S+)$", re.M)


def test_cli_trains_builtin_env_and_resumes(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 64\n  hidden_units: 16\n  learning_rate: 5.0e-3\n"
                   "  summary_freq: 100\n")
    base = [str(cfg), "--env", "Simple1D", "--num-envs", "1", "--seed", "3", "--results-dir", str(tmp_path),
            "--run-id", "r", "--progress-every", "100"]
    assert main(base + ["--steps", "300"]) == 0
    out = capsys.readouterr().out
    m = FINAL.search(out)
    assert m and int(m.group(1)) == 301
    assert float(m.group(3)) > 0 and float(m.group(4)) > 0
    models = tmp_path / "r" / "models" / "Simple1D"
    assert (models / "model-301.index").exists()
    assert main(base + ["--steps", "500", "--resume"]) == 0
    out = capsys.readouterr().out
    assert "Resumed Simple1D at step 301" in out
    m = FINAL.search(out)
    assert int(m.group(1)) == 501  # the whole run: 301 → 501
    assert (models / "model-501.index").exists()
    timers = (tmp_path / "r" / "timers.json").read_bytes()
    assert main(base + ["--steps", "50", "--resume", "--inference"]) == 0
    m = FINAL.search(capsys.readouterr().out)
    assert int(m.group(1)) == 50
    assert sorted(p.name for p in models.glob("model-*.index"))[-1] == "model-501.index"  # nothing new saved
    assert (tmp_path / "r" / "timers.json").read_bytes() == timers  # the training's timings stay
    assert (tmp_path / "r" / "inference_timers.json").exists()
    unseeded = [a for a in base if a not in ("--seed", "3")]
    assert main(unseeded + ["--steps", "20", "--inference"]) == 0  # the run's own seed, not a fresh one
    out = capsys.readouterr().out
    assert "Loaded Simple1D's policy of step 501: acting with it, not training (seed 3)." in out
    assert "Resumed" not in out and ", seed 3," in out


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("kerasrl-learn: error: ") and err.count("\n") == 1, err
    return err


def test_cli_errors_name_the_problem(tmp_path, capsys):
    assert main([str(tmp_path / "missing.yaml"), "--env", "Simple1D"]) == 2
    assert "missing.yaml" in one_line_error(capsys)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n")
    assert main([str(cfg), "--env", "Simple1D", "--num-envs", "4", "--results-dir", str(tmp_path)]) == 2
    assert "--num-envs" in one_line_error(capsys)
    assert main([str(cfg), "--env", "CartPol-v1", "--results-dir", str(tmp_path), "--run-id", "x"]) == 2
    assert "CartPol-v1" in one_line_error(capsys)
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert main([str(cfg), "--env", "Simple1D", "--results-dir", str(blocked)]) == 2
    assert str(blocked) in one_line_error(capsys)
    assert main([str(cfg), "--env", "Simple1D", "--results-dir", str(tmp_path), "--run-id", "none", "--inference"]) == 2
    assert "no trained model" in one_line_error(capsys)
    assert main([str(cfg), "--env", "Simple1D", "--force", "--resume"]) == 2
    assert "--force" in one_line_error(capsys)


def test_existing_run_is_refused_and_force_starts_afresh(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n")
    base = [str(cfg), "--env", "Simple1D", "--seed", "1", "--results-dir", str(tmp_path), "--run-id", "r"]
    assert main(base + ["--steps", "100"]) == 0  # built-in envs pick --num-envs 1 themselves
    models = tmp_path / "r" / "models" / "Simple1D"
    assert sorted(p.name for p in models.glob("model-*.index")) == ["model-101.index"]
    capsys.readouterr()
    assert main(base + ["--steps", "60"]) == 2
    assert "--resume" in one_line_error(capsys) and (models / "model-101.index").exists()
    assert main(base + ["--steps", "60", "--force"]) == 0
    assert sorted(p.name for p in models.glob("model-*.index")) == ["model-61.index"]


def test_ctrl_c_exits_130_after_saving(tmp_path, capsys, monkeypatch):
    from kerasrl.trainers import TrainerController

    original = TrainerController.advance

    def interrupt_at_50(self, env):
        if self.global_step == 50:
            raise KeyboardInterrupt
        return original(self, env)

    monkeypatch.setattr(TrainerController, "advance", interrupt_at_50)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n")
    assert main([str(cfg), "--env", "Simple1D", "--results-dir", str(tmp_path), "--steps", "200"]) == 130
    assert "continue with --resume" in capsys.readouterr().out
    assert (tmp_path / "ppo" / "models" / "Simple1D" / "model-50.index").exists()


@pytest.mark.slow
@pytest.mark.default_fast_path
def test_cartpole_reaches_475_within_100k_steps(tmp_path):
    # Seed 1 reaches a rolling mean of 475 at ~68k steps. Learning curves are chaotic in the float
    # round-off: a change of numerics re-draws every seed's curve (see benchmarks/bench_ppo.py for
    # the spread over seeds; SB3 also misses 475 at 100k on about one seed in ten).
    args = build_parser("train_ppo.py", config_required=False).parse_args(
        ["--config", config_path("cartpole_zoo"), "--steps", "100000", "--seed", "1",
         "--results-dir", str(tmp_path), "--progress-every", "100000"]
    )
    result = run_training(args)
    assert result["steps"] >= 100000
    assert result["mean_return"] >= 475, result


def test_main_job_script_runs(tmp_path, capsys, monkeypatch):
    """The script as ``python3 examples/train_ppo.py`` runs it, in this process (its TensorFlow is
    loaded already; the next test and the docs' block run it as a separate process)."""
    script = os.path.join(ROOT, "examples", "train_ppo.py")
    monkeypatch.setattr(sys, "argv", [script, "--steps", "4000", "--results-dir", str(tmp_path), "--progress-every",
                                      "2000"])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the repository first
    with pytest.raises(SystemExit) as done:
        runpy.run_path(script, run_name="__main__")
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    m = FINAL.search(out)
    assert m, out
    assert int(m.group(1)) >= 4000
    assert np.isfinite(float(m.group(2)))
    assert (tmp_path / "cartpole_ppo" / "models" / "CartPole-v1").exists()


def test_main_job_names_its_run_folder_after_another_env(tmp_path, capsys, monkeypatch):
    """With ``--env`` and no ``--run-id`` the run goes to ``<env>_ppo``, not the CartPole run's folder."""
    script = os.path.join(ROOT, "examples", "train_ppo.py")
    monkeypatch.setattr(sys, "argv", [script, "--env", "Pendulum-v1", "--steps", "1000", "--results-dir", str(tmp_path)])
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as done:
        runpy.run_path(script, run_name="__main__")
    assert done.value.code == 0, capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["pendulum_ppo"]


@pytest.mark.slow
def test_main_job_keeps_its_compiled_update_for_the_next_run(tmp_path):
    """The main job's XLA cache: the first run publishes the compiled update, the second loads
    it, and TensorFlow's spurious errors about the load stay hidden (no TF_CPP_MIN_LOG_LEVEL set)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_XLA_FLAGS")}
    runs = []
    for run_id in ("a", "b"):
        runs.append(subprocess.run(
            [sys.executable, os.path.join(ROOT, "examples", "train_ppo.py"), "--steps", "2000", "--results-dir",
             str(tmp_path), "--run-id", run_id, "--xla-cache", str(tmp_path / "xla")],
            capture_output=True, text=True, timeout=300, env=env))
        assert runs[-1].returncode == 0, runs[-1].stderr
    (namespace,) = os.listdir(tmp_path / "xla")
    assert [n for n in os.listdir(tmp_path / "xla" / namespace)] != []
    assert all(n.endswith(".pb") for n in os.listdir(tmp_path / "xla" / namespace))  # staging removed
    assert len(os.listdir(tmp_path / "xla" / namespace)) == 1  # the second run loaded the first's entry
    assert "SIGILL" not in runs[1].stderr and "Error parsing" not in runs[1].stderr, runs[1].stderr
    assert FINAL.search(runs[1].stdout).group(2) == FINAL.search(runs[0].stdout).group(2)  # same seed, same run


def test_a_shipped_config_can_be_named(tmp_path, capsys):
    args = ["trainer_config", "--env", "Simple1D", "--steps", "20", "--results-dir", str(tmp_path)]
    assert main(args) == 0
    assert FINAL.search(capsys.readouterr().out)
    assert main(["no_such_config", "--env", "Simple1D", "--results-dir", str(tmp_path), "--run-id", "b"]) == 2
    assert "no_such_config" in capsys.readouterr().err


def test_run_folder_records_metrics_timers_and_configuration(tmp_path, capsys):
    import csv

    import yaml

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n  summary_freq: 50\n")
    base = [str(cfg), "--env", "Simple1D", "--seed", "2", "--results-dir", str(tmp_path), "--run-id", "m"]
    assert main(base + ["--steps", "200"]) == 0
    assert main(base + ["--steps", "300", "--resume"]) == 0
    run = tmp_path / "m"
    with open(run / "Simple1D.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["Step"])) for r in rows] == [50, 100, 150, 200, 250, 300]  # continued after --resume
    assert {"Environment/Cumulative Reward", "Policy/Learning Rate", "Losses/Value Loss"} <= set(rows[0])
    assert rows[0]["Losses/Value Loss"] == "" and rows[-1]["Losses/Value Loss"] != ""  # a later column widens the file
    timers = json.loads((run / "timers.json").read_text())
    assert timers["name"] == "root" and any(g["name"] == "Simple1D.mean_reward" for g in timers.get("gauges", []))
    record = yaml.safe_load((run / "configuration.yaml").read_text())
    assert "--resume" in record["command_line"] and record["seed"] == 2
    assert record["behaviors"]["Simple1D"]["batch_size"] == 16 and record["behaviors"]["Simple1D"]["max_steps"] == 300
    assert len((run / "commands.log").read_text().splitlines()) == 2


def test_initialize_from_starts_a_new_run_from_another_runs_weights(tmp_path, capsys):
    import numpy as np

    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.settings import RunContext
    from kerasrl.trainers import create_trainers

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n  normalize: true\n")
    base = [str(cfg), "--env", "Simple1D", "--seed", "4", "--results-dir", str(tmp_path), "--train"]
    assert main(base + ["--run-id", "first", "--steps", "150"]) == 0

    def weights(context):
        env = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=0))
        trainer = create_trainers(str(cfg), env.behavior_specs, context)["Simple1D"]
        return trainer, [w.numpy() for w in trainer.learner.actor_critic.weights]

    trained, expected = weights(RunContext.in_results_dir(str(tmp_path), "first", load_model=True, seed=9))
    started, got = weights(RunContext.in_results_dir(str(tmp_path), "other", seed=9,
                                                     initialize_from=str(tmp_path / "first" / "models")))
    assert started.get_step == 0 and started.update_count == 0 and trained.get_step == 151
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))
    assert main(base + ["--run-id", "second", "--steps", "50", "--initialize-from", "first"]) == 0
    assert (tmp_path / "second" / "models" / "Simple1D" / "model-51.index").exists()
    capsys.readouterr()
    assert main(base + ["--run-id", "third", "--initialize-from", "nope"]) == 2
    assert "nope" in capsys.readouterr().err and not (tmp_path / "third").exists()
    assert main(base + ["--run-id", "first", "--resume", "--initialize-from", "second"]) == 2
    assert main(base + ["--run-id", "x", "--inference"]) == 2
    assert "--train and --inference" in capsys.readouterr().err


def test_progress_is_a_bar_on_a_terminal_and_lines_otherwise(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n")
    base = [str(cfg), "--env", "Simple1D", "--steps", "100", "--progress-every", "20", "--results-dir", str(tmp_path)]
    assert main(base + ["--run-id", "plain"]) == 0
    plain = capsys.readouterr().out
    assert len(re.findall(r"^steps=\d+ mean_return=\S+ steps_per_sec=\d+$", plain, re.M)) == 5
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(base + ["--run-id", "bar"]) == 0
    out = capsys.readouterr().out
    assert "mean_return:" in out and "steps/s:" in out and "100/100" in out  # keras.utils.Progbar's line
    assert not re.search(r"^steps=\d+ ", out, re.M)
    assert FINAL.search(out)  # the machine-readable line still ends the run, on its own line


def files_under(folder) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> its bytes), and every folder (-> b"/")."""
    return {str(p.relative_to(folder)): b"/" if p.is_dir() else p.read_bytes() for p in folder.rglob("*")}


def test_a_missing_unity_player_is_an_error_before_the_run_folder_is_touched(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n")
    player = str(tmp_path / "nosuchplayer.x86_64")
    base = [str(cfg), "--env", player, "--steps", "800", "--results-dir", str(tmp_path / "results")]
    assert main(base + ["--run-id", "c9"]) == 2
    assert player in one_line_error(capsys)
    assert not (tmp_path / "results").exists()
    run = tmp_path / "results" / "old"  # an existing run that --resume would continue: left as it is
    run.mkdir(parents=True)
    (run / MARKER).write_text(f"{MARKER_TEXT}\n")
    (run / LOCK).write_text("12345\n")
    (run / "commands.log").write_text("a start\n")
    before = files_under(tmp_path)
    assert main(base + ["--run-id", "old", "--resume"]) == 2
    assert player in one_line_error(capsys)
    assert files_under(tmp_path) == before


def test_a_unity_scene_that_never_connects_leaves_no_run_folder(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n")
    (port,) = free_ports(1)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "mine.txt").write_text("keep\n")
    before = files_under(tmp_path)
    for results in ("results", os.path.join("made", "deeper")):  # a folder that existed stays; made ones go
        assert main([str(cfg), "--env", "editor", "--base-port", str(port), "--timeout-wait", "0.3", "--steps", "50",
                     "--results-dir", str(tmp_path / results), "--run-id", "c9"]) == 2
        assert "did not connect" in one_line_error(capsys)
        assert files_under(tmp_path) == before


def test_a_player_that_exits_without_writing_its_log_names_no_log_file_and_leaves_nothing(tmp_path, capsys):
    """A player that fails on its arguments before writing its log: the error says so rather than
    naming a file that is not there, and the unstarted run folder is gone."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n")
    player = tmp_path / "player.x86_64"
    player.write_text("#!/bin/sh\nexit 2\n")
    player.chmod(0o755)
    (port,) = free_ports(1)
    assert main([str(cfg), "--env", str(player), "--timeout-wait", "5", "--steps", "50", "--base-port", str(port),
                 "--results-dir", str(tmp_path / "results"), "--run-id", "r"]) == 2
    err = one_line_error(capsys)
    assert "which wrote no log) exited with code 2 before it connected" in err and "Player-0.log" not in err
    assert not (tmp_path / "results").exists()


def test_a_player_that_exits_before_connecting_keeps_its_log_and_the_command_can_run_again(tmp_path, capsys):
    """The error names the player's log, which is there to read; the folder holds no run, so the
    same command (once the player is fixed) starts one there without --force."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n")
    player = tmp_path / "player.x86_64"
    player.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -logFile ] && echo "no GPU" > "$2"; shift; done\n'
                      "exit 1\n")
    player.chmod(0o755)
    command = [str(cfg), "--env", str(player), "--timeout-wait", "5", "--steps", "50",
               "--results-dir", str(tmp_path / "results"), "--run-id", "r"]
    for _ in range(2):
        (port,) = free_ports(1)
        assert main([*command, "--base-port", str(port)]) == 2
        err = one_line_error(capsys)
        log = tmp_path / "results" / "r" / "run_logs" / "Player-0.log"
        assert f"its log: {log}" in err and "exited with code 1 before it connected" in err
        assert log.read_text() == "no GPU\n"
    assert main([*command[:2], "Simple1D", *command[3:]]) == 0  # the folder takes a run
    assert (tmp_path / "results" / "r" / "models" / "Simple1D").is_dir()
    assert not (tmp_path / "results" / "r" / "run_logs" / "Player-0.log").exists()
    capsys.readouterr()


def test_force_with_a_unity_env_that_never_connects_loses_nothing(tmp_path, capsys):
    """``--force`` deletes the old run only once the environment has started: the old run is
    whole after an editor or a player that never connects (the player's own log kept aside)."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 32\n")
    player = tmp_path / "player.x86_64"
    player.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -logFile ] && echo failed > "$2"; shift; done\n'
                      "sleep 30\n")
    player.chmod(0o755)
    run = tmp_path / "results" / "r"
    (run / "models" / "B").mkdir(parents=True)
    (run / "models" / "B" / "model-100.index").write_text("checkpoint\n")
    (run / "run_logs").mkdir()
    (run / "run_logs" / "Player-0.log").write_text("old run\n")
    (run / MARKER).write_text(f"{MARKER_TEXT}\n")
    before = files_under(run)
    for env in ("editor", str(player)):
        (port,) = free_ports(1)
        assert main([str(cfg), "--env", env, "--base-port", str(port), "--timeout-wait", "0.5", "--steps", "50",
                     "--results-dir", str(tmp_path / "results"), "--run-id", "r", "--force"]) == 2
        assert "did not connect" in one_line_error(capsys)
        after = files_under(run)
        assert {k: v for k, v in after.items() if k in before} == before and not (run / REPLACED).exists()
    assert (run / FAILED_START / "run_logs").is_dir()  # the failed start's own player log


def test_flag_errors_are_one_line(tmp_path, capsys):
    for argv, expected in ((["cartpole_zoo", "--bogus"], "unrecognized arguments: --bogus"),
                           (["cartpole_zoo", "--steps", "abc"], "argument --steps: invalid int value: 'abc'")):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2
        assert capsys.readouterr().err == f"kerasrl-learn: error: {expected} (see kerasrl-learn --help)\n"
    for argv, prog in ((["plot", str(tmp_path), "--bogus"], "kerasrl"), (["export"], "kerasrl export")):
        with pytest.raises(SystemExit) as done:
            tools.main(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2 and err.startswith(f"{prog}: error: ") and err.count("\n") == 1, err
        assert err.endswith(f"(see {prog} --help)\n")


def test_help_lists_every_shipped_config():
    words = set(re.findall(r"[\w]+", build_parser().format_help()))
    assert len(available_configs()) > 2 and set(available_configs()) <= words


def test_a_negative_seed_other_than_minus_one_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:  # refused as the flags are parsed (tests/test_rough_edges.py)
        main(["trainer_config", "--env", "Simple1D", "--seed", "-5", "--steps", "20", "--results-dir", str(tmp_path)])
    assert done.value.code == 2
    assert "argument --seed: must be from 0 to 4294967295, or -1 to draw one; got -5" in one_line_error(capsys)
    assert os.listdir(tmp_path) == []


def test_a_run_resumed_at_its_target_reports_the_mean_return_it_ended_with(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"  # no summary (no CSV row) within the run
    cfg.write_text("default:\n  batch_size: 16\n  buffer_size: 64\n  hidden_units: 8\n  summary_freq: 10000\n")
    base = [str(cfg), "--env", "Simple1D", "--seed", "1", "--results-dir", str(tmp_path), "--run-id", "r",
            "--progress-every", "1000"]
    assert main(base + ["--steps", "300"]) == 0
    ended = FINAL.search(capsys.readouterr().out).group(2)
    assert np.isfinite(float(ended))
    assert main(base + ["--resume"]) == 0
    out = capsys.readouterr().out
    assert "already at its target" in out and FINAL.search(out).group(2) == ended
    (tmp_path / "r" / RETURNS).unlink()  # a folder that keeps no return: nan, and a line says why
    assert main(base + ["--resume"]) == 0
    out = capsys.readouterr().out
    assert FINAL.search(out).group(2) == "nan" and "mean_return is not known" in out
