"""Observation encoders: the dense vector stack and the three visual encoders of ML-Agents 0.9."""
from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from kerasrl.settings import CONV_STYLES, INITIALIZERS, VIS_ENCODE_TYPES, NetworkSettings


def swish(x: tf.Tensor) -> tf.Tensor:
    return x * tf.sigmoid(x)


ACTIVATIONS = {"swish": swish, "tanh": tf.tanh, "relu": tf.nn.relu}


def get_activation(name: str) -> Any:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got '{name}'.")
    return ACTIVATIONS[name]


_ORTHOGONAL_GAIN = {"hidden": 2.0**0.5, "action": 0.01, "value": 1.0}
_VARIANCE_SCALE = {"hidden": 1.0, "action": 0.01, "value": 1.0}


def hidden_initializer(seed: int | None, scale: float = 1.0) -> keras.initializers.Initializer:
    """ML-Agents 0.9's TF1 ``variance_scaling_initializer(factor)`` ≈ fan-in truncated normal."""
    return keras.initializers.VarianceScaling(scale=scale, mode="fan_in", distribution="truncated_normal", seed=seed)


def kernel_initializer(kind: str, role: str, seed: int | None) -> keras.initializers.Initializer:
    """Kernel initializer for a ``role`` ("hidden", "action" or "value") layer.

    ``variance_scaling`` is ML-Agents' choice; ``orthogonal`` is Stable-Baselines3's PPO (gains
    √2 for hidden layers, 0.01 for the action layer, 1 for value heads); ``torch`` is torch's
    ``Linear`` default, uniform within ±1/√fan_in for every role (Stable-Baselines3's SAC; the
    biases stay zero).
    """
    if kind == "orthogonal":
        return keras.initializers.Orthogonal(gain=_ORTHOGONAL_GAIN[role], seed=seed)
    if kind == "torch":
        return keras.initializers.VarianceScaling(scale=1.0 / 3.0, mode="fan_in", distribution="uniform", seed=seed)
    if kind == "variance_scaling":
        return hidden_initializer(seed, _VARIANCE_SCALE[role])
    raise ValueError(f"initializer must be one of {INITIALIZERS}, got '{kind}'.")


class VectorEncoder(keras.layers.Layer):
    """``num_layers`` dense layers of ``hidden_units`` (swish, as ML-Agents; values < 1 coerced to 1),
    computing in the encoder's ``dtype`` policy."""

    def __init__(self, hidden_units: int, num_layers: int, seed: int | None = None,
                 activation: str = NetworkSettings.activation, initializer: str = NetworkSettings.initializer,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.initializer = initializer
        self.hidden_units = int(hidden_units)
        self.num_layers = max(int(num_layers), 1)
        self.seed = seed
        self.activation = activation
        self.dense = [
            keras.layers.Dense(
                self.hidden_units,
                activation=get_activation(activation),
                kernel_initializer=kernel_initializer(initializer, "hidden", None if seed is None else seed + i),
                name=f"hidden_{i}",
                dtype=self.dtype_policy,
            )
            for i in range(self.num_layers)
        ]

    def call(self, x: tf.Tensor) -> tf.Tensor:
        for layer in self.dense:
            x = layer(x)
        return x

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "hidden_units": self.hidden_units, "num_layers": self.num_layers,
                "seed": self.seed, "activation": self.activation, "initializer": self.initializer}


#: The convolutions' fixed activation per encoder under ``conv_style: mlagents`` (ELU otherwise).
_MLAGENTS_CONV_ACTIVATION = {"resnet": "relu", "match3": "leaky_relu"}
_CONV_ACTIVATIONS = {"elu": tf.nn.elu, "leaky_relu": tf.nn.leaky_relu}


def _conv(filters: int, kernel: int, stride: int, initializer: keras.initializers.Initializer, padding: str = "valid",
          activation: Any = None, name: str | None = None, dtype: Any = None) -> keras.layers.Conv2D:
    return keras.layers.Conv2D(filters, kernel, strides=stride, padding=padding, activation=activation,
                               kernel_initializer=initializer, name=name, dtype=dtype)


class VisualEncoder(keras.layers.Layer):
    """Convolutional encoder of one camera followed by the dense stack.

    ``simple``: 16@8×8/4 → 32@4×4/2; ``nature_cnn``: 32@8×8/4 → 64@4×4/2 → 64@3×3/1;
    ``resnet``: per channel count in (16, 32, 32): conv 3×3 → maxpool 3×3/2 → two residual
    blocks, then the activation; ``match3`` (ML-Agents' encoder for small boards, from 5×5):
    35@3×3/1 → 144@3×3/1 with leaky ReLU; ``fully_connected``: no convolution, the pixels flattened.
    The dense stack after the flattened features follows ``activation`` and ``initializer`` (as
    ML-Agents'); the convolutions do with ``conv_style`` ``network`` (ReLU + orthogonal √2 with one
    512-unit layer is SB3's NatureCNN) and are
    ML-Agents 0.9's fixed ELU (ReLU for resnet) with Glorot-uniform init with ``mlagents``.
    Inputs are images in ``[0, 1]``, ``(h, w, c)``; every layer computes in the encoder's ``dtype`` policy.
    """

    MIN_SIZE = {"simple": 20, "nature_cnn": 36, "resnet": 15, "match3": 5, "fully_connected": 1}

    def __init__(self, encode_type: str, hidden_units: int, num_layers: int, seed: int | None = None,
                 activation: str = NetworkSettings.activation, initializer: str = NetworkSettings.initializer,
                 conv_style: str = NetworkSettings.conv_style, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if encode_type not in VIS_ENCODE_TYPES:
            raise ValueError(f"vis_encode_type must be one of {VIS_ENCODE_TYPES}, got '{encode_type}'.")
        if conv_style not in CONV_STYLES:
            raise ValueError(f"conv_style must be one of {CONV_STYLES}, got '{conv_style}'.")
        self.encode_type = encode_type
        self.hidden_units = int(hidden_units)
        self.num_layers = max(int(num_layers), 1)
        self.seed = seed
        self.activation, self.initializer, self.conv_style = activation, initializer, conv_style
        mlagents = conv_style == "mlagents"
        #: The convolutions' activation, by name (``elu`` or one of ``ACTIVATIONS``) and as a function.
        self.conv_activation_name = _MLAGENTS_CONV_ACTIVATION.get(encode_type, "elu") if mlagents else activation
        self.conv_activation = _CONV_ACTIVATIONS.get(self.conv_activation_name) or get_activation(self.conv_activation_name)
        counter = iter(range(1, 1000))

        def conv(filters: int, kernel: int, stride: int, padding: str = "valid", activation: Any = None) -> keras.layers.Conv2D:
            k = None if seed is None else seed * 100 + next(counter)
            init = keras.initializers.GlorotUniform(seed=k) if mlagents else kernel_initializer(initializer, "hidden", k)
            return _conv(filters, kernel, stride, init, padding, activation, dtype=self.dtype_policy)

        act = self.conv_activation
        if encode_type == "simple":
            self.convs = [conv(16, 8, 4, activation=act), conv(32, 4, 2, activation=act)]
        elif encode_type == "nature_cnn":
            self.convs = [conv(32, 8, 4, activation=act), conv(64, 4, 2, activation=act), conv(64, 3, 1, activation=act)]
        elif encode_type == "match3":
            self.convs = [conv(35, 3, 1, activation=act), conv(144, 3, 1, activation=act)]
        elif encode_type == "fully_connected":
            self.convs = []
        else:
            self.stages = []
            for ch in (16, 32, 32):
                blocks = [(conv(ch, 3, 1, "same"), conv(ch, 3, 1, "same")) for _ in range(2)]
                self.stages.append((conv(ch, 3, 1), keras.layers.MaxPooling2D(3, 2, "same", dtype=self.dtype_policy),
                                    blocks))
        self.flatten = keras.layers.Flatten(dtype=self.dtype_policy)
        self.dense = VectorEncoder(hidden_units, num_layers, seed=seed, activation=activation, initializer=initializer,
                                   name="dense", dtype=self.dtype_policy)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        if self.encode_type == "resnet":
            act = self.conv_activation
            for conv, pool, blocks in self.stages:
                x = pool(conv(x))
                for c1, c2 in blocks:
                    x = x + c2(act(c1(act(x))))
            x = act(x)
        else:
            for conv in self.convs:
                x = conv(x)
        return self.dense(self.flatten(x))

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(), "encode_type": self.encode_type, "hidden_units": self.hidden_units,
            "num_layers": self.num_layers, "seed": self.seed, "activation": self.activation,
            "initializer": self.initializer, "conv_style": self.conv_style,
        }
