"""Faults surface as themselves: a broken environment's error is the one the user sees, and
nothing written at the end of the run hides it."""
import numpy as np
import pytest

from kerasrl.envs import EnvironmentException, SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import TrainerError
from kerasrl.trainers import TrainerController, initialize_trainers

CONFIG = {"default": {"batch_size": 16, "buffer_size": 32, "hidden_units": 8, "num_layers": 1, "max_steps": 200}}


class BrokenEnv(Simple1DEnvironment):
    """Simple1D whose ``fault`` corrupts the step result once ``at`` steps have been taken."""

    def __init__(self, fault: str, at: int) -> None:
        super().__init__(use_discrete=True, seed=0)
        self.fault, self.at, self.steps = fault, at, 0

    def step(self, actions):
        out = super().step(actions)
        self.steps += 1
        if self.steps >= self.at:
            result = out[self.behavior_name]
            if self.fault == "nan_observation":
                result.observations[0][:] = np.nan
            elif self.fault == "nan_reward":
                result.rewards[:] = np.inf
            elif self.fault == "observation_shape":
                result.observations[0] = np.zeros((len(result), 3), np.float32)
        return out


def train(env, tmp_path, save_freq=10**6, **controller_kwargs):
    manager = SimpleEnvManager(env)
    trainers = initialize_trainers(CONFIG, manager.behavior_specs, str(tmp_path / "s"), "run",
                                   str(tmp_path / "m"), keep_checkpoints=2, train_model=True, load_model=False,
                                   seed=0)
    tc = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "run", save_freq=save_freq,
                           **controller_kwargs)
    tc.start_learning(manager)
    return tc


@pytest.mark.parametrize("fault,message", [
    ("nan_observation", "Observation 0 of behavior 'Simple1D' contains NaN or inf"),
    ("nan_reward", "Rewards of behavior 'Simple1D' contain NaN or inf"),
    ("observation_shape", r"Observation 0 of behavior 'Simple1D' has shape \(3,\), spec says \(1,\)"),
])
@pytest.mark.parametrize("at", [5, 150], ids=["before-any-checkpoint", "after-updates"])
def test_environment_faults_surface_as_themselves(tmp_path, fault, message, at):
    with pytest.raises(EnvironmentException, match=message):
        train(BrokenEnv(fault, at), tmp_path)
    models = tmp_path / "m" / "Simple1D"
    assert not list(models.glob("*.weights.h5*"))  # nothing exported after a failure
    # The bad data never reached the trainer: its state at the failure is checkpointed.
    assert sorted(p.name for p in models.glob("model-*.index")) == [f"model-{at - 1}.index"]


def test_a_failure_at_the_end_does_not_hide_the_error(tmp_path, monkeypatch, caplog):
    """The export and clean-up of a failed run log their own failures instead of raising them."""
    env = BrokenEnv("nan_reward", 150)
    monkeypatch.setattr(SimpleEnvManager, "close", lambda self: (_ for _ in ()).throw(OSError("close failed")))
    with pytest.raises(EnvironmentException, match="Rewards"):
        train(env, tmp_path)
    assert "close the environment failed too" in caplog.text


def test_a_clean_run_still_raises_its_own_end_of_run_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(SimpleEnvManager, "close", lambda self: (_ for _ in ()).throw(OSError("close failed")))
    with pytest.raises(OSError, match="close failed"):
        train(Simple1DEnvironment(use_discrete=True, seed=0), tmp_path)


def test_checkpoints_follow_trainer_steps_and_time(tmp_path, monkeypatch):
    tc = train(Simple1DEnvironment(use_discrete=True, seed=0), tmp_path, save_freq=60)
    names = sorted(p.name for p in (tmp_path / "m" / "Simple1D").glob("model-*.index"))
    assert names == ["model-180.index", "model-201.index"]  # keep 2: ..., 180, then the final one
    assert tc.trainers["Simple1D"].get_step == 201
    with pytest.raises(TrainerError, match="save_every_seconds"):
        TrainerController({}, str(tmp_path), str(tmp_path), "r", save_freq=10, save_every_seconds=0)


def test_time_based_checkpoints(tmp_path, monkeypatch):
    from kerasrl.ppo.trainer import PPOTrainer

    saved = []
    original = PPOTrainer.save_model
    monkeypatch.setattr(PPOTrainer, "save_model", lambda self: saved.append(self.get_step) or original(self))
    clock = iter(range(10**6))
    monkeypatch.setattr("kerasrl.trainers.controller.time.monotonic", lambda: float(next(clock)))
    train(Simple1DEnvironment(use_discrete=True, seed=0), tmp_path, save_every_seconds=50)
    assert saved[:3] == [50, 100, 150] and saved[-1] == 201  # one "second" per step here
