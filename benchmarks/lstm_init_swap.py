"""Whether a recurrent gap lies in the training loop or in the starting network: RecurrentPPO
(64-unit actor LSTM, critic without memory, the Zoo CartPole keys) on ``MaskedCartPole-v1``,
trained by its own loop from another initialisation.

``--init``:

* ``own``: RecurrentPPO's own initialisation (``--peer mlp-critic`` of ``lstm_seeds.py``);
* ``kerasrl``: the weights of a freshly built kerasrl model of ``lstm_mlp_critic`` copied in
  (the LSTM's second bias and the action layer's bias frozen at 0, as Keras has none; the
  critic's linear layer copied from kerasrl's);
* ``kerasrl-bias``: the same with the action layer's bias trained (kerasrl's ``action_bias: true``);
* ``kerasrl-critic``: its own initialisation, but the critic as kerasrl's before it had the linear
  layer: that layer frozen at ``[I; 0]``, so the hidden layer acts on the observation with an
  orthogonal kernel of gain √2;
* ``one-bias``: its own initialisation with the LSTM's second bias frozen at 0.

    python benchmarks/lstm_init_swap.py --init kerasrl --seeds 1200-1204 --json swap.json

Each seed's final rolling-100 return is written to ``--json`` as it finishes (a rerun skips the
seeds already there).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_tasks  # noqa: E402  (registers MaskedCartPole-v1)
from seed_args import parse_seeds  # noqa: E402

UNITS = 64
INITS = ("own", "kerasrl", "kerasrl-bias", "kerasrl-critic", "one-bias")


def kerasrl_weights(seed: int) -> dict[str, Any]:
    """The trainable variables of a fresh kerasrl ``lstm_mlp_critic`` model, by name."""
    from kerasrl.configs import config_path
    from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
    from kerasrl.settings import read_yaml
    from kerasrl.trainers import initialize_trainers

    config = {"default": read_yaml(config_path("lstm_mlp_critic"))["default"]}
    folder = tempfile.mkdtemp()
    manager = SimpleEnvManager(GymnasiumEnv("MaskedCartPole-v1", num_envs=1, seed=seed))
    trainer = next(iter(initialize_trainers(config, manager.behavior_specs, folder, "p", folder, 1, True, False,
                                            seed).values()))
    return {v.path.split("/", 1)[1]: v.numpy() for v in trainer.learner.actor_critic.trainable_variables}


def set_linear(linear: Any, weights: dict[str, Any], name: str) -> None:
    import torch

    linear.weight.copy_(torch.tensor(weights[f"{name}/kernel"].T))
    if f"{name}/bias" in weights:
        linear.bias.copy_(torch.tensor(weights[f"{name}/bias"]))


def apply_init(model: Any, init: str, seed: int) -> None:
    """Replace ``model``'s initial weights as ``init`` says; frozen parameters leave the optimizer."""
    import torch

    policy = model.policy
    extractor, lstm = policy.mlp_extractor, policy.lstm_actor
    frozen = []
    with torch.no_grad():
        if init in ("kerasrl", "kerasrl-bias"):
            w = kerasrl_weights(seed)
            for linear, name in [(extractor.policy_net[0], "main_graph_0/vector/hidden_0"),
                                 (extractor.value_net[0], "main_graph_1/vector/hidden_0"),
                                 (policy.action_net, "branch_0"), (policy.value_net, "extrinsic_value"),
                                 (policy.critic, "main_graph_1/projection")]:
                set_linear(linear, w, name)
            cell = "main_graph_0/lstm/lstm_cell"
            lstm.weight_ih_l0.copy_(torch.tensor(w[f"{cell}/kernel"].T))
            lstm.weight_hh_l0.copy_(torch.tensor(w[f"{cell}/recurrent_kernel"].T))
            lstm.bias_ih_l0.copy_(torch.tensor(w[f"{cell}/bias"]))
            policy.action_net.bias.zero_()  # Keras's initial bias
            frozen = [] if init == "kerasrl-bias" else [policy.action_net.bias]
        if init == "kerasrl-critic":
            policy.critic.weight.copy_(torch.eye(UNITS, policy.critic.in_features))
            policy.critic.bias.zero_()
            hidden = extractor.value_net[0]
            hidden.weight.zero_()
            kernel = torch.empty(UNITS, policy.critic.in_features)
            torch.nn.init.orthogonal_(kernel, gain=2 ** 0.5)
            hidden.weight[:, : policy.critic.in_features] = kernel
            frozen = [policy.critic.weight, policy.critic.bias]
        if init in ("kerasrl", "kerasrl-bias", "one-bias"):
            lstm.bias_hh_l0.zero_()
            frozen.append(lstm.bias_hh_l0)
    for parameter in frozen:
        parameter.requires_grad_(False)
    policy.optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-3, eps=1e-5)


def run(init: str, seed: int, steps: int) -> float:
    import numpy as np
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    model = RecurrentPPO("MlpLstmPolicy", make_vec_env("MaskedCartPole-v1", n_envs=8, seed=seed), seed=seed,
                         device="cpu", verbose=0, **bench_tasks._zoo_cartpole(),
                         policy_kwargs={"lstm_hidden_size": UNITS, "enable_critic_lstm": False,
                                        "net_arch": {"pi": [UNITS], "vf": [UNITS]}, "activation_fn": torch.nn.Tanh})
    if init != "own":
        apply_init(model, init, seed)
    model.learn(total_timesteps=steps)
    return float(np.mean([e["r"] for e in model.ep_info_buffer]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", choices=INITS, default="kerasrl")
    parser.add_argument("--seeds", default="1200-1204", help="a range (1200-1204) or a list (1,5,9)")
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--json", default="lstm_init_swap.json", help="{seed: final rolling-100 return}")
    args = parser.parse_args()
    results = json.load(open(args.json)) if os.path.exists(args.json) else {}
    for seed in parse_seeds(args.seeds):
        if str(seed) not in results:
            results[str(seed)] = run(args.init, seed, args.steps)
            print(f"{args.init} seed {seed}: {results[str(seed)]:.1f}", flush=True)
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
