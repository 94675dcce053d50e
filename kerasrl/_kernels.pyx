# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""Small numeric kernels of the acting and trajectory loop, where numpy's per-call overhead
(per array operation, on a handful of rows) would dominate.

* ``sample_masked_categorical``: the numpy policy's masked multi-categorical sampling for a
  batch of agents, the same float32 arithmetic as ``MaskedMultiCategorical`` (softmax,
  ``+EPSILON``, mask, renormalise, inverse-CDF sample, log-probs, entropy) in one call;
* ``gae``: generalised advantage estimation and λ-returns of one trajectory (``gae_segments``:
  of many consecutive ones in one call);
* ``discounted_returns``: the running discounted returns that ``normalize_rewards`` scales by.
"""
from libc.math cimport expf, logf


def sample_masked_categorical(
    const float[:, ::1] logits,
    const float[:, ::1] masks,
    const float[:, ::1] noise,
    const long long[::1] branches,
    float epsilon,
    int[:, ::1] actions,
    float[:, ::1] log_probs,
    float[::1] entropy,
) -> None:
    """Fill ``actions`` / ``log_probs`` ``[n, n_branches]`` and ``entropy`` ``[n]``.

    ``logits`` and ``masks`` are ``[n, Σ branches]``; ``noise`` is uniform in (0, 1),
    ``[n, n_branches]``. Per branch: ``p = softmax(logits)``, ``raw = (p + ε)·mask``,
    ``probs = raw / Σ raw``, ``log p = log(probs + ε)``; the action is the number of CDF
    entries below ``u · cdf[-1]`` (capped at the last action).
    """
    cdef Py_ssize_t n = logits.shape[0]
    cdef Py_ssize_t nb = branches.shape[0]
    cdef Py_ssize_t i, k, j, start, size, a
    cdef float mx, total, raw_total, cdf, threshold, ent, p, lp
    cdef float probs[4096]
    total = 0
    for k in range(nb):
        if branches[k] < 1 or branches[k] > 4096:
            raise ValueError(f"branch {k} has {branches[k]} actions; the kernel supports 1..4096")
        total += branches[k]
    if logits.shape[1] != <Py_ssize_t>total or masks.shape[1] != <Py_ssize_t>total:
        raise ValueError(f"logits/masks have {logits.shape[1]}/{masks.shape[1]} columns, branches sum to {total}")
    if noise.shape[0] != n or noise.shape[1] != nb or masks.shape[0] != n:
        raise ValueError("noise and masks must have one row per agent; noise one column per branch")
    if actions.shape[0] != n or actions.shape[1] != nb or log_probs.shape[0] != n or log_probs.shape[1] != nb \
            or entropy.shape[0] != n:
        raise ValueError("output arrays have the wrong shape")
    with nogil:
        for i in range(n):
            ent = 0
            start = 0
            for k in range(nb):
                size = branches[k]
                mx = logits[i, start]
                for j in range(1, size):
                    if logits[i, start + j] > mx:
                        mx = logits[i, start + j]
                total = 0
                for j in range(size):
                    probs[j] = expf(logits[i, start + j] - mx)
                    total = total + probs[j]
                raw_total = 0
                for j in range(size):
                    probs[j] = (probs[j] / total + epsilon) * masks[i, start + j]
                    raw_total = raw_total + probs[j]
                for j in range(size):
                    probs[j] = probs[j] / raw_total
                cdf = 0
                for j in range(size):
                    cdf = cdf + probs[j]
                threshold = noise[i, k] * cdf
                a = 0
                cdf = 0
                for j in range(size):
                    cdf = cdf + probs[j]
                    if cdf < threshold:
                        a += 1
                if a > size - 1:
                    a = size - 1
                for j in range(size):
                    p = probs[j]
                    lp = logf(p + epsilon)
                    ent = ent - p * lp
                    if j == a:
                        log_probs[i, k] = lp
                actions[i, k] = <int>a
                start += size
            entropy[i] = ent


cdef void _gae_range(const float[::1] rewards, const float[::1] values, Py_ssize_t start, Py_ssize_t end,
                     double value_next, double gamma, double lambd, float[::1] advantages,
                     float[::1] returns) noexcept nogil:
    """GAE(λ) of rows ``[start, end)`` (one trajectory), bootstrapped from ``value_next``."""
    cdef Py_ssize_t t
    cdef float g32 = <float>gamma
    cdef float next_value = <float>value_next
    cdef float delta
    cdef double running = 0.0
    cdef double gl = gamma * lambd
    for t in range(end - 1, start - 1, -1):
        delta = rewards[t] + g32 * next_value
        delta = delta - values[t]
        running = running * gl + <double>delta
        advantages[t] = <float>running
        returns[t] = advantages[t] + values[t]
        next_value = values[t]


def gae(
    const float[::1] rewards,
    const float[::1] values,
    double value_next,
    double gamma,
    double lambd,
    float[::1] advantages,
    float[::1] returns,
) -> None:
    """GAE(λ) of one trajectory into ``advantages`` and ``returns = advantages + values``.

    ``δ_t = r_t + γ·V_{t+1} − V_t`` in float32 (``V_T = value_next``), then
    ``A_t = δ_t + γλ·A_{t+1}`` accumulated in float64 and stored as float32.
    """
    cdef Py_ssize_t n = rewards.shape[0]
    if values.shape[0] != n or advantages.shape[0] != n or returns.shape[0] != n:
        raise ValueError(f"rewards ({n}), values ({values.shape[0]}) and outputs must have one length")
    with nogil:
        _gae_range(rewards, values, 0, n, value_next, gamma, lambd, advantages, returns)


def gae_segments(
    const float[::1] rewards,
    const float[::1] values,
    const long long[::1] ends,
    const double[::1] values_next,
    double gamma,
    double lambd,
    float[::1] advantages,
    float[::1] returns,
) -> None:
    """:func:`gae` of consecutive trajectories in one call: trajectory ``i`` is rows
    ``[ends[i-1], ends[i])`` (from 0), bootstrapped from ``values_next[i]``; ``ends`` ends at
    the row count."""
    cdef Py_ssize_t n = rewards.shape[0]
    cdef Py_ssize_t i, start = 0
    if values.shape[0] != n or advantages.shape[0] != n or returns.shape[0] != n:
        raise ValueError(f"rewards ({n}), values ({values.shape[0]}) and outputs must have one length")
    if values_next.shape[0] != ends.shape[0]:
        raise ValueError(f"{ends.shape[0]} trajectory ends but {values_next.shape[0]} bootstrap values")
    for i in range(ends.shape[0]):
        if ends[i] < start or ends[i] > n:
            raise ValueError(f"trajectory ends must grow within the {n} rows, got {ends[i]} after {start}")
        start = ends[i]
    if start != n:
        raise ValueError(f"the trajectories cover {start} of the {n} rows")
    start = 0
    with nogil:
        for i in range(ends.shape[0]):
            _gae_range(rewards, values, start, ends[i], values_next[i], gamma, lambd, advantages, returns)
            start = ends[i]


def discounted_returns(
    const double[::1] rewards,
    double gamma,
    double start,
    double[::1] returns,
) -> float:
    """Forward discounted returns ``G_t = γ·G_{t-1} + r_t`` from ``G_{-1} = start`` into
    ``returns``; the last one is returned (the running return carried to the next call)."""
    cdef Py_ssize_t n = rewards.shape[0]
    cdef Py_ssize_t t
    cdef double g = start
    if returns.shape[0] != n:
        raise ValueError(f"rewards ({n}) and returns ({returns.shape[0]}) must have one length")
    with nogil:
        for t in range(n):
            g = gamma * g + rewards[t]
            returns[t] = g
    return g
