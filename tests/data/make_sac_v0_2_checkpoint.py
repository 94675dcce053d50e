"""Make the SAC checkpoint-compatibility fixture (tests/data/checkpoints_sac_v0_2/).

SAC checkpoints written before the target critics were saved by name (kerasrl at commit
96d4b04) hold the actor and the critics only through the optimizers' variable lists, and no
target critic. This trains SAC briefly on the continuous ``Simple1DEnvironment`` with that
tree and keeps what a test needs to resume the checkpoint with the current code:

    checkpoints_sac_v0_2/config.json      the trainer config dict passed to initialize_trainers
    checkpoints_sac_v0_2/expected.npz     "step", "updates"; "actor/<i>" and "critic/<i>": the
                                          actor's and the critics' trainable weights, in order
    checkpoints_sac_v0_2/Simple1D/        the TF checkpoint (checkpoint, model-N.*)

Run it with that tree first on ``sys.path``:

    git worktree add --detach /tmp/kerasrl_sac_base 96d4b04
    (cd /tmp/kerasrl_sac_base && python3 setup.py build_ext --inplace -q)
    cd /tmp/kerasrl_sac_base && python3 /work/main/tests/data/make_sac_v0_2_checkpoint.py /tmp/kerasrl_sac_base
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "checkpoints_sac_v0_2")
CONFIG = {"default": {"trainer": "sac", "batch_size": 16, "buffer_size": 2000, "buffer_init_steps": 32,
                      "hidden_units": 8, "num_layers": 1, "max_steps": 120, "summary_freq": 1000}}


def main(source: str) -> None:
    sys.path.insert(0, os.path.abspath(source))
    import numpy as np

    import kerasrl
    from kerasrl.envs import SimpleEnvManager
    from kerasrl.envs.simple import Simple1DEnvironment
    from kerasrl.trainers import TrainerController, initialize_trainers

    assert kerasrl.__file__.startswith(os.path.abspath(source)), kerasrl.__file__
    work = tempfile.mkdtemp()
    env = SimpleEnvManager(Simple1DEnvironment(use_discrete=False, seed=0))
    trainers = initialize_trainers(CONFIG, env.behavior_specs, os.path.join(work, "s"), "old", os.path.join(work, "m"),
                                   keep_checkpoints=1, train_model=True, load_model=False, seed=0)
    TrainerController(trainers, os.path.join(work, "m"), os.path.join(work, "s"), "old", save_freq=10**6,
                      ).start_learning(env)
    trainer = trainers["Simple1D"]
    nets = trainer.networks
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    shutil.copytree(os.path.join(work, "m", "Simple1D"), os.path.join(OUT, "Simple1D"),
                    ignore=lambda folder, names: [n for n in names if not n.startswith(("checkpoint", "model-"))])
    arrays = {"step": np.int64(trainer.get_step), "updates": np.int64(trainer.update_steps)}
    arrays.update({f"actor/{i}": v.numpy() for i, v in enumerate(nets.actor_variables)})
    arrays.update({f"critic/{i}": v.numpy() for i, v in enumerate(nets.critic_variables)})
    np.savez(os.path.join(OUT, "expected.npz"), **arrays)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=1)
    print("wrote", OUT, "step", trainer.get_step, "updates", trainer.update_steps)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kerasrl_sac_base")
