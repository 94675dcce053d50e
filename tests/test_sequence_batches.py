"""``sequence_batches: sb3``: recurrent mini-batches of ``batch_size`` agent steps, every sequence
in every epoch (sb3-contrib's RecurrentPPO), against ML-Agents' whole padded mini-batches."""
import numpy as np
import pytest

from kerasrl.common.minibatches import minibatch_plan, step_counted_plan
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import load_trainer_config


@pytest.mark.parametrize("n, steps, batch, seq", [(15, 249, 256, 32), (8, 256, 256, 32), (40, 1000, 256, 32),
                                                   (3, 20, 64, 16), (100, 4000, 64, 8)])
def test_every_sequence_once_per_epoch_in_ceil_steps_over_batch_minibatches(n, steps, batch, seq):
    plan = step_counted_plan(n, steps, batch, seq, num_epoch=4, seed=3)
    epochs, n_batches, width = plan.shape
    assert epochs == 4 and n_batches == min(-(-steps // batch), n)
    assert width % max(batch // seq, 1) == 0 and width >= -(-n // n_batches)
    for epoch in plan:
        real = epoch[epoch < n]
        assert sorted(real.tolist()) == list(range(n))  # every sequence, once
        assert set(epoch[epoch >= n].tolist()) <= {n}  # the rest is the masked sequence
    assert not np.array_equal(plan[0], plan[1])  # a fresh permutation per epoch


def test_the_mlagents_plan_drops_what_the_step_counted_one_keeps():
    """15 sequences of a 249-step rollout with batch_size 256 and sequences of 32: ML-Agents'
    plan trains on 8 of them per epoch, the step-counted plan on all 15."""
    assert minibatch_plan(15, 256 // 32, 1, 0).size == 8
    plan = step_counted_plan(15, 249, 256, 32, 1, 0)
    assert plan.shape == (1, 1, 16) and np.count_nonzero(plan < 15) == 15


def test_the_key_is_read_and_checked():
    config = {"default": {"trainer": "ppo", "use_recurrent": True, "sequence_batches": "sb3"}}
    assert load_trainer_config(config).settings_for("B").hyperparameters.sequence_batches == "sb3"
    with pytest.raises(TrainerConfigError, match="sequence_batches"):
        load_trainer_config({"default": {"trainer": "ppo", "sequence_batches": "torch"}})
