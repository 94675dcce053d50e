"""``threaded: true``: PPO (and SAC) updates in a thread of their own while acting goes on. It
learns as the unthreaded trainer does, its data is one update old, seeded runs repeat, a failing
update stops the run with one line and no thread left, and Ctrl-C / SIGTERM / --resume work."""
import json
import re
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from test_faults_signals import FINAL, _learn, _saved_step, _stop_once_training

import kerasrl
from kerasrl import recording
from kerasrl.cli import main
from kerasrl.cli.train import threaded_sections
from kerasrl.envs import EnvironmentException, SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import TrainerConfigError, UpdateThreadError
from kerasrl.ppo.trainer import PPOTrainer, ThreadedData
from kerasrl.sac.trainer import SACTrainer
from kerasrl.trainers import TrainerController, initialize_trainers

BASE = {"batch_size": 16, "buffer_size": 63, "hidden_units": 16, "num_layers": 1, "num_epoch": 3,
        "learning_rate": 3.0e-3, "summary_freq": 10**6, "max_steps": 1500, "threaded": True}


def _train(tmp_path, seed=0, save_freq=10**6, env=None, load=False, run="run", **overrides):
    """A Simple1D run; returns the controller and its trainer."""
    manager = SimpleEnvManager(env or Simple1DEnvironment(use_discrete=True, seed=seed))
    config = {"default": {**BASE, **overrides}}
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "s"), run, str(tmp_path / "m"),
                                   keep_checkpoints=3, train_model=True, load_model=load, seed=seed)
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), run, save_freq=save_freq,
                           timers_path=str(tmp_path / f"{run}_timers.json"))
    tc.start_learning(manager)
    return tc, trainers["Simple1D"]


def _update_threads():
    return [t for t in threading.enumerate() if t.name.startswith("kerasrl-update-")]


@pytest.mark.parametrize("threaded", [False, True], ids=["unthreaded", "threaded"])
def test_threaded_learns_simple1d_as_unthreaded_does(tmp_path, threaded):
    _, trainer = _train(tmp_path, seed=1, threaded=threaded)
    assert trainer.update_count >= 15
    assert np.mean(trainer.recent_returns) > 0.9
    assert not _update_threads()


def test_with_rollouts_every_update_after_the_first_is_exactly_one_update_old(tmp_path):
    _, trainer = _train(tmp_path, flush_on_update=True, max_steps=600)
    staleness = trainer.stats["Policy/Staleness"]
    assert len(staleness) == trainer.update_count >= 8
    assert staleness == [0.0] + [1.0] * (len(staleness) - 1)
    assert trainer.updates_applied == trainer.update_count  # the end waited for the last update


def test_with_time_horizon_trajectories_an_update_sees_steps_at_most_two_updates_old(tmp_path):
    # a trajectory cut at time_horizon that spans a hand-over keeps its oldest steps' weights
    _, trainer = _train(tmp_path, max_steps=600, time_horizon=8)
    staleness = trainer.stats["Policy/Staleness"]
    assert len(staleness) == trainer.update_count >= 8
    assert staleness[0] == 0.0 and set(staleness[1:]) <= {1.0, 2.0} and 1.0 in staleness


def test_seeded_threaded_runs_repeat(tmp_path):
    weights = []
    for run in ("a", "b"):
        _, trainer = _train(tmp_path / run, seed=3, max_steps=500, flush_on_update=True)
        weights.append([v.numpy() for v in trainer.learner.actor_critic.trainable_variables])
        weights.append(list(trainer.recent_returns))
    assert all(np.array_equal(x, y) for x, y in zip(weights[0], weights[2]))
    assert weights[1] == weights[3]


def test_an_update_buffer_built_while_acting_learns_as_one_built_in_the_update_thread(tmp_path, monkeypatch):
    # the acting thread stages each update's buffer (GAE, appends; the normalizer's
    # observations go with it): the same weights and normalizer as the update thread building it
    # (the staged path's advantages refreshed with the learner's critic left out, which the
    # other path has not)
    monkeypatch.setattr(PPOTrainer, "_refresh_advantages", lambda self, update, values, segments: None)

    def results(run):
        _, trainer = _train(tmp_path / run, seed=5, max_steps=500, flush_on_update=True, normalize=True)
        model = trainer.learner.actor_critic
        return [v.numpy() for v in model.trainable_variables] + list(model.normalizer.numpy_stats())

    staged = results("staged")
    original = PPOTrainer.prepare_threaded

    def unstaged(self):
        original(self)
        assert self._next.staged is not None  # the path compared against is the one a run takes
        self._next = ThreadedData()

    monkeypatch.setattr(PPOTrainer, "prepare_threaded", unstaged)
    in_thread = results("in_thread")
    assert all(np.array_equal(a, b) for a, b in zip(staged, in_thread))


def test_refreshed_advantages_are_each_staged_trajectorys_gae_with_the_learners_values(tmp_path, monkeypatch):
    """The threaded update recomputes GAE over the staged trajectories in one call: the same as
    each trajectory's own GAE with the learner's values and the learner's value of the
    observation after its last step (0 once terminated), not the acting policy's older one."""
    from kerasrl.common.gae import gae_and_returns
    from kerasrl.fields import Field

    checked, stale = [], []
    real = PPOTrainer._refresh_advantages

    def refresh_and_check(self, update, values, segments):
        real(self, update, values, segments)
        rewards, adv = update[Field.rewards("extrinsic")].get_batch(), update[Field.advantage("extrinsic")].get_batch()
        model = self.learner.actor_critic
        assert segments[0].start == 0 and segments[-1].end == len(rewards)
        for seg in segments:
            learner_next = float(model.values(model.acting_inputs([o[None] for o in seg.next_observations]))
                                 [Field.value_estimates("extrinsic")].numpy()[0])
            v_next = 0.0 if seg.terminated else learner_next
            stale.append(not seg.terminated and abs(learner_next - seg.bootstrap["extrinsic"]) > 1e-4)
            expected, _ = gae_and_returns(rewards[seg.start:seg.end], values["extrinsic"][seg.start:seg.end], v_next,
                                          0.99, self.hyperparameters.lambd)
            np.testing.assert_allclose(adv[seg.start:seg.end], expected, rtol=1e-5, atol=1e-6)
        checked.append(len(segments))

    monkeypatch.setattr(PPOTrainer, "_refresh_advantages", refresh_and_check)
    _train(tmp_path, seed=2, max_steps=300, time_horizon=8)
    assert len(checked) >= 3 and max(checked) > 1
    assert any(stale)  # the acting policy's bootstrap values were older: the check can tell them apart


def test_ppo_clips_the_ratio_to_the_learners_weights_at_the_update_start_not_the_acting_ones(tmp_path, monkeypatch):
    # the acting weights are one update older: their log-probabilities would start rows clipped;
    # the value estimates (and so the advantages and returns) are the learner's critic's too
    from kerasrl.fields import Field
    from kerasrl.ppo.learner import PPOLearner

    seen = []
    original = PPOLearner.update

    def spy(self, batch, step, seed):
        model = self.actor_critic
        inputs = {k: np.asarray(v) for k, v in batch.items() if k in self.batch_signature()}
        log_prob, _, values = model.evaluate_actions(inputs, inputs[Field.ACTIONS])
        np.testing.assert_allclose(batch["extrinsic_value_estimates"], values["extrinsic"].numpy().reshape(-1),
                                   rtol=1e-5, atol=1e-5)
        seen.append((batch[Field.ACTION_LOG_PROBS].sum(axis=-1), log_prob.numpy()))
        return original(self, batch, step, seed)

    monkeypatch.setattr(PPOLearner, "update", spy)
    acted = []
    original_stage = PPOTrainer._stage

    def stage(self, trajectory, data):
        acted.append(trajectory.steps[Field.ACTION_LOG_PROBS].get_batch().sum(axis=-1))
        original_stage(self, trajectory, data)

    monkeypatch.setattr(PPOTrainer, "_stage", stage)
    _, trainer = _train(tmp_path, seed=2, max_steps=400, flush_on_update=True)
    assert len(seen) == trainer.update_count >= 5
    for used, learner_now in seen:
        np.testing.assert_allclose(used, learner_now, rtol=1e-5, atol=1e-5)
    acting = np.concatenate(acted)[: sum(len(u) for u, _ in seen)]
    used_all = np.concatenate([u for u, _ in seen])
    assert np.abs(acting - used_all).max() > 1e-3  # what acting stored is not what PPO clipped to


def test_the_gil_switch_interval_is_short_only_while_an_update_thread_runs(tmp_path, monkeypatch):
    import sys

    before = sys.getswitchinterval()
    seen = []
    update = PPOTrainer._update

    def watching(self, step, stats):
        seen.append(sys.getswitchinterval())
        return update(self, step, stats)

    monkeypatch.setattr(PPOTrainer, "_update", watching)
    _train(tmp_path, max_steps=300)
    assert seen and all(v < before for v in seen) and sys.getswitchinterval() == before


def test_timers_show_how_much_acting_and_learning_overlap(tmp_path):
    _train(tmp_path, max_steps=400)
    tree = json.loads((tmp_path / "run_timers.json").read_text())
    thread = next(c for c in tree["children"] if c["name"] == "update_thread:Simple1D")
    assert thread["is_parallel"] and thread["children"][0]["name"] == "update"
    assert thread["children"][0]["count"] >= 5
    gauges = {g["name"]: g["value"] for g in tree["gauges"]}
    busy, waited = gauges["Simple1D.threaded.update_seconds"], gauges["Simple1D.threaded.acting_waited_seconds"]
    assert busy > 0 and gauges["Simple1D.threaded.overlap_seconds"] == pytest.approx(max(busy - waited, 0.0))


def test_a_failing_update_stops_the_run_with_one_line_and_keeps_the_checkpoints(tmp_path, monkeypatch):
    update = PPOTrainer._update
    calls = []

    def failing(self, step, stats):
        calls.append(step)
        if len(calls) == 6:
            raise RuntimeError("the learner broke\nat update 6")
        return update(self, step, stats)

    monkeypatch.setattr(PPOTrainer, "_update", failing)
    with pytest.raises(UpdateThreadError) as info:
        _train(tmp_path, save_freq=128, max_steps=10**6)
    message = str(info.value)
    assert "\n" not in message and "Behavior Simple1D: the update failed: RuntimeError: the learner broke at update 6" in message
    assert not _update_threads()
    saved = sorted(int(p.name[6:-6]) for p in (tmp_path / "m" / "Simple1D").glob("model-*.index"))
    assert saved and max(saved) >= 256
    monkeypatch.setattr(PPOTrainer, "_update", update)
    _, resumed = _train(tmp_path, load=True, save_freq=128, max_steps=max(saved) + 200)
    assert resumed.step > max(saved)


def test_an_environment_failure_stops_the_update_thread_and_saves(tmp_path):
    class Broken(Simple1DEnvironment):
        steps = 0

        def step(self, actions):
            out = super().step(actions)
            self.steps += 1
            if self.steps >= 300:
                out[self.behavior_name].rewards[:] = np.nan
            return out

    with pytest.raises(EnvironmentException, match="NaN or inf"):
        _train(tmp_path, env=Broken(use_discrete=True, seed=0), max_steps=10**6)
    assert not _update_threads()
    assert sorted(p.name for p in (tmp_path / "m" / "Simple1D").glob("model-*.index")) == ["model-299.index"]


def test_ctrl_c_saves_after_the_update_in_progress_and_resume_continues(tmp_path):
    class Interrupting(SimpleEnvManager):
        calls = 0

        def step(self):
            self.calls += 1
            if self.calls == 250:
                raise KeyboardInterrupt
            return super().step()

    manager = Interrupting(Simple1DEnvironment(use_discrete=True, seed=0))
    trainers = initialize_trainers({"default": {**BASE, "threaded": True}}, manager.behavior_specs, str(tmp_path / "s"),
                                   "run", str(tmp_path / "m"), keep_checkpoints=2, train_model=True, load_model=False,
                                   seed=0)
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "run", save_freq=10**6)
    tc.start_learning(manager)
    trainer = trainers["Simple1D"]
    assert tc.interrupted and not _update_threads()
    assert (tmp_path / "m" / "Simple1D" / f"model-{trainer.step}.index").exists()
    assert trainer.updates_applied == trainer.update_count >= 2
    _, resumed = _train(tmp_path, load=True, max_steps=trainer.step + 100)
    assert resumed.update_count > trainer.update_count


@pytest.mark.slow
def test_sigterm_through_kerasrl_learn_threaded_saves_and_resume_continues(tmp_path, capsys):
    proc, out, err = _stop_once_training(_learn(tmp_path, "--threaded", "--steps", "10000000", "--progress-every", "50"),
                                         signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "the model was saved; continue with --resume" in out
    step = _saved_step(tmp_path)
    assert step >= 100 and int(FINAL.search(out).group(1)) == step
    status = main(_learn(tmp_path, "--threaded", "--steps", str(step + 200), "--resume")[3:])  # the resume: in this process
    resumed = capsys.readouterr()
    assert status == 0, resumed.err
    assert f"Resumed Simple1D at step {step}" in resumed.out and _saved_step(tmp_path) > step


def test_fit_threaded_ends_an_epoch_per_applied_update(tmp_path):
    agent = kerasrl.PPO("Simple1D", seed=0, run_dir=str(tmp_path / "fit"), threaded=True, batch_size=16,
                        buffer_size=63, hidden_units=16, num_layers=1, max_steps=10**6)
    try:
        history = agent.fit(640, verbose=0)
        trainer = agent.trainer
        assert trainer is not None and trainer.threaded
        assert len(history.history["loss"]) == trainer.update_count >= 8
        assert trainer.updates_applied == trainer.update_count
    finally:
        agent.close()


@pytest.mark.parametrize("overrides,message", [
    ({"inference": "tf"}, "Behavior Simple1D: threaded: true acts with the numpy mirror"),
    ({"trainer": "offline_bc", "batches_per_epoch": 2, "demo_path": "x.demo"},
     "Behavior Simple1D: threaded: true is for the ppo trainer"),
])
def test_what_threaded_cannot_do_is_one_clear_error(tmp_path, overrides, message):
    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=0))
    with pytest.raises(TrainerConfigError, match=message):
        initialize_trainers({"default": {**BASE, "threaded": True, **overrides}}, manager.behavior_specs,
                            str(tmp_path / "s"), "run", str(tmp_path / "m"), keep_checkpoints=1, train_model=True,
                            load_model=False, seed=0)


SAC = {"trainer": "sac", "batch_size": 32, "buffer_size": 5000, "buffer_init_steps": 40, "hidden_units": 16,
       "num_layers": 1, "learning_rate": 1.0e-3, "time_horizon": 16, "summary_freq": 10**6, "threaded": True}


def _train_sac(tmp_path, seed=0, load=False, **overrides):
    """A continuous Simple1D run of SAC; returns its trainer."""
    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=False, seed=seed))
    trainers = initialize_trainers({"default": {**SAC, **overrides}}, manager.behavior_specs, str(tmp_path / "s"), "run",
                                   str(tmp_path / "m"), keep_checkpoints=2, train_model=True, load_model=load, seed=seed)
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "run", save_freq=100,
                           timers_path=str(tmp_path / "sac_timers.json"))
    tc.start_learning(manager)
    return trainers["Simple1D"]


def test_a_threaded_sac_trainer_trains_checkpoints_and_resumes(tmp_path, monkeypatch):
    # SAC's update (the trajectories since the last one into the replay, then the gradient steps
    # due) runs in the update thread; the checkpoint's replay holds every closed trajectory
    closed = []
    take = SACTrainer.take_for_update
    monkeypatch.setattr(SACTrainer, "take_for_update", lambda self, t: (closed.append(len(t)), take(self, t))[1])
    trainer = _train_sac(tmp_path, max_steps=300, save_replay_buffer=True, normalize=True)
    assert trainer.threaded and not _update_threads()
    assert trainer.update_count >= 10 and trainer.updates_applied == trainer.update_count
    staleness = trainer.stats["Policy/Staleness"]
    assert len(staleness) == trainer.update_count and staleness[0] == 0.0 and max(staleness) >= 1.0
    assert len(trainer.stats["Losses/Value Loss"]) == trainer.update_count
    assert all(np.isfinite(v) for v in trainer.stats["Losses/Value Loss"])
    # at the end the policy acts with the learner's weights and normalizer
    actor, policy = trainer.networks.actor, trainer.policy
    assert all(np.array_equal(w, d.kernel.numpy()) for (w, _), d in zip(policy.layers, actor.body.dense))
    assert np.array_equal(policy.stats[0], trainer.networks.normalizer.numpy_stats()[0])
    folder = tmp_path / "m" / "Simple1D"
    assert (folder / f"model-{trainer.step}.index").exists() and (folder / f"model-{trainer.step}.replay.h5").exists()
    assert len(trainer.replay) == sum(closed) and not trainer._pending
    json.loads((tmp_path / "sac_timers.json").read_text())["children"]  # the update thread's timers were merged
    resumed = _train_sac(tmp_path, load=True, max_steps=trainer.step + 150, save_replay_buffer=True, normalize=True)
    assert resumed.step > trainer.step and resumed.update_steps > trainer.update_steps
    assert len(resumed.replay) > len(trainer.replay) and not _update_threads()


def test_seeded_threaded_sac_runs_repeat(tmp_path):
    runs = [_train_sac(tmp_path / run, seed=4, max_steps=200) for run in ("a", "b")]
    weights = [[v.numpy() for v in t.networks.weights] for t in runs]
    assert all(np.array_equal(x, y) for x, y in zip(*weights))
    assert runs[0].stats["Policy/Staleness"] == runs[1].stats["Policy/Staleness"]


def test_threaded_sac_with_memory_is_one_clear_error(tmp_path):
    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=False, seed=0))
    with pytest.raises(TrainerConfigError, match="Behavior Simple1D: threaded: true acts with the numpy mirror of the "
                                                 "policy, and a sac network with cameras or memory acts with TensorFlow"):
        initialize_trainers({"default": {**SAC, "use_recurrent": True, "memory_size": 16, "sequence_length": 4}},
                            manager.behavior_specs, str(tmp_path / "s"), "run", str(tmp_path / "m"), keep_checkpoints=1,
                            train_model=True, load_model=False, seed=0)
    assert not (tmp_path / "m").exists()


def test_the_threaded_flag_threads_the_ppo_and_poca_sections_only():
    from kerasrl.settings import load_trainer_config

    config = threaded_sections(load_trainer_config({"default": {"trainer": "ppo"}, "Pendulum": {"trainer": "sac"},
                                               "Copy": {"trainer": "offline_bc", "demo_path": "x.demo",
                                                        "batches_per_epoch": 2},
                                               "Group": {"trainer": "poca"}}))
    assert {name: s.threaded for name, s in config.sections.items()} == {"default": True, "Pendulum": False,
                                                                         "Copy": False, "Group": True}


def test_threaded_is_off_by_default_and_read_from_the_config():
    from kerasrl.settings import TrainerSettings
    assert TrainerSettings().threaded is False
    assert TrainerSettings.from_dict({"threaded": True}).threaded is True
    with pytest.raises(TrainerConfigError, match="threaded"):
        TrainerSettings.from_dict({"threaded": "sometimes"})


@pytest.mark.slow
def test_recurrent_normalized_policies_with_curiosity_and_bc_pretraining_run_threaded(tmp_path):
    demo = str(tmp_path / "expert.demo")
    recording.record(Simple1DEnvironment(True, seed=7), lambda obs: (obs > 0).astype(np.int32), 300, demo)
    _, trainer = _train(tmp_path, max_steps=700, use_recurrent=True, sequence_length=4, memory_size=8,
                        normalize=True, time_horizon=16, pretraining={"demo_path": demo, "strength": 0.5, "steps": 0},
                        reward_signals={"extrinsic": {"strength": 1.0, "gamma": 0.99},
                                        "curiosity": {"strength": 0.01, "gamma": 0.99, "encoding_size": 8}})
    stats = trainer.stats
    assert trainer.update_count >= 5 and len(stats["Policy/Staleness"]) == trainer.update_count
    assert stats["Losses/Curiosity Forward Loss"] and stats["Losses/Pretraining Loss"]
    assert all(np.isfinite(v) for v in stats["Losses/Value Loss"])
    # the acting normalizer is the learner's after the last update
    mirror = trainer.policy.numpy_model
    mean, _ = trainer.learner.actor_critic.normalizer.numpy_stats()
    assert np.array_equal(mirror.norm[0], mean)


def test_the_docs_page_python_example_runs(tmp_path, monkeypatch):
    page = (Path(__file__).resolve().parents[1] / "docs" / "threaded.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", page, re.S)
    short = block.replace("agent.fit(50_000", "agent.fit(20_000")
    assert short != block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(short, "docs/threaded.md", "exec"), namespace)  # noqa: S102
    rows = namespace["rows"]
    assert [float(r["Policy/Staleness"]) for r in rows][-1] == 1.0
    assert len(namespace["history"].history["loss"]) == namespace["agent"].trainer.update_count
    on, auto = re.findall(r"```yaml\n(.*?)```", page, re.S)  # threaded: true, then threaded: auto
    import yaml

    from kerasrl.settings import load_trainer_config
    assert load_trainer_config(yaml.safe_load(on)).default.threaded is True
    assert load_trainer_config(yaml.safe_load(auto)).default.threaded == "auto"


@pytest.mark.slow
def test_cli_threaded_with_workers_trains_exports_and_writes_the_timers(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 64\n  buffer_size: 255\n  hidden_units: 16\n  num_epoch: 2\n"
                   "  flush_on_update: true\n  time_horizon: 32\n")
    base = [str(cfg), "--env", "CartPole-v1", "--num-envs", "4", "--workers", "2", "--seed", "2", "--threaded",
            "--results-dir", str(tmp_path), "--run-id", "w", "--progress-every", "1000"]
    assert main(base + ["--steps", "2000"]) == 0
    out = capsys.readouterr().out
    assert "x4 in 2 worker processes" in out and int(FINAL.search(out).group(1)) >= 2000
    assert not _update_threads()
    tree = json.loads((tmp_path / "w" / "timers.json").read_text())
    assert any(c["name"] == "update_thread:CartPole-v1" for c in tree["children"])
    rows = (tmp_path / "w").rglob("CartPole-v1.csv")
    assert any("Policy/Staleness" in p.read_text().splitlines()[0] for p in rows)
    assert (tmp_path / "w" / "models" / "CartPole-v1" / "CartPole-v1.weights.h5").exists()


class TwoBehaviors(kerasrl.envs.Environment):
    """Two Simple1D tasks side by side, one behavior each (one discrete, one continuous)."""

    def __init__(self, seed):
        self.parts = {"Left": Simple1DEnvironment(True, seed=seed, behavior_name="Left"),
                      "Right": Simple1DEnvironment(False, seed=seed + 1, behavior_name="Right")}

    @property
    def behavior_specs(self):
        return {name: env.behavior_specs[name] for name, env in self.parts.items()}

    def reset(self, config=None):
        return {k: v for env in self.parts.values() for k, v in env.reset(config).items()}

    def step(self, actions):
        return {k: v for name, env in self.parts.items() for k, v in env.step({name: actions[name]}).items()}


def test_two_behaviors_each_update_in_their_own_thread(tmp_path):
    manager = SimpleEnvManager(TwoBehaviors(seed=0))
    config = {"default": {**BASE, "max_steps": 1200}, "Right": {**BASE, "max_steps": 1200, "threaded": False}}
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "s"), "run", str(tmp_path / "m"),
                                   keep_checkpoints=1, train_model=True, load_model=False, seed=0)
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "run", save_freq=10**6,
                           timers_path=str(tmp_path / "timers.json"))
    tc.start_learning(manager)
    left, right = trainers["Left"], trainers["Right"]
    assert left.threaded and not right.threaded
    assert left.update_count >= 10 and right.update_count >= 10
    assert set(left.stats["Policy/Staleness"][1:]) == {1.0} and "Policy/Staleness" not in right.stats
    assert left.episodes_completed and right.episodes_completed
    tree = json.loads((tmp_path / "timers.json").read_text())
    names = [c["name"] for c in tree["children"]]  # (the timers are the process's: earlier runs' too)
    assert "update_thread:Left" in names and "update_thread:Right" not in names
    assert not _update_threads()
