"""MA-POCA against PPO on a cooperative game whose only reward is the group's, over seeds.

GroupSimple1D (``kerasrl.envs.groups``): ``--agents`` walkers in one group, each with its own goal;
the group earns ``home / agents`` when nobody walks any more (1.0: everyone reached its goal), 0 when
``--episode-steps`` cut the episode; an agent that reaches the wrong end leaves the group early.
``poca`` trains on the group reward as MA-POCA does; ``ppo`` is PPO with the group reward summed
into every agent's own reward (PPO reads no group reward otherwise). Both use the same network and
hyper-parameters. The score of a run: the mean group reward of its last ``--last`` group episodes.
Each run writes one JSON line to ``--out`` as it finishes (a rerun skips the runs found there);
the table gives per variant the median score and a two-sided Mann-Whitney U test:

    flock /tmp/kerasrl-bench.lock python3 benchmarks/poca_seeds.py --seeds 1-8 --steps 30000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Mapping, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compare import mann_whitney_u  # noqa: E402
from seed_args import parse_seeds  # noqa: E402

from kerasrl.envs import Environment, SimpleEnvManager  # noqa: E402
from kerasrl.envs.groups import GroupSimple1DEnvironment  # noqa: E402
from kerasrl.settings import RunContext, load_trainer_config  # noqa: E402
from kerasrl.spec import StepResult  # noqa: E402
from kerasrl.trainers import TrainerController, create_trainers  # noqa: E402

SECTION = {"hidden_units": 32, "num_layers": 2, "batch_size": 64, "buffer_size": 512, "time_horizon": 32,
           "summary_freq": 10**9, "learning_rate": 3e-3, "beta": 0.01}
VARIANTS = ("poca", "ppo")


class ScoredGroups(Environment):
    """A GroupSimple1D that records each group episode's reward; ``summed``: the group reward is
    added to each agent's own reward (what PPO trains on)."""

    def __init__(self, env: GroupSimple1DEnvironment, summed: bool) -> None:
        self.env, self.summed, self.scores = env, summed, []

    @property
    def behavior_specs(self) -> Mapping[str, Any]:
        return self.env.behavior_specs

    def reset(self, config: Optional[Mapping[str, float]] = None) -> dict[str, StepResult]:
        return self._scored(self.env.reset(config), ended=False)

    def step(self, actions: Mapping[str, np.ndarray]) -> dict[str, StepResult]:
        before = self.env.episode_count
        return self._scored(self.env.step(actions), ended=self.env.episode_count != before)

    def _scored(self, results: dict[str, StepResult], ended: bool) -> dict[str, StepResult]:
        for result in results.values():
            if ended:
                self.scores.append(float(result.group_reward_or_zeros.max(initial=0.0)))
            if self.summed:
                result.rewards = result.rewards + result.group_reward_or_zeros
        return results


def run(variant: str, seed: int, args: argparse.Namespace) -> float:
    """The score of one seeded run."""
    env = ScoredGroups(GroupSimple1DEnvironment(num_agents=args.agents, seed=seed, max_steps=args.episode_steps),
                       summed=variant == "ppo")
    manager = SimpleEnvManager(env)
    with tempfile.TemporaryDirectory() as folder:
        context = RunContext.in_results_dir(folder, variant, seed=seed, max_steps=args.steps)
        config = load_trainer_config({"default": {**SECTION, "trainer": variant}})
        trainers = create_trainers(config, manager.behavior_specs, context)
        TrainerController(trainers, context.model_path, context.summaries_dir, variant, save_freq=10**9,
                          training_seed=seed).start_learning(manager)
    return float(np.mean(env.scores[-args.last:])) if env.scores else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-6"))
    parser.add_argument("--steps", type=int, default=30000)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--episode-steps", type=int, default=40)
    parser.add_argument("--last", type=int, default=200, help="group episodes a run's score averages")
    parser.add_argument("--out", default="poca_seeds.jsonl")
    args = parser.parse_args()
    done = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            done = {(r["variant"], r["seed"]): r["score"] for r in map(json.loads, f) if r["steps"] == args.steps}
    for seed in args.seeds:
        for variant in VARIANTS:
            if (variant, seed) not in done:
                done[(variant, seed)] = run(variant, seed, args)
                with open(args.out, "a") as f:
                    f.write(json.dumps({"variant": variant, "seed": seed, "steps": args.steps,
                                        "score": done[(variant, seed)]}) + "\n")
            print(f"{variant} seed {seed}: {done[(variant, seed)]:.3f}", flush=True)
    scores = {v: [done[(v, s)] for s in args.seeds] for v in VARIANTS}
    u, p, method = mann_whitney_u(scores["poca"], scores["ppo"])
    print(f"\nGroupSimple1D, {args.agents} agents, {args.steps} steps, seeds {args.seeds}")
    print("| variant | median score | scores |\n|---|---|---|")
    for v in VARIANTS:
        print(f"| {v} | {statistics.median(scores[v]):.3f} | {', '.join(f'{x:.2f}' for x in scores[v])} |")
    print(f"Mann-Whitney U (poca vs ppo) = {u:g}, two-sided p = {p:.4f} ({method})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
