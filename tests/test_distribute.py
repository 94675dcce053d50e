"""The PPO train_step under MirroredStrategy (2 logical CPUs) equals one device on the whole batch.

With gradient-norm clipping too: the norm is that of the summed gradient, not each replica's.

Runs in a subprocess: logical devices must be configured before TensorFlow starts, and the
rest of the suite runs on the plain CPU.
"""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

SCRIPT = textwrap.dedent(
    """
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, os.path.join(sys.argv[1], "tests"))
    from test_learner import make_batch
    from kerasrl.envs.base import BehaviorSpec
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.ppo.learner import PPOLearner
    from kerasrl.settings import NetworkSettings, PPOSettings

    def build(kind, max_grad_norm=None):
        spec = BehaviorSpec(((4,),), kind, (3, 2) if kind == "discrete" else (2,))
        model = ActorCritic(spec, ["extrinsic", "curiosity"], NetworkSettings(hidden_units=16), seed=3)
        return PPOLearner(model, PPOSettings(learning_rate=1e-2, epsilon=0.2, beta=1e-2, max_grad_norm=max_grad_norm),
                          max_steps=100)

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    for kind, max_grad_norm in (("discrete", None), ("continuous", None), ("discrete", 0.05), ("continuous", 0.05)):
        single = build(kind, max_grad_norm)
        batch = make_batch(single, 64, seed=5)
        batch["masks"][::7] = 0.0  # padding rows must be left out of the global mean too
        one = single.train_minibatch(batch)

        with strategy.scope():
            mirrored = build(kind, max_grad_norm)
        dataset = tf.data.Dataset.from_tensor_slices(
            {k: tf.constant(v) for k, v in batch.items()}).batch(64)
        dist = next(iter(strategy.experimental_distribute_dataset(dataset)))

        @tf.function
        def step(d):
            per_replica = strategy.run(mirrored.train_step, args=(d,))
            return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in per_replica.items()}

        two = {k: float(v) for k, v in step(dist).items()}
        assert strategy.num_replicas_in_sync == 2
        for k in one:
            assert abs(one[k] - two[k]) < 1e-4 * max(1.0, abs(one[k])), (kind, max_grad_norm, k, one[k], two[k])
        for a, b in zip(single.actor_critic.trainable_weights, mirrored.actor_critic.trainable_weights):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=f"{kind} {max_grad_norm}")
        moved = [np.abs(a.numpy() - b.numpy()).max() for a, b in
                 zip(single.actor_critic.trainable_weights, build(kind).actor_critic.trainable_weights)]
        assert max(moved) > 1e-4
    print("MIRRORED_OK")
    """
)


def test_mirrored_strategy_matches_single_device():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, ROOT], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "MIRRORED_OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
