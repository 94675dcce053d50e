"""Recurrent SAC: the refusal is gone, bad values still get one line, masked losses, the
replay's sequences (never across episodes, the stored memory at their start), acting with
memory, checkpoints with the replay's memories, export, learning a task that needs memory, and
behavioral cloning over the demonstration's sequences."""
import random

import numpy as np
import pytest
import tensorflow as tf
from test_sac import run

from kerasrl.buffer import BufferException
from kerasrl.envs.base import ActionType, BehaviorSpec, Environment, StepResult, check_actions
from kerasrl.exception import TrainerConfigError, UnityTrainerException
from kerasrl.fields import Field
from kerasrl.sac import loss
from kerasrl.sac.learner import SACLearner
from kerasrl.sac.networks import SACNetworks
from kerasrl.sac.policy import SACPolicy
from kerasrl.sac.replay import BURN_IN, BURN_IN_MASKS, ReplayBuffer
from kerasrl.settings import TrainerSettings, load_trainer_config

# Short runs without XLA (the recurrent default), whose compile would take most of their time.
RECURRENT = {"trainer": "sac", "batch_size": 32, "buffer_size": 5000, "hidden_units": 32, "num_layers": 1,
             "learning_rate": 3e-3, "time_horizon": 8, "summary_freq": 500, "use_recurrent": True,
             "memory_size": 16, "sequence_length": 4, "jit_compile": False}
#: The same with the default compile (XLA).
RECURRENT_XLA = {k: v for k, v in RECURRENT.items() if k != "jit_compile"}


class CueEnvironment(Environment):
    """The goal (−1 or +1) is shown at an episode's first step only; the episode's last action
    (its ``length``-th) is rewarded ``action × goal`` (continuous, in [-1, 1]) or ±1 (discrete:
    1 means +1). Without memory the expected return is 0. Observation ``[cue, t / length]``.

    As the built-in environments, the step that ends an episode resets it: the next action is
    the new episode's unstored start (ignored), after which the cue shows.
    """

    def __init__(self, use_discrete: bool, seed: int, length: int = 3) -> None:
        self.use_discrete = use_discrete
        self.length = length
        self.random = random.Random(seed)
        self._spec = BehaviorSpec(((2,),), ActionType.DISCRETE if use_discrete else ActionType.CONTINUOUS,
                                  (2,) if use_discrete else (1,))
        self.goal, self.t = 1, 0
        self.returns: list[float] = []

    @property
    def behavior_specs(self):
        return {"Cue": self._spec}

    def _result(self, reward, done, cue):
        obs = np.array([[self.goal if cue else 0.0, max(self.t, 0) / self.length]], np.float32)
        return {"Cue": StepResult(agent_ids=np.zeros(1, np.int64), observations=[obs],
                                  rewards=np.array([reward], np.float32), terminated=np.array([done]),
                                  truncated=np.array([False]))}

    def reset(self, config=None):
        self.goal, self.t = self.random.choice([-1, 1]), 0
        return self._result(0.0, False, True)

    def step(self, actions):
        action = check_actions(self._spec, actions["Cue"], 1, "Cue")[0]
        if self.t < 0:  # the action taken on the ended episode's last observation: the new one starts
            self.t = 0
            return self._result(0.0, False, True)
        self.t += 1
        if self.t < self.length:
            return self._result(0.0, False, False)
        sign = (2.0 * int(action[0]) - 1.0) if self.use_discrete else float(np.clip(action[0], -1.0, 1.0))
        reward = sign * self.goal
        self.returns.append(reward)
        self.goal, self.t = self.random.choice([-1, 1]), -1
        return self._result(reward, True, False)


def networks(discrete=False, sequence_length=4, memory_size=16, section=RECURRENT):
    spec = BehaviorSpec(((2,),), "discrete" if discrete else "continuous", (3,) if discrete else (2,))
    settings = TrainerSettings.from_dict({**section, "sequence_length": sequence_length, "memory_size": memory_size})
    return SACLearner.for_behavior(spec, settings, seed=0, max_steps=100)


# -- settings -----------------------------------------------------------------------------
def test_use_recurrent_is_accepted_and_bad_memory_values_get_one_line():
    settings = load_trainer_config({"default": RECURRENT}).default
    assert settings.network.use_recurrent and settings.trainer == "sac"
    assert SACNetworks(BehaviorSpec(((2,),), "continuous", (1,)), ["extrinsic"], settings.network).recurrent
    for bad, word in (({"memory_size": 10}, "memory_size"), ({"sequence_length": 0}, "sequence_length")):
        with pytest.raises(TrainerConfigError) as e:
            load_trainer_config({"default": {**RECURRENT, **bad}})
        assert "\n" not in str(e.value) and word in str(e.value)


MIRRORED = """
from kerasrl.exception import TrainerError
from kerasrl.sac.learner import SACLearner
from kerasrl.settings import TrainerSettings
from kerasrl.spec import BehaviorSpec
from test_sac_recurrent import RECURRENT, sequence_batch

for discrete in (False, True):
    spec = BehaviorSpec(((2,),), "discrete" if discrete else "continuous", (3,) if discrete else (2,))
    # RECURRENT has no XLA on one device either, as the replicas run (XLA's rounding differs).
    settings = TrainerSettings.from_dict({**RECURRENT, "sequence_length": 3, "batch_size": 12})
    learners = []
    for mirrored in (False, True):
        distribute.set_strategy(strategy if mirrored else None)
        with (strategy.scope() if mirrored else tf.distribute.get_strategy().scope()):
            learners.append(SACLearner.for_behavior(spec, settings, seed=3, max_steps=100))
    assert learners[1].replicas == N
    batch = sequence_batch(np.random.default_rng(0), 3, 4, 3, discrete, 50.0)
    batch[Field.MASKS][:, :2] = 1.0  # the first replica's sequences have no padding, the second's have some
    for lr in (1e-3, 3e-4):
        one, two = (learner.update(batch, 3, lr) for learner in learners)
        for k in one:
            assert abs(one[k] - two[k]) < 1e-5 * max(1.0, abs(one[k])), (discrete, k, one[k], two[k])
    for a, b in zip(learners[0].networks.weights, learners[1].networks.weights):
        # six Adam steps: float32 sums in another order move a near-zero gradient's step by ~1e-5 relative
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{discrete} {a.path}")
distribute.set_strategy(strategy)
try:
    with strategy.scope():
        SACLearner.for_behavior(spec, TrainerSettings.from_dict({**RECURRENT, "sequence_length": 4, "batch_size": 12}),
                                seed=3, max_steps=100)
except TrainerError as e:
    assert "sequences of 4 rows (3)" in str(e) and "\\n" not in str(e), e
else:
    raise AssertionError("sequences the replicas cannot share were accepted")
print("RECURRENT_OK")
"""


@pytest.mark.slow
def test_mirrored_recurrent_update_matches_single_device():
    from test_distribute import run_script

    run_script("from kerasrl.fields import Field\n" + MIRRORED, 2, "RECURRENT_OK")


# -- losses -------------------------------------------------------------------------------
def test_masked_means_ignore_padded_rows():
    x = tf.constant([[1.0, 3.0], [5.0, 7.0], [100.0, -100.0]])
    weights = tf.constant(loss.step_weights(np.array([[1.0, 1.0, 0.0]]))[0])
    assert float(loss.masked_mean(x, weights)) == pytest.approx(4.0)
    np.testing.assert_allclose(loss.row_mean(x, weights).numpy(), [3.0, 5.0])
    assert float(loss.critic_loss([x[:, :1], x[:, 1:]], tf.zeros([3, 1]), weights)) == pytest.approx(
        0.5 * (1 + 25) / 2 + 0.5 * (9 + 49) / 2)
    assert float(loss.masked_mean(x)) == pytest.approx(float(tf.reduce_mean(x)))


# -- replay sequences -----------------------------------------------------------------------
def trajectory(agent, episode, start, n, done):
    """Rows whose vector_obs encode (agent, episode, step) and whose memory is its step."""
    steps = np.arange(start, start + n)
    obs = np.stack([np.full(n, agent), np.full(n, episode), steps], axis=-1).astype(np.float32)
    finished = np.zeros(n, bool)
    finished[-1] = done
    return {Field.VECTOR_OBS: obs, Field.MEMORY: np.repeat(steps[:, None], 2, axis=1).astype(np.float32),
            Field.DONE: finished, Field.ACTIONS: steps[:, None].astype(np.float32)}


def interleaved_replay(capacity=200):
    """Two agents' episodes cut into trajectories of 3 steps, added interleaved."""
    replay = ReplayBuffer(capacity, sequences=True)
    for start in range(0, 9, 3):
        for agent, length in ((0, 7), (1, 9)):
            n = min(3, length - start)
            if n > 0:
                replay.add(trajectory(agent, 0, start, n, start + n == length), agent=agent)
    replay.add(trajectory(0, 1, 0, 3, False), agent=0)  # agent 0's next episode
    return replay


def check_sequences(batch, burn_in):
    obs, masks = batch[Field.VECTOR_OBS], batch[Field.MASKS]
    first = obs[..., 0, :]
    for t in range(obs.shape[-2]):
        real = masks[..., t] > 0
        np.testing.assert_array_equal(obs[..., t, :2][real], first[..., :2][real])  # one agent, one episode
        np.testing.assert_array_equal(obs[..., t, 2][real], first[..., 2][real] + t)  # consecutive steps
    np.testing.assert_array_equal(batch[Field.MEMORY][..., 0], first[..., 2])  # the stored memory at the start
    before = batch[BURN_IN + Field.VECTOR_OBS]
    for t in range(burn_in):
        real = batch[BURN_IN_MASKS][..., t] > 0
        np.testing.assert_array_equal(before[..., t, :2][real], first[..., :2][real])
        np.testing.assert_array_equal(before[..., t, 2][real], first[..., 2][real] - burn_in + t)
        np.testing.assert_array_equal(real, first[..., 2] - burn_in + t >= 0)  # masked before the episode's start


def test_sequences_follow_one_agents_episode_across_its_trajectories():
    replay = interleaved_replay()
    batch = replay.sample_sequences(np.random.default_rng(0), (50, 8), 5, burn_in=4, first_only=(Field.MEMORY,),
                                    burn_in_fields=(Field.VECTOR_OBS,))
    assert batch[Field.VECTOR_OBS].shape == (50, 8, 5, 3) and batch[Field.MEMORY].shape == (50, 8, 2)
    check_sequences(batch, 4)
    obs, masks = batch[Field.VECTOR_OBS], batch[Field.MASKS]
    length = np.where(obs[..., 0, 0] == 0, np.where(obs[..., 0, 1] == 0, 7, 3), 9)  # each episode's steps
    np.testing.assert_array_equal(masks.sum(-1), np.minimum(5, length - obs[..., 0, 2]))  # cut at the episode's end
    assert (masks[..., 1:].sum() > 0) and set(obs[..., 0, 2].ravel().astype(int)) == set(range(9))


def test_sequences_survive_saving_and_overwritten_links_are_void(tmp_path):
    replay = interleaved_replay()
    path = str(tmp_path / "replay.h5")
    replay.save(path)
    small = ReplayBuffer.load(path, capacity=10)  # the newest 10 rows: some episodes lose their start
    assert small.sequences
    batch = small.sample_sequences(np.random.default_rng(1), (40, 8), 4, burn_in=4, first_only=(Field.MEMORY,),
                                   burn_in_fields=(Field.VECTOR_OBS,))
    check_sequences_held = batch[BURN_IN_MASKS].sum() < batch[BURN_IN_MASKS].size
    assert check_sequences_held
    obs = batch[Field.VECTOR_OBS]
    for t in range(4):
        real = batch[Field.MASKS][..., t] > 0
        np.testing.assert_array_equal(obs[..., t, 2][real], obs[..., 0, 2][real] + t)
    with pytest.raises(BufferException, match="sequences=True"):
        ReplayBuffer(10).sample_sequences(np.random.default_rng(0), (1, 1), 2)


# -- networks and acting ------------------------------------------------------------------
@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_acting_stores_the_memory_in_use_and_zeros_it_after_done(discrete):
    nets = networks(discrete).networks
    policy = SACPolicy(nets, seed=0)
    assert policy.experience_fields == [Field.ACTIONS, Field.MEMORY]
    rng = np.random.default_rng(0)

    def step(done):
        obs = [rng.standard_normal((3, 2)).astype(np.float32)]
        result = StepResult(agent_ids=np.array([4, 9, 2]), observations=obs, rewards=np.zeros(3, np.float32),
                            terminated=np.array(done), truncated=np.zeros(3, bool),
                            action_mask=np.ones((3, 3), np.float32) if discrete else None)
        return obs[0], policy.evaluate(result)

    _, first = step([False, False, False])
    np.testing.assert_array_equal(first[Field.MEMORY], 0.0)  # every episode starts from zeros
    obs, second = step([False, True, False])
    np.testing.assert_array_equal(second[Field.MEMORY][[0, 2]], first[Field.MEMORY_OUT][[0, 2]])
    np.testing.assert_array_equal(second[Field.MEMORY][1], 0.0)  # its episode ended at this step
    _, third = step([False, False, False])
    np.testing.assert_array_equal(third[Field.MEMORY][1], 0.0)  # and the next one starts from zeros
    # the memory carried is the actor's own, step after step
    inputs = {Field.VECTOR_OBS: tf.constant(obs), Field.MEMORY: tf.constant(second[Field.MEMORY])}
    if discrete:
        inputs[Field.ACTION_MASK] = tf.ones([3, 3])
    np.testing.assert_allclose(nets.act_with_memory(inputs, None)[2].numpy(), second[Field.MEMORY_OUT], atol=1e-6)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_a_sequence_from_its_stored_memory_gives_what_acting_gave(discrete):
    learner = networks(discrete, sequence_length=3)
    nets = learner.networks
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((4, 2, 2)).astype(np.float32)  # 4 steps of 2 agents
    memory = np.zeros((2, 16), np.float32)
    acted, memories = [], []
    mask = {Field.ACTION_MASK: tf.ones([2, 3])} if discrete else {}
    for t in range(4):
        memories.append(memory)
        action, probs, memory = nets.act_with_memory({Field.VECTOR_OBS: tf.constant(obs[t]),
                                                      Field.MEMORY: tf.constant(memory), **mask}, None)
        acted.append(probs.numpy())
        memory = memory.numpy()
    # a sequence of the last 3 steps (the last one padding) from the memory stored at its first step
    batch = {Field.VECTOR_OBS: obs[1:].transpose(1, 0, 2), Field.NEXT_VECTOR_OBS: obs[[2, 3, 3]].transpose(1, 0, 2),
             Field.MEMORY: memories[1], Field.MASKS: np.array([[1, 1, 1], [1, 1, 0]], np.float32)}
    steps, nxt = nets.sequences({k: tf.constant(v) for k, v in batch.items()})
    outs = nets.actor_outputs(steps)
    want = np.stack(acted[1:], axis=1).reshape(6, -1)
    got = tf.nn.softmax(outs[0]).numpy() if discrete else np.tanh(outs[0].numpy())
    np.testing.assert_allclose(got, want, atol=1e-5)
    following = nets.actor_outputs(nxt)[0].numpy().reshape(2, 3, -1)
    np.testing.assert_allclose(following[:, :2], outs[0].numpy().reshape(2, 3, -1)[:, 1:], atol=1e-5)
    q = nets.q_values(nets.critics, steps, None if discrete else tf.zeros([6, 2]))
    assert q[0].shape == ((6, 1, 3) if discrete else (6, 1))


def sequence_batch(rng, k, n, length, discrete, pad_value):
    """``k`` mini-batches of ``n`` sequences of ``length`` steps, the last step and the first
    burn-in step padding, holding ``pad_value``."""
    b = {Field.VECTOR_OBS: rng.standard_normal((k, n, length, 2)),
         Field.NEXT_VECTOR_OBS: rng.standard_normal((k, n, length, 2)),
         "rewards": rng.standard_normal((k, n, length, 1)), Field.TERMINATED: np.zeros((k, n, length)),
         Field.MEMORY: rng.standard_normal((k, n, 16)), Field.MASKS: np.ones((k, n, length)),
         BURN_IN + Field.VECTOR_OBS: rng.standard_normal((k, n, length, 2)), BURN_IN_MASKS: np.ones((k, n, length))}
    if discrete:
        b[Field.ACTIONS] = rng.integers(0, 3, (k, n, length, 1))
        b[Field.ACTION_MASK] = b[Field.NEXT_ACTION_MASK] = np.ones((k, n, length, 3))
    else:
        b[Field.ACTIONS] = rng.uniform(-1, 1, (k, n, length, 2))
        b["noise"], b["next_noise"] = rng.standard_normal((2, k, n, length, 2))
    b[Field.MASKS][..., -1] = 0
    b[BURN_IN_MASKS][..., 0] = 0
    for key in (Field.VECTOR_OBS, Field.NEXT_VECTOR_OBS, "rewards", Field.TERMINATED, "noise"):
        if key in b:
            b[key][:, :, -1] = pad_value
    b[BURN_IN + Field.VECTOR_OBS][:, :, 0] = pad_value
    return {key: np.asarray(v, np.int32 if key == Field.ACTIONS and discrete else np.float32) for key, v in b.items()}


@pytest.mark.slow
def test_a_gradient_step_ignores_padded_steps():
    learner = networks(sequence_length=3, section=RECURRENT_XLA)
    assert learner.use_xla
    nets = learner.networks
    weights = [v.numpy() for v in nets.weights]
    first = learner.update(sequence_batch(np.random.default_rng(0), 1, 4, 3, False, 0.0), 1, 1e-3)
    after = [v.numpy() for v in nets.weights]
    for v, w in zip(nets.weights, weights):
        v.assign(w)
    for opt in learner.optimizers.values():
        for var in opt.variables:
            var.assign(tf.zeros_like(var))
    second = learner.update(sequence_batch(np.random.default_rng(0), 1, 4, 3, False, 50.0), 1, 1e-3)
    assert first == pytest.approx(second, rel=1e-5)
    for x, y in zip(after, [v.numpy() for v in nets.weights]):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


# -- training, checkpoints, export ----------------------------------------------------------
@pytest.mark.slow
def test_training_stores_memories_and_resumes_with_them(tmp_path):
    section = {**RECURRENT, "max_steps": 80, "buffer_init_steps": 30, "save_replay_buffer": True}
    first = run(CueEnvironment(False, seed=1), tmp_path, section)
    assert first.update_steps > 40 and np.isfinite(first.last_update_metrics["critic_loss"])
    held = first.replay.chronological()
    assert held[Field.MEMORY].shape[1] == 16 and np.abs(held[Field.MEMORY]).sum() > 0
    starts = held[Field.VECTOR_OBS][:, 1] == 0  # each episode's first step (t = 0)
    np.testing.assert_array_equal(held[Field.MEMORY][starts], 0.0)
    section["max_steps"] = 100
    second = run(CueEnvironment(False, seed=1), tmp_path, section, load=True)
    assert second.step > first.step and second.update_steps > first.update_steps
    resumed = second.replay.chronological()
    np.testing.assert_array_equal(resumed[Field.MEMORY][: len(held[Field.MEMORY])], held[Field.MEMORY])
    feed_forward = ReplayBuffer(100)
    feed_forward.add({Field.VECTOR_OBS: np.zeros((3, 2), np.float32)})
    feed_forward.save(str(tmp_path / "ff.h5"))
    with pytest.raises(UnityTrainerException) as e:
        second._load_replay(str(tmp_path / "ff.h5"))
    assert "without memories" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous savedmodel", "discrete onnx"])
def test_exported_recurrent_actor_carries_its_memory(discrete, tmp_path):
    from kerasrl.export import export_policy, onnx_available

    nets = networks(discrete).networks
    paths = export_policy(nets, str(tmp_path), "Agent", onnx=discrete and onnx_available())
    rng = np.random.default_rng(0)
    feeds = {Field.VECTOR_OBS: rng.standard_normal((5, 2)).astype(np.float32),
             Field.MEMORY: rng.standard_normal((5, 16)).astype(np.float32)}
    if discrete:
        feeds[Field.ACTION_MASK] = np.ones((5, 3), np.float32)
    action, _, memory_out = nets.act_with_memory({k: tf.constant(v) for k, v in feeds.items()}, None)
    if discrete and "onnx" in paths:
        ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (optional extra kerasrl[onnx])")
        session = ort.InferenceSession(paths["onnx"])
        names = [o.name for o in session.get_outputs()]
        out = dict(zip(names, session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})))
    else:
        loaded = tf.saved_model.load(paths["savedmodel"])
        out = {k: v.numpy() for k, v in loaded.signatures["deterministic"](**feeds).items()}
    np.testing.assert_allclose(out["action"], action.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["memory_out"], memory_out.numpy(), rtol=1e-5, atol=1e-6)
    assert '"memory_size": 16' in open(paths["policy_json"]).read()


@pytest.mark.slow
@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_recurrent_sac_learns_a_cue_it_sees_only_at_the_first_step(discrete, tmp_path):
    env = CueEnvironment(discrete, seed=3)
    run(env, tmp_path, {**RECURRENT_XLA, "max_steps": 1500, "buffer_init_steps": 150}, seed=3)
    # without memory the expected reward is 0
    assert np.mean(env.returns[-50:]) > 0.8, env.returns[-50:]


def test_sac_fit_trains_a_recurrent_discrete_agent(tmp_path):
    import kerasrl

    agent = kerasrl.SAC(CueEnvironment(True, seed=0), config={"default": RECURRENT}, seed=0,
                        run_dir=str(tmp_path / "run"), buffer_init_steps=20)
    history = agent.fit(60, verbose=0)
    assert agent.trainer is not None and agent.trainer.networks.recurrent and history.history["critic_loss"]
    held = agent.trainer.replay.chronological()
    assert held[Field.MEMORY].shape[1] == 16 and np.abs(held[Field.MEMORY]).sum() > 0
    actions = agent.predict(np.zeros((3, 2), np.float32))  # from zero memory
    assert actions.shape == (3, 1) and set(actions.ravel()) <= {0, 1}
    agent.close()


def cue_expert(discrete=False):
    """Acts the goal at every step: the cue while it shows, then the one remembered (discrete:
    action 1 for +1, 0 for −1)."""
    remembered = {"goal": 1.0}

    def act(obs):
        if obs[0, 0] != 0:
            remembered["goal"] = float(obs[0, 0])
        if discrete:
            return np.full((len(obs), 1), int(remembered["goal"] > 0), np.int32)
        return np.full((len(obs), 1), remembered["goal"], np.float32)
    return act


def cue_networks(discrete=False):
    spec = CueEnvironment(discrete, seed=0).behavior_specs["Cue"]
    return SACLearner.for_behavior(spec, TrainerSettings.from_dict(RECURRENT), seed=0, max_steps=100).networks


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_recurrent_bc_learns_what_only_memory_can_tell(tmp_path, discrete):
    from kerasrl import recording
    from kerasrl.sac.bc import LOSS_STAT, sac_pretraining
    from kerasrl.settings import BehavioralCloningSettings

    demo = str(tmp_path / "cue.demo")
    _, rows = recording.record(CueEnvironment(discrete, seed=3), cue_expert(discrete), 240, demo)
    nets = cue_networks(discrete)
    bc = sac_pretraining(nets, BehavioralCloningSettings(demo_path=demo, strength=1.0, steps=0, num_epoch=4),
                         3e-3, 32, seed=0)
    # Whole sequences of 4 steps, 8 of them to a mini-batch.
    obs, masks = bc.data[Field.VECTOR_OBS].numpy().reshape(-1, 4, 2), bc.data[Field.MASKS].numpy().reshape(-1, 4)
    assert bc.learner.sequence_length == 4 and bc.n_sequences == 8
    assert masks.sum() == len(rows[Field.ACTIONS]) < masks.size  # episodes padded
    losses = [bc.update(step=0)[LOSS_STAT] for _ in range(25)]
    assert losses[-1] < 0.25 * losses[0], losses
    # The actor run over every episode from zero memory: its deterministic action at the steps
    # where the cue no longer shows is the goal's.
    memory = np.zeros((len(obs), nets.memory_size), np.float32)
    signs = []
    for t in range(obs.shape[1]):
        inputs = {Field.VECTOR_OBS: obs[:, t], Field.MEMORY: memory}
        if discrete:
            inputs[Field.ACTION_MASK] = np.ones((len(obs), 2), np.float32)
        action, _, memory = nets.act_with_memory(inputs, None)
        action = np.asarray(action)[:, 0]
        signs.append(2.0 * action - 1.0 if discrete else np.sign(action))
    goals = obs[:, 0, 0]
    blind = (masks > 0) & (obs[:, :, 0] == 0)
    assert blind.sum() > 100
    assert (np.stack(signs, 1)[blind] == np.broadcast_to(goals[:, None], blind.shape)[blind]).mean() > 0.95


def test_recurrent_bc_loss_is_the_actor_stepped_through_each_sequence_over_its_real_steps(tmp_path):
    from kerasrl import recording
    from kerasrl.sac.bc import sac_pretraining
    from kerasrl.settings import BehavioralCloningSettings

    demo = str(tmp_path / "cue.demo")
    recording.record(CueEnvironment(False, seed=3), cue_expert(), 60, demo)
    nets = cue_networks()
    bc = sac_pretraining(nets, BehavioralCloningSettings(demo_path=demo, strength=1.0, steps=0), 3e-3, 32, seed=0)
    rows = bc.learner.plan(bc.n_rows, bc.batch_size, bc.num_epoch, bc.max_batches, seed=0)[0]
    flat = {k: v.numpy()[rows] for k, v in bc.data.items()}
    flat_noise = bc.learner.noise(flat, tf.constant(0), tf.constant(0)).numpy()
    assert flat_noise.shape == (len(rows), nets.action_size)
    length = bc.learner.sequence_length
    batch = {k: v.reshape(-1, length, *v.shape[1:]) for k, v in flat.items()}
    noise = flat_noise.reshape(-1, length, nets.action_size)
    masks = batch[Field.MASKS]
    assert (masks == 0).any() and (masks > 0).any()
    memory = np.zeros((len(masks), nets.memory_size), np.float32)
    squared = []
    for t in range(masks.shape[1]):
        inputs = {Field.VECTOR_OBS: batch[Field.VECTOR_OBS][:, t], Field.MEMORY: memory}
        action, _, memory = nets.act_with_memory(inputs, noise[:, t])
        squared.append(np.mean((np.asarray(action) - batch[Field.ACTIONS][:, t]) ** 2, axis=-1))
    expected = (np.stack(squared, 1) * masks).sum() / masks.sum()
    assert float(bc.learner.loss(flat, flat_noise)) == pytest.approx(expected, rel=1e-5)
    padded = flat[Field.MASKS] == 0  # what a padded step holds changes nothing
    changed = dict(flat, **{Field.VECTOR_OBS: np.where(padded[..., None], 100.0, flat[Field.VECTOR_OBS]),
                            Field.ACTIONS: np.where(padded[..., None], -1.0, flat[Field.ACTIONS])})
    assert float(bc.learner.loss(changed, flat_noise)) == pytest.approx(expected, rel=1e-5)


def test_a_recurrent_sac_run_with_pretraining_clones_between_updates(tmp_path):
    from kerasrl import recording
    from kerasrl.sac.bc import LOSS_STAT

    demo = str(tmp_path / "cue.demo")
    recording.record(CueEnvironment(False, seed=3), cue_expert(), 60, demo)
    section = {**RECURRENT, "max_steps": 60, "buffer_init_steps": 20,
               "pretraining": {"demo_path": demo, "strength": 1.0, "steps": 0}}
    trainer = run(CueEnvironment(False, seed=1), tmp_path, section)
    assert trainer.bc_module is not None and int(trainer.bc_module.optimizer.iterations.numpy()) > 0
    losses = [row[LOSS_STAT] for row in trainer.summary_log if LOSS_STAT in row] + list(trainer.stats[LOSS_STAT])
    assert losses and all(np.isfinite(losses)) and max(losses) > 0


@pytest.mark.slow
def test_kerasrl_learn_trains_resumes_and_exports_a_recurrent_sac(tmp_path, capsys):
    import json

    from kerasrl.cli import main

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("default:\n  trainer: sac\n  jit_compile: false\n  use_recurrent: true\n  memory_size: 16\n"
                   "  sequence_length: 4\n  batch_size: 16\n  hidden_units: 16\n  num_layers: 1\n  time_horizon: 8\n"
                   "  buffer_init_steps: 20\n  save_replay_buffer: true\n  summary_freq: 1000\n")
    base = [str(cfg), "--env", "Simple1DContinuous", "--seed", "0", "--results-dir", str(tmp_path), "--run-id", "r"]
    assert main(base + ["--steps", "60"]) == 0
    assert main(base + ["--steps", "90", "--resume"]) == 0
    assert "Resumed Simple1D at step 61" in capsys.readouterr().out
    models = tmp_path / "r" / "models" / "Simple1D"
    assert (models / "model-61.replay.h5").exists() and (models / "model-91.replay.h5").exists()
    described = json.loads((models / "Simple1D.policy.json").read_text())
    assert described["memory_size"] == 16 and "memory_out" in described["outputs"]
