"""PettingZoo games as kerasrl environments: behaviors by agent type or team, agents that leave,
the next episode, action masks, groups, AEC envs, and PPO training through the env manager."""
from __future__ import annotations

import numpy as np
import pytest

pettingzoo = pytest.importorskip("pettingzoo", reason="pettingzoo is not installed (optional extra kerasrl[pettingzoo])")

from kerasrl.envs import EnvironmentException  # noqa: E402
from kerasrl.envs.pettingzoo_env import PettingZooEnv, agent_type  # noqa: E402
from tests.pettingzoo_games import Chase  # noqa: E402


def test_agents_of_one_type_are_one_behavior_with_fixed_ids():
    env = PettingZooEnv(Chase(), seed=0)
    assert list(env.behavior_specs) == ["runner", "chaser"]
    assert env.behavior_specs["runner"].observation_shapes == ((2,),)
    assert env.behavior_specs["chaser"].discrete_branches == (3,) and agent_type("pursuer_12") == "pursuer"
    first = env.reset()
    assert first["runner"].agent_ids.tolist() == [0, 1] and first["chaser"].agent_ids.tolist() == [2]
    np.testing.assert_array_equal(first["chaser"].action_mask, [[1, 1, 0]])


def test_an_agent_that_leaves_is_reported_done_once_then_the_game_starts_again():
    game = Chase()
    env = PettingZooEnv(game, seed=0)
    env.reset()
    act = {"runner": np.array([[2], [0]]), "chaser": np.array([[1]])}
    env.step(act)
    second = env.step(act)["runner"]
    assert second.agent_ids.tolist() == [0, 1] and second.terminated.tolist() == [False, True]
    assert second.rewards.tolist() == [2.0, -2.0]
    third = env.step({"runner": np.array([[2], [2]]), "chaser": np.array([[1]])})["runner"]
    assert third.agent_ids.tolist() == [0]  # runner_1 left; the action given for it is not sent
    assert "runner_1" not in game.seen_actions[-1]
    fourth = env.step({"runner": np.array([[1]]), "chaser": np.array([[0]])})
    assert fourth["runner"].truncated.tolist() == [True] and fourth["chaser"].truncated.tolist() == [True]
    again = env.step({"runner": np.array([[1]]), "chaser": np.array([[1]])})  # nobody left: a new episode
    assert again["runner"].agent_ids.tolist() == [0, 1] and not again["runner"].done.any()
    assert again["runner"].rewards.tolist() == [0.0, 0.0] and len(game.seen_actions) == 4


def test_teams_are_behaviors_with_a_team_suffix_and_groups_are_reported():
    env = PettingZooEnv(Chase(), teams={"runner_0": 0, "runner_1": 1, "chaser_0": 1}, groups=True)
    assert list(env.behavior_specs) == ["runner?team=0", "runner?team=1", "chaser?team=1"]
    first = env.reset()
    assert [r.group_id.tolist() for r in first.values()] == [[1], [2], [3]]
    with pytest.raises(EnvironmentException, match="teams gives no team for the PettingZoo agent 'chaser_0'"):
        PettingZooEnv(Chase(), teams={"runner_0": 0, "runner_1": 1})


def test_bad_actions_and_mixed_spaces_are_one_line():
    env = PettingZooEnv(Chase())
    env.reset()
    with pytest.raises(EnvironmentException, match=r"Actions for behavior 'runner' have shape \(1, 1\), expected \(2, 1\)"):
        env.step({"runner": np.array([[1]]), "chaser": np.array([[1]])})
    with pytest.raises(EnvironmentException, match="fall outside branch sizes"):
        env.step({"runner": np.array([[1], [3]]), "chaser": np.array([[1]])})
    with pytest.raises(EnvironmentException, match="runner_0 and chaser_0 of behavior 'all' have different spaces"):
        PettingZooEnv(Chase(), behavior_of=lambda agent: "all")


def test_an_aec_game_is_played_through_pettingzoos_converter():
    from pettingzoo.utils.conversions import parallel_to_aec

    env = PettingZooEnv(parallel_to_aec(Chase()))
    assert set(env.behavior_specs) == {"runner", "chaser"}
    assert env.reset()["runner"].agent_ids.tolist() == [0, 1]


def test_ppo_trains_a_pettingzoo_game_through_the_env_manager(tmp_path):
    from kerasrl.envs.env_manager import SimpleEnvManager
    from kerasrl.trainers.controller import TrainerController
    from kerasrl.trainers.factory import initialize_trainers

    game = Chase()
    manager = SimpleEnvManager(PettingZooEnv(game, seed=1))
    config = {"default": {"batch_size": 8, "buffer_size": 16, "hidden_units": 8, "max_steps": 64, "summary_freq": 32}}
    trainers = initialize_trainers(config, manager.behavior_specs, str(tmp_path / "s"), "run", str(tmp_path / "m"),
                                   keep_checkpoints=1, train_model=True, load_model=False, seed=1)
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "run", save_freq=1000).start_learning(manager)
    assert trainers["runner"].get_step > 64 and trainers["chaser"].update_count >= 1
    assert trainers["runner"].episodes_completed >= 10  # both runners' episodes: runner_1's end at step 2
    chaser_moves = {actions["chaser_0"] for actions in game.seen_actions if "chaser_0" in actions}
    assert chaser_moves <= {0, 1} and len(chaser_moves) == 2  # its mask forbids move 2; both others are tried


def test_kerasrl_learn_trains_a_pettingzoo_game_named_on_the_command_line(tmp_path, capsys):
    from kerasrl.cli import main

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  batch_size: 8\n  buffer_size: 16\n  hidden_units: 8\n")
    common = [str(cfg), "--steps", "40", "--results-dir", str(tmp_path), "--seed", "2"]
    assert main([*common, "--env", "pettingzoo:tests.pettingzoo_games", "--run-id", "a"]) == 0
    assert (tmp_path / "a" / "models" / "runner").is_dir() and (tmp_path / "a" / "models" / "chaser").is_dir()
    capsys.readouterr()
    assert main([*common, "--env", "pettingzoo:tests.no_such_games", "--run-id", "b"]) == 2
    err = capsys.readouterr().err
    assert "--env pettingzoo:tests.no_such_games: the module tests.no_such_games cannot be imported" in err
    assert err.count("\n") == 1 and not (tmp_path / "b").exists()
    assert main([*common, "--env", "pettingzoo:tests.pettingzoo_games:nothing", "--run-id", "c"]) == 2
    assert "has no nothing function" in capsys.readouterr().err
    assert main([*common, "--env", "pettingzoo:tests.pettingzoo_games", "--num-envs", "2", "--run-id", "d"]) == 2
    assert "is one environment (its agents are its own); --num-envs must be 1" in capsys.readouterr().err


@pytest.mark.slow
def test_self_play_on_a_pettingzoo_game_beats_the_scripted_runner(tmp_path):
    """Duel1D's race as a PettingZoo game, its two runners two teams of behavior ``runner``: PPO by
    self-play, then the trained policy against Duel1D's scripted runner (as in tests/test_self_play.py)."""
    from kerasrl.envs.env_manager import SimpleEnvManager
    from kerasrl.settings import RunContext
    from kerasrl.trainers import TrainerController, create_trainers
    from tests.pettingzoo_games import DuelGame
    from tests.test_self_play import LEARNING, _win_rate

    manager = SimpleEnvManager(PettingZooEnv(DuelGame(seed=1), seed=1, teams={"runner_0": 0, "runner_1": 1}))
    assert sorted(manager.behavior_specs) == ["runner?team=0", "runner?team=1"]
    context = RunContext(run_id="r", summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=1)
    section = {**LEARNING, "max_steps": 40000}
    trainers = create_trainers({"behaviors": {"runner": section}}, manager.behavior_specs, context)
    ghost = trainers["runner"]
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**9,
                      training_seed=1).start_learning(manager)
    wins, draws = _win_rate(lambda r: ghost.policy.get_action(r).action, games=200, seed=7)
    print(f"PettingZoo self-play: {ghost.step} steps, wins {wins:.2f}, draws {draws:.2f}, ELO {ghost.elo:.0f}")
    assert wins >= 0.8 and ghost.elo > ghost.self_play.initial_elo
