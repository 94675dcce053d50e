"""MA-POCA (``trainer: poca``): the groupmate status the agent processor stores, the loss and the
counterfactual advantages against numpy, the bootstrap of agents that leave their group early, the
config, checkpoints, the fit API, and learning ``GroupSimple1D`` from its group reward alone."""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pytest
import tensorflow as tf

import kerasrl
from kerasrl.envs import SimpleEnvManager
from kerasrl.envs.groups import GroupSimple1DEnvironment
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.attention import ResidualSelfAttention, multi_head_attention
from kerasrl.poca.learner import POCALearner
from kerasrl.poca.loss import poca_loss
from kerasrl.poca.networks import POCACritic
from kerasrl.poca.numpy_critic import NumpyCritic
from kerasrl.poca.trainer import GROUP_REWARD_STAT, POCATrainer, lambda_returns_and_advantages
from kerasrl.settings import POCASettings, RunContext, TrainerSettings, load_trainer_config
from kerasrl.trainers import TrainerController, create_trainers
from kerasrl.trainers.agent_processor import AgentProcessor
from kerasrl.trainers.groupmates import groupmate_index
from kerasrl.trainers.trajectory import TrajectoryQueue

NAME = "GroupSimple1D"
SMALL = {"trainer": "poca", "hidden_units": 16, "num_layers": 1, "batch_size": 32, "buffer_size": 128,
         "time_horizon": 16, "summary_freq": 500, "max_steps": 400}
GAMMA, LAMBD = 0.99, 0.95


def _spec():
    return GroupSimple1DEnvironment().behavior_specs[NAME]


def _trainer(tmp_path, max_steps=400, load=False, **overrides):
    env = GroupSimple1DEnvironment(num_agents=3, seed=0, max_steps=40)
    manager = SimpleEnvManager(env)
    context = RunContext.in_results_dir(str(tmp_path), "poca", seed=1, max_steps=max_steps, load_model=load)
    trainers = create_trainers(load_trainer_config({"default": {**SMALL, **overrides}}), manager.behavior_specs, context)
    return trainers[NAME], manager, context


def numpy_lambda_return(r, v, value_next, gamma=GAMMA, lambd=LAMBD):
    """ML-Agents' ``lambda_return``, as it is written there."""
    returns = np.zeros_like(r)
    returns[-1] = r[-1] + gamma * value_next
    for t in reversed(range(len(r) - 1)):
        returns[t] = gamma * lambd * returns[t + 1] + r[t] + (1 - lambd) * gamma * v[t + 1]
    return returns


# -- the groupmate status ---------------------------------------------------------------------

def test_groupmate_index_lists_each_rows_groupmates_padded_and_masked():
    index, mask = groupmate_index(np.array([1, 0, 1, 2, 1, 2]))
    assert index.shape == (6, 2)
    got = [sorted(index[i][mask[i]].tolist()) for i in range(6)]
    assert got == [[2, 4], [], [0, 4], [5], [0, 2], [3]]
    wide, wide_mask = groupmate_index(np.array([0, 0]), width=3)
    assert wide.shape == (2, 3) and not wide_mask.any()


def _scripted_run(num_agents=3, seed=4):
    """GroupSimple1D with agent 0 walking away from its goal (it leaves the group after 11 steps)
    and the others dawdling (forth and back), then walking home; the processor's trajectories."""
    env = GroupSimple1DEnvironment(num_agents=num_agents, seed=seed)
    queue = TrajectoryQueue(NAME)
    proc = AgentProcessor(env.behavior_specs[NAME], {}, [Field.ACTIONS], defaultdict(list), queue)
    curr = env.reset()[NAME]
    goals = curr.observations[0][:, 0].copy()
    proc.add_step(None, curr, None)
    results = [curr]
    for step in range(1, 40):
        towards = (curr.observations[0][:, :1] > 0).astype(np.int32)
        actions = towards if step > 12 else np.full((len(curr), 1), step % 2, np.int32)
        actions[curr.agent_ids == 0] = 0 if goals[0] > 0 else 1
        outputs = {Field.ACTIONS: actions}
        nxt = env.step({NAME: actions})[NAME]
        proc.add_step(curr, nxt, outputs)
        results.append(nxt)
        curr = nxt
        if nxt.done.all():
            break
    return queue.take_all(), results


def test_the_processor_stores_each_transitions_groupmates_and_the_leavers_group_at_its_end():
    trajectories, results = _scripted_run()
    leaver = next(t for t in trajectories if t.agent_id == 0)
    assert len(leaver) == 11 and leaver.terminated and not leaver.group_done  # it left; the group goes on
    mask = leaver.steps[Field.GROUPMATE_MASK].get_batch()
    assert mask.shape == (11, 2) and (mask == 1).all()
    # its groupmates' observations and actions at each step are agents 1 and 2's, in id order
    for t in range(11):
        np.testing.assert_array_equal(leaver.steps[Field.GROUPMATE_VECTOR_OBS][t], results[t].observations[0][1:])
    np.testing.assert_array_equal(leaver.steps[Field.GROUPMATE_ACTIONS].get_batch()[:, :, 0],
                                  np.repeat(np.arange(1, 12)[:, None] % 2, 2, axis=1))
    # the bootstrap's group: agents 1 and 2 at the step it left
    assert leaver.next_groupmate_mask.tolist() == [1.0, 1.0]
    np.testing.assert_array_equal(leaver.next_groupmate_observations[0], results[11].observations[0][1:])
    stayer = next(t for t in trajectories if t.agent_id == 1)  # its first episode, one trajectory (no time_horizon)
    mates = stayer.steps[Field.GROUPMATE_MASK].get_batch()
    assert len(stayer) == 23 and (mates[:11] == 1).all() and (mates[11:] == [1, 0]).all()  # then agent 2 alone, padded
    assert stayer.terminated and stayer.group_done and stayer.steps[Field.GROUP_DONE][-1] == 1.0
    assert (stayer.steps[Field.GROUP_DONE].get_batch()[:-1] == 0).all()


def test_without_groups_the_processor_stores_no_groupmate_status():
    env = Simple1DEnvironment(True, seed=0)
    spec = env.behavior_specs[env.behavior_name]
    queue = TrajectoryQueue()
    proc = AgentProcessor(spec, {}, [Field.ACTIONS], defaultdict(list), queue)
    curr = env.reset()[env.behavior_name]
    proc.add_step(None, curr, None)
    for _ in range(30):
        outputs = {Field.ACTIONS: np.ones((len(curr), 1), np.int32)}
        nxt = env.step({env.behavior_name: outputs[Field.ACTIONS]})[env.behavior_name]
        proc.add_step(curr, nxt, outputs)
        curr = nxt
    got = queue.take_all()
    assert got and all(Field.GROUPMATE_MASK not in t.steps and t.next_groupmate_mask is None for t in got)


# -- the loss and the advantages against numpy ------------------------------------------------

def _hand_batch(actor, rows=6, width=2, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.array([[1, 1], [1, 0], [0, 0], [1, 1], [1, 0], [1, 1]], np.float32)[:rows]
    batch = {Field.VECTOR_OBS: rng.normal(size=(rows, 2)).astype(np.float32),
             Field.ACTION_MASK: np.ones((rows, 2), np.float32),
             Field.ACTIONS: rng.integers(0, 2, (rows, 1)).astype(np.int32),
             Field.ACTION_LOG_PROBS: np.log(rng.uniform(0.3, 0.7, (rows, 1))).astype(np.float32),
             Field.ADVANTAGES: rng.normal(size=rows).astype(np.float32),
             Field.MASKS: np.array([1, 1, 1, 1, 1, 0], np.float32)[:rows],
             Field.GROUPMATE_VECTOR_OBS: rng.normal(size=(rows, width, 2)).astype(np.float32) * mask[..., None],
             Field.GROUPMATE_ACTIONS: rng.integers(0, 2, (rows, width, 1)).astype(np.int32),
             Field.GROUPMATE_MASK: mask,
             Field.returns("extrinsic"): rng.normal(size=rows).astype(np.float32),
             Field.value_estimates("extrinsic"): rng.normal(size=rows).astype(np.float32) * 0.1,
             Field.baseline_estimates("extrinsic"): rng.normal(size=rows).astype(np.float32) * 0.1}
    return batch


def _networks():
    spec, settings = _spec(), TrainerSettings.from_dict(SMALL)
    actor = ActorCritic(spec, ["extrinsic"], settings.network, seed=3)
    return actor, POCACritic(spec, ["extrinsic"], settings.network, seed=3)


def _numpy_loss(actor, critic, batch, eps, beta):
    logits = actor(actor.acting_inputs([batch[Field.VECTOR_OBS]], batch[Field.ACTION_MASK]))["logits"].numpy()
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    log_prob = log_p[np.arange(len(logits)), batch[Field.ACTIONS][:, 0]]
    entropy = -(np.exp(log_p) * log_p).sum(-1)
    m = batch[Field.MASKS]
    mean = lambda x: (x * m).sum() / m.sum()  # noqa: E731
    ratio = np.exp(log_prob - batch[Field.ACTION_LOG_PROBS][:, 0])
    adv = batch[Field.ADVANTAGES]
    policy = -mean(np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv))
    own, mates, mmask = batch[Field.VECTOR_OBS], batch[Field.GROUPMATE_VECTOR_OBS], batch[Field.GROUPMATE_MASK]
    v = critic.values(own, mates, mmask)["extrinsic"].numpy()
    b = critic.baselines(own, mates, batch[Field.GROUPMATE_ACTIONS], mmask)["extrinsic"].numpy()
    ret = batch[Field.returns("extrinsic")]

    def clipped(x, old):
        return mean(np.maximum((ret - x) ** 2, (ret - old - np.clip(x - old, -eps, eps)) ** 2))

    value = clipped(v, batch[Field.value_estimates("extrinsic")])
    baseline = clipped(b, batch[Field.baseline_estimates("extrinsic")])
    return policy + 0.5 * (value + 0.5 * baseline) - beta * mean(entropy), value, baseline


def test_the_loss_and_one_update_match_a_numpy_computation():
    actor, critic = _networks()
    batch = _hand_batch(actor)
    expected, value, baseline = _numpy_loss(actor, critic, batch, 0.2, 0.01)
    loss, metrics = poca_loss(actor, critic, {k: tf.constant(v) for k, v in batch.items()}, tf.constant(0.2),
                              tf.constant(0.01), ["extrinsic"])
    assert float(loss) == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert float(metrics["value_loss"]) == pytest.approx(value, rel=1e-4)
    assert float(metrics["baseline_loss"]) == pytest.approx(baseline, rel=1e-4)
    # one update (one epoch, one mini-batch of every row) reports the loss before its step, then moves both networks
    learner = POCALearner(actor, critic, POCASettings(batch_size=6, buffer_size=6, num_epoch=1,
                                                      learning_rate_schedule="constant", beta=0.01, beta_end=0.01,
                                                      epsilon=0.2, epsilon_end=0.2))
    before = [v.numpy().copy() for v in learner.variables]
    out = learner.update(batch, step=0, seed=0)
    assert out["loss"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
    moved = [not np.array_equal(b, v.numpy()) for b, v in zip(before, learner.variables)]
    assert any(moved[: len(moved) - len(critic.trainable_variables)]) and any(moved[-len(critic.trainable_variables):])
    assert all(np.array_equal(actor.value_heads["extrinsic"].kernel.numpy(), k)
               for k in [actor.value_heads["extrinsic"].kernel.numpy()])


def test_one_critic_pass_and_its_numpy_mirror_give_the_values_and_baselines_of_separate_passes():
    """``estimates`` (both sets of entities through one attention) equals ``values`` and
    ``baselines`` apart, and the trainer's numpy mirror equals both (a normaliser with statistics,
    groupmates masked out, a member count scaled by a larger group)."""
    spec = _spec()
    network = dataclasses.replace(TrainerSettings.from_dict(SMALL).network, normalize=True)
    actor = ActorCritic(spec, ["extrinsic"], network, seed=3)
    critic = POCACritic(spec, ["extrinsic"], network, actor.normalizer, seed=3)
    batch = _hand_batch(actor)
    actor.normalizer.update(np.random.default_rng(1).normal(1.0, 3.0, (50, 2)))
    critic.note_group_size(4)
    args = [batch[k] for k in (Field.VECTOR_OBS, Field.GROUPMATE_VECTOR_OBS, Field.GROUPMATE_ACTIONS,
                               Field.GROUPMATE_MASK)]
    values, baselines = critic.estimates(*args)
    apart = (critic.values(args[0], args[1], args[3]), critic.baselines(*args))
    mirror = NumpyCritic(critic, network.activation).estimates(*args)
    for got in ((values, baselines), mirror):
        for estimate, expected in zip(got, apart):
            np.testing.assert_allclose(np.asarray(estimate["extrinsic"]), expected["extrinsic"].numpy(),
                                       rtol=1e-5, atol=1e-5)
    alone = [a[:, :0] for a in args[1:]]  # no groupmates at all (an environment without groups)
    for estimate, expected in zip(NumpyCritic(critic, network.activation).estimates(args[0], *alone),
                                  critic.estimates(args[0], *alone)):
        np.testing.assert_allclose(estimate["extrinsic"], expected["extrinsic"].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("entities", [3, 20])  # broadcast products; einsum above BROADCAST_ENTITIES
def test_the_attention_from_the_layers_weights_equals_keras_multi_head_attention(entities):
    block = ResidualSelfAttention(16, seed=3)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(6, entities, 16)).astype(np.float32))
    mask = np.ones((6, entities), np.float32)
    mask[:3, -1], mask[4, 1:] = 0, 0
    block(x, tf.constant(mask))
    pairs = tf.cast(mask[:, None, :], tf.bool) & tf.ones([6, entities, 1], tf.bool)
    expected = block.attention(x, x, x, attention_mask=pairs)
    got = tf.function(multi_head_attention, autograph=False)(block.attention, x, tf.constant(mask))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_the_xla_update_padded_to_a_fixed_stack_matches_the_plain_one():
    """Two updates of several mini-batches (the second with fewer rows, run from a stack padded to
    the first's size): XLA's weights equal the plain tf.function's to float rounding."""
    settings = POCASettings(batch_size=4, buffer_size=12, num_epoch=2, learning_rate_schedule="constant")
    learners = []
    for jit in (True, False):
        actor, critic = _networks()
        learners.append(POCALearner(actor, critic, dataclasses.replace(settings, jit_compile=jit)))
    for rows, seed in ((12, 0), (8, 1)):
        halves = [_hand_batch(learners[0].actor, seed=seed + 10 * k) for k in (0, 1)]
        batch = {key: np.concatenate([h[key] for h in halves])[:rows] for key in halves[0]}
        outs = [learner.update(batch, step=0, seed=seed) for learner in learners]
        assert outs[0]["loss"] == pytest.approx(outs[1]["loss"], rel=1e-4, abs=1e-6)
    assert learners[0].use_xla and not learners[1].use_xla and learners[0]._stack_size == 2 * 3 + 2 * 2
    for a, b in zip(learners[0].variables, learners[1].variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_lambda_returns_and_counterfactual_advantages_match_numpy():
    rng = np.random.default_rng(1)
    r, v, b = rng.normal(size=(3, 9)).astype(np.float32)
    ret, adv = lambda_returns_and_advantages(r, v, b, 0.7, GAMMA, LAMBD)
    np.testing.assert_allclose(ret, numpy_lambda_return(r, v, 0.7), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(adv, numpy_lambda_return(r, v, 0.7) - b, rtol=1e-5, atol=1e-6)


def test_a_trajectory_gets_group_rewards_group_values_baselines_and_its_advantages(tmp_path):
    trainer, _, _ = _trainer(tmp_path)
    trajectories, _ = _scripted_run()
    last = next(t for t in trajectories if t.agent_id == 1)
    steps = last.steps
    steps[Field.rewards("extrinsic")].set(steps[Field.ENVIRONMENT_REWARDS].get_batch())
    assert steps[Field.GROUP_REWARD][-1] == pytest.approx(2 / 3)  # two of three home
    trainer.process_trajectory(last)
    values, baselines, _ = trainer.estimates(last)  # the critic's, as the processing used them
    update = trainer.training_buffer.update_buffer
    rewards = update[Field.rewards("extrinsic")].get_batch()
    assert rewards[-1] == pytest.approx(2 / 3) and (rewards[:-1] == 0).all()  # individual (0) + group reward
    own = steps[Field.VECTOR_OBS].get_batch()
    critic = trainer.learner.critic
    v = critic.values(own, steps[Field.GROUPMATE_VECTOR_OBS].get_batch(), steps[Field.GROUPMATE_MASK].get_batch())
    np.testing.assert_allclose(values["extrinsic"], v["extrinsic"].numpy(), rtol=1e-5, atol=1e-6)
    expected = numpy_lambda_return(rewards, values["extrinsic"], 0.0)  # the whole group terminated
    np.testing.assert_allclose(update[Field.returns("extrinsic")].get_batch(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(update[Field.ADVANTAGES].get_batch(), expected - baselines["extrinsic"], rtol=1e-5,
                               atol=1e-6)
    assert trainer.stats[GROUP_REWARD_STAT] == [pytest.approx(2 / 3)]  # its episode ended


def test_an_agent_that_left_early_is_bootstrapped_from_its_groups_value_not_as_terminal(tmp_path):
    trainer, _, _ = _trainer(tmp_path)
    trajectories, _ = _scripted_run()
    leaver = next(t for t in trajectories if t.agent_id == 0)
    assert leaver.terminated and not leaver.group_done
    leaver.steps[Field.rewards("extrinsic")].set(leaver.steps[Field.ENVIRONMENT_REWARDS].get_batch())
    trainer.process_trajectory(leaver)
    _, _, value_next = trainer.estimates(leaver)
    mates = leaver.next_groupmate_observations[0]  # agents 1 and 2 at the step agent 0 left
    own = leaver.next_observations[0].reshape(1, -1)  # its final observation stays in (ML-Agents' POCA)
    assert leaver.next_groupmate_mask.tolist() == [1.0, 1.0]
    group = trainer.learner.critic.values(own, mates[None], np.ones((1, 2), np.float32))["extrinsic"]
    group = group.numpy()[0]
    swapped = trainer.learner.critic.values(mates[:1], np.concatenate([own, mates[1:]])[None],
                                            np.ones((1, 2), np.float32))["extrinsic"]
    assert float(swapped.numpy()[0]) == pytest.approx(float(group), rel=1e-5, abs=1e-7)  # the group's, in any order
    assert value_next["extrinsic"] == pytest.approx(float(group), rel=1e-5, abs=1e-7) and abs(group) > 1e-4
    returns = trainer.training_buffer.update_buffer[Field.returns("extrinsic")].get_batch()
    assert returns[-1] == pytest.approx(GAMMA * group, rel=1e-5)  # a terminal bootstrap would give 0


# -- config, trainer, checkpoints -------------------------------------------------------------

def test_a_poca_config_in_todays_layout_loads_and_makes_a_poca_trainer(tmp_path):
    config = load_trainer_config({"behaviors": {NAME: {
        "trainer_type": "poca", "max_steps": 1000, "time_horizon": 16,
        "hyperparameters": {"batch_size": 32, "buffer_size": 256, "learning_rate": 1e-3, "beta": 0.01, "lambd": 0.9},
        "network_settings": {"hidden_units": 16, "num_layers": 1},
        "reward_signals": {"extrinsic": {"gamma": 0.99, "strength": 1.0}}}}})
    settings = config.settings_for(NAME)
    assert settings.trainer == "poca" and isinstance(settings.hyperparameters, POCASettings)
    assert settings.hyperparameters.lambd == 0.9 and kerasrl.trainer_types()["poca"].settings_cls is POCASettings
    manager = SimpleEnvManager(GroupSimple1DEnvironment(seed=0))
    trainers = create_trainers(config, manager.behavior_specs, RunContext.in_results_dir(str(tmp_path), "r", seed=0))
    assert isinstance(trainers[NAME], POCATrainer)
    with pytest.raises(TrainerConfigError, match="vf_coef .* of the ppo trainer.*, which the poca trainer does not use"):
        load_trainer_config({"default": {"trainer": "poca", "vf_coef": 1.0}})


def test_cameras_are_refused_in_one_line(tmp_path):
    manager = SimpleEnvManager(kerasrl.VisualSimple1DEnvironment(True, seed=0))
    with pytest.raises(UnityTrainerException, match="vector observations only"):
        create_trainers(load_trainer_config({"default": SMALL}), manager.behavior_specs,
                        RunContext.in_results_dir(str(tmp_path), "v", seed=0))


def test_a_checkpoint_restores_the_actor_and_the_critic_and_training_resumes(tmp_path):
    trainer, manager, context = _trainer(tmp_path, max_steps=300)
    TrainerController({NAME: trainer}, context.model_path, context.summaries_dir, "poca", save_freq=10**6,
                      training_seed=1).start_learning(manager)
    assert trainer.update_count >= 1
    trainer.save_model()
    saved = {v.path: v.numpy() for v in [*trainer.learner.actor.weights, *trainer.learner.critic.weights]}
    restored, manager, context = _trainer(tmp_path, max_steps=500, load=True)
    assert restored.get_step == trainer.get_step and restored.update_count == trainer.update_count
    for v in [*restored.learner.actor.weights, *restored.learner.critic.weights]:
        np.testing.assert_array_equal(v.numpy(), saved[v.path], err_msg=v.path)
    TrainerController({NAME: restored}, context.model_path, context.summaries_dir, "poca", save_freq=10**6,
                      training_seed=1).start_learning(manager)
    assert restored.get_step > trainer.get_step
    started, _, _ = _trainer(tmp_path / "other", init_path=context.behavior_model_path(NAME))  # init_path: weights, step 0
    assert started.get_step == 0 and started.update_count == 0
    newest = {v.path: v.numpy() for v in [*restored.learner.actor.weights, *restored.learner.critic.weights]}
    for v in [*started.learner.actor.weights, *started.learner.critic.weights]:
        np.testing.assert_array_equal(v.numpy(), newest[v.path], err_msg=v.path)


def test_a_deferred_reward_signal_trains_beside_the_group_reward(tmp_path):
    """Curiosity's rewards are computed per trajectory (not at the update, as PPO's are), with
    their own value and baseline heads, and its model trains at each update."""
    signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99}, "curiosity": {"strength": 0.02, "gamma": 0.99,
                                                                            "encoding_size": 8}}
    trainer, manager, context = _trainer(tmp_path, max_steps=300, reward_signals=signals)
    TrainerController({NAME: trainer}, context.model_path, context.summaries_dir, "poca", save_freq=10**6,
                      training_seed=1).start_learning(manager)
    log = {k for k, v in trainer.stats.items() if v}  # no summary yet: summary_freq is 500
    assert trainer.update_count >= 1 and "Losses/Curiosity Forward Loss" in log
    assert {"Policy/Curiosity Baseline Estimate", "Policy/Curiosity Value Estimate"} <= set(log)


def test_the_fit_api_trains_saves_loads_and_predicts(tmp_path):
    agent = kerasrl.POCA(NAME, seed=1, run_dir=str(tmp_path / "run"), hidden_units=16, num_layers=1, batch_size=32,
                         buffer_size=128, time_horizon=16)
    history = agent.fit(600, verbose=0)
    assert isinstance(agent.trainer, POCATrainer) and len(history.epoch) >= 3
    assert {"baseline_loss", "value_loss", "policy_loss", "episode_reward_mean"} <= set(history.history)
    path = agent.save(str(tmp_path / "group.keras"))
    obs = np.array([[1.0, 0.2], [-1.0, -0.5]], np.float32)
    loaded = kerasrl.load(path)
    assert isinstance(loaded, kerasrl.POCA) and loaded.trainer is None
    np.testing.assert_array_equal(loaded.predict(obs), agent.predict(obs))
    for mine, theirs in zip(agent.networks.critic.weights, loaded.networks.critic.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    resumed = kerasrl.load(path, env=NAME, run_dir=str(tmp_path / "again"))
    assert resumed.trainer.step == agent.trainer.step
    resumed.fit(200, verbose=0)
    assert resumed.trainer.step > agent.trainer.step
    for a in (agent, resumed):
        a.close()


# -- learning -----------------------------------------------------------------------------------

LEARNING = {"trainer": "poca", "hidden_units": 32, "num_layers": 2, "batch_size": 64, "buffer_size": 512,
            "time_horizon": 32, "summary_freq": 1000, "max_steps": 8000, "learning_rate": 3e-3, "beta": 0.01}


def test_poca_learns_group_simple1d_from_its_group_reward(tmp_path):
    """Two walkers whose only reward is their group's (1 each when both reach their goals within the
    episode's 40 steps; random walks hardly ever do): from none in the first 1,000 steps to nearly
    every episode by 8,000 (seeded; ~10 s on two CPU cores)."""
    manager = SimpleEnvManager(GroupSimple1DEnvironment(num_agents=2, seed=0, max_steps=40))
    context = RunContext.in_results_dir(str(tmp_path), "learn", seed=3, max_steps=8000)
    trainers = create_trainers(load_trainer_config({"default": LEARNING}), manager.behavior_specs, context)
    TrainerController(trainers, context.model_path, context.summaries_dir, "learn", save_freq=10**6,
                      training_seed=3).start_learning(manager)
    curve = [row.get(GROUP_REWARD_STAT, 0.0) for row in trainers[NAME].summary_log]
    assert len(curve) == 8
    assert curve[0] < 0.1 and np.mean(curve[-2:]) > 0.8, curve
    assert "Losses/Baseline Loss" in trainers[NAME].summary_log[-1]
