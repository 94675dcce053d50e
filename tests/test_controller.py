"""The controller loop: step counting, saving at the end and on Ctrl-C, timers JSON, resume."""
import json
import os

import numpy as np
import pytest

from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.trainers import TrainerController, initialize_trainers

CONFIG = {"default": {"batch_size": 16, "buffer_size": 64, "hidden_units": 16, "learning_rate": 5.0e-3,
                      "max_steps": 300, "memory_size": 8, "normalize": True, "num_epoch": 2, "num_layers": 1,
                      "time_horizon": 16, "sequence_length": 4, "summary_freq": 100}}


class InterruptingManager(SimpleEnvManager):
    def __init__(self, env, interrupt_at):
        super().__init__(env)
        self.calls = 0
        self.interrupt_at = interrupt_at
        self.closed = False

    def step(self):
        self.calls += 1
        if self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        return super().step()

    def close(self):
        self.closed = True
        super().close()


def build(tmp_path, interrupt_at=-1, load=False, config=CONFIG, seed=5):
    manager = InterruptingManager(Simple1DEnvironment(use_discrete=True, seed=seed), interrupt_at)
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "summaries"), "run",
                                   str(tmp_path / "models"), keep_checkpoints=2, train_model=True,
                                   load_model=load, seed=seed)
    tc = TrainerController(trainers, str(tmp_path / "models"), str(tmp_path / "summaries"), "run-0",
                           save_freq=100000, train=True, training_seed=seed)
    return tc, manager


def checkpoints(tmp_path):
    d = tmp_path / "models" / "Simple1D"
    return sorted(p.name for p in d.glob("model-*.index"))


def test_trains_to_max_steps_and_saves_once_at_end(tmp_path):
    tc, manager = build(tmp_path)
    tc.start_learning(manager)
    trainer = tc.trainers["Simple1D"]
    assert tc.global_step == 301
    assert trainer.get_step == 301
    assert checkpoints(tmp_path) == ["model-301.index"]
    assert manager.closed and not tc.interrupted
    assert trainer.update_count >= 3
    tree = json.loads((tmp_path / "summaries" / "run-0_timers.json").read_text())
    assert tree["name"] == "root"
    names = [c["name"] for c in tree.get("children", [])]
    assert "TrainerController.advance" in names
    assert any(os.path.basename(p).startswith("events") for p in os.listdir(tmp_path / "summaries" / "run_Simple1D"))
    assert [r["step"] for r in trainer.summary_log] == [100, 200, 300]
    assert any("Environment/Cumulative Reward" in r for r in trainer.summary_log)
    assert all("Losses/Value Loss" in r for r in trainer.summary_log[1:])


def test_ctrl_c_saves_and_exits_cleanly(tmp_path):
    tc, manager = build(tmp_path, interrupt_at=120)
    tc.start_learning(manager)
    assert tc.interrupted
    assert manager.closed
    assert checkpoints(tmp_path) == ["model-119.index"]
    assert (tmp_path / "summaries" / "run-0_timers.json").exists()


def test_resume_restores_exactly_and_continues(tmp_path):
    tc, manager = build(tmp_path, interrupt_at=200)
    tc.start_learning(manager)
    trainer = tc.trainers["Simple1D"]
    weights = [w.numpy().copy() for w in trainer.learner.actor_critic.weights]
    slots = [v.numpy().copy() for v in trainer.learner.optimizer.variables if "learning_rate" not in v.path]
    norm_count = float(trainer.policy.model.normalizer.count.numpy())
    assert norm_count > 0

    tc2, manager2 = build(tmp_path, load=True)
    t2 = tc2.trainers["Simple1D"]
    assert t2.get_step == 199
    assert t2.update_count == trainer.update_count
    for a, b in zip(weights, t2.learner.actor_critic.weights):
        np.testing.assert_array_equal(a, b.numpy())
    restored = [v for v in t2.learner.optimizer.variables if "learning_rate" not in v.path]
    assert len(restored) == len(slots) > 2
    for a, b in zip(slots, restored):
        np.testing.assert_array_equal(a, b.numpy())
    assert float(t2.policy.model.normalizer.count.numpy()) == norm_count
    assert float(t2.learner.clip_epsilon.numpy()) == pytest.approx(0.2 - 0.1 * 199 / 300)
    tc2.start_learning(manager2)
    assert t2.get_step == 301
    assert "model-301.index" in checkpoints(tmp_path)
    assert len(checkpoints(tmp_path)) <= 2


def test_load_without_checkpoint_names_the_path(tmp_path):
    with pytest.raises(Exception, match="could not be found"):
        build(tmp_path, load=True)


def test_same_seed_same_learning_curve(tmp_path):
    curves = []
    for run in range(2):
        tc, manager = build(tmp_path / str(run), seed=9)
        tc.start_learning(manager)
        t = tc.trainers["Simple1D"]
        curves.append(([r.get("Environment/Cumulative Reward") for r in t.summary_log],
                       [w.numpy() for w in t.learner.actor_critic.trainable_weights]))
    assert curves[0][0] == curves[1][0]
    for a, b in zip(curves[0][1], curves[1][1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("flush", [True, False])
def test_flush_on_update_cuts_every_trajectory_for_the_update(tmp_path, flush):
    from kerasrl.envs import GymnasiumEnv

    config = {"default": dict(CONFIG["default"], flush_on_update=flush, time_horizon=1000, max_steps=600,
                              buffer_size=100, hidden_units=8)}
    manager = SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=4, seed=0))
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "s"), "run", str(tmp_path / "m"),
                                   keep_checkpoints=1, train_model=True, load_model=False, seed=0)
    trainer = trainers["CartPole-v1"]
    seen = []
    original = trainer.update_policy

    def spy():
        seen.append((len(trainer.training_buffer.update_buffer["actions"]), sum(trainer.trajectory_lengths.values()),
                     trainer.get_step, trainer.episodes_completed))
        original()

    trainer.update_policy = spy
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "run", save_freq=10**6,
                      training_seed=0).start_learning(manager)
    assert len(seen) >= 4
    rows = [r for r, _, _, _ in seen]
    pending = [p for _, p, _, _ in seen]
    if flush:
        assert pending == [0] * len(seen)  # everything collected is in the update, nothing waits
        # A rollout is 101+ agent steps (26 steps of 4 envs), as SB3's n_steps × n_envs, whatever
        # the episodes: each episode's NEXT_STEP reset step stores nothing, so rows <= 104.
        assert [step for _, _, step, _ in seen] == [104 * (k + 1) for k in range(len(seen))]  # 4 agents a step
        assert all(r <= 104 for r in rows) and any(r < 104 for r in rows)
        episodes = [e for _, _, _, e in seen]
        assert all(r >= 104 - (e1 - e0) - 4 for r, e0, e1 in zip(rows[1:], episodes, episodes[1:]))
    else:
        assert all(r > 100 for r in rows)  # ML-Agents semantics: update once more than buffer_size
        assert any(p > 0 for p in pending)  # and unfinished trajectories wait


def test_environment_reset_forgets_recurrent_memories(tmp_path):
    config = {"default": dict(CONFIG["default"], use_recurrent=True, memory_size=8)}
    tc, manager = build(tmp_path, config=config)
    trainer = tc.trainers["Simple1D"]
    manager.set_policy("Simple1D", trainer.policy)
    first = manager.reset()[0].current["Simple1D"]
    trainer.policy.get_action(first)
    assert trainer.policy._memories and np.abs(trainer.policy._memories[0]).sum() > 0
    trainer.end_episode()
    assert not trainer.policy._memories and not trainer.policy._prev_actions
