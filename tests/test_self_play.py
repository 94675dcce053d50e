"""Self-play (ML-Agents' ghost trainer, ``kerasrl.trainers.self_play``): snapshots and their window,
the opponents' swaps, the learning team's turns, ELO, the ``Elo`` curriculum measure, resume, the
factory's trainers for both config layouts, and the built-in competitive game ``Duel1D``."""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from kerasrl.curriculum import Curriculum, MetaCurriculum
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.competitive import LENGTH, MAX_STEPS, SPEC, Duel1DEnvironment, team_behavior
from kerasrl.envs.registry import BUILTIN_ENVS, make_env
from kerasrl.exception import TrainerConfigError, TrainerError
from kerasrl.export import export_trainers
from kerasrl.settings import RunContext, load_trainer_config
from kerasrl.settings.self_play import SelfPlaySettings
from kerasrl.spec import ActionType, BehaviorSpec, StepResult
from kerasrl.trainers import TrainerController, create_trainers
from kerasrl.trainers.elo import expected_score, game_result, rating_change
from kerasrl.trainers.self_play import League, SelfPlayTrainer, base_name, team_of
from kerasrl.trainers.self_play_state import SELF_PLAY_FILE
from kerasrl.trainers.trainer import Trainer

TEAM0, TEAM1 = team_behavior(0), team_behavior(1)


# -- a trainer whose "model" is one number, so that snapshots can be told apart ----------------

class NumberModel:
    def __init__(self, value: float = 0.0) -> None:
        self.weights = [np.array([value], np.float32)]

    def get_weights(self):
        return [w.copy() for w in self.weights]

    def set_weights(self, weights):
        self.weights = [np.array(w) for w in weights]

    @property
    def value(self) -> float:
        return float(self.weights[0][0])


class NumberPolicy:
    def __init__(self, model: NumberModel) -> None:
        self.model = model

    def with_model(self, model, seed=0):
        return NumberPolicy(model)

    def refresh(self):
        pass


class NumberTrainer(Trainer):
    """The inner trainer: records what reaches it; its checkpoint is its step in a JSON file."""

    def __init__(self, behavior, spec, settings, context, reward_buff_cap=1):
        super().__init__(behavior, spec, settings, context, reward_buff_cap)
        self.model = NumberModel()
        self._policy = NumberPolicy(self.model)
        self.seen: list[tuple[list[str], list[str]]] = []
        self.episodes_ended = 0
        if context.load_model:
            with open(os.path.join(self.model_path, "step.json")) as f:
                self.step = json.load(f)

    @classmethod
    def checkpointed_model(cls, behavior, spec, settings, seed):
        return NumberModel(), {}

    @property
    def policy(self):
        return self._policy

    @property
    def trained_model(self):
        return self.model

    def add_step(self, previous, current, outputs):
        self.seen.append((sorted(previous), sorted(current)))

    def end_episode(self):
        self.episodes_ended += 1

    def save_model(self):
        os.makedirs(self.model_path, exist_ok=True)
        with open(os.path.join(self.model_path, "step.json"), "w") as f:
            json.dump(self.step, f)
        return self.model_path


def _ghost(tmp_path, load=False, seed=3, name="Duel1D", league=None, **self_play):
    settings = load_trainer_config({"default": {}}).default
    context = RunContext(run_id="r", summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=seed,
                         load_model=load)
    inner = NumberTrainer(name, SPEC, settings, context)
    return SelfPlayTrainer(inner, [team_behavior(0, name), team_behavior(1, name)], league or League(),
                           SelfPlaySettings(**self_play))


def _train(ghost, team, steps, value=None):
    """``steps`` agent steps of ``team``, the learning weights set to ``value`` first."""
    if value is not None:
        ghost.inner.model.set_weights([np.array([value], np.float32)])
    ghost.increment_behavior_steps({team_behavior(team): steps, team_behavior(1 - team): 0})


def _games(rewards):
    n = len(rewards)
    return StepResult(np.arange(n), [np.zeros((n, 4))], np.asarray(rewards, np.float32), np.ones(n, bool),
                      np.zeros(n, bool))


# -- names ------------------------------------------------------------------------------------

def test_team_and_base_name_of_a_behavior():
    assert team_of("Striker?team=1") == 1 and team_of("Walker") == 0
    assert base_name("Striker?team=1") == "Striker" and base_name("Walker") == "Walker"


# -- snapshots, swaps, team changes -----------------------------------------------------------

def test_a_snapshot_every_save_steps_and_the_window_keeps_the_last(tmp_path):
    ghost = _ghost(tmp_path, save_steps=10, window=3, swap_steps=10**6, team_change=10**6)
    assert ghost.state.saved_snapshots == 1 and [w[0][0] for w in ghost.snapshots] == [0.0]  # the first weights
    for step in range(1, 10):
        _train(ghost, 0, 1, value=step)
    assert ghost.state.saved_snapshots == 1  # 9 steps: none due
    _train(ghost, 0, 1, value=10)
    assert ghost.state.saved_snapshots == 2 and ghost.state.last_save == 10
    for value in (20, 30):
        _train(ghost, 0, 10, value=value)
    assert [w[0][0] for w in ghost.snapshots] == [30.0, 10.0, 20.0]  # 0 gave way (slot 4 % 3 = 0)
    assert len(ghost.state.snapshot_elos) == 3


def test_swaps_draw_the_latest_with_the_ratio_else_a_window_snapshot_uniformly(tmp_path):
    ghost = _ghost(tmp_path, save_steps=1, window=4, swap_steps=1, team_change=10**7,
                   play_against_latest_model_ratio=0.3, seed=11)
    reference = np.random.default_rng(11)
    expected = [None if reference.random() < 0.3 else int(reference.integers(1))]  # the first swap: one snapshot
    for value in (1, 2, 3):
        _train(ghost, 0, 1, value=value)  # a snapshot each, no ghost step: no swap
    assert [w[0][0] for w in ghost.snapshots] == [0.0, 1.0, 2.0, 3.0]
    drawn = []
    ghost.inner.model.set_weights([np.array([7.0], np.float32)])
    ghost.state.last_save = ghost.step = 10**6  # no more snapshots
    for _ in range(2000):
        ghost.increment_behavior_steps({TEAM0: 0, TEAM1: 1})
        drawn.append(ghost.state.opponent)
        opponent = ghost.policy_for(TEAM1).model.value
        assert opponent == (7.0 if ghost.state.opponent is None else float(ghost.state.opponent))
    expected += [None if reference.random() < 0.3 else int(reference.integers(4)) for _ in range(2000)]
    assert drawn == expected[1:]
    latest = sum(d is None for d in drawn) / len(drawn)
    assert 0.26 < latest < 0.34
    counts = np.bincount([d for d in drawn if d is not None], minlength=4)
    assert counts.min() > 0.8 * counts.mean()


def test_the_learning_team_changes_every_team_change_steps(tmp_path):
    ghost = _ghost(tmp_path, save_steps=100, window=5, swap_steps=10**6, team_change=20)
    assert ghost.league.learning_team == 0 and ghost.take_policy_change()
    assert ghost.policy_for(TEAM0) is ghost.inner.policy and ghost.policy_for(TEAM1) is not ghost.inner.policy
    _train(ghost, 0, 19)
    assert ghost.league.learning_team == 0 and not ghost.take_policy_change()
    snapshots, ended = ghost.state.saved_snapshots, ghost.inner.episodes_ended
    _train(ghost, 0, 1)
    assert ghost.league.learning_team == 1 and ghost.take_policy_change()
    assert ghost.policy_for(TEAM1) is ghost.inner.policy and ghost.policy_for(TEAM0) is not ghost.inner.policy
    assert ghost.state.saved_snapshots == snapshots + 1 and ghost.inner.episodes_ended == ended + 1
    ghost.increment_behavior_steps({TEAM0: 5, TEAM1: 7})  # team 1's steps are the trainer's now
    assert ghost.step == 27 and ghost.state.ghost_step == 5
    _train(ghost, 1, 13)
    assert ghost.league.learning_team == 0 and ghost.step == 40


def test_teams_of_several_behaviors_change_together_at_their_captains_turn(tmp_path):
    league = League()
    goalie = _ghost(tmp_path, name="Goalie", league=league, save_steps=100, swap_steps=10**6, team_change=20)
    striker = _ghost(tmp_path, name="Striker", league=league, save_steps=100, swap_steps=10**6, team_change=20)
    assert league.trainers == {0: [goalie, striker], 1: [goalie, striker]} and league.captain(0) is goalie
    striker.increment_behavior_steps({"Striker?team=0": 30})  # not the captain: no change
    assert league.learning_team == 0 and striker.step == 30
    goalie.increment_behavior_steps({"Goalie?team=0": 20})
    assert league.learning_team == 1 and goalie.take_policy_change()
    snapshots = striker.state.saved_snapshots
    # this step was taken before the change (team 0 learning), then the striker follows the league
    striker.increment_behavior_steps({"Striker?team=0": 4, "Striker?team=1": 6})
    assert striker.step == 34 and striker.state.ghost_step == 6 and striker.state.last_team_change == 34
    assert striker.state.saved_snapshots == snapshots + 1 and striker.take_policy_change()
    assert striker.policy_for("Striker?team=1") is striker.policy


def test_only_the_learning_teams_steps_reach_the_inner_trainer_under_its_name(tmp_path):
    ghost = _ghost(tmp_path, swap_steps=10**6)
    results = {TEAM0: _games([0.0]), TEAM1: _games([0.0])}
    for behavior in ghost.behaviors:
        ghost.add_behavior_step(behavior, {}, results, None)
    assert ghost.inner.seen == [([], ["Duel1D"])]


# -- ELO ---------------------------------------------------------------------------------------

def test_elo_arithmetic_by_hand():
    assert expected_score(1200, 1200) == 0.5
    assert rating_change(1200, 1200, 1.0) == 8.0 and rating_change(1200, 1200, 0.0) == -8.0
    # 1300 against 1100: expected 1 / (1 + 10^(-0.5)) = 0.759747
    assert rating_change(1300, 1100, 0.0) == pytest.approx(-16 * 0.7597469, abs=1e-5)
    assert rating_change(1300, 1100, 0.5) == pytest.approx(16 * (0.5 - 0.7597469), abs=1e-5)
    assert [game_result(r) for r in (2.0, 0.0, -0.1)] == [1.0, 0.5, 0.0]


def test_a_game_moves_the_learner_and_its_opponent_snapshot_by_as_much(tmp_path):
    ghost = _ghost(tmp_path, play_against_latest_model_ratio=0.0, initial_elo=1200.0, swap_steps=10**6)
    assert ghost.state.opponent == 0 and ghost.elo == 1200.0 and ghost.opponent_elo == 1200.0
    ghost.add_behavior_step(TEAM0, {}, {TEAM0: _games([1.0])}, None)  # a win: 16 × (1 − 0.5)
    assert ghost.elo == 1208.0 and ghost.state.snapshot_elos == [1192.0]
    ghost.add_behavior_step(TEAM0, {}, {TEAM0: _games([0.0])}, None)  # a draw against 1192
    e = 1 / (1 + 10 ** ((1192 - 1208) / 400))  # 0.523017
    assert ghost.elo == pytest.approx(1208 + 16 * (0.5 - e)) and ghost.opponent_elo == pytest.approx(1192 - 16 * (0.5 - e))
    before, opponent = ghost.elo, ghost.opponent_elo
    ghost.add_behavior_step(TEAM0, {}, {TEAM0: _games([-1.0])}, None)  # a loss
    change = -16 / (1 + 10 ** ((opponent - before) / 400))
    assert ghost.elo == pytest.approx(before + change) and ghost.opponent_elo == pytest.approx(opponent - change)
    ghost.add_behavior_step(TEAM1, {}, {TEAM1: _games([1.0])}, None)  # the opponents' games do not count
    assert ghost.elo == pytest.approx(before + change)
    assert len(ghost.inner.stats["Self-play/ELO"]) == 3


def test_against_the_latest_policy_the_opponent_has_the_learners_rating_at_the_swap(tmp_path):
    ghost = _ghost(tmp_path, play_against_latest_model_ratio=1.0, initial_elo=1000.0, swap_steps=10**6)
    assert ghost.state.opponent is None and ghost.opponent_elo == 1000.0
    ghost.add_behavior_step(TEAM0, {}, {TEAM0: _games([1.0, 1.0])}, None)
    assert ghost.elo > 1000.0 > ghost.opponent_elo and ghost.elo + ghost.opponent_elo == pytest.approx(2000.0)


def test_the_elo_curriculum_measure(tmp_path):
    ghost = _ghost(tmp_path, play_against_latest_model_ratio=0.0, swap_steps=10**6)
    data = {"measure": "Elo", "thresholds": [1205.0], "min_lesson_length": 0, "signal_smoothing": False,
            "parameters": {"hurdles": [0.2, 0.4]}}
    meta = MetaCurriculum.of({"Duel1D": Curriculum("elo.json", data=data, behavior_name="Duel1D")})
    meta.check_behaviors([TEAM0, TEAM1])  # a curriculum names the behavior without the team suffix
    controller = TrainerController({"Duel1D": ghost}, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**6,
                                   meta_curriculum=meta)
    assert controller._get_measure_vals() == {"Duel1D": 1200.0}
    assert meta.increment_lessons(controller._get_measure_vals()) == {"Duel1D": False}
    ghost.add_behavior_step(TEAM0, {}, {TEAM0: _games([1.0])}, None)
    assert controller._get_measure_vals() == {"Duel1D": 1208.0}
    assert meta.increment_lessons(controller._get_measure_vals()) == {"Duel1D": True}


def test_an_elo_curriculum_for_a_behavior_without_self_play_is_one_line(tmp_path):
    data = {"measure": "Elo", "thresholds": [1300.0], "min_lesson_length": 0, "signal_smoothing": False,
            "parameters": {"hurdles": [0.2, 0.4]}}
    meta = MetaCurriculum.of({"Duel1D": Curriculum("elo.json", data=data, behavior_name="Duel1D")})
    plain = _ghost(tmp_path).inner
    with pytest.raises(TrainerError, match="^The curriculum elo.json measures Elo.* behavior Duel1D does not train by "
                                           "self-play; add a self_play block"):
        TrainerController({"Duel1D": plain}, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10,
                          meta_curriculum=meta)


def test_environment_parameters_may_end_lessons_on_elo():
    from kerasrl.cli.env_parameters import EnvParameters
    from kerasrl.cli.parser import build_parser

    criteria = {"behavior": "Duel1D", "measure": "Elo", "threshold": 1300.0, "signal_smoothing": False}
    block = {"hurdles": {"curriculum": [{"name": "L0", "value": 1, "completion_criteria": criteria},
                                        {"name": "L1", "value": 2}]}}
    params = EnvParameters.from_args(build_parser().parse_args(["x.yaml"]), {"environment_parameters": block}, "f")
    (curriculum,) = params.meta_curriculum.curricula.values()
    assert curriculum.measure == "Elo" and curriculum.thresholds == [1300.0]


# -- checkpoints ---------------------------------------------------------------------------------

def test_resume_continues_the_snapshots_ratings_learning_team_counters_and_draws(tmp_path):
    settings = dict(save_steps=10, window=3, swap_steps=4, team_change=30, play_against_latest_model_ratio=0.5)
    ghost = _ghost(tmp_path, **settings)
    for value in range(1, 8):
        _train(ghost, ghost.league.learning_team, 6, value=value)
        ghost.increment_behavior_steps({team_behavior(1 - ghost.league.learning_team): 3})
        ghost.add_behavior_step(team_behavior(ghost.league.learning_team), {}, {
            team_behavior(ghost.league.learning_team): _games([1.0 if value % 3 else -1.0])}, None)
    assert ghost.league.learning_team == 1 and ghost.state.saved_snapshots > 3
    ghost.save_model()
    assert os.path.isfile(tmp_path / "m" / "Duel1D" / SELF_PLAY_FILE)
    resumed = _ghost(tmp_path, load=True, **settings)
    assert resumed.step == ghost.step == 42
    assert resumed.state == ghost.state and resumed.league.learning_team == 1
    assert [w[0][0] for w in resumed.snapshots] == [w[0][0] for w in ghost.snapshots]
    assert resumed.policy_for(TEAM0).model.value == ghost.policy_for(TEAM0).model.value
    for _ in range(5):  # both go on alike: the same draws, snapshots and team changes
        for g in (ghost, resumed):
            _train(g, g.league.learning_team, 7, value=99)
            g.increment_behavior_steps({team_behavior(1 - g.league.learning_team): 5})
        assert resumed.state == ghost.state and resumed.league.learning_team == ghost.league.learning_team


# -- the factory and a short run with PPO ---------------------------------------------------------

PPO_SECTION = {"trainer_type": "ppo", "hyperparameters": {"batch_size": 64, "buffer_size": 256},
               "network_settings": {"hidden_units": 16, "num_layers": 1}, "max_steps": 1500, "summary_freq": 500,
               "self_play": {"save_steps": 200, "swap_steps": 100, "team_change": 600, "window": 3}}


def _context(tmp_path, load=False):
    return RunContext(run_id="r", summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=5,
                      load_model=load)


def test_the_factory_builds_one_self_play_trainer_per_name_in_both_layouts(tmp_path):
    specs = {TEAM0: SPEC, TEAM1: SPEC}
    flat = {"default": {"batch_size": 64, "buffer_size": 256, "hidden_units": 16},
            "Duel1D": {"self_play": {"play_against_current_self_ratio": 0.7, "save_steps": 500}}}
    for config in (flat, {"behaviors": {"Duel1D": PPO_SECTION}}):
        trainers = create_trainers(config, specs, _context(tmp_path))
        (ghost,) = trainers.values()
        assert list(trainers) == ["Duel1D"] and isinstance(ghost, SelfPlayTrainer)
        assert ghost.behaviors == [TEAM0, TEAM1] and ghost.behavior_name == "Duel1D"
        assert ghost.model_path == os.path.join(str(tmp_path / "m"), "Duel1D")
        assert ghost.policy_for(TEAM0) is ghost.policy and ghost.policy_for(TEAM1) is not ghost.policy
    assert trainers["Duel1D"].self_play.save_steps == 200
    assert create_trainers(flat, specs, _context(tmp_path))["Duel1D"].self_play.play_against_latest_model_ratio == 0.7


def test_an_asymmetric_game_has_a_trainer_per_name_and_one_league(tmp_path):
    goalie = BehaviorSpec(observation_shapes=((3,),), action_type=ActionType.DISCRETE, action_shape=(3,))
    section = {k: v for k, v in PPO_SECTION.items() if k != "trainer_type"}
    config = {"behaviors": {"Striker": section, "Goalie": section}}
    trainers = create_trainers(config, {"Striker?team=0": SPEC, "Goalie?team=1": goalie}, _context(tmp_path))
    striker, keeper = trainers["Striker"], trainers["Goalie"]
    assert striker.league is keeper.league and striker.league.learning_team == 0
    assert striker.policy_for("Striker?team=0") is striker.policy
    assert keeper.policy_for("Goalie?team=1") is not keeper.policy
    with pytest.raises(TrainerConfigError, match="specs differ"):
        create_trainers({"behaviors": {"Duel1D": section}}, {TEAM0: SPEC, TEAM1: goalie}, _context(tmp_path))


def _run(tmp_path, max_steps, load=False):
    manager = SimpleEnvManager(Duel1DEnvironment(num_areas=8, seed=2))
    config = {"behaviors": {"Duel1D": dict(PPO_SECTION, max_steps=max_steps)}}
    trainers = create_trainers(config, manager.behavior_specs, _context(tmp_path, load))
    controller = TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**6,
                                   training_seed=5, export=export_trainers)
    controller.start_learning(manager)
    return trainers["Duel1D"], manager


def test_a_ppo_self_play_run_hands_each_team_its_policy_saves_and_resumes(tmp_path):
    ghost, manager = _run(tmp_path, 1500)
    learning = team_behavior(ghost.league.learning_team)
    other = team_behavior(1 - ghost.league.learning_team)
    assert manager.policies[learning] is ghost.policy and manager.policies[other] is not ghost.policy
    assert ghost.step > 1500 and ghost.state.ghost_step > 1000 and ghost.state.saved_snapshots >= 8
    assert ghost.state.last_team_change > 0  # the teams took turns
    assert os.path.isfile(tmp_path / "m" / "Duel1D" / "Duel1D.weights.h5")  # the export: the learning policy
    resumed = create_trainers({"behaviors": {"Duel1D": PPO_SECTION}}, manager.behavior_specs,
                              _context(tmp_path, load=True))["Duel1D"]
    assert resumed.step == ghost.step and resumed.state == ghost.state
    assert resumed.league.learning_team == ghost.league.learning_team
    for mine, theirs in zip(resumed.opponent_weights, ghost.opponent_weights):
        np.testing.assert_array_equal(mine, theirs)
    for mine, theirs in zip(resumed._opponent_model.get_weights(), ghost._opponent_model.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    assert resumed.rng.random() == ghost.rng.random()


# -- the competitive built-in ----------------------------------------------------------------

def test_duel1d_is_registered_seeded_and_its_games_end_for_both_teams_at_once():
    assert {"Duel1D", "Duel1DScripted"} <= set(BUILTIN_ENVS)
    assert sorted(make_env("Duel1D", None, seed=0).behavior_specs) == [TEAM0, TEAM1]
    assert list(make_env("Duel1DScripted", None, seed=0).behavior_specs) == [TEAM0]
    runs = []
    for _ in range(2):
        env, rng, seen = Duel1DEnvironment(num_areas=4, seed=9), np.random.default_rng(0), []
        r = env.reset()
        assert set(r[TEAM0].agent_ids) | set(r[TEAM1].agent_ids) == set(range(8))
        for _ in range(3 * MAX_STEPS):
            r = env.step({b: rng.integers(0, 2, (4, 1)).astype(np.int32) for b in (TEAM0, TEAM1)})
            done0, done1 = r[TEAM0].terminated | r[TEAM0].truncated, r[TEAM1].terminated | r[TEAM1].truncated
            assert (done0 == done1).all() and (r[TEAM0].rewards == -r[TEAM1].rewards).all()
            assert set(np.abs(r[TEAM0].rewards[done0])) <= {0.0, 1.0} and not r[TEAM0].rewards[~done0].any()
            seen.append(r[TEAM0].observations[0].tolist() + r[TEAM1].rewards.tolist())
        runs.append(seen)
    assert runs[0] == runs[1] and sum(env.wins.values()) > 20


def _win_rate(act, games=2000, seed=4):
    env = Duel1DEnvironment(num_areas=50, seed=seed, opponent="scripted")
    r = env.reset()[TEAM0]
    while sum(env.wins.values()) < games:
        r = env.step({TEAM0: act(r)})[TEAM0]
    total = sum(env.wins.values())
    return env.wins["win"] / total, env.wins["draw"] / total


def test_against_the_scripted_runner_a_random_one_wins_half_and_a_skilled_one_nearly_always():
    rng = np.random.default_rng(0)
    wins, draws = _win_rate(lambda r: rng.integers(0, 2, (len(r), 1)).astype(np.int32))
    assert 0.42 < wins + draws / 2 < 0.55
    wins, _ = _win_rate(lambda r: r.observations[0][:, :1].astype(np.int32))  # jump exactly the hurdles
    assert wins > 0.9
    assert LENGTH == 10


# -- learning -----------------------------------------------------------------------------------

LEARNING = {"trainer_type": "ppo",
            "hyperparameters": {"batch_size": 256, "buffer_size": 2048, "learning_rate": 3.0e-3, "beta": 0.01,
                                "num_epoch": 3},
            "network_settings": {"hidden_units": 32, "num_layers": 2}, "time_horizon": 64, "max_steps": 60000,
            "summary_freq": 10000,
            "self_play": {"save_steps": 2000, "swap_steps": 1000, "team_change": 8000, "window": 5}}


@pytest.mark.slow
def test_ppo_self_play_learns_duel1d_and_beats_the_scripted_runner(tmp_path):
    """Measured on 2 shared CPU cores: 60k trainer steps in about 10 s (seed 1); the trained policy
    won 197 of 205 games against the scripted runner (random: 81 wins, 25 draws), ELO 1200 -> 1683."""
    manager = SimpleEnvManager(Duel1DEnvironment(num_areas=16, seed=1))
    context = RunContext(run_id="r", summaries_dir=str(tmp_path / "s"), model_path=str(tmp_path / "m"), seed=1)
    trainers = create_trainers({"behaviors": {"Duel1D": LEARNING}}, manager.behavior_specs, context)
    ghost = trainers["Duel1D"]
    policy = ghost.policy
    before, _ = _win_rate(lambda r: policy.get_action(r).action, games=200, seed=7)
    start = time.perf_counter()
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**9,
                      training_seed=1).start_learning(manager)
    seconds = time.perf_counter() - start
    after, _ = _win_rate(lambda r: policy.get_action(r).action, games=200, seed=7)
    print(f"self-play: {ghost.step} steps in {seconds:.1f} s; wins against the script {before:.2f} -> {after:.2f}; "
          f"ELO {ghost.self_play.initial_elo} -> {ghost.elo:.0f}")
    assert before < 0.6 and after >= 0.8
    assert ghost.elo > ghost.self_play.initial_elo + 100
    assert seconds < 180


def test_the_fit_api_refuses_a_self_play_block_in_one_line(tmp_path):
    import kerasrl

    config = {"behaviors": {"Duel1D": {**PPO_SECTION}}}
    with pytest.raises(TrainerError, match=r"^kerasrl.PPO trains one behavior, and kerasrl.PPO's config gives "
                                           r"Duel1D\?team=0 a self_play block, .* kerasrl-learn"):
        kerasrl.PPO("Duel1D", config=config, behavior=team_behavior(0), run_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("threaded", [False, True])
def test_poca_trains_by_self_play_as_soccer_twos_configures_it(tmp_path, threaded):
    """``trainer_type: poca`` with a ``self_play`` block (ML-Agents' SoccerTwos): one self-play trainer
    wraps a POCA trainer for both teams, trains, rates and saves (threaded too: the snapshots are
    read between two updates)."""
    from kerasrl.poca.trainer import POCATrainer

    manager = SimpleEnvManager(Duel1DEnvironment(num_areas=4, seed=1))
    section = {"trainer_type": "poca", "threaded": threaded, "hyperparameters": {"batch_size": 64, "buffer_size": 256},
               "network_settings": {"hidden_units": 16, "num_layers": 1}, "max_steps": 1500, "summary_freq": 500,
               "self_play": {"save_steps": 300, "swap_steps": 100, "team_change": 600, "window": 3}}
    context = _context(tmp_path)
    trainers = create_trainers({"behaviors": {"Duel1D": section}}, manager.behavior_specs, context)
    ghost = trainers["Duel1D"]
    assert isinstance(ghost, SelfPlayTrainer) and isinstance(ghost.inner, POCATrainer)
    TrainerController(trainers, str(tmp_path / "m"), str(tmp_path / "s"), "r", save_freq=10**9).start_learning(manager)
    assert ghost.step > 1500 and ghost.inner.update_count >= 3 and ghost.elo != ghost.self_play.initial_elo
    assert ghost.inner.threaded is threaded and ghost.inner.updates_applied == ghost.inner.update_count
    assert os.path.isfile(tmp_path / "m" / "Duel1D" / SELF_PLAY_FILE)
