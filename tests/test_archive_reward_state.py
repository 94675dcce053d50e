"""An archive keeps what the rewards depend on: ``load(..., env=...)`` then ``fit`` goes on with the
reward signals as they had learned and the reward normalizer's statistics, as a resumed CLI run does."""
import zipfile

import numpy as np

import kerasrl

SIGNALS = {"extrinsic": {"strength": 1.0, "gamma": 0.99},
           "curiosity": {"strength": 0.02, "gamma": 0.99, "encoding_size": 8}}


def statistics(agent):
    normalizer = agent.trainer.reward_normalizer
    return normalizer.count, normalizer.mean, normalizer.var


def signal_weights(agent, name):
    return [w.numpy().copy() for w in agent.trainer.reward_signals[name].model.weights]


def test_load_with_an_env_restores_the_reward_signals_and_the_reward_normalizer(tmp_path):
    agent = kerasrl.PPO("Pendulum-v1", seed=0, num_envs=2, run_dir=str(tmp_path / "a"), buffer_size=128, batch_size=32,
                        hidden_units=8, num_layers=1, normalize_rewards=True, reward_signals=SIGNALS)
    agent.fit(300, verbose=0)
    saved_stats = statistics(agent)
    saved_curiosity = signal_weights(agent, "curiosity")
    saved_updates = agent.trainer.reward_signals["curiosity"].update_count
    assert saved_stats[0] > 100 and saved_updates > 0
    path = agent.save(str(tmp_path / "agent.keras"))
    agent.close()

    loaded = kerasrl.load(path, env="Pendulum-v1", num_envs=2, run_dir=str(tmp_path / "b"))
    np.testing.assert_allclose(statistics(loaded), saved_stats, rtol=1e-6)
    for got, want in zip(signal_weights(loaded, "curiosity"), saved_curiosity):
        np.testing.assert_array_equal(got, want)
    assert loaded.trainer.reward_signals["curiosity"].update_count == saved_updates
    loaded.fit(130, verbose=0)  # goes on from there
    assert statistics(loaded)[0] > saved_stats[0]
    loaded.close()


def test_an_agent_without_reward_state_saves_only_its_networks(tmp_path):
    agent = kerasrl.PPO("CartPole-v1", seed=0, num_envs=2, run_dir=str(tmp_path / "a"), buffer_size=64, batch_size=32,
                        hidden_units=8, num_layers=1)
    path = agent.save(str(tmp_path / "agent.keras"))
    assert sorted(zipfile.ZipFile(path).namelist()) == ["actor_critic.weights.h5", "kerasrl.json"]
    loaded = kerasrl.load(path, env="CartPole-v1", num_envs=2, run_dir=str(tmp_path / "b"))
    assert loaded.trainer.step == 0
    loaded.close()
    agent.close()
