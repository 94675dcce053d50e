"""PPO on CartPole-v1 through the Keras-style API, with stock Keras callbacks.

    python examples/fit_keras.py                       # up to 100k steps, seed 0, into ./fit_keras/
    python examples/fit_keras.py --steps 20000 --out /tmp/fit --patience 10

``kerasrl.PPO(...).fit`` runs one Keras epoch per policy update (256 steps with ``cartpole_zoo``),
so ``EarlyStopping``'s ``patience`` counts updates. The callbacks write, under ``--out``:
``cartpole.csv`` (CSVLogger: one row per update), ``tb/`` (TensorBoard), ``cartpole.keras``
(ModelCheckpoint: an archive ``kerasrl.load`` reads) and, while fit runs, ``backup/``
(BackupAndRestore: run the script again after a crash and it continues from the last update).
The saved policy is then loaded and played for one episode.

The last line is machine-readable:
``final steps=<int> updates=<int> mean_return=<float> greedy_return=<float>``.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gymnasium  # noqa: E402
import keras  # noqa: E402

import kerasrl  # noqa: E402


def play(model: kerasrl.PPO, seed: int) -> float:
    """The return of one CartPole episode played by the model's deterministic policy."""
    env = gymnasium.make("CartPole-v1")
    observation, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = model.predict(observation[None])[0, 0]
        observation, reward, terminated, truncated, _ = env.step(int(action))
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="environment steps (all 8 copies counted)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--patience", type=int, default=40, help="EarlyStopping's patience, in policy updates")
    parser.add_argument("--out", default="fit_keras", help="folder for the callbacks' files and the run")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, "cartpole.keras")
    agent = kerasrl.PPO("CartPole-v1", config="cartpole_zoo", seed=args.seed, run_dir=os.path.join(args.out, "run"))
    try:
        history = agent.fit(args.steps, callbacks=[
            keras.callbacks.EarlyStopping(monitor="episode_reward_mean", mode="max", patience=args.patience),
            keras.callbacks.TerminateOnNaN(),
            keras.callbacks.CSVLogger(os.path.join(args.out, "cartpole.csv")),
            keras.callbacks.TensorBoard(os.path.join(args.out, "tb")),
            keras.callbacks.ModelCheckpoint(model_path),
            keras.callbacks.BackupAndRestore(os.path.join(args.out, "backup")),
        ])
        steps, updates = agent.trainer.step, len(history.epoch)
        mean_return = history.history["episode_reward_mean"][-1]
    finally:
        agent.close()
    greedy = play(kerasrl.load(model_path), seed=args.seed + 1)
    print(f"final steps={steps} updates={updates} mean_return={mean_return:.1f} greedy_return={greedy:.1f}", flush=True)


if __name__ == "__main__":
    main()
