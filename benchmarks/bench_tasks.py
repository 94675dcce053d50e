"""The tasks of ``bench_ppo.py --task``: one environment, one kerasrl config and the matching
Stable-Baselines3 (or sb3-contrib) model with the same hyper-parameters.

Two small environments are defined here (registered with Gymnasium on import):

* ``MaskedCartPole-v1`` — CartPole-v1 with the two velocities zeroed (partially observed:
  a policy needs memory to balance), as the RL-Zoo's ``CartPoleNoVel-v1``;
* ``PixelChase-v0`` — a 36×36 grey image of a 6×6 board with the agent's cell in the top
  half and a target cell in the bottom half; actions left / right / stay; reward 1 each time
  the agent's column reaches the target's (a new target is drawn), 30 steps an episode. A
  random policy scores ~3, a good one ~12. Small enough for both libraries' CNNs (SB3's
  NatureCNN needs 36×36) to learn in ~50k steps on a CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import gymnasium
import numpy as np
from gymnasium import spaces


class MaskedCartPole(gymnasium.ObservationWrapper):
    """CartPole-v1 with the cart and pole velocities (observations 1 and 3) set to 0."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.observation_space = env.observation_space

    def observation(self, observation: np.ndarray) -> np.ndarray:
        out = np.array(observation, dtype=np.float32)
        out[1] = out[3] = 0.0
        return out


def make_masked_cartpole(**kwargs: Any) -> gymnasium.Env:
    return MaskedCartPole(gymnasium.make("CartPole-v1", **kwargs))


class PixelChase(gymnasium.Env):
    """Move along a row of 6 cells onto the target's column, seen only as pixels."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}
    CELLS = 6
    CELL_PX = 6
    STEPS = 30

    def __init__(self, render_mode: Optional[str] = None) -> None:
        self.render_mode = render_mode
        size = self.CELLS * self.CELL_PX
        self.observation_space = spaces.Box(0, 255, (size, size, 1), np.uint8)
        self.action_space = spaces.Discrete(3)
        self._agent = self._target = self._t = 0

    def _new_target(self) -> None:
        choices = [c for c in range(self.CELLS) if c != self._agent]
        self._target = int(self.np_random.choice(choices))

    def _image(self) -> np.ndarray:
        img = np.zeros(self.observation_space.shape, np.uint8)
        px, half = self.CELL_PX, self.CELLS // 2 * self.CELL_PX
        img[: half, self._agent * px : (self._agent + 1) * px] = 255
        img[half:, self._target * px : (self._target + 1) * px] = 160
        return img

    def render(self) -> np.ndarray:
        return np.repeat(self._image(), 3, axis=2)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._agent = int(self.np_random.integers(self.CELLS))
        self._new_target()
        self._t = 0
        return self._image(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        move = (-1, 1, 0)[int(action)]
        self._agent = int(np.clip(self._agent + move, 0, self.CELLS - 1))
        reward = 0.0
        if self._agent == self._target:
            reward = 1.0
            self._new_target()
        self._t += 1
        return self._image(), reward, False, self._t >= self.STEPS, {}


if "MaskedCartPole-v1" not in gymnasium.registry:
    gymnasium.register("MaskedCartPole-v1", entry_point=make_masked_cartpole, max_episode_steps=None)
if "PixelChase-v0" not in gymnasium.registry:
    gymnasium.register("PixelChase-v0", entry_point=PixelChase)


def linear(v: float) -> Callable[[float], float]:
    """SB3 schedule decaying linearly to 0 over the run, as kerasrl's learning rate (ML-Agents)."""
    return lambda progress: progress * v


@dataclass(frozen=True)
class Task:
    """One row of the suite: env, copies, kerasrl config (+ overrides), SB3 model, threshold."""

    env_id: str
    num_envs: int
    config: str
    threshold: float
    steps: int
    sb3_class: str  # "PPO" (stable_baselines3) or "RecurrentPPO" (sb3_contrib)
    sb3_policy: str
    sb3_kwargs: Callable[[], dict[str, Any]]
    overrides: dict[str, Any] = field(default_factory=dict)
    #: SB3's ``VecNormalize`` arguments (None: no wrapper); kerasrl's config says what it normalises.
    sb3_vec_normalize: Optional[dict[str, Any]] = None


def _zoo_cartpole() -> dict[str, Any]:
    return dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                learning_rate=linear(1e-3), clip_range=linear(0.2))


def _pendulum() -> dict[str, Any]:
    import torch

    return dict(n_steps=1024, batch_size=64, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                learning_rate=linear(1e-3), clip_range=0.2, policy_kwargs={"activation_fn": torch.nn.Tanh})


def _lstm() -> dict[str, Any]:
    import torch

    return dict(**_zoo_cartpole(), policy_kwargs={"lstm_hidden_size": 64, "enable_critic_lstm": True,
                                                 "net_arch": {"pi": [64], "vf": [64]}, "activation_fn": torch.nn.Tanh})


def _visual() -> dict[str, Any]:
    return dict(n_steps=128, batch_size=256, gae_lambda=0.95, gamma=0.95, n_epochs=4, ent_coef=0.01,
                learning_rate=linear(5e-4), clip_range=0.2)


TASKS: dict[str, Task] = {
    "cartpole": Task("CartPole-v1", 8, "cartpole_zoo", 475.0, 100_000, "PPO", "MlpPolicy", _zoo_cartpole),
    # 102,400 steps: the 25 whole rollouts of 4 × 1024 that SB3 runs for its Zoo budget of 100k.
    "pendulum": Task("Pendulum-v1", 4, "pendulum_sb3", -200.0, 102_400, "PPO", "MlpPolicy", _pendulum),
    # lstm_sb3: cartpole_zoo's keys with RecurrentPPO's network (LSTM on the observations).
    "lstm": Task("MaskedCartPole-v1", 8, "lstm_sb3", 475.0, 100_000, "RecurrentPPO", "MlpLstmPolicy", _lstm),
    # kerasrl's visual_sb3 config: SB3's NatureCNN and these hyper-parameters in ML-Agents keys.
    "visual": Task("PixelChase-v0", 8, "visual_sb3", 9.0, 50_000, "PPO", "CnnPolicy", _visual),
    "agents64": Task("CartPole-v1", 64, "cartpole_zoo", 475.0, 200_000, "PPO", "MlpPolicy",
                     lambda: {**_zoo_cartpole()}, {"buffer_size": 2047}),
}


def _acrobot() -> dict[str, Any]:
    return dict(n_steps=256, batch_size=64, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0,
                learning_rate=linear(1e-3), clip_range=0.2)


def _lunarlander() -> dict[str, Any]:
    return dict(n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01,
                learning_rate=linear(3e-4), clip_range=0.2)


#: The tuned configs of kerasrl/configs (SB3 with the same settings, but without the Zoo's
#: VecNormalize for Acrobot: kerasrl normalises observations only).
TASKS.update({
    "acrobot": Task("Acrobot-v1", 16, "acrobot", -100.0, 200_000, "PPO", "MlpPolicy", _acrobot),
    "pendulum200k": Task("Pendulum-v1", 4, "pendulum", -250.0, 200_000, "PPO", "MlpPolicy", _pendulum),
    "lunarlander": Task("LunarLander-v3", 16, "lunarlander", 200.0, 1_000_000, "PPO", "MlpPolicy", _lunarlander),
})


def _mujoco(**kwargs: Any) -> Callable[[], dict[str, Any]]:
    """The RL-Zoo's PPO settings for a MuJoCo task (separate 256x256 ReLU networks, log σ from −2)."""
    def make() -> dict[str, Any]:
        import torch

        return dict(**kwargs, policy_kwargs={"log_std_init": -2.0, "ortho_init": False, "activation_fn": torch.nn.ReLU,
                                             "net_arch": {"pi": [256, 256], "vf": [256, 256]}})
    return make


#: MuJoCo with the Zoo's PPO settings (kerasrl/configs/halfcheetah_ppo.yaml, hopper_ppo.yaml):
#: observations and rewards normalised on both sides (SB3: VecNormalize, as the Zoo).
TASKS.update({
    "halfcheetah": Task("HalfCheetah-v5", 1, "halfcheetah_ppo", 1500.0, 1_000_000, "PPO", "MlpPolicy",
                        _mujoco(n_steps=512, batch_size=64, gamma=0.98, learning_rate=2.0633e-5, ent_coef=4.01762e-4,
                                clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096),
                        sb3_vec_normalize={"norm_obs": True, "norm_reward": True, "gamma": 0.98}),
    "hopper": Task("Hopper-v5", 1, "hopper_ppo", 1000.0, 1_000_000, "PPO", "MlpPolicy",
                   _mujoco(n_steps=512, batch_size=32, gamma=0.999, learning_rate=9.80828e-5, ent_coef=2.29519e-3,
                           clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671),
                   sb3_vec_normalize={"norm_obs": True, "norm_reward": True, "gamma": 0.999}),
})
