"""CombinationLock-v0 (kerasrl.envs.lock), the sparse-reward task curiosity is measured on, behaves as its docs say."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from kerasrl.envs import lock
from kerasrl.envs.registry import make_env

ROOT = Path(__file__).resolve().parents[1]


def test_the_code_opens_the_lock_with_the_only_reward():
    env = lock.CombinationLock()
    obs, _ = env.reset(seed=1)
    assert obs.argmax() == 0 and obs.sum() == 1
    rewards = []
    for step, action in enumerate(env.code, 1):
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        assert obs.argmax() == step and not truncated
    assert terminated and rewards[:-1] == [0.0] * (len(env.code) - 1)
    assert rewards[-1] == pytest.approx(1.0 - 0.9 * lock.LENGTH / lock.MAX_STEPS)


def test_a_wrong_action_goes_back_to_the_start_without_ending_the_episode():
    env = lock.CombinationLock(length=12, actions=3, max_steps=36)
    env.reset(seed=1)
    for action in env.code[:5]:
        env.step(action)
    obs, reward, terminated, truncated, _ = env.step((env.code[5] + 1) % 3)
    assert obs.argmax() == 0 and reward == 0.0 and not terminated and not truncated


def test_episodes_stop_at_the_step_limit_unopened():
    env = lock.CombinationLock()
    env.reset(seed=1)
    wrong = 1 - env.code[0]
    ends = [env.step(wrong)[2:4] for _ in range(lock.MAX_STEPS)]
    assert ends[-1] == (False, True) and all(end == (False, False) for end in ends[:-1])


def test_the_code_is_the_same_whatever_the_seed_and_uses_every_action():
    first, second = lock.CombinationLock(), lock.CombinationLock()
    first.reset(seed=1)
    second.reset(seed=2)
    np.testing.assert_array_equal(first.code, second.code)
    assert set(first.code) == set(range(lock.ACTIONS))
    assert set(lock.CombinationLock(length=12, actions=3).code) == {0, 1, 2}


@pytest.mark.parametrize("key, value", [("actions", 1), ("length", 0), ("max_steps", 2.5)])
def test_a_bad_size_is_one_line_naming_it(key, value):
    with pytest.raises(ValueError, match=f"{key} must be an integer >= .*got {value}"):
        gymnasium.make(lock.COMBINATION_LOCK, **{key: value})


def test_it_is_an_environment_id_for_the_command_line_and_the_api():
    env = make_env(lock.COMBINATION_LOCK, 4, seed=3)
    spec = next(iter(env.behavior_specs.values()))
    assert tuple(spec.observation_shapes) == ((lock.LENGTH + 1,),) and spec.is_discrete
    assert tuple(spec.action_shape) == (lock.ACTIONS,)
    env.close()


def test_the_environment_registry_registers_it():
    """What kerasrl-learn and kerasrl.PPO make environments with registers the id, in a fresh process."""
    code = ("import gymnasium; from kerasrl.envs.registry import make_env; "
            "print(gymnasium.spec('CombinationLock-v0').entry_point, make_env('CombinationLock-v0', 2, 0).num_envs)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["kerasrl.envs.lock:CombinationLock", "2"]


def test_the_benchmark_follows_how_far_each_episode_got():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("curiosity_seeds", ROOT / "benchmarks" / "curiosity_seeds.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    env = bench.LockProgress(lock.CombinationLock(length=4, actions=2, max_steps=6))
    env.reset(seed=1)
    code = env.unwrapped.code
    for action in [code[0], code[1], code[2], 1 - code[3], code[0], 1 - code[1]]:
        env.step(action)
    assert bench.FURTHEST == [pytest.approx(3 / 4)]
