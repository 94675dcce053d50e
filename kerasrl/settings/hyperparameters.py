"""The hyperparameters section of a trainer config: PPO's hyper-parameters and how its update runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _Checked, at_least, one_of, positive, setting, unit_interval
from kerasrl.settings.sac import LEARNING_RATE_SCHEDULES

ADAM_EPSILON_STYLES = ("keras", "torch")
ADVANTAGE_NORMALIZATIONS = ("buffer", "minibatch")
SEQUENCE_BATCHES = ("mlagents", "sb3")


@dataclass(frozen=True, kw_only=True)
class PPOSettings(_Checked):
    """PPO's hyper-parameters and how its update runs (``ppo.PPOLearner``)."""

    batch_size: int = setting(1024, at_least(1), "experiences per gradient step")
    buffer_size: int = setting(10240, at_least(1), "update when the update buffer holds more than this")
    beta: float = setting(5.0e-3, at_least(0.0), "entropy bonus (decays linearly to beta_end)")
    beta_end: float = setting(1.0e-5, at_least(0.0), "where the entropy bonus decays to (SB3's is constant: beta)")
    epsilon: float = setting(0.2, positive, "PPO clip range (decays linearly to epsilon_end)")
    epsilon_end: float = setting(0.1, at_least(0.0), "where the clip range decays to")
    lambd: float = setting(0.95, unit_interval, "GAE lambda")
    learning_rate: float = setting(3.0e-4, positive, "Adam's step size (see learning_rate_schedule)")
    learning_rate_schedule: str = setting("linear", one_of(*LEARNING_RATE_SCHEDULES),
                                          "linear: decays to 1e-10 at max_steps (ML-Agents); constant (the RL-Zoo's MuJoCo)")
    num_epoch: int = setting(3, at_least(1), "passes over the update buffer")
    clip_value_loss: bool = setting(True, doc="PPO value clipping with the same epsilon")
    vf_coef: float = setting(0.5, at_least(0.0), "weight of the value loss in PPO's loss (SB3's and the RL-Zoo's "
                                                   "vf_coef; ML-Agents fixes it at 0.5)")
    max_grad_norm: Optional[float] = setting(None, positive, "clip the global gradient norm (PyTorch's formula)")
    adam_epsilon: float = setting(1.0e-7, positive, "Adam's epsilon")
    adam_epsilon_style: str = setting("keras", one_of(*ADAM_EPSILON_STYLES),
                                      "keras: eps added to sqrt(v); torch: to the bias-corrected sqrt(v)")
    fused_update: bool = setting(True, doc="every epoch and mini-batch of an update in one compiled call")
    jit_compile: Optional[bool] = setting(
        None, doc="compile the update with XLA (default: where measured faster, kerasrl.common.fast_path)")
    flush_on_update: bool = setting(False, doc="cut every trajectory when an update is due (SB3's rollouts)")
    normalize_advantages: str = setting(
        "buffer", one_of(*ADVANTAGE_NORMALIZATIONS),
        "advantages normalised over the update buffer (ML-Agents) or also per mini-batch (SB3)")
    sequence_batches: str = setting(
        "mlagents", one_of(*SEQUENCE_BATCHES),
        "recurrent mini-batches. mlagents: batch_size / sequence_length whole sequences, padding counted, the "
        "trailing partial mini-batch dropped; sb3: batch_size counts agent steps and every epoch visits every "
        "sequence, in ceil(steps / batch_size) mini-batches (sb3-contrib's RecurrentPPO)")
    normalize_rewards: bool = setting(
        False, doc="divide the extrinsic rewards by the running std of their discounted return, clipped to ±10 "
                   "(SB3's VecNormalize norm_reward, the RL-Zoo's for MuJoCo)")

    def _check(self) -> None:
        if self.batch_size > self.buffer_size + 1:
            raise TrainerConfigError(
                f"batch_size ({self.batch_size}) is larger than an update (buffer_size + 1 = "
                f"{self.buffer_size + 1}): no mini-batch could be drawn.")
