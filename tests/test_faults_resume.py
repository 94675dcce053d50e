"""``--resume`` continues the run that was started: to its recorded target with its recorded
seed (so the schedules go on decaying over the same steps), says when there is nothing left
to train, leaves no step twice in the metrics CSV, and resumes a SAC run stopped before any
experience reached its replay.

Each test runs ``kerasrl-learn`` on the built-in ``Simple1D`` with a tiny model, a few hundred
steps, and stops or damages the run as Ctrl-C or a crash would: in a subprocess where a signal
or TensorFlow's own output is part of the check, else its ``main`` in this process (a
subprocess's TensorFlow import is most of such a short run).
"""
import csv
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from process_tools import free_ports

from kerasrl.cli import main
from kerasrl.cli.report import RETURN_KEY
from kerasrl.ppo.schedules import LR_END, linear_decay
from kerasrl.sac.replay import ReplayBuffer
from kerasrl.trainers import TrainerController
from kerasrl.trainers.stats import CsvStats, StatsWriter

FINAL = re.compile(r"^final steps=(\d+) mean_return=(\S+) steps_per_sec=(\S+) wall_s=(\S+)$", re.M)
TF_LOG = re.compile(r"^(WARNING: All log messages|[IWEF]\d{4} )")  # TensorFlow's and absl's own
LR = 3.0e-3
CONFIG = f"default:\n  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n  summary_freq: 50\n" \
         f"  learning_rate: {LR}\n  max_steps: 200\n"


def command(tmp_path: Path, *flags: str) -> list[str]:
    cfg = tmp_path / "cfg.yaml"
    if not cfg.exists():
        cfg.write_text(CONFIG)
    return [sys.executable, "-m", "kerasrl.cli", str(cfg), "--env", "Simple1D", "--results-dir", str(tmp_path),
            "--run-id", "r", "--xla-cache", "off", "--progress-every", "100000", *flags]


def default_sigint() -> None:
    """Ctrl-C as on a terminal, even when pytest runs in the background (where a shell starts
    commands with SIGINT ignored, which the run would inherit)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def learn(tmp_path: Path, capsys, *flags: str) -> str:
    """``kerasrl-learn``'s ``main`` in this process, as ``command`` runs it; its output."""
    status = main(command(tmp_path, *flags)[3:])
    out, err = capsys.readouterr()
    assert status == 0, err[-2000:]
    return out


def record(tmp_path: Path) -> dict:
    return yaml.safe_load((tmp_path / "r" / "configuration.yaml").read_text())


def csv_rows(tmp_path: Path) -> list[dict]:
    with open(tmp_path / "r" / "Simple1D.csv", newline="") as f:
        return list(csv.DictReader(f))


def steps_of(rows: list[dict]) -> list[int]:
    return [int(float(r["Step"])) for r in rows]


@pytest.mark.slow
def test_resume_continues_to_the_recorded_target_with_the_recorded_seed(tmp_path, capsys):
    """Ctrl-C of a ``--steps 600`` run (config ``max_steps: 200``), then ``--resume`` without
    ``--steps`` or ``--seed``: it trains to 600 with the drawn seed, and the learning rate goes
    on decaying over 600 steps (a decay over 200 would drop it to its end value)."""
    models = tmp_path / "r" / "models" / "Simple1D"
    proc = subprocess.Popen(command(tmp_path, "--steps", "600", "--save-freq", "100"), preexec_fn=default_sigint,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(models.glob("model-*.index")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err[-2000:]
    seed = record(tmp_path)["seed"]
    assert f"seed {seed}," in out and record(tmp_path)["target_steps"] == {"Simple1D": 600}
    stopped = int(FINAL.search(out).group(1))
    assert 0 < stopped < 600

    out = learn(tmp_path, capsys, "--resume")
    assert re.search(rf"Resumed Simple1D at step {stopped}: continuing to its target of 600 steps with seed {seed}\.",
                     out), out
    assert int(FINAL.search(out).group(1)) == 601
    assert record(tmp_path)["seed"] == seed and record(tmp_path)["target_steps"] == {"Simple1D": 600}
    rows = [r for r in csv_rows(tmp_path) if r.get("Policy/Learning Rate")]
    assert rows and max(steps_of(rows)) > 500
    for step, row in zip(steps_of(rows), rows):  # the mean rate of the updates in (step - 50, step]
        rate = float(row["Policy/Learning Rate"])
        assert linear_decay(LR, LR_END, step, 600) * 0.999 <= rate <= linear_decay(LR, LR_END, step - 50, 600) * 1.001
    rates = [float(r["Policy/Learning Rate"]) for r in rows]
    assert all(a >= b for a, b in zip(rates, rates[1:]))  # no jump up


def test_resume_of_a_finished_run_says_so_and_an_explicit_steps_is_the_new_target(tmp_path, capsys):
    """Also: a damaged ``configuration.yaml`` is a one-line error, not a silent fresh target."""
    learn(tmp_path, capsys, "--steps", "200", "--seed", "5")
    out = learn(tmp_path, capsys, "--resume")
    assert "Resumed Simple1D at step 201: already at its target of 200 steps: nothing left to train." in out
    final = FINAL.search(out)
    assert final and int(final.group(1)) == 201
    assert math.isfinite(float(final.group(2))) and "nan" not in out  # the last summary's mean return
    returns = [r["Environment/Cumulative Reward"] for r in csv_rows(tmp_path) if r["Environment/Cumulative Reward"]]
    assert float(final.group(2)) == round(float(returns[-1]), 3)

    out = learn(tmp_path, capsys, "--resume", "--steps", "300")
    assert "Resumed Simple1D at step 201: continuing to its target of 300 steps with seed 5." in out
    assert int(FINAL.search(out).group(1)) == 301
    assert record(tmp_path)["target_steps"] == {"Simple1D": 300} and record(tmp_path)["seed"] == 5
    assert "already at its target of 300 steps" in learn(tmp_path, capsys, "--resume")

    (tmp_path / "r" / "configuration.yaml").write_text("[unclosed")  # the record damaged: one line names it
    proc = subprocess.run(command(tmp_path, "--resume"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    err = [line for line in proc.stderr.splitlines() if not TF_LOG.match(line)]
    assert len(err) == 1 and "configuration.yaml cannot be read" in err[0] and "--steps and --seed" in err[0], err


def test_csv_rows_past_the_resumed_step_are_dropped(tmp_path, capsys):
    """The newest checkpoints are lost (a damaged disk, a crash after the CSV got rows past the
    last checkpoint): the run resumes at step 200, and the CSV's rows of steps 250..400 go
    before the replayed steps write theirs."""
    learn(tmp_path, capsys, "--steps", "400", "--save-freq", "100", "--seed", "1")
    assert steps_of(csv_rows(tmp_path)) == [50, 100, 150, 200, 250, 300, 350, 400]
    models = tmp_path / "r" / "models" / "Simple1D"
    for path in models.glob("model-*"):
        if int(path.name.split(".")[0].split("-")[1]) > 200:
            path.unlink()
    out = learn(tmp_path, capsys, "--resume")
    assert "Resumed Simple1D at step 200: continuing to its target of 400 steps with seed 1." in out
    steps = steps_of(csv_rows(tmp_path))
    assert steps == [50, 100, 150, 200, 250, 300, 350, 400]  # each step once, in order
    assert not os.path.exists(tmp_path / "r" / "Simple1D.csv.tmp")
    reward_steps = scalar_steps(tmp_path / "r" / "summaries", "Environment/Cumulative Reward")
    rewarded = [int(float(r["Step"])) for r in csv_rows(tmp_path) if r["Environment/Cumulative Reward"]]
    assert sorted(reward_steps) == rewarded and max(rewarded) > 200  # TensorBoard as the CSV: each step once


def scalar_steps(folder: Path, tag: str) -> list[int]:
    """The steps of every ``tag`` event in the TensorBoard files under ``folder``."""
    import tensorflow as tf

    return [event.step for path in folder.rglob("*.tfevents.*") for record in tf.data.TFRecordDataset(str(path))
            for event in [tf.compat.v1.Event.FromString(bytes(record.numpy()))]
            if any(value.tag == tag for value in event.summary.value)]


def test_stats_writer_drops_the_events_past_the_step(tmp_path):
    writer = StatsWriter(str(tmp_path / "tb"))
    assert writer.drop_after(10) == 0
    for step in (50, 100, 150):
        writer.write_scalars(step, {"a": float(step), "b": 1.0})
    assert writer.drop_after(150) == 0
    assert writer.drop_after(60) == 4
    writer.write_scalars(100, {"a": 2.0})
    writer.close()
    assert sorted(scalar_steps(tmp_path / "tb", "a")) == [50, 100] and scalar_steps(tmp_path / "tb", "b") == [50]
    assert not list((tmp_path / "tb").glob("*.tmp"))


def test_drop_after_keeps_the_rows_up_to_the_step(tmp_path):
    stats = CsvStats(str(tmp_path / "b.csv"))
    assert stats.drop_after(10) == 0 and not (tmp_path / "b.csv").exists()
    for step in (50, 100, 150, 200):
        stats.write_row(step, {"a": float(step)} if step < 150 else {"a": float(step), "b": 1.0})
    assert stats.drop_after(200) == 0
    assert stats.drop_after(120) == 2
    with open(tmp_path / "b.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["Step"] for r in rows] == ["50", "100"] and list(rows[0]) == ["Step", "a", "b"]
    assert stats.last_value("a") == 100.0 and stats.last_value("b") is None
    stats.write_row(150, {"a": 3.0})
    assert [r["Step"] for r in csv.DictReader(open(tmp_path / "b.csv", newline=""))] == ["50", "100", "150"]


def on_two_hosts(tmp_path: Path, *flags: str) -> list[str]:
    """``kerasrl-learn`` on two local hosts (2 CartPole copies each); their outputs."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("default:\n  batch_size: 32\n  buffer_size: 63\n  time_horizon: 16\n  num_epoch: 2\n"
                   "  hidden_units: 8\n  num_layers: 1\n  summary_freq: 64\n  jit_compile: false\n  max_steps: 64\n")
    hosts = ",".join(f"localhost:{p}" for p in free_ports(2))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    procs = [subprocess.Popen([sys.executable, "-m", "kerasrl.cli", str(cfg), "--num-envs", "2", "--xla-cache", "off",
                               "--results-dir", str(tmp_path / f"host{i}"), "--run-id", "r", "--worker-hosts", hosts,
                               "--task-index", str(i), *flags], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        outs.append(out)
    return outs


@pytest.mark.slow
def test_resume_on_two_hosts_takes_the_chiefs_recorded_seed_and_target(tmp_path):
    """A drawn seed and ``--steps 128`` (the config says 64), then ``--resume`` on both hosts
    without them: both continue to the chief's target with the chief's seed, and a further
    ``--steps`` is the new target."""
    on_two_hosts(tmp_path, "--steps", "128")
    chief = yaml.safe_load((tmp_path / "host0" / "r" / "configuration.yaml").read_text())
    seed = chief["seed"]
    assert chief["target_steps"] == {"CartPole-v1": 128}
    outs = on_two_hosts(tmp_path, "--resume")
    assert all("already at its target of 128 steps: nothing left to train." in out for out in outs)
    # The chief's summary repeats the last return in its CSV (the other host keeps none); a run
    # whose drawn seed ended no episode on the chief has none to repeat and says nan.
    last = CsvStats(str(tmp_path / "host0" / "r" / "CartPole-v1.csv")).last_value(RETURN_KEY)
    assert FINAL.search(outs[0]).group(2) == (f"{last:.3f}" if last is not None else "nan")
    for out in on_two_hosts(tmp_path, "--resume", "--steps", "192"):
        assert f"continuing to its target of 192 steps with seed {seed}." in out
        assert re.search(r"^final steps=196 ", out, re.M)
    chief = yaml.safe_load((tmp_path / "host0" / "r" / "configuration.yaml").read_text())
    assert chief["seed"] == seed and chief["target_steps"] == {"CartPole-v1": 192}


def test_a_sac_run_stopped_before_any_experience_resumes(tmp_path, capsys, caplog, monkeypatch):
    """Ctrl-C before the first step of a SAC run that checkpoints its replay saves step 0 with an
    empty replay; ``--resume`` restores it (empty) and trains on, filling the replay."""
    (tmp_path / "cfg.yaml").write_text("default:\n  trainer: sac\n  batch_size: 16\n  buffer_size: 64\n"
                                       "  buffer_init_steps: 10\n  hidden_units: 8\n  num_layers: 1\n"
                                       "  time_horizon: 8\n  save_replay_buffer: true\n")

    def stop_at_once(self, env):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(TrainerController, "advance", stop_at_once)
        assert main(command(tmp_path, "--steps", "40")[3:]) == 130
    capsys.readouterr()
    models = tmp_path / "r" / "models" / "Simple1D"
    assert len(ReplayBuffer.load(str(models / "model-0.replay.h5"))) == 0
    with caplog.at_level(logging.INFO, logger="kerasrl"):
        out = learn(tmp_path, capsys, "--resume")
    assert int(FINAL.search(out).group(1)) == 41, out
    assert "Simple1D: replay buffer of 0 transitions restored from" in caplog.text
    saved = max(models.glob("model-*.replay.h5"), key=lambda p: int(p.name.split(".")[0][6:]))
    assert len(ReplayBuffer.load(str(saved))) >= 32  # every full trajectory of 8 steps
