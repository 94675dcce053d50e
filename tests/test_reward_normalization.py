"""``normalize_rewards``: extrinsic rewards over the running spread of their discounted return."""
import numpy as np
import pytest

from kerasrl.trainers.reward_normalization import CLIP, RewardNormalizer


def test_rewards_are_scaled_by_the_spread_of_every_agents_discounted_returns():
    rng = np.random.default_rng(0)
    norm = RewardNormalizer(gamma=0.9)
    pieces = [(0, rng.normal(3.0, 2.0, 40), False), (1, rng.normal(-1.0, 5.0, 30), True),
              (0, rng.normal(3.0, 2.0, 25), True), (1, rng.normal(0.0, 1.0, 10), False)]
    running = {0: 0.0, 1: 0.0}
    seen = []
    for agent, rewards, ended in pieces:
        out = norm(agent, rewards, ended)
        g = running[agent]
        for r in rewards:
            g = 0.9 * g + r
            seen.append(g)
        running[agent] = 0.0 if ended else g
        np.testing.assert_allclose(out, np.clip(rewards / np.sqrt(np.var(seen) + 1e-8), -CLIP, CLIP), rtol=1e-4)
    assert norm.var == pytest.approx(np.var(seen), rel=1e-4)
    assert norm.mean == pytest.approx(np.mean(seen), rel=1e-4)


def test_an_ended_episode_starts_the_next_return_from_zero_and_large_rewards_are_clipped():
    norm = RewardNormalizer(gamma=0.99)
    norm(0, np.ones(5), True)
    norm.var = 1e-6  # a tiny spread: the next rewards are clipped
    out = norm(0, np.array([1.0, -1.0]), False)
    assert norm._returns[0] == pytest.approx(0.99 * 1.0 - 1.0)  # started from 0, not from the first episode's
    np.testing.assert_array_equal(np.sign(out), [1.0, -1.0])
    assert np.abs(out).max() <= CLIP


def test_ppo_normalizes_its_extrinsic_rewards_and_checkpoints_the_statistics(tmp_path):
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_reward_signals import simple_config
    from tests.test_simple_rl import run_training

    config = simple_config(max_steps=200, normalize_rewards=True)
    trainer = next(iter(run_training(Simple1DEnvironment(use_discrete=True, seed=3), tmp_path, config=config)
                        .trainers.values()))
    norm = trainer.reward_normalizer
    assert norm is not None and norm.count > 150  # every stored step's return
    stats = (norm.count, norm.mean, norm.var)
    trainer.save_model()
    norm.count, norm.mean, norm.var = 1.0, 2.0, 123.0
    trainer.load_model()
    assert (norm.count, norm.mean, norm.var) == pytest.approx(stats)
