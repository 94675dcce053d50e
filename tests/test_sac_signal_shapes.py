"""The model reward signals of a SAC update see few batch shapes (each new shape is a TensorFlow trace)."""
from collections import defaultdict
from types import SimpleNamespace

import numpy as np

from kerasrl.fields import Field
from kerasrl.sac.learner import REWARDS
from kerasrl.sac.trainer import SACTrainer


class RecordingSignal:
    """A model signal that records the rows it is asked to evaluate and rewards each row with its observation."""

    per_step = False
    batch_fields = (Field.VECTOR_OBS,)
    stat_name = "Policy/Fake Reward"

    def __init__(self) -> None:
        self.rows: list[int] = []

    def evaluate_batch(self, batch):
        self.rows.append(len(batch[Field.VECTOR_OBS]))
        return SimpleNamespace(scaled_reward=batch[Field.VECTOR_OBS][:, 0])


def test_model_signal_rewards_use_power_of_two_shapes_and_fill_only_the_used_batches():
    signal = RecordingSignal()
    trainer = SimpleNamespace(reward_signals={"fake": signal}, stats=defaultdict(list))
    steps_per_call, batch = 16, 4
    for count in range(1, steps_per_call + 1):
        obs = np.arange(steps_per_call * batch, dtype=np.float32).reshape(steps_per_call, batch, 1) + 1
        obs[count:] = 0  # the padding
        stacked = {Field.VECTOR_OBS: obs, REWARDS: np.zeros((steps_per_call, batch, 1), np.float32)}
        SACTrainer._model_signal_rewards(trainer, stacked, count)
        np.testing.assert_array_equal(stacked[REWARDS][:count, :, 0], obs[:count, :, 0])
        assert not stacked[REWARDS][count:].any()
    assert sorted(set(signal.rows)) == [batch * n for n in (1, 2, 4, 8, 16)]


class UpdateRecorder:
    """A model signal that records how many rows each of its updates trains on."""

    per_step = False
    batch_fields = (Field.VECTOR_OBS,)

    def __init__(self) -> None:
        self.rows: list[int] = []

    def update(self, buffer, n_sequences):
        self.rows.append(len(buffer[Field.MASKS]))
        return {"Losses/Fake Loss": 0.0}


class Replay:
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def sample(self, rng, shape):
        return {Field.VECTOR_OBS: rng.normal(size=(*shape, 3)).astype(np.float32)}


def test_model_signals_train_on_every_due_mini_batch_in_power_of_two_chunks():
    batch = 8
    signal = UpdateRecorder()
    trainer = SimpleNamespace(reward_signals={"fake": signal}, stats=defaultdict(list), rng=np.random.default_rng(0),
                              hyperparameters=SimpleNamespace(batch_size=batch), replay=Replay(10_000))
    shapes = set()
    for due in range(1, 41):
        signal.rows.clear()
        SACTrainer._update_model_signals(trainer, due)
        assert sum(signal.rows) == due * batch  # every due mini-batch, once
        shapes.update(signal.rows)
    assert shapes == {batch * 2**k for k in range(6)}  # 40 different due counts, 6 shapes: 1, 2, 4, ... 32 mini-batches
    signal.rows.clear()
    trainer.replay = Replay(3 * batch + 5)  # a replay holding fewer rows than are due: as many whole batches as it holds
    SACTrainer._update_model_signals(trainer, 10)
    assert signal.rows == [2 * batch, batch]
