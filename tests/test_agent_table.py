"""AgentCounters (per-agent counters as slot-indexed numpy columns), shared_ones, env managers' validation default."""
import numpy as np
import pytest

from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.trainers.agent_processor import AgentCounters


def test_slots_are_stable_new_ids_get_new_slots_and_columns_grow():
    table = AgentCounters(["a", "b"])
    first = table.slots(np.array([5, 7, 9], np.int64))
    assert first.tolist() == [0, 1, 2]
    # The same ids in another array object (and order) map to the same slots.
    assert table.slots(np.array([9, 5], np.int64)).tolist() == [2, 0]
    many = np.arange(100, 140, dtype=np.int64)
    slots = table.slots(many)
    assert slots.tolist() == list(range(3, 43))
    assert len(table.columns["a"]) >= 43 and len(table.columns["b"]) >= 43
    table.columns["a"][table.slots(many)] += 1.0
    table.columns["a"][table.slots(np.array([5, 100], np.int64))] += 2.0
    assert table.get("a", 5) == 2.0 and table.get("a", 100) == 3.0 and table.get("a", 139) == 1.0
    assert table.get("a", 12345) == 0.0  # unknown agent
    table.set("b", 7, 4.5)
    assert table.as_dict("b")[7] == 4.5 and len(table.as_dict("b")) == 43
    table.clear()
    assert not table.columns["a"].any() and not table.columns["b"].any()
    assert table.slots(np.array([7], np.int64)).tolist() == [1]  # slots survive a clear


def test_env_manager_checks_every_step_unless_the_env_checks_itself():
    assert SimpleEnvManager(Simple1DEnvironment(use_discrete=True)).validate is True
    assert SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=2, seed=0)).validate is False
    assert SimpleEnvManager(GymnasiumEnv("CartPole-v1", num_envs=2, seed=0), validate=True).validate is True


def test_shared_ones_is_one_read_only_array_per_shape():
    from kerasrl.arrays import shared_ones

    a = shared_ones(8, 3)
    assert a.shape == (8, 3) and a.dtype == np.float32 and (a == 1).all()
    assert shared_ones(8, 3) is a and shared_ones(8) is not a
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 0.0
