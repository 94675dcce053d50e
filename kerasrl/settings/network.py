"""The network section of a trainer config: the actor-critic's shape (``models.ActorCritic``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.checks import _Checked, at_least, one_of, positive, setting

VIS_ENCODE_TYPES = ("simple", "nature_cnn", "resnet", "match3", "fully_connected")
CONV_STYLES = ("mlagents", "network")
ACTIVATIONS = ("swish", "tanh", "relu")
INITIALIZERS = ("variance_scaling", "orthogonal", "torch")
GAUSSIAN_STYLES = ("mlagents", "sb3")
RECURRENT_STYLES = ("mlagents", "sb3")


@dataclass(frozen=True, kw_only=True)
class NetworkSettings(_Checked):
    """The actor-critic's shape (``models.ActorCritic``)."""

    hidden_units: int = setting(128, at_least(1), "units per hidden layer")
    num_layers: int = setting(2, at_least(1), "hidden layers per stream")
    normalize: bool = setting(False, doc="running mean/variance normalisation of vector observations")
    vis_encode_type: str = setting("simple", one_of(*VIS_ENCODE_TYPES), "visual encoder")
    conv_style: str = setting(
        "mlagents", one_of(*CONV_STYLES),
        "visual encoders' convolutions. mlagents: ML-Agents 0.9's fixed ELU (resnet: ReLU) and Glorot-uniform init; "
        "network: the activation and initializer keys (relu + orthogonal: SB3's NatureCNN)")
    use_recurrent: bool = setting(False, doc="LSTM memory")
    memory_size: int = setting(256, at_least(0), "LSTM state size (cell + hidden), divisible by 4")
    sequence_length: int = setting(64, at_least(1), "steps per training sequence (recurrent only)")
    recurrent_style: str = setting(
        "mlagents", one_of(*RECURRENT_STYLES),
        "where the LSTM sits. mlagents: hidden layers, then the LSTM (discrete actions: with the previous action's "
        "one-hot), then the heads; sb3: the LSTM on the observations, then the hidden layers, then the heads "
        "(sb3-contrib RecurrentPPO's MlpLstmPolicy; vector observations only)")
    critic_memory: bool = setting(
        True, doc="recurrent: the value stream has an LSTM of its own. false: the critic is an MLP on the current "
        "observation and the policy's LSTM holds the whole memory (sb3-contrib's enable_critic_lstm=False; with "
        "recurrent_style: sb3, as there, a linear layer of the LSTM's width comes first; needs use_recurrent and "
        "separate streams, implies separate_value_network)")
    activation: str = setting("swish", one_of(*ACTIVATIONS), "hidden units' activation")
    initializer: str = setting(
        "variance_scaling", one_of(*INITIALIZERS),
        "layers' kernels. variance_scaling: ML-Agents'; orthogonal: Stable-Baselines3's PPO gains; torch: uniform "
        "within ±1/√fan_in, as torch's Linear layers (Stable-Baselines3's SAC)")
    separate_value_network: Optional[bool] = setting(
        None, doc="separate policy and value streams (default: continuous actions only)")
    gaussian_style: str = setting(
        "mlagents", one_of(*GAUSSIAN_STYLES),
        "continuous actions. mlagents: trainable log σ², entropy averaged over dimensions; sb3: trainable log σ "
        "(Stable-Baselines3's), entropy summed over dimensions")
    log_std_init: float = setting(0.0, lambda v: None if -20.0 <= v <= 5.0 else "must be in [-20, 5]",
                                  "initial log σ of continuous actions (SB3's log_std_init)")
    action_bias: bool = setting(
        False, doc="discrete actions of the PPO, MA-POCA and BC actor-critic: each branch's logit layer has a bias, as "
        "Stable-Baselines3's (and today's ML-Agents'); false: no bias, as ML-Agents 0.9's. SAC's policy always has one")
    action_scale: Optional[float] = setting(
        None, positive, "continuous actions: the sample is clipped at ±action_scale and divided by it, giving [-1, 1] "
        "(default 3 for mlagents, 1 for sb3; the Box's half-range puts μ and σ in the env's units, as SB3)")

    def _check(self) -> None:
        if self.use_recurrent and (self.memory_size <= 0 or self.memory_size % 4):
            raise TrainerConfigError(
                f"memory_size must be > 0 and divisible by 4 with use_recurrent (it holds the LSTM cell and hidden "
                f"state of up to two streams), got {self.memory_size}.")
        if not self.critic_memory:
            self._check_no_critic_memory()

    def _check_no_critic_memory(self) -> None:
        """``critic_memory: false`` is a memoryless value stream beside the policy's: it needs an
        LSTM and two streams, and makes the streams separate when that key is unset."""
        if not self.use_recurrent:
            raise TrainerConfigError("critic_memory: false needs use_recurrent: true (a network without memory has "
                                     "no memory to take from the critic).")
        if self.separate_value_network is False:
            raise TrainerConfigError("critic_memory: false needs separate policy and value streams: remove "
                                     "separate_value_network: false or set critic_memory: true.")
        object.__setattr__(self, "separate_value_network", True)
