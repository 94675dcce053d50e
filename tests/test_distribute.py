"""Learners under MirroredStrategy on logical CPUs equal one device on the same global batch.

Each check runs in a subprocess: logical devices must be configured before TensorFlow starts
(``kerasrl.distribute.get_strategy(cpu_replicas=N)`` at the entry point), and the rest of the
suite runs on the plain CPU. Covered: the train_step (with gradient clipping), the fused update
for feed-forward, LSTM and visual learners on 2 replicas (feed-forward and LSTM on 4) and the
per-mini-batch one for the LSTM on 2 (weights within 1e-5 of one device, replicas bit-identical,
metrics equal; 4 replicas without checkpoints, slow-marked), a batch_size the replicas cannot share,
normalizer statistics, checkpoints across strategies, the strategy errors, and ML-Agents 0.9's
Simple1D acceptance test under 2 replicas. ``SIGNALS`` (run after ``UPDATES`` in the same
process) does the same for curiosity (discrete vector, continuous visual), GAIL (with actions),
VAIL and BC (discrete LSTM, continuous with noise; on 4 replicas curiosity, VAIL and the LSTM BC)
— one update, weights within 1e-5, replicas identical, rewards equal, non-divisible mini-batches
refused, signal and BC optimizer checkpoints across strategies — and ``SIGNALS_END_TO_END`` runs
PPO with curiosity, GAIL (reading the policy's normalizer) and BC pretraining under 2 replicas
end to end.
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

PRELUDE = """
import os, sys, tempfile
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
sys.path.insert(0, os.path.join(sys.argv[1], "tests"))
from kerasrl import distribute
N = int(sys.argv[2])
strategy = distribute.get_strategy(cpu_replicas=N)
assert strategy.num_replicas_in_sync == N
"""

TRAIN_STEP = """
from test_learner import make_batch
from kerasrl.envs.base import BehaviorSpec
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.learner import PPOLearner
from kerasrl.settings import NetworkSettings, PPOSettings

def build(kind, max_grad_norm=None):
    spec = BehaviorSpec(((4,),), kind, (3, 2) if kind == "discrete" else (2,))
    model = ActorCritic(spec, ["extrinsic", "curiosity"], NetworkSettings(hidden_units=16), seed=3)
    return PPOLearner(model, PPOSettings(learning_rate=1e-2, epsilon=0.2, beta=1e-2, max_grad_norm=max_grad_norm,
                                         jit_compile=False), max_steps=100)

for kind, max_grad_norm in (("discrete", None), ("continuous", 0.05)):
    single = build(kind, max_grad_norm)
    batch = make_batch(single, 64, seed=5)
    batch["masks"][::7] = 0.0  # padding rows must be left out of the global mean too
    one = single.train_minibatch(batch)
    with strategy.scope():
        mirrored = build(kind, max_grad_norm)
    dataset = tf.data.Dataset.from_tensor_slices({k: tf.constant(v) for k, v in batch.items()}).batch(64)
    dist = next(iter(strategy.experimental_distribute_dataset(dataset)))

    @tf.function
    def step(d):
        per_replica = strategy.run(mirrored.train_step, args=(d,))
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in per_replica.items()}

    two = {k: float(v) for k, v in step(dist).items()}
    for k in one:
        assert abs(one[k] - two[k]) < 1e-4 * max(1.0, abs(one[k])), (kind, max_grad_norm, k, one[k], two[k])
    for a, b in zip(single.actor_critic.trainable_weights, mirrored.actor_critic.trainable_weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=f"{kind} {max_grad_norm}")
    moved = [np.abs(a.numpy() - b.numpy()).max() for a, b in
             zip(single.actor_critic.trainable_weights, build(kind).actor_critic.trainable_weights)]
    assert max(moved) > 1e-4
print("TRAIN_STEP_OK")
"""

UPDATES = """
from test_learner import make_batch
from kerasrl.envs.base import BehaviorSpec
from kerasrl.exception import TrainerError
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.ppo.learner import PPOLearner
from kerasrl.settings import NetworkSettings, PPOSettings
from kerasrl.trainers.checkpoint import CheckpointSaver

CASES = {
    "feed-forward": (BehaviorSpec(((4,),), "discrete", (3, 2)), dict(normalize=True), None),
    "feed-forward-clipped": (BehaviorSpec(((4,),), "continuous", (2,)), {}, 0.5),
    "lstm": (BehaviorSpec(((4,),), "discrete", (3,)), dict(use_recurrent=True, memory_size=8, sequence_length=4), None),
    "visual": (BehaviorSpec(((20, 20, 3), (2,)), "continuous", (2,)), dict(vis_encode_type="simple"), None),
}

def build(case, batch_size=32):
    spec, network, max_grad_norm = CASES[case]
    model = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=16, **network), seed=3)
    hp = PPOSettings(learning_rate=3e-3, beta=1e-2, batch_size=batch_size, buffer_size=128,
                     max_grad_norm=max_grad_norm, jit_compile=False)  # XLA: tests/test_learner.py
    return PPOLearner(model, hp, max_steps=1000)

def replica_values(v):
    return [c.numpy() for c in v.value.values]

for case in CASES if N == 2 else ("feed-forward", "lstm"):  # 4 replicas: the splits, more cheaply
    single = build(case)
    batch = make_batch(single, 96, seed=11)
    batch["masks"][::5] = 0.0
    if "memory" in batch:
        batch["memory"] = batch["memory"] * 0.1
    if case == "feed-forward":
        single.update_normalization(batch["vector_obs"])
    m_one = single.fused_update(batch, num_epoch=2, batch_size=32, seed=7)
    # Both drivers share the gradient step: the per-mini-batch one is checked on the LSTM (whole
    # sequences and their memories split over the replicas).
    for driver in ("fused_update", "minibatch_update") if N == 2 and case == "lstm" else ("fused_update",):
        with strategy.scope():
            mirrored = build(case)
        if case == "feed-forward":
            mirrored.update_normalization(batch["vector_obs"])
            for v in mirrored.actor_critic.normalizer.non_trainable_variables:
                vals = replica_values(v)
                assert all(np.array_equal(vals[0], x) for x in vals[1:]), (case, v.path)
        m_n = getattr(mirrored, driver)(batch, num_epoch=2, batch_size=32, seed=7)
        assert int(mirrored.optimizer.iterations.numpy()) == 2 * 3
        for k in m_one:
            assert abs(m_one[k] - m_n[k]) < 1e-5 * max(1.0, abs(m_one[k])), (case, driver, k, m_one[k], m_n[k])
        for a, b in zip(single.actor_critic.weights, mirrored.actor_critic.weights):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-5, err_msg=f"{case} {driver} {a.path}")
            vals = replica_values(b)
            assert len(vals) == N and all(np.array_equal(vals[0], x) for x in vals[1:]), (case, driver, b.path)
        if driver == "fused_update":
            for w, v in zip(mirrored.latest_weights, mirrored.actor_critic.trainable_variables):
                np.testing.assert_array_equal(w, v.numpy())
    assert max(np.abs(a.numpy() - b.numpy()).max() for a, b in
               zip(single.actor_critic.trainable_weights, build(case).actor_critic.trainable_weights)) > 1e-4

    if N != 2:
        continue
    # Checkpoints: written under the strategy, restored on one device, and the other way round.
    folder = tempfile.mkdtemp()
    CheckpointSaver(folder, 1, model=mirrored.actor_critic, optimizer=mirrored.optimizer).save(5, 1)
    fresh = build(case)
    CheckpointSaver(folder, 1, model=fresh.actor_critic, optimizer=fresh.optimizer).restore()
    for a, b in zip(fresh.actor_critic.weights, mirrored.actor_critic.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    folder = tempfile.mkdtemp()
    CheckpointSaver(folder, 1, model=single.actor_critic, optimizer=single.optimizer).save(5, 1)
    with strategy.scope():
        fresh = build(case)
    CheckpointSaver(folder, 1, model=fresh.actor_critic, optimizer=fresh.optimizer).restore()
    for a, b in zip(fresh.actor_critic.weights, single.actor_critic.weights):
        vals = replica_values(a)
        assert all(np.array_equal(x, b.numpy()) for x in vals), (case, a.path)
    assert int(fresh.optimizer.iterations.numpy()) == 6

# batch_size is the global mini-batch: it must split into whole sequences per replica.
for case, bad in (("feed-forward", 8 * N + N // 2), ("lstm", 4 * (N + 1))):
    with strategy.scope():
        try:
            build(case, batch_size=bad)
        except TrainerError as e:
            assert f"batch_size {bad} cannot be split over {N} replicas" in str(e), e
        else:
            raise AssertionError(f"batch_size {bad} accepted on {N} replicas")
print("UPDATES_OK")
"""

SIGNALS = """
from test_reward_signals import as_buffer, make_rows, make_signal, make_spec
from kerasrl.bc.actor_critic import ActorCriticImitator
from kerasrl.bc.learner import BCLearner, imitation_batch
from kerasrl.buffer import AgentBuffer
from kerasrl.exception import TrainerError
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.settings import NetworkSettings
from kerasrl.trainers.checkpoint import CheckpointSaver

def built(mirrored, make):
    # Learners take kerasrl.distribute.learner_strategy() at construction: one device, or the strategy.
    distribute.set_strategy(strategy if mirrored else None)
    try:
        if not mirrored:
            return make()
        with strategy.scope():
            return make()
    finally:
        distribute.set_strategy(strategy)

def same_weights(single_vars, mirrored_vars, what):
    for a, b in zip(single_vars, mirrored_vars):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-5, err_msg=f"{what} {a.path}")
        vals = [c.numpy() for c in b.value.values]
        assert len(vals) == N and all(np.array_equal(vals[0], x) for x in vals[1:]), (what, b.path)

def same_metrics(one, two, what):
    assert one.keys() == two.keys() and one, (what, one, two)
    for k in one:
        assert abs(one[k] - two[k]) < 1e-5 * max(1.0, abs(one[k])), (what, k, one[k], two[k])

net = NetworkSettings(hidden_units=16)
SIGNAL_CASES = {
    "curiosity discrete vector": ("curiosity", make_spec(True, False), {}),
    "curiosity continuous visual": ("curiosity", make_spec(False, True), {}),
    "gail discrete with actions": ("gail", make_spec(True, False), dict(use_actions=True)),
    "vail continuous": ("gail_vail", make_spec(False, False), {}),
}
for case, (kind, spec, kw) in SIGNAL_CASES.items() if N == 2 else [
        (c, SIGNAL_CASES[c]) for c in ("curiosity discrete vector", "vail continuous")]:
    rng = np.random.default_rng(4)
    rows = make_rows(spec, 68, rng, padding=4)
    single, mirrored = (built(m, lambda: make_signal(kind, spec, net, seed=3, **kw)) for m in (False, True))
    assert mirrored.replicas == N and not mirrored.jit_compile
    same_metrics(single.update(as_buffer(rows), n_sequences=16), mirrored.update(as_buffer(rows), n_sequences=16), case)
    assert int(mirrored.optimizer.iterations.numpy()) == int(single.optimizer.iterations.numpy()) > 0
    same_weights(single.model.weights, mirrored.model.weights, case)
    batch = {k: rows[k] for k in single.batch_fields}  # rewards: one device, reading the mirrored weights
    np.testing.assert_allclose(single.evaluate_batch(batch).unscaled_reward,
                               mirrored.evaluate_batch(batch).unscaled_reward, rtol=1e-5, atol=1e-6)
    try:
        mirrored.update(as_buffer(rows), n_sequences=8 * N + 1)
    except TrainerError as e:
        assert f"cannot be split over {N} replicas" in str(e) and "\\n" not in str(e), e
    else:
        raise AssertionError(f"{case}: {8 * N + 1} rows accepted on {N} replicas")
    if N == 2 and kind == "gail_vail":  # signal state written under the strategy, read on one device
        folder = tempfile.mkdtemp()
        CheckpointSaver(folder, 1, signal=mirrored.checkpoint_state()).save(5, 1)
        fresh = built(False, lambda: make_signal(kind, spec, net, seed=9, **kw))
        CheckpointSaver(folder, 1, signal=fresh.checkpoint_state()).restore()
        same_weights(fresh.model.weights, mirrored.model.weights, "restored " + case)
        assert fresh.update_count == 1 and int(fresh.optimizer.iterations.numpy()) > 0

def demo_rows(spec, n):
    rows = make_rows(spec, n, np.random.default_rng(6))
    rows[Field.EPISODE_ID] = np.repeat(np.arange(n // 10 + 1), 10)[:n]
    rows[Field.ACTION_MASK] = np.ones((n, sum(spec.discrete_branches or (1,))), np.float32)
    buffer = AgentBuffer()
    buffer.extend_fields(rows)
    return buffer

BC_CASES = {
    "bc discrete lstm": (make_spec(True, False), dict(use_recurrent=True, memory_size=8, sequence_length=4)),
    "bc continuous noise": (make_spec(False, False), {}),
}
for case, (spec, network) in BC_CASES.items() if N == 2 else [("bc discrete lstm", BC_CASES["bc discrete lstm"])]:
    def make():
        model = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=16, **network), seed=3)
        return BCLearner(ActorCriticImitator(model, sample_noise=True), 3e-3)
    single, mirrored = built(False, make), built(True, make)
    data = imitation_batch(spec, demo_rows(spec, 90), single.imitator)
    n_rows = len(data[Field.MASKS])
    plan = single.plan(n_rows, batch_size=16, num_epoch=2, max_batches=None, seed=5)
    one, two = single.update(data, plan, 3e-3, 5), mirrored.update(data, plan, 3e-3, 5)
    same_metrics({"loss": one}, {"loss": two}, case)
    assert int(mirrored.optimizer.iterations.numpy()) == len(plan)
    same_weights(single.imitator.model.weights, mirrored.imitator.model.weights, case)
    if N == 2 and "lstm" in case:  # the BC optimizer written on one device, read under the strategy
        folder = tempfile.mkdtemp()
        CheckpointSaver(folder, 1, model=single.imitator.model, bc_optimizer=single.optimizer).save(5, 1)
        fresh = built(True, make)
        CheckpointSaver(folder, 1, model=fresh.imitator.model, bc_optimizer=fresh.optimizer).restore()
        same_weights(single.optimizer.variables, fresh.optimizer.variables, "restored " + case)
    try:
        mirrored.check_batch_size(4 * (N + 1) if "lstm" in case else 8 * N + 1, "pretraining: ")
    except TrainerError as e:
        assert e.args[0].startswith("pretraining: batch_size") and f"over {N} replicas" in str(e), e
    else:
        raise AssertionError(f"{case}: a batch_size accepted that {N} replicas cannot share")

print("SIGNALS_OK")
"""

SIGNALS_END_TO_END = """
# The PPO trainer with curiosity, GAIL and BC pretraining under the strategy, end to end; a
# batch_size that the replicas cannot share is refused naming the brain and the signal.
import pathlib
from test_reward_signals import record_scripted_expert, simple_config
from test_simple_rl import run_training
from kerasrl.envs.simple import Simple1DEnvironment
from kerasrl.exception import UnityTrainerException
folder = pathlib.Path(tempfile.mkdtemp())
record_scripted_expert(True, folder / "expert.demo")
signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99},
           "curiosity": {"strength": 0.5, "gamma": 0.9, "encoding_size": 8},
           "gail": {"strength": 0.5, "gamma": 0.9, "demo_path": str(folder / "expert.demo"), "use_actions": True}}
pretraining = {"demo_path": str(folder / "expert.demo"), "strength": 0.5, "steps": 1000}
config = simple_config(max_steps=140, normalize=True, reward_signals=signals, pretraining=pretraining)
trainer = next(iter(run_training(Simple1DEnvironment(use_discrete=True, seed=1), folder, config=config,
                                 seed=1).trainers.values()))
assert trainer.learner.replicas == N and trainer.bc_module.learner.replicas == N
assert [s.replicas for s in trainer.reward_signals.values() if hasattr(s, "model")] == [N, N]
assert trainer.reward_signals["gail"].normalizer is trainer.learner.actor_critic.normalizer is not None
for key in ("Losses/Curiosity Forward Loss", "Losses/GAIL Loss", "Losses/Pretraining Loss"):
    assert trainer.stats[key] and all(np.isfinite(trainer.stats[key])), key
try:
    run_training(Simple1DEnvironment(use_discrete=True, seed=1), folder / "bad",
                 config=simple_config(max_steps=200, batch_size=8 * N + 1, reward_signals=signals))
except (TrainerError, UnityTrainerException) as e:
    assert f"Behavior Simple1D: reward signal curiosity: batch_size {8 * N + 1} cannot be split over {N} replicas" in str(e), e
else:
    raise AssertionError("a batch_size that the replicas cannot share was accepted")
print("END_TO_END_OK")
"""

ERRORS = """
from kerasrl.exception import TrainerError
try:
    distribute.get_strategy(cpu_replicas=N + 1)
except TrainerError as e:
    assert "already initialised" in str(e) and "\\n" not in str(e), e
else:
    raise AssertionError("a late CPU split was accepted")
assert distribute.get_strategy(cpu_replicas=N).num_replicas_in_sync == N  # the same split again is fine
try:
    distribute.get_strategy(gpus=64)
except TrainerError as e:
    assert "0 GPU(s)" in str(e) and "cpu_replicas" in str(e), e
else:
    raise AssertionError("64 GPUs accepted")
print("ERRORS_OK")
"""

SIMPLE1D = """
import math, pathlib
from test_simple_rl import run_training
from kerasrl.envs.simple import Simple1DEnvironment
tc = run_training(Simple1DEnvironment(use_discrete=True, seed=1337), pathlib.Path(tempfile.mkdtemp()))
trainer = next(iter(tc.trainers.values()))
assert trainer.learner.replicas == N
for name, value in tc._get_measure_vals().items():
    assert not math.isnan(value) and value > 0.99, (name, value)
print("SIMPLE1D_OK")
"""


def run_script(body: str, replicas: int, marker: str) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = textwrap.dedent(PRELUDE) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script, ROOT, str(replicas)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0 and marker in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_mirrored_train_step_matches_single_device():
    run_script(TRAIN_STEP + ERRORS, 2, "ERRORS_OK")


@pytest.mark.slow
def test_mirrored_updates_match_single_device():
    run_script(UPDATES + SIGNALS + SIGNALS_END_TO_END, 2, "END_TO_END_OK")


@pytest.mark.slow
def test_mirrored_updates_match_single_device_on_four_replicas():
    run_script(UPDATES + SIGNALS, 4, "SIGNALS_OK")


@pytest.mark.slow
def test_simple1d_acceptance_under_two_replicas():
    run_script(SIMPLE1D, 2, "SIMPLE1D_OK")


@pytest.mark.slow
def test_train_ppo_example_solves_cartpole_on_two_cpu_replicas(tmp_path):
    # As tests/test_cli.py's one-device run (seed 1, 100k steps, rolling mean >= 475); measured here: 500.
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "train_ppo.py"), "--cpu-replicas", "2", "--steps", "100000",
         "--seed", "1", "--results-dir", str(tmp_path), "--progress-every", "100000"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = [line for line in proc.stdout.splitlines() if line.startswith("final ")]
    assert final and float(final[0].split("mean_return=")[1].split()[0]) >= 475, proc.stdout[-2000:]


def test_cli_strategy_errors_are_one_line(tmp_path, capsys):
    import tensorflow as tf

    from kerasrl.cli import main

    tf.config.list_logical_devices()  # TensorFlow is running in this process: too late to split the CPU
    common = ["trainer_config", "--env", "Simple1D", "--steps", "10", "--results-dir", str(tmp_path)]
    assert main([*common, "--gpus", str(len(tf.config.list_physical_devices("GPU")) + 1)]) == 2
    err = capsys.readouterr().err.strip()
    assert "GPU(s) visible" in err and "--cpu-replicas N" in err and "\n" not in err
    assert main([*common, "--cpu-replicas", "2", "--run-id", "b"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cpu_replicas=2" in err and "already initialised" in err and "\n" not in err
    assert main([*common, "--cpu-replicas", "0", "--run-id", "c"]) == 2
    assert "cpu_replicas must be a whole number >= 1" in capsys.readouterr().err


def test_several_gpus_for_a_small_mlp_warn_that_env_stepping_dominates(caplog):
    from kerasrl.distribute import warn_if_small

    with caplog.at_level("WARNING", logger="kerasrl"):
        assert warn_if_small(64, 2, visual=False, n_gpus=2)
        assert not warn_if_small(64, 2, visual=False, n_gpus=1)
        assert not warn_if_small(64, 2, visual=True, n_gpus=2)
        assert not warn_if_small(1024, 2, visual=False, n_gpus=2)
    assert [r.getMessage() for r in caplog.records] == [
        "2 GPUs for a 2×64 MLP policy: the update is a small part of a step, environment stepping dominates; "
        "one device is as fast."]
