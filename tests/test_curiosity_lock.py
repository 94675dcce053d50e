"""benchmarks/curiosity_seeds.py's combination lock: the task curiosity is measured on behaves as its docs say."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("curiosity_seeds", ROOT / "benchmarks" / "curiosity_seeds.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_the_code_opens_the_lock_with_the_only_reward(bench):
    env = bench.CombinationLock()
    obs, _ = env.reset(seed=1)
    assert obs.argmax() == 0 and obs.sum() == 1
    rewards = []
    for step, action in enumerate(env.code, 1):
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        assert obs.argmax() == step and not truncated
    assert terminated and rewards[:-1] == [0.0] * (len(env.code) - 1)
    assert rewards[-1] == pytest.approx(1.0 - 0.9 * bench.LOCK_LENGTH / bench.LOCK_STEPS)


def test_a_wrong_action_goes_back_to_the_start_without_ending_the_episode(bench):
    env = bench.CombinationLock(length=12, actions=3, max_steps=36)
    env.reset(seed=1)
    for action in env.code[:5]:
        env.step(action)
    obs, reward, terminated, truncated, _ = env.step((env.code[5] + 1) % 3)
    assert obs.argmax() == 0 and reward == 0.0 and not terminated and not truncated


def test_episodes_stop_at_the_step_limit_unopened(bench):
    env = bench.CombinationLock()
    env.reset(seed=1)
    wrong = 1 - env.code[0]
    ends = [env.step(wrong)[2:4] for _ in range(bench.LOCK_STEPS)]
    assert ends[-1] == (False, True) and all(end == (False, False) for end in ends[:-1])


def test_the_code_is_the_same_whatever_the_seed_and_uses_every_action(bench):
    first, second = bench.CombinationLock(), bench.CombinationLock()
    first.reset(seed=1)
    second.reset(seed=2)
    np.testing.assert_array_equal(first.code, second.code)
    assert set(first.code) == set(range(bench.LOCK_ACTIONS))
    assert set(bench.CombinationLock(length=12, actions=3).code) == {0, 1, 2}


def test_progress_records_the_furthest_position_of_each_episode(bench):
    env = bench.LockProgress(bench.CombinationLock(length=4, actions=2, max_steps=6))
    env.reset(seed=1)
    code = env.unwrapped.code
    for action in [code[0], code[1], code[2], 1 - code[3], code[0], 1 - code[1]]:
        env.step(action)
    assert bench.FURTHEST[-1] == pytest.approx(3 / 4)
    bench.FURTHEST.clear()
