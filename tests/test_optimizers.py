"""kerasrl's Adam: the Keras update unchanged, PyTorch's ε placement reproduced, bad settings refused."""
import keras
import numpy as np
import pytest

from kerasrl.optimizers import Adam


def torch_adam_reference(w: np.ndarray, grads: list[np.ndarray], lr: float, eps: float,
                         b1: float = 0.9, b2: float = 0.999) -> np.ndarray:
    """PyTorch's documented Adam update, in float64."""
    w, m, v = w.astype(np.float64), np.zeros_like(w, np.float64), np.zeros_like(w, np.float64)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr / (1 - b1**t) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return w


def run(optimizer: keras.optimizers.Optimizer, w0: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    var = keras.Variable(w0)
    optimizer.build([var])
    for g in grads:
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g), var)])
    return keras.ops.convert_to_numpy(var)


def gradients(seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=(5, 3)).astype(np.float32)
    # Magnitudes from 1e-8 to 1: where the two ε conventions differ most.
    scale = np.logspace(-8, 0, 15).reshape(5, 3)
    return w0, [(rng.normal(size=(5, 3)) * scale).astype(np.float32) for _ in range(25)]


def test_torch_style_matches_pytorch_formula():
    w0, grads = gradients()
    got = run(Adam(learning_rate=1e-3, epsilon=1e-5, epsilon_style="torch"), w0, grads)
    want = torch_adam_reference(w0, grads, 1e-3, 1e-5)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_keras_style_is_keras_adam():
    w0, grads = gradients(1)
    got = run(Adam(learning_rate=1e-3, epsilon=1e-5), w0, grads)
    want = run(keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-5), w0, grads)
    np.testing.assert_array_equal(got, want)


def test_the_two_styles_differ_on_small_gradients():
    w0, grads = gradients(2)
    torch_w = run(Adam(learning_rate=1e-3, epsilon=1e-5, epsilon_style="torch"), w0, grads)
    keras_w = run(Adam(learning_rate=1e-3, epsilon=1e-5, epsilon_style="keras"), w0, grads)
    # Keras's ε is effectively ε/√(1−β₂ᵗ) (~30x larger at t=1): weights whose gradients are
    # near ε move much less; large gradients move alike.
    small, large = slice(3, 8), slice(12, 15)
    moved_t, moved_k = np.abs(torch_w - w0).ravel(), np.abs(keras_w - w0).ravel()
    assert (moved_t[small] > 2 * moved_k[small]).all()
    np.testing.assert_allclose(moved_t[large], moved_k[large], rtol=0.05)


def test_config_round_trip():
    opt = Adam(learning_rate=2e-3, epsilon=1e-5, epsilon_style="torch")
    clone = Adam.from_config(opt.get_config())
    assert clone.epsilon_style == "torch" and clone.epsilon == pytest.approx(1e-5)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert isinstance(restored, Adam) and restored.epsilon_style == "torch"


@pytest.mark.parametrize("kwargs,match", [
    ({"epsilon_style": "pytorch"}, "epsilon_style"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": float("nan")}, "epsilon"),
    ({"epsilon_style": "torch", "amsgrad": True}, "amsgrad"),
])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Adam(**kwargs)
