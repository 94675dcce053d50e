"""The fastest measured execution path for a policy, chosen in this one place.

A config without kerasrl's extra keys (``jit_compile``, ``inference``) gets, per policy:

* the update (``jit_compile`` unset): compiled with XLA for feed-forward vector and LSTM
  policies, where it was measured faster (the LSTM's longer one-time compile is soon repaid),
  plain ``tf.function`` for visual ones, where XLA's CPU convolutions are much slower
  (``benchmarks/bench_fast_path.py``; figures in ``benchmarks/README.md``);
* the updates and rewards of the curiosity and GAIL models (MLP encoders): XLA unless
  ``jit_compile`` is false (visual signal models never use it, as above);
* acting (``inference: auto``): the numpy mirror of the network, measured faster than the
  compiled TF call (``bench_fast_path.py --acting``), for policies on vector observations,
  feed-forward or LSTM, and for feed-forward policies on cameras with ``simple``/``nature_cnn``
  encoders; the compiled TF call otherwise (recurrent visual policies, ``resnet``).

Both choices are logged once per behavior at start-up; an explicit key always wins.

Start-up: the XLA update's one-time tracing and compilation (a large share of a short run's
start-up, less when loaded from the cache) run in a background thread from the first step of
training (``PPOLearner.start_warm_up``), overlapping the first rollout, and ``use_xla_cache`` keeps
the compiled code on disk (``kerasrl.xla_cache``; on by default in ``kerasrl-learn``) so that
later runs of the same command skip XLA's compiler.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from kerasrl import xla_cache
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.numpy_policy import NumpyActorCritic
from kerasrl.models.numpy_visual import NumpyVisualActorCritic

logger = logging.getLogger("kerasrl")

#: Policy kinds whose update runs faster under XLA on CPU (bench_fast_path.py).
XLA_FASTER = frozenset({"mlp", "lstm"})


def policy_kind(model: ActorCritic) -> str:
    """``lstm`` (recurrent), ``cnn`` (visual observations, feed-forward) or ``mlp``."""
    if model.use_recurrent:
        return "lstm"
    return "cnn" if model.num_visual else "mlp"


def choose_jit_compile(jit_compile: Optional[bool], model: ActorCritic) -> bool:
    """``jit_compile`` as set, else whether XLA was measured faster for this kind of policy."""
    kind = policy_kind(model)
    chosen = kind in XLA_FASTER if jit_compile is None else bool(jit_compile)
    how = "jit_compile is set" if jit_compile is not None else f"the fastest measured for a {kind} policy"
    logger.info("%s: PPO update %s XLA (%s).", model.name, "compiled with" if chosen else "without", how)
    return chosen


def signal_jit_compile(jit_compile: Optional[bool]) -> bool:
    """XLA for the reward signals' models (vector encoders; visual ones opt out themselves):
    ``jit_compile`` as set, else yes, as for the MLP policies it was measured on."""
    return True if jit_compile is None else bool(jit_compile)


def numpy_mirror(model: ActorCritic) -> type[NumpyActorCritic]:
    """The numpy mirror class for ``model``: convolutional (``simple``/``nature_cnn`` cameras) or vector."""
    return NumpyVisualActorCritic if NumpyVisualActorCritic.supports(model) else NumpyActorCritic


def choose_inference(inference: str, model: ActorCritic) -> str:
    """``numpy`` or ``tf``: as set, or (``auto``) numpy wherever a mirror supports the model
    (vector observations with or without memory; feed-forward ``simple``/``nature_cnn`` cameras)."""
    chosen = inference
    if inference == "auto":
        chosen = "numpy" if numpy_mirror(model).supports(model) else "tf"
    how = "inference is set" if inference != "auto" else f"the fastest for a {policy_kind(model)} policy"
    path = "numpy mirror" if chosen == "numpy" else "compiled TF"
    logger.info("%s: acting with the %s policy (%s).", model.name, path, how)
    return chosen


def use_xla_cache(directory: Optional[str] = None) -> Optional[str]:
    """Keep XLA's compiled code in ``directory`` (``kerasrl.xla_cache.enable``: safe to share
    between runs; default ``~/.cache/kerasrl/xla``), so that a later run compiling the same
    update loads it. Call before the process compiles anything with XLA. Returns the folder
    of this TensorFlow's entries, or None when the cache stays off."""
    return xla_cache.enable(directory)


def join_warm_up(thread: Optional[threading.Thread]) -> float:
    """Wait for an update's compilation started ahead in ``thread`` (``None``: none started); the
    seconds waited, which a learner counts as tracing time."""
    if thread is None:
        return 0.0
    start = time.perf_counter()
    thread.join()
    return time.perf_counter() - start
