"""The learner on several hosts: MultiWorkerMirroredStrategy from TF_CONFIG, on loopback ports.

Two worker processes (each one CPU replica) form a cluster; both hold the same global batch, as
every replica must, and run one update. It must equal the one-device update on that batch, and
the checkpoint that only the chief writes must load in a plain single process. A worker whose
peers never come gives a one-line error naming the cluster (the join watchdog). Two
``kerasrl-learn --worker-hosts`` processes train CartPole together: every update holds both
hosts' rows, the hosts end with the same weights, and only the chief writes.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from process_tools import free_ports

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

WORKER = """
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
root, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "tests"))
import numpy as np
from kerasrl import distribute
strategy = distribute.get_strategy()
assert strategy.num_replicas_in_sync == 2, strategy
from test_multi_worker import build, update_batch
from kerasrl.trainers.checkpoint import CheckpointSaver
with strategy.scope():
    learner = build()
metrics = learner.fused_update(update_batch(learner), num_epoch=2, batch_size=32, seed=7)
path = CheckpointSaver(os.path.join(out, "models"), 1, model=learner.actor_critic, optimizer=learner.optimizer).save(6, 1)
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
np.savez(os.path.join(out, f"worker{index}.npz"), *[w.numpy() for w in learner.actor_critic.weights])
print(json.dumps({"chief": distribute.is_chief(), "path": path, "metrics": metrics}))
"""


def build():
    from kerasrl.envs.base import BehaviorSpec
    from kerasrl.models.actor_critic import ActorCritic
    from kerasrl.ppo.learner import PPOLearner
    from kerasrl.settings import NetworkSettings, PPOSettings

    spec = BehaviorSpec(((4,),), "discrete", (3, 2))
    model = ActorCritic(spec, ["extrinsic"], NetworkSettings(hidden_units=16), seed=3)
    hp = PPOSettings(learning_rate=3e-3, beta=1e-2, batch_size=32, buffer_size=128, max_grad_norm=0.5)
    return PPOLearner(model, hp, max_steps=1000)


def update_batch(learner):
    from test_learner import make_batch

    batch = make_batch(learner, 96, seed=11)
    batch["masks"][::5] = 0.0
    return batch


def _worker_env(hosts: list[str], index: int) -> dict[str, str]:
    config = {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}}
    return dict(os.environ, TF_CONFIG=json.dumps(config), TF_CPP_MIN_LOG_LEVEL="2",
                PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.slow
def test_one_update_on_two_hosts_equals_one_device_and_the_chief_checkpoint_loads(tmp_path):
    from kerasrl.trainers.checkpoint import CheckpointSaver

    hosts = [f"localhost:{p}" for p in free_ports(2)]
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER), ROOT, str(tmp_path)],
                              env=_worker_env(hosts, i), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["chief"] for o in outs] == [True, False]
    assert outs[0]["path"] and outs[1]["path"] == ""  # only the chief wrote a checkpoint
    prefixes = {name.split(".")[0] for name in os.listdir(tmp_path / "models") if name.startswith("model-")}
    assert prefixes == {os.path.basename(outs[0]["path"])} == {"model-6"}

    single = build()
    m_one = single.fused_update(update_batch(single), num_epoch=2, batch_size=32, seed=7)
    w0, w1 = (np.load(tmp_path / f"worker{i}.npz") for i in range(2))
    for k, w in enumerate(single.actor_critic.weights):
        np.testing.assert_allclose(w0[f"arr_{k}"], w.numpy(), rtol=0, atol=1e-5, err_msg=w.path)
        np.testing.assert_array_equal(w0[f"arr_{k}"], w1[f"arr_{k}"])  # the replicas agree exactly
    for key, value in m_one.items():
        assert abs(outs[0]["metrics"][key] - value) < 1e-5 * max(1.0, abs(value)), key

    fresh = build()
    assert CheckpointSaver(str(tmp_path / "models"), 1, model=fresh.actor_critic, optimizer=fresh.optimizer).restore() \
        == (6, 1)
    for k, w in enumerate(fresh.actor_critic.weights):
        np.testing.assert_array_equal(w.numpy(), w0[f"arr_{k}"])


def test_a_worker_whose_peers_never_join_gets_a_clear_error():
    hosts = [f"localhost:{p}" for p in free_ports(2)]
    script = "from kerasrl import distribute; distribute.multi_worker_strategy(join_timeout_s=3)"
    proc = subprocess.run([sys.executable, "-c", script], env=_worker_env(hosts, 1), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    line = next(line for line in proc.stderr.splitlines() if line.startswith("kerasrl: error:"))
    assert f"worker 1 of the cluster {{'worker': {hosts!r}}} waited 3 s for the other workers to join" in line


def test_tf_config_and_worker_hosts_errors(monkeypatch):
    from kerasrl import distribute
    from kerasrl.exception import TrainerError

    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(TrainerError, match="TF_CONFIG is not a cluster description"):
        distribute.tf_config()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker",
                                                                                               "index": 2}}))
    with pytest.raises(TrainerError, match=r"task worker 2 is not in its cluster"):
        distribute.tf_config()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}))
    assert distribute.tf_config() is None  # a single worker: no multi-host strategy
    with pytest.raises(TrainerError, match="--worker-hosts must be host:port entries"):
        distribute.set_cluster(["a:1", "nohost"], 0)
    with pytest.raises(TrainerError, match="--task-index 2 is not an index of the 2 --worker-hosts"):
        distribute.set_cluster(["a:1", "b:2"], 2)
    distribute.set_cluster(["a:1", "b:2"], 1)
    assert distribute.tf_config()["task"] == {"type": "worker", "index": 1}


TINY = """default:
  batch_size: 32
  buffer_size: 63
  time_horizon: 16
  num_epoch: 2
  hidden_units: 8
  num_layers: 1
  normalize: true
  summary_freq: 64
  jit_compile: false
"""
SUMMARY = re.compile(r"^kerasrl: worker (\d) of 2: CartPole-v1: (\d+) updates on (\d+) rows \((\d+) from this host\), "
                     r"step (\d+), weights ([0-9a-f]{16})$", re.M)


@pytest.mark.slow
def test_kerasrl_learn_trains_on_two_hosts_with_one_global_batch(tmp_path):
    """Each host steps 2 CartPole copies; buffer_size 63 is the global rollout (32 agent steps a
    host), so updates come every 16 steps of the 4 copies; --steps counts every host's steps."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    hosts = ",".join(f"localhost:{p}" for p in free_ports(2))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TF_CONFIG", None)
    procs = [subprocess.Popen([sys.executable, "-m", "kerasrl.cli", str(tmp_path / "tiny.yaml"), "--num-envs", "2",
                               "--steps", "192", "--seed", "4", "--results-dir", str(tmp_path / f"host{i}"),
                               "--run-id", "r", "--worker-hosts", hosts, "--task-index", str(i)],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        outs.append(out)
    found = [SUMMARY.search(out) for out in outs]
    assert all(found), outs
    index, updates, rows, local, step, digest = zip(*[m.groups() for m in found])
    assert index == ("0", "1")
    assert digest[0] == digest[1]  # the hosts' weights (normalizer included) are identical
    assert updates[0] == updates[1] == "3"  # at steps 64, 128, 192
    assert rows[0] == rows[1] == str(int(local[0]) + int(local[1]))  # every update held both hosts' rows
    assert int(local[0]) > 0 and int(local[1]) > 0
    assert step == ("196", "196")  # until the step passes --steps 192: 49 steps of the 4 copies
    assert all(re.search(r"^final steps=196 ", out, re.M) for out in outs)
    models = tmp_path / "host0" / "r" / "models" / "CartPole-v1"
    assert (models / "model-196.index").exists() and (models / "CartPole-v1.weights.h5").exists()
    assert not (tmp_path / "host1").exists()  # only the chief wrote


def _cli_error(capsys, argv: list) -> str:
    from kerasrl.cli import main

    assert main(["cartpole_zoo", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kerasrl-learn: error: ") and err.count("\n") == 1, err
    return err


def test_worker_hosts_flag_errors(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    hosts = ["--worker-hosts", "a:1,b:2"]
    assert "--worker-hosts and --task-index go together" in _cli_error(capsys, hosts)
    assert "--worker-hosts and --task-index go together" in _cli_error(capsys, ["--task-index", "0"])
    malformed = ["--worker-hosts", "a:1,b", "--task-index", "0"]
    assert "--worker-hosts must be host:port entries" in _cli_error(capsys, malformed)
    assert "--task-index 2 is not an index of the 2 --worker-hosts" in _cli_error(capsys, hosts + ["--task-index", "2"])
    for flag in (["--gpus", "1"], ["--cpu-replicas", "2"], ["--inference"], ["--curriculum", "c"]):
        err = _cli_error(capsys, hosts + ["--task-index", "0", *flag])
        assert f"{flag[0]} cannot be combined with a multi-host run" in err
    assert "TF_CONFIG" not in os.environ and not os.listdir(tmp_path)  # nothing set, nothing written


def test_multi_host_refuses_what_it_cannot_share():
    from kerasrl.exception import TrainerConfigError
    from kerasrl.ppo.multi_host import check_settings
    from kerasrl.settings import load_trainer_config

    def settings(**extra):
        return load_trainer_config({"default": {"trainer": "ppo", **extra}}).settings_for("B")

    check_settings("B", settings())
    curiosity = {"extrinsic": {"strength": 1.0, "gamma": 0.99}, "curiosity": {"strength": 0.01, "gamma": 0.99,
                                                                               "encoding_size": 16}}
    with pytest.raises(TrainerConfigError, match="Behavior B: reward_signals: curiosity is not supported on several"):
        check_settings("B", settings(reward_signals=curiosity))
    with pytest.raises(TrainerConfigError, match=r"Behavior B: pretraining \(behavioral cloning\) is not supported on"):
        check_settings("B", settings(pretraining={"demo_path": "x.demo", "strength": 0.5, "steps": 100}))


def test_gathered_tables_keep_every_dtype_and_shape():
    """The byte packing of ``Cluster.gather_tables``, on a one-host stand-in for the collective:
    mixed dtypes and row shapes come back exactly, and a table without rows takes part."""
    from kerasrl.distribute import Cluster

    hosts = object.__new__(Cluster)
    hosts.hosts, hosts.local_replicas = 1, 1
    hosts.all_gather = lambda values: np.asarray(values).reshape(1, -1)
    rng = np.random.default_rng(0)
    table = {"actions": rng.integers(0, 5, (7, 2)).astype(np.int32),
             "obs": rng.standard_normal((7, 3)).astype(np.float32),
             "visual": rng.integers(0, 255, (7, 2, 2, 3)).astype(np.uint8), "count": np.arange(7, dtype=np.float64)}
    layout = {k: (v.dtype, v.shape[1:]) for k, v in table.items()}
    (got, empty), counts = hosts.gather_tables([table, {}], [layout, {"x": (np.dtype(np.float32), (5,))}])
    assert counts.tolist() == [[7, 0]]
    for k, v in table.items():
        assert got[k].dtype == v.dtype
        np.testing.assert_array_equal(got[k], v)
    assert empty["x"].shape == (0, 5)


def _mirror_hosts(chief: bool, fail_after=None, peer=None):
    """A two-host cluster in one process: the other host sends what this one sends (or, from a
    list ``peer``, what another host sent: that host is then worker 0 and this one worker 1);
    after ``fail_after`` collectives it is gone (as TensorFlow reports a dead peer)."""
    import tensorflow as tf

    from kerasrl.distribute import Cluster

    class Mirror(Cluster):
        def __init__(self):  # no strategy: the collective is the stand-in below
            self.hosts, self.task_index, self.chief, self.local_replicas, self.calls = 2, int(bool(peer)), chief, 1, 0
            self.sent = []

        def all_gather(self, values):
            self.calls += 1
            if fail_after is not None and self.calls > fail_after:
                raise tf.errors.UnavailableError(None, None, "Graph execution error:\nCollective ops is aborted by: "
                                                 "cluster check alive failed, /job:worker/replica:0/task:1 is down")
            v = np.asarray(values, np.int32).reshape(1, -1)
            self.sent.append(v[0])
            return np.concatenate([peer[self.calls - 1][None] if peer else v, v])

    return Mirror()


def _mirrored_run(tmp_path, hosts):
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.ppo.trainer import PPOTrainer
    from kerasrl.settings import RunContext, load_trainer_config
    from kerasrl.trainers import TrainerController
    from kerasrl.trainers.multi_host import create_on_hosts

    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=True, seed=1))
    name, spec = next(iter(manager.behavior_specs.items()))
    context = RunContext.in_results_dir(str(tmp_path), "t", seed=3, max_steps=200)
    settings = load_trainer_config({"default": {"hidden_units": 8, "num_layers": 1, "batch_size": 16, "buffer_size": 31,
                                                "summary_freq": 1000, "jit_compile": False, "normalize": True}})
    trainer = create_on_hosts(PPOTrainer, name, spec, settings.settings_for(name), context, cluster=hosts)
    tc = TrainerController({name: trainer}, context.model_path, context.summaries_dir, "t", save_freq=64)
    return tc, manager, trainer


def test_a_multi_host_trainer_counts_every_host_and_trains_on_the_gathered_rows(tmp_path):
    from kerasrl.fields import Field

    tc, manager, trainer = _mirrored_run(tmp_path, _mirror_hosts(chief=False))
    rows = []
    update = trainer.learner.update
    trainer.learner.update = lambda batch, step, seed: rows.append(len(batch[Field.ADVANTAGES])) or update(
        batch, step, seed)
    tc.start_learning(manager)
    assert trainer.get_step == 202  # every step of the one agent counts twice: until it passes 200
    assert trainer.update_count == len(rows) == 6  # buffer_size 31 is the global rollout: 16 steps a host
    assert sum(rows) == trainer.multi_host.rows_trained == 2 * trainer.multi_host.local_rows_trained > 0
    assert float(trainer.learner.actor_critic.normalizer.count.numpy()) == trainer.multi_host.rows_trained  # both hosts'
    assert not list((tmp_path / "t" / "models").rglob("*.weights.h5"))  # a non-chief exports nothing


def test_a_lost_worker_is_a_one_line_error_after_the_chief_saves(tmp_path):
    from kerasrl.exception import TrainerError

    tc, manager, trainer = _mirrored_run(tmp_path, _mirror_hosts(chief=True, fail_after=2))
    with pytest.raises(TrainerError) as info:
        tc.start_learning(manager)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("Behavior Simple1D: worker 0 of 2 lost the other workers during an update (a collective "
                              "failed with UnavailableError: Collective ops is aborted by: cluster check alive failed, "
                              "/job:worker/replica:0/task:1 is down: a worker stopped, or the network failed); "
                              "the model was saved at step 64."), message
    assert (tmp_path / "t" / "models" / "Simple1D" / "model-64.index").exists()


def test_resume_on_several_hosts_gives_every_host_the_chiefs_state(tmp_path):
    """The chief restored a checkpoint (here: trained a little); a fresh worker takes its weights,
    normalizer, optimizer slots, step and update count in one all-gather."""
    chief_hosts = _mirror_hosts(chief=True)
    tc, manager, chief = _mirrored_run(tmp_path / "chief", chief_hosts)
    tc.start_learning(manager)
    chief_hosts.sent.clear()
    chief.sync_from_chief()  # the chief keeps its own state, and records what it sends
    _, _, worker = _mirrored_run(tmp_path / "worker", _mirror_hosts(chief=False, peer=chief_hosts.sent))
    assert worker.get_step == 0 and worker.update_count == 0
    theirs, ours = chief.state_variables(), worker.state_variables()
    assert any((a.numpy() != b.numpy()).any() for a, b in zip(theirs, ours))
    worker.sync_from_chief()
    assert (worker.get_step, worker.update_count) == (chief.get_step, chief.update_count) == (202, 6)
    assert len(theirs) == len(ours) and int(chief.learner.optimizer.iterations.numpy()) > 0
    for a, b in zip(theirs, ours):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    assert worker.learner.optimizer.learning_rate.numpy() == chief.learner.optimizer.learning_rate.numpy()


def test_a_trainer_type_without_the_multi_host_hooks_and_threaded_updates_are_refused_in_one_line(tmp_path):
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.exception import TrainerConfigError
    from kerasrl.ppo.trainer import PPOTrainer
    from kerasrl.sac.trainer import SACTrainer
    from kerasrl.settings import RunContext, load_trainer_config
    from kerasrl.trainers.multi_host import create_on_hosts

    manager = SimpleEnvManager(Simple1DEnvironment(use_discrete=False, seed=1))
    name, spec = next(iter(manager.behavior_specs.items()))
    settings = load_trainer_config({"default": {"trainer": "sac"}}).settings_for(name)
    context = RunContext.in_results_dir(str(tmp_path), "t", seed=3)
    with pytest.raises(TrainerConfigError) as info:
        create_on_hosts(SACTrainer, name, spec, settings, context, cluster=_mirror_hosts(chief=True))
    assert str(info.value) == (f"Behavior {name}: trainer: sac cannot train on several hosts (--worker-hosts); "
                               "only ppo can.")
    threaded = load_trainer_config({"default": {"threaded": True}}).settings_for(name)
    with pytest.raises(TrainerConfigError, match=f"^Behavior {name}: threaded: true is not available when training on "
                                                 "several hosts; set threaded: false.$"):
        create_on_hosts(PPOTrainer, name, spec, threaded, context, cluster=_mirror_hosts(chief=True))
    auto = load_trainer_config({"default": {"threaded": "auto"}}).settings_for(name)  # lockstep: stays in the acting thread
    in_workers = RunContext.in_results_dir(str(tmp_path), "a", seed=3, environment_in_other_processes=True)
    trainer = create_on_hosts(PPOTrainer, name, spec, auto, in_workers, cluster=_mirror_hosts(chief=True))
    assert not trainer.threaded and trainer.settings.threaded is False
    trainer.close()
    manager.close()
