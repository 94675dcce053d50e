"""Reward signals: config errors, the shape grid, curiosity's falling
rewards, GAIL's demonstrations and GAIL as the only signal on Simple1D."""
import math

import numpy as np
import pytest

from kerasrl.buffer import AgentBuffer
from kerasrl.exception import TrainerConfigError
from kerasrl.fields import Field
from kerasrl.rewards import CuriosityRewardSignal, GAILRewardSignal, create_reward_signal
from kerasrl.settings import CuriositySettings, GAILSettings, NetworkSettings, RewardSignalSettings, trainer_config_from_dict
from kerasrl.spec import ActionType, BehaviorSpec

VECTOR, VISUAL = ((3,),), ((20, 20, 3),)


def make_spec(discrete: bool, visual: bool) -> BehaviorSpec:
    action = (ActionType.DISCRETE, (2, 3)) if discrete else (ActionType.CONTINUOUS, (2,))
    return BehaviorSpec(VISUAL if visual else VECTOR, *action)


def make_rows(spec: BehaviorSpec, n: int, rng: np.random.Generator, padding: int = 0) -> dict:
    """``n`` random transitions of ``spec`` as stored fields; the first ``padding`` rows are masked out."""
    rows = {}
    if spec.vector_observation_size:
        obs = rng.normal(size=(n + 1, spec.vector_observation_size)).astype(np.float32)
        rows[Field.VECTOR_OBS], rows[Field.NEXT_VECTOR_OBS] = obs[:-1], obs[1:]
    for j, shape in enumerate(spec.visual_observation_shapes):
        img = rng.uniform(size=(n + 1, *shape)).astype(np.float32)
        rows[Field.visual_obs(j)], rows[Field.next_visual_obs(j)] = img[:-1], img[1:]
    if spec.is_discrete:
        rows[Field.ACTIONS] = np.stack([rng.integers(0, b, n) for b in spec.discrete_branches], 1).astype(np.int32)
    else:
        rows[Field.ACTIONS] = rng.uniform(-1, 1, size=(n, spec.action_size)).astype(np.float32)
    rows[Field.DONE] = (rng.uniform(size=n) < 0.1).astype(np.float32)
    rows[Field.MASKS] = np.r_[np.zeros(padding), np.ones(n - padding)].astype(np.float32)
    return rows


def as_buffer(rows: dict) -> AgentBuffer:
    buffer = AgentBuffer()
    buffer.extend_fields(rows)
    return buffer


def make_signal(kind: str, spec: BehaviorSpec, network: NetworkSettings, seed: int = 1, demo=None,
                jit_compile: bool = False, **kw):
    if kind == "curiosity":
        settings = CuriositySettings(strength=1.0, gamma=0.99, encoding_size=16, **kw)
        return CuriosityRewardSignal(settings, spec, network, seed=seed, jit_compile=jit_compile)
    settings = GAILSettings(strength=1.0, gamma=0.99, demo_path="in-memory", encoding_size=16,
                            use_vail=kind == "gail_vail", **kw)
    if demo is None:
        demo = (spec, as_buffer(make_rows(spec, 40, np.random.default_rng(seed + 1))))
    return GAILRewardSignal(settings, spec, network, seed=seed, jit_compile=jit_compile, demo=demo)


# -- configuration ---------------------------------------------------------------------------

def config(signals: dict) -> dict:
    return {"default": {"trainer": "ppo", "reward_signals": signals}}


@pytest.mark.parametrize("signals, message", [
    ({"extrinsic": {"strength": 1.0, "gamma": 0.99}, "novelty": {"strength": 1.0}}, "Unknown reward signal type novelty"),
    ({"curiosity": {"strength": 0.1, "gamma": 0.9, "encoding_size": 8, "lr": 1e-3}},
     "Unknown parameter lr for reward signal curiosity"),
    ({"curiosity": {"strength": 0.1, "gamma": 0.9}},
     "The hyper-parameter encoding_size could not be found for reward signal curiosity"),
    ({"gail": {"strength": 0.1, "gamma": 0.9}}, "The hyper-parameter demo_path could not be found for reward signal gail"),
    ({"gail": {"strength": 0.1, "gamma": 0.9, "demo_path": "x", "use_vail": "maybe"}}, "use_vail"),
])
def test_config_errors_name_the_signal_and_key(signals, message):
    with pytest.raises(TrainerConfigError, match=message):
        trainer_config_from_dict(config(signals)).settings_for("Brain")


def test_defaults_and_factory():
    settings = trainer_config_from_dict(config({
        "curiosity": {"strength": 0.02, "gamma": 0.9, "encoding_size": 8},
        "gail": {"strength": 0.5, "gamma": 0.8, "demo_path": "d.demo"}})).settings_for("Brain").reward_signals
    cur, gail = settings["curiosity"], settings["gail"]
    assert (cur.learning_rate, cur.num_epoch) == (3e-4, 3)
    assert (gail.encoding_size, gail.learning_rate, gail.num_epoch, gail.samples_per_update, gail.use_actions,
            gail.use_vail) == (64, 3e-4, 3, 0, False, False)
    spec = make_spec(True, False)
    signal = create_reward_signal("curiosity", cur, spec, NetworkSettings())
    assert (signal.strength, signal.gamma, signal.use_terminal_states, signal.needs_next_observations) == (0.02, 0.9, False, True)
    assert signal.stat_name == "Policy/Curiosity Reward"
    extrinsic = create_reward_signal("extrinsic", RewardSignalSettings(strength=1.0, gamma=0.99))
    assert extrinsic.use_terminal_states and not extrinsic.needs_next_observations
    with pytest.raises(TrainerConfigError, match="Unknown reward signal type bogus"):
        create_reward_signal("bogus", cur, spec)
    with pytest.raises(TrainerConfigError, match="gail takes GAILSettings, got CuriositySettings"):
        create_reward_signal("gail", cur, spec)


def test_gail_refuses_a_demo_of_another_spec():
    spec, other = make_spec(True, False), make_spec(False, False)
    demo = (other, as_buffer(make_rows(other, 10, np.random.default_rng(0))))
    message = r"demo_path in-memory is for observations \[\(3,\)\], continuous actions \(2,\), but the behavior has .*discrete"
    with pytest.raises(TrainerConfigError, match=message):
        make_signal("gail", spec, NetworkSettings(), demo=demo)


# -- the shape grid --------------------------------------------------------------------------

GRID = [(kind, discrete, visual, recurrent, False) for kind in ("curiosity", "gail", "gail_vail")
        for discrete in (True, False) for visual in (False, True) for recurrent in (False, True)]
#: The XLA-compiled update (PPO's ``jit_compile``) once per signal.
GRID += [("curiosity", True, False, False, True), ("gail_vail", False, False, True, True)]


def grid_id(case):
    kind, discrete, visual, recurrent, jit = case
    return (f"{kind}-{'dc' if discrete else 'cc'}-{'visual' if visual else 'vector'}{'-lstm' if recurrent else ''}"
            f"{'-xla' if jit else ''}")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c[2] or c[4] else c for c in GRID],
                         ids=grid_id)
def test_one_update_gives_finite_losses_and_rewards(case):
    kind, discrete, visual, recurrent, jit = case
    spec = make_spec(discrete, visual)
    network = NetworkSettings(use_recurrent=recurrent, sequence_length=4, memory_size=8)
    options = {} if kind == "curiosity" else {"use_actions": True}
    signal = make_signal(kind, spec, network, jit_compile=jit, **options)
    assert signal.jit_compile == jit
    rows = make_rows(spec, 24, np.random.default_rng(2), padding=3 if recurrent else 0)
    batch = {k: rows[k] for k in signal.batch_fields}
    before = signal.evaluate_batch(batch)
    assert before.scaled_reward.shape == (24,) and not before.scaled_reward.any()
    stats = signal.update(as_buffer(rows), n_sequences=2)
    assert set(stats) == set(signal.loss_names) and all(math.isfinite(v) for v in stats.values())
    after = signal.evaluate_batch(batch)
    assert after.scaled_reward.shape == (24,) and after.scaled_reward.dtype == np.float32
    assert np.isfinite(after.scaled_reward).all() and after.scaled_reward.any()


# -- learning --------------------------------------------------------------------------------

def test_curiosity_rewards_fall_as_the_forward_model_learns_a_fixed_distribution():
    spec = make_spec(False, False)
    signal = make_signal("curiosity", spec, NetworkSettings(), learning_rate=3e-3)
    signal.strength = 0.01
    rng = np.random.default_rng(5)
    probe = make_rows(spec, 64, rng)
    probe_batch = {k: probe[k] for k in signal.batch_fields}
    assert not signal.evaluate_batch(probe_batch).scaled_reward.any()
    means = []
    for _ in range(30):
        signal.update(as_buffer(make_rows(spec, 64, rng)), n_sequences=32)
        result = signal.evaluate_batch(probe_batch)
        assert (result.scaled_reward > 0).all() and (result.scaled_reward <= 1).all()
        means.append(float(result.unscaled_reward.mean()))
    assert means[-1] < 0.5 * means[0], means


def simple_config(**default) -> dict:
    """Short Simple1D runs: without XLA, whose compilation would cost more than these runs (the
    XLA paths are checked by the shape grid above and tests/test_fast_path.py)."""
    return {"default": {"batch_size": 16, "buffer_size": 64, "learning_rate": 5.0e-3, "summary_freq": 100_000,
                        "jit_compile": False, **default}}


def test_ppo_with_curiosity_stores_next_observations_and_trains_the_signal(tmp_path):
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_simple_rl import run_training

    config = simple_config(max_steps=300, reward_signals={
        "extrinsic": {"strength": 1.0, "gamma": 0.99},
        "curiosity": {"strength": 0.5, "gamma": 0.9, "encoding_size": 8}})
    tc = run_training(Simple1DEnvironment(use_discrete=True, seed=1), tmp_path, config=config, seed=1)
    trainer = next(iter(tc.trainers.values()))
    assert trainer.processor.store_next_obs
    stats = trainer.stats
    assert stats["Losses/Curiosity Forward Loss"] and stats["Losses/Curiosity Inverse Loss"]
    assert all(math.isfinite(v) for v in stats["Losses/Curiosity Forward Loss"])
    assert any(v > 0 for v in stats["Policy/Curiosity Reward"])
    assert stats["Policy/Curiosity Value Estimate"]


def scripted_expert(discrete: bool):
    """Simple1D's expert: straight to the observed goal."""
    def expert(obs):
        goal = np.asarray(obs)[:, 0]
        return (goal > 0).astype(np.int32)[:, None] if discrete else goal[:, None].astype(np.float32)
    return expert


def record_scripted_expert(discrete: bool, path, num_steps: int = 500):
    """(spec, buffer) of the scripted expert's demo, written to ``path``. With env seed 7 its
    goals are unbalanced: 400 steps hold 29 % of goal +1."""
    from kerasrl import recording
    from kerasrl.envs.simple import Simple1DEnvironment

    return recording.record(Simple1DEnvironment(use_discrete=discrete, seed=7), scripted_expert(discrete), num_steps,
                            path)


def random_policy_rows(spec: BehaviorSpec, n: int, rng: np.random.Generator) -> dict:
    """Simple1D transitions of a uniformly random policy (what GAIL's discriminator first sees)."""
    goal = rng.choice([-1.0, 1.0], size=(n, 1)).astype(np.float32)
    actions = (rng.integers(0, 2, (n, 1)).astype(np.int32) if spec.is_discrete
               else rng.uniform(-1.0, 1.0, (n, 1)).astype(np.float32))
    return {Field.VECTOR_OBS: goal, Field.ACTIONS: actions, Field.DONE: np.zeros(n, np.float32),
            Field.MASKS: np.ones(n, np.float32)}


@pytest.mark.slow
@pytest.mark.parametrize("use_discrete", [True, False], ids=["discrete", "continuous"])
def test_gail_rewards_the_experts_action_above_the_opposite_one_on_every_seed(use_discrete, tmp_path):
    """A discriminator trained against a random policy ranks (goal, expert's action) above (goal,
    opposite action) for both goals, on every seed. With the two-sided gradient penalty, 4 of 8
    seeds ranked one goal's actions the other way after 10 updates, and PPO learned the anti-expert."""
    spec, demo = record_scripted_expert(use_discrete, tmp_path / "expert.demo", 400)
    dtype = np.int32 if use_discrete else np.float32
    toward = {Field.VECTOR_OBS: np.array([[1.0], [-1.0]], np.float32),  # goal +1, goal -1
              Field.ACTIONS: np.array([[1], [0]] if use_discrete else [[1.0], [-1.0]], dtype),
              Field.DONE: np.zeros(2, np.float32)}
    away = {**toward, Field.ACTIONS: np.array([[0], [1]] if use_discrete else [[-1.0], [1.0]], dtype)}
    wrong = []
    for seed in range(1, 7):
        signal = make_signal("gail", spec, NetworkSettings(), seed=seed, demo=(spec, demo), use_actions=True)
        rng = np.random.default_rng(seed)
        for _ in range(10):
            signal.update(as_buffer(random_policy_rows(spec, 64, rng)), n_sequences=16)
        good, bad = signal.evaluate_batch(toward).unscaled_reward, signal.evaluate_batch(away).unscaled_reward
        if not (good > bad).all():
            wrong.append((seed, [round(float(v), 2) for v in good], [round(float(v), 2) for v in bad]))
    assert not wrong, f"(seed, expert's rewards for goals +1/-1, opposite actions'): {wrong}"


@pytest.mark.slow
@pytest.mark.parametrize("use_discrete", [True, False], ids=["discrete", "continuous"])
def test_gail_alone_learns_simple1d_from_a_scripted_expert(use_discrete, tmp_path):
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_simple_rl import run_training

    demo = tmp_path / "expert.demo"
    record_scripted_expert(use_discrete, demo)
    config = simple_config(max_steps=2500, reward_signals={"gail": {
        "strength": 1.0, "gamma": 0.99, "demo_path": str(demo), "use_actions": True, "encoding_size": 32,
        "learning_rate": 1e-3}})
    tc = run_training(Simple1DEnvironment(use_discrete=use_discrete, seed=1337), tmp_path, config=config)
    trainer = next(iter(tc.trainers.values()))
    returns = list(trainer.recent_returns)[-10:]
    assert len(returns) == 10 and np.mean(returns) >= 0.9, returns
    assert trainer.reward_signals["gail"].has_updated


@pytest.mark.slow
def test_gail_alone_follows_its_expert_on_five_seeds(tmp_path):
    """The setting in which 1 seed in 5 walked to the wrong end every time: GAIL the only
    reward, state-action discriminator, a 400-step scripted demo, 6,000 steps."""
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_simple_rl import run_training

    demo = tmp_path / "expert.demo"
    record_scripted_expert(True, demo, 400)
    config = simple_config(max_steps=6000, reward_signals={"gail": {
        "strength": 1.0, "gamma": 0.99, "demo_path": str(demo), "use_actions": True}})
    finals = {}
    for seed in (21, 22, 23, 24, 25):
        tc = run_training(Simple1DEnvironment(use_discrete=True, seed=seed), tmp_path / str(seed), config=config,
                          seed=seed)
        finals[seed] = round(float(np.mean(list(next(iter(tc.trainers.values())).recent_returns)[-10:])), 3)
    assert all(v >= 0.9 for v in finals.values()), finals


@pytest.mark.slow
def test_state_only_gail_follows_its_expert_on_most_seeds(tmp_path):
    """GAIL's default, state-only discriminator, where the states tell the expert's walk from the
    anti-expert's (``observe_position``) and GAIL's discount matches the 10-step episodes (the
    setting docs/guides/reward-signals.md recommends): most of ten seeds follow the expert (a
    policy that does not learn ends every episode below 0.9). benchmarks/gail_seeds.py measured
    77 of 80 seeds with ``gamma`` 0.9; which seeds fail depends on the machine's floating-point
    paths (on one machine seeds 31-35 gave 4 of 5, on another 2 of 5 and 36-45 10 of 10), so the
    bar is six of ten, not four of five."""
    from kerasrl import recording
    from kerasrl.envs.simple import Simple1DEnvironment
    from tests.test_simple_rl import run_training

    demo = tmp_path / "expert.demo"
    recording.record(Simple1DEnvironment(use_discrete=True, seed=7, observe_position=True), scripted_expert(True), 400,
                     demo)
    config = simple_config(max_steps=6000, reward_signals={"gail": {"strength": 1.0, "gamma": 0.9,
                                                                    "demo_path": str(demo)}})
    finals = {}
    for seed in range(31, 41):
        env = Simple1DEnvironment(use_discrete=True, seed=seed, observe_position=True)
        tc = run_training(env, tmp_path / str(seed), config=config, seed=seed)
        finals[seed] = round(float(np.mean(list(next(iter(tc.trainers.values())).recent_returns)[-10:])), 3)
    assert sum(v >= 0.9 for v in finals.values()) >= 6, finals


def gail_features(signal: GAILRewardSignal, rows: dict) -> np.ndarray:
    """The discriminator's input by hand: observations, one-hot actions, done."""
    spec = signal.spec
    onehot = [np.eye(b, dtype=np.float32)[rows[Field.ACTIONS][:, k]] for k, b in enumerate(spec.discrete_branches)]
    return np.concatenate([rows[Field.VECTOR_OBS], *onehot, rows[Field.DONE][:, None]], axis=1)


def test_gail_loss_and_reward_match_their_formulas():
    """One update's loss, by hand: ``−mean(log(D_e + ε) + log(1 − D_p + ε)) + 10·mean(max(‖∂D/∂x‖ − 1, 0)²)``
    with ∂D/∂x by central differences (expert rows = policy rows: the interpolation is that row),
    and the reward ``−log(1 − D + ε)``."""
    import tensorflow as tf

    spec = make_spec(True, False)
    rows = make_rows(spec, 16, np.random.default_rng(6))
    signal = make_signal("gail", spec, NetworkSettings(), seed=3, demo=(spec, as_buffer(rows)), use_actions=True)
    signal.model.out.kernel.assign(signal.model.out.kernel * 30.0)  # some rows steeper than 1: the penalty acts
    x = gail_features(signal, rows)

    def d_of(inputs: np.ndarray) -> np.ndarray:
        return signal.model.head(tf.constant(inputs, tf.float32))[0].numpy().astype(np.float64)

    d = d_of(x)
    h = 1e-2
    grad = np.stack([(d_of(x + h * e) - d_of(x - h * e)) / (2 * h) for e in np.eye(x.shape[1], dtype=np.float32)], 1)
    norms = np.linalg.norm(grad, axis=1)
    assert (norms > 1.0).any() and (norms < 1.0).any(), norms
    eps = 1e-7
    expected = -np.mean(np.log(d + eps) + np.log(1 - d + eps)) + 10.0 * np.mean(np.maximum(norms - 1.0, 0.0) ** 2)
    batch = {k: tf.constant(rows[k]) for k in signal.batch_fields}
    batch.update({f"expert/{k}": v for k, v in list(batch.items())})
    loss, d_policy, d_expert = signal.train_step(batch, tf.constant([1, 2], tf.int64)).numpy()
    assert d_policy == pytest.approx(d.mean(), rel=1e-5) and d_expert == pytest.approx(d.mean(), rel=1e-5)
    assert loss == pytest.approx(expected, rel=2e-3)
    signal.update(as_buffer(rows), n_sequences=16)
    reward = signal.evaluate_batch({k: rows[k] for k in signal.batch_fields}).unscaled_reward
    np.testing.assert_allclose(reward, -np.log(1.0 - d_of(x) + eps), rtol=1e-3)  # float32 at D ≈ 1


def test_gail_sees_vector_observations_through_the_policys_normalizer():
    """With the policy's normalizer, expert and policy observations are normalised for the update
    and the rewards: the same as a signal without it fed normalised observations."""
    from kerasrl.models.normalizer import Normalizer

    spec = make_spec(True, False)
    rng = np.random.default_rng(4)
    expert, policy = make_rows(spec, 40, rng), make_rows(spec, 32, rng)
    for rows in (expert, policy):
        rows[Field.VECTOR_OBS] = rows[Field.VECTOR_OBS] * 3.0 + 5.0
    normalizer = Normalizer(3)
    normalizer.update(policy[Field.VECTOR_OBS])

    def normed(rows: dict) -> dict:
        return {**rows, Field.VECTOR_OBS: normalizer(rows[Field.VECTOR_OBS]).numpy()}

    def trained(seen_expert: dict, seen_policy: dict, with_normalizer: bool) -> np.ndarray:
        signal = make_signal("gail", spec, NetworkSettings(), seed=5, demo=(spec, as_buffer(seen_expert)),
                             use_actions=True)
        signal.use_normalizer(normalizer if with_normalizer else None)
        signal.update(as_buffer(seen_policy), n_sequences=16)
        return signal.evaluate_batch({k: seen_policy[k] for k in signal.batch_fields}).unscaled_reward

    through = trained(expert, policy, True)
    np.testing.assert_allclose(through, trained(normed(expert), normed(policy), False), rtol=1e-5, atol=1e-6)
    assert not np.allclose(through, trained(expert, policy, False), rtol=1e-2)


@pytest.mark.parametrize("normalize", [True, False])
def test_ppo_hands_its_normalizer_to_gail(normalize, tmp_path):
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.trainers import initialize_trainers

    demo = tmp_path / "expert.demo"
    record_scripted_expert(True, demo, 50)
    config = simple_config(normalize=normalize, reward_signals={"gail": {"strength": 1.0, "gamma": 0.99,
                                                                         "demo_path": str(demo)}})
    trainers = initialize_trainers(config, SimpleEnvManager(Simple1DEnvironment(use_discrete=True)).behavior_specs,
                                   summaries_dir=str(tmp_path), run_id="id", model_path=str(tmp_path / "m"),
                                   keep_checkpoints=1, train_model=True, load_model=False, seed=1,
                                   meta_curriculum=None, multi_gpu=False)
    trainer = next(iter(trainers.values()))
    normalizer = trainer.learner.actor_critic.normalizer
    assert (normalizer is not None) == normalize
    assert trainer.reward_signals["gail"].normalizer is normalizer


def test_signal_state_is_checkpointed_and_restored(tmp_path):
    from kerasrl.trainers.checkpoint import CheckpointSaver

    spec = make_spec(True, False)
    rows = make_rows(spec, 32, np.random.default_rng(3))
    batch = {k: rows[k] for k in ("vector_obs", "actions", "done")}
    trained = make_signal("gail_vail", spec, NetworkSettings(), seed=1, use_actions=True)
    trained.update(as_buffer(rows), n_sequences=16)
    CheckpointSaver(str(tmp_path), 1, signal=trained.checkpoint_state()).save(10, 1)
    fresh = make_signal("gail_vail", spec, NetworkSettings(), seed=2, use_actions=True)
    assert not fresh.has_updated
    CheckpointSaver(str(tmp_path), 1, signal=fresh.checkpoint_state()).restore()
    assert fresh.has_updated and float(fresh.model.beta.numpy()) == float(trained.model.beta.numpy())
    np.testing.assert_allclose(fresh.evaluate_batch(batch).scaled_reward, trained.evaluate_batch(batch).scaled_reward,
                               rtol=1e-6)
    assert fresh.optimizer.iterations.numpy() == trained.optimizer.iterations.numpy() > 0


class _CountingSignal:
    """A non-per-step signal whose reward is a stored column (checks the update-time GAE)."""

    per_step, use_terminal_states, gamma = False, False, 0.9
    stat_name = "Policy/Test Reward"
    batch_fields = ["vector_obs"]

    def __init__(self):
        self.calls = 0

    def evaluate_batch(self, batch):
        from kerasrl.rewards import RewardSignalResult

        self.calls += 1
        r = batch["vector_obs"][:, 0].astype(np.float32)
        return RewardSignalResult(r, r)


def test_update_time_rewards_run_gae_per_trajectory_in_one_call():
    from collections import defaultdict

    from kerasrl.common.gae import gae_and_returns
    from kerasrl.rewards.batched import UpdateBatchRewards
    from kerasrl.trainers.agent_processor import AgentCounters

    signal = _CountingSignal()
    table = AgentCounters(["return_test"])
    table.slots(np.array([4, 5]))
    stats = defaultdict(list)
    deferred = UpdateBatchRewards({"test": signal}, table, stats)
    rng = np.random.default_rng(0)
    # Two trajectories: agent 4 with 3 rows behind 2 padding rows (episode continues), agent 5 with 4 rows (ended).
    masks = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1], np.float32)
    obs = rng.uniform(size=(9, 1)).astype(np.float32) * masks[:, None]
    values = rng.normal(size=9).astype(np.float32)
    ub = as_buffer({Field.MASKS: masks, Field.VECTOR_OBS: obs, Field.value_estimates("test"): values,
                    Field.rewards("test"): np.zeros(9, np.float32)})
    deferred.add(4, 0, 5, {"test": 0.5}, terminated=False, ended=False)
    deferred.add(5, 5, 9, {"test": 2.0}, terminated=True, ended=True)
    deferred.finish(ub, lambd=0.8)
    assert signal.calls == 1 and not deferred.segments
    adv = ub[Field.advantage("test")].get_batch()
    for rows, v_next in ((slice(2, 5), 0.5), (slice(5, 9), 2.0)):  # intrinsic: a terminal state keeps V
        expected, _ = gae_and_returns(obs[rows, 0], values[rows], v_next, 0.9, 0.8)
        np.testing.assert_allclose(adv[rows], expected, rtol=1e-6)
    assert not adv[:2].any()
    np.testing.assert_allclose(ub[Field.ADVANTAGES].get_batch(), adv)
    assert stats["Policy/Test Reward"] == [pytest.approx(float(obs[5:, 0].sum()))]
    assert table.get("return_test", 4) == pytest.approx(float(obs[2:5, 0].sum()))
    assert table.get("return_test", 5) == 0.0
