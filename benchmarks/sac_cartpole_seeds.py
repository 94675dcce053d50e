"""Discrete SAC on CartPole-v1, seed after seed: how many steps until the mean return of the
last 100 training episodes reaches 475, the best such mean, and the deterministic policy's
mean return over 20 evaluation episodes at the end.

``--set KEY=VALUE`` overrides the config's keys (ML-Agents' names; VALUE read as YAML), to
compare settings. No peer: Stable-Baselines3 has no discrete SAC.

    nice -n 10 python3 benchmarks/sac_cartpole_seeds.py --seeds 5 --steps 110000 --stop-when-solved
    nice -n 10 python3 benchmarks/sac_cartpole_seeds.py --seeds 1 --steps 40000 --set learning_rate=1e-3
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import deque
from typing import Any

import gymnasium
import numpy as np
import yaml

import kerasrl
from kerasrl.callbacks import Callback

TARGET = 475.0


class _Returns(Callback):
    """Stops at ``stop_at`` (once the last-100 mean reached the target, if asked) and keeps the
    step at which the mean of the last 100 episodes first reached ``TARGET``."""

    def __init__(self, stop_when_solved: bool, every: int) -> None:
        super().__init__()
        self.every, self.next_print = every, every
        self.returns: deque[float] = deque(maxlen=100)
        self.solved_at: int | None = None
        self.best = float("-inf")
        self.stop_when_solved = stop_when_solved

    def on_episode_end(self, logs: Any = None) -> None:
        self.returns.append(float(logs["episode_reward"]))
        if self.every and logs["step"] >= self.next_print:
            print(f"  step {int(logs['step'])}: mean of the last {len(self.returns)} episodes "
                  f"{np.mean(self.returns):.1f}", flush=True)
            self.next_print += self.every
        if len(self.returns) == 100:
            mean = float(np.mean(self.returns))
            self.best = max(self.best, mean)
            if mean >= TARGET and self.solved_at is None:
                self.solved_at = int(logs["step"])
                if self.stop_when_solved:
                    self.model.stop_training = True


def evaluate(agent: kerasrl.SAC, episodes: int, seed: int, deterministic: bool = True) -> float:
    """The policy's mean return (deterministic: its most probable actions)."""
    env = gymnasium.make("CartPole-v1")
    totals = []
    for k in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed * 100 + k)
        total, done = 0.0, False
        while not done:
            action = int(agent.predict(obs[None].astype(np.float32), deterministic=deterministic)[0, 0])
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    return float(np.mean(totals))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="sac_cartpole")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--stop-when-solved", action="store_true")
    parser.add_argument("--progress-every", type=int, default=0, help="print the last-100 mean every N steps")
    args = parser.parse_args()
    overrides = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        agent = kerasrl.SAC("CartPole-v1", config=args.config, seed=seed, **overrides)
        returns = _Returns(args.stop_when_solved, args.progress_every)
        start = time.perf_counter()
        agent.fit(args.steps, callbacks=[returns], verbose=0)
        wall = time.perf_counter() - start
        step = agent.trainer.step if agent.trainer is not None else 0
        final = float(np.mean(returns.returns)) if returns.returns else float("nan")
        row = {"seed": seed, "solved_at": returns.solved_at, "best100": returns.best, "final100": final,
               "eval": evaluate(agent, 20, seed), "eval_sampled": evaluate(agent, 20, seed, deterministic=False),
               "ent_coef": agent.trainer.last_update_metrics.get("ent_coef", float("nan")) if agent.trainer else 0.0,
               "steps_per_s": step / wall}
        agent.close()
        rows.append(row)
        print(f"seed {seed}: last-100 mean reached {TARGET:.0f} at step {row['solved_at']}, best {row['best100']:.1f}, "
              f"final {final:.1f}, deterministic eval {row['eval']:.1f}, sampled eval {row['eval_sampled']:.1f}, "
              f"ent_coef {row['ent_coef']:.4f}, {row['steps_per_s']:.0f} steps/s", flush=True)
    solved = [r["solved_at"] for r in rows if r["solved_at"] is not None]
    print(f"\n{len(solved)}/{len(rows)} seeds reached {TARGET:.0f}; medians: "
          f"steps to {TARGET:.0f} {statistics.median(solved) if solved else 'n/a'} (of those that did), "
          f"best last-100 mean {statistics.median(r['best100'] for r in rows):.1f}, "
          f"final {statistics.median(r['final100'] for r in rows):.1f}, "
          f"deterministic eval {statistics.median(r['eval'] for r in rows):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
