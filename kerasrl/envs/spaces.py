"""Gymnasium spaces as a kerasrl behavior: the spec one agent's observation and action spaces make,
its observations as float32 arrays, and kerasrl's action rows as what the environment takes.

One :class:`SpaceCodec` serves every agent with the same spaces, batched (a vector env's, or
several PettingZoo agents' stacked) or one at a time. The mapping (``kerasrl.envs.gym_adapter``
describes it for users): ``Box`` of 1 dimension → vector observation; 3 dimensions → visual
``(h, w, c)``; 2-D ``uint8`` → visual ``(h, w, 1)``; other shapes flattened; ``Discrete`` →
one-hot; ``Dict`` → one observation per key; ``uint8`` images scaled to [0, 1]. Actions:
``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` → branches; ``Box`` → continuous, kerasrl's
[−1, 1] mapped onto finite bounds; a ``Tuple`` or ``Dict`` of one ``Box`` and one ``Discrete`` or
``MultiDiscrete`` → hybrid.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium import spaces

from kerasrl.envs.base import ActionType, BehaviorSpec, EnvironmentException, check_actions

__all__ = ["SpaceCodec"]

_BOX, _ONE_HOT = 0, 1


class _HybridActions:
    """A ``Tuple`` or ``Dict`` action space of one ``Box`` and one ``Discrete`` or ``MultiDiscrete``:
    kerasrl's hybrid actions (the Box's dimensions, then the branches)."""

    def __init__(self, space: spaces.Tuple | spaces.Dict, name: str) -> None:
        parts = list(space.spaces.items()) if isinstance(space, spaces.Dict) else list(enumerate(space.spaces))
        boxes = [(k, s) for k, s in parts if isinstance(s, spaces.Box)]
        branches = [(k, s) for k, s in parts if isinstance(s, (spaces.Discrete, spaces.MultiDiscrete))]
        if len(parts) != 2 or len(boxes) != 1 or len(branches) != 1:
            raise EnvironmentException(
                f"{name}: action space {space} is not supported; a Tuple or Dict action space "
                "must hold one Box and one Discrete or MultiDiscrete (hybrid actions).")
        self.keys = [k for k, _ in parts]
        self.as_dict = isinstance(space, spaces.Dict)
        (self.box_key, box), (self.branch_key, branch) = boxes[0], branches[0]
        low = np.asarray(box.low, np.float64).reshape(-1)
        high = np.asarray(box.high, np.float64).reshape(-1)
        finite = np.isfinite(low) & np.isfinite(high)
        low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)
        self.scale = ((high - low) / 2.0).astype(np.float32)
        self.offset = ((high + low) / 2.0).astype(np.float32)
        self.box_shape, self.box_dtype = tuple(box.shape), box.dtype
        self.single = isinstance(branch, spaces.Discrete)
        nvec = np.asarray(branch.n if self.single else branch.nvec, np.int64)  # type: ignore[union-attr]
        self.branch_shape = tuple(nvec.shape)
        self.start = np.asarray(branch.start, np.int64).reshape(1, -1)
        self.action_shape = (int(low.shape[0]), *(int(n) for n in nvec.reshape(-1)))

    def env_action(self, arr: np.ndarray, batched: bool) -> Any:
        """kerasrl's (checked) hybrid action array as the env's tuple or dict."""
        size = self.action_shape[0]
        box = (np.clip(arr[:, :size], -1.0, 1.0) * self.scale + self.offset).astype(self.box_dtype)
        chosen = arr[:, size:].astype(np.int64) + self.start
        if batched:
            values = {self.box_key: box.reshape((-1, *self.box_shape)),
                      self.branch_key: chosen[:, 0] if self.single else chosen.reshape((-1, *self.branch_shape))}
        else:
            values = {self.box_key: box[0].reshape(self.box_shape),
                      self.branch_key: int(chosen[0, 0]) if self.single else chosen[0].reshape(self.branch_shape)}
        if self.as_dict:
            return {k: values[k] for k in self.keys}
        return tuple(values[k] for k in self.keys)


def observation_parts(space: spaces.Space, name: str) -> list[tuple[Optional[str], int, tuple[int, ...], Any]]:
    """How to turn each part of an observation into a float32 array: (dict key, kind, kerasrl shape, extra)."""
    if isinstance(space, spaces.Dict):
        parts: list[tuple[Optional[str], int, tuple[int, ...], Any]] = []
        for key, sub in space.spaces.items():
            if isinstance(sub, spaces.Dict):
                raise EnvironmentException(f"{name}: nested Dict observation spaces are not supported.")
            (_, kind, shape, extra), = observation_parts(sub, name)
            parts.append((str(key), kind, shape, extra))
        if not parts:
            raise EnvironmentException(f"{name} has an empty Dict observation space.")
        return parts
    if isinstance(space, spaces.Box):
        shape = tuple(int(d) for d in space.shape)
        out: tuple[int, ...]
        if len(shape) == 3:
            out = shape
        elif len(shape) == 2 and space.dtype == np.uint8:
            out = shape + (1,)
        else:
            out = (int(np.prod(shape, dtype=np.int64)),)
        scale = np.float32(1.0 / 255.0) if len(out) == 3 and space.dtype == np.uint8 else None
        return [(None, _BOX, out, scale)]
    if isinstance(space, spaces.Discrete):
        return [(None, _ONE_HOT, (int(space.n),), int(space.start))]
    raise EnvironmentException(f"{name}: observation space {space} is not supported (Box, Discrete or Dict of them).")


class SpaceCodec:
    """One agent's observation and action spaces as a kerasrl behavior; ``name`` (e.g.
    ``"Gymnasium env 'CartPole-v1'"``) begins its error messages and ``label`` (the behavior)
    is named in the action errors."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, name: str, label: str) -> None:
        self.name, self.label = name, label
        self.obs_parts = observation_parts(observation_space, name)
        self.single_box = (len(self.obs_parts) == 1 and self.obs_parts[0][0] is None
                           and self.obs_parts[0][1] == _BOX and self.obs_parts[0][3] is None)
        self.obs_batch_shapes = [(-1,) + shape for _, _, shape, _ in self.obs_parts]
        self.one_hot = [np.eye(shape[0], dtype=np.float32) if kind == _ONE_HOT else None
                        for _, kind, shape, _ in self.obs_parts]
        action_type = self._setup_actions(action_space)
        self.spec = BehaviorSpec(observation_shapes=tuple(shape for _, _, shape, _ in self.obs_parts),
                                 action_type=action_type, action_shape=self.action_shape)

    def _setup_actions(self, space: spaces.Space) -> ActionType:
        """Record how kerasrl actions map to the action space; return the kerasrl action type."""
        self.hybrid: Optional[_HybridActions] = None
        if isinstance(space, (spaces.Tuple, spaces.Dict)):
            self.hybrid = _HybridActions(space, self.name)
            self.action_shape: tuple[int, ...] = self.hybrid.action_shape
            return ActionType.HYBRID
        self.act_kind: type = next(
            (k for k in (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box) if isinstance(space, k)),
            type(space),
        )
        self.discrete = not isinstance(space, spaces.Box)
        self._has_start = False
        self._start: Any = 0
        if isinstance(space, spaces.Discrete):
            self.action_shape = (int(space.n),)
            self._start = np.int64(space.start)
            self._has_start = bool(space.start != 0)
            self.env_shape: tuple[int, ...] = ()
        elif isinstance(space, spaces.MultiDiscrete):
            nvec = np.asarray(space.nvec)
            self.action_shape = tuple(int(n) for n in nvec.reshape(-1))
            self._start = np.asarray(space.start, dtype=np.int64).reshape(1, -1)
            self._has_start = bool(np.any(self._start != 0))
            self.env_shape = tuple(nvec.shape)
        elif isinstance(space, spaces.MultiBinary):
            self.env_shape = tuple(int(d) for d in np.atleast_1d(np.asarray(space.n)))
            self.action_shape = (2,) * int(np.prod(self.env_shape))
        elif isinstance(space, spaces.Box):
            self._setup_box_actions(space)
        else:
            raise EnvironmentException(
                f"{self.name}: action space {space} is not supported (Discrete, MultiDiscrete, MultiBinary, Box, or a "
                "Tuple or Dict of a Box and a Discrete or MultiDiscrete).")
        self._dtype = space.dtype if space.dtype is not None else np.int64
        self._single_branch = isinstance(space, spaces.Discrete)
        self._limits = np.asarray(self.action_shape, np.uint64)
        if self._single_branch:
            self._limits = self._limits[0]
        return ActionType.DISCRETE if self.discrete else ActionType.CONTINUOUS

    def _setup_box_actions(self, space: spaces.Box) -> None:
        """A Box's actions: kerasrl's [-1, 1] scaled to the finite bounds (half-bounded ones clipped)."""
        low = np.asarray(space.low, np.float64).reshape(-1)
        high = np.asarray(space.high, np.float64).reshape(-1)
        finite = np.isfinite(low) & np.isfinite(high)
        self.action_shape = (int(low.shape[0]),)
        safe_low, safe_high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)
        self._scale = ((safe_high - safe_low) / 2.0).astype(np.float32)
        self._offset = ((safe_high + safe_low) / 2.0).astype(np.float32)
        self._identity = bool(np.all(self._scale == 1.0) and np.all(self._offset == 0.0))
        half = ~finite & (np.isfinite(low) | np.isfinite(high))
        self._bounds = (low.astype(np.float32), high.astype(np.float32)) if half.any() else None
        self.env_shape = tuple(space.shape)

    def env_actions(self, arr: np.ndarray, batched: bool) -> Any:
        """kerasrl's action rows ``[n, action_size]`` (n = 1 unless ``batched``) as the env's actions:
        a batch (one row per agent) or one agent's action; bad values are one error naming the behavior."""
        if self.hybrid is not None:
            return self.hybrid.env_action(check_actions(self.spec, arr, arr.shape[0], self.label), batched)
        if self.discrete:
            a = arr[:, 0] if self._single_branch else arr
            a = a.astype(np.int64)  # a fresh copy, so the caller's array is never modified
            if np.count_nonzero(a.view(np.uint64) >= self._limits):
                raise EnvironmentException(
                    f"Discrete actions for behavior '{self.label}' fall outside branch sizes {self.action_shape}.")
            if self._has_start:
                a += self._start
        else:
            if np.count_nonzero(np.isfinite(arr)) != arr.size:
                raise EnvironmentException(f"Continuous actions for behavior '{self.label}' contain NaN or inf.")
            a = np.minimum(np.maximum(arr, -1.0), 1.0)
            if not self._identity:
                a = a * self._scale + self._offset
            if self._bounds is not None:
                a = np.minimum(np.maximum(a, self._bounds[0]), self._bounds[1])
        if self.act_kind is spaces.Discrete:
            return a if batched else int(a[0])
        a = a.astype(self._dtype, copy=False)
        return a.reshape((-1, *self.env_shape) if batched else self.env_shape)

    def observations(self, raw: Any, ndim: int = -1) -> list[np.ndarray]:
        """An observation (a batch, or one: then 1 row) as fresh float32 arrays ``[n, *shape]``;
        ``ndim``: the rank a single Box batch already has (no reshape needed), -1 if unknown."""
        if self.single_box:
            o = np.array(raw, dtype=np.float32)
            return [o if o.ndim == ndim else o.reshape(self.obs_batch_shapes[0])]
        out = []
        for (key, kind, _, extra), batch_shape, eye in zip(self.obs_parts, self.obs_batch_shapes, self.one_hot):
            part = raw[key] if key is not None else raw
            if kind == _ONE_HOT:
                out.append(eye[np.asarray(part, np.int64).reshape(-1) - extra])  # type: ignore[index]
            elif extra is not None:
                out.append(np.multiply(part, extra, dtype=np.float32).reshape(batch_shape))
            else:
                out.append(np.array(part, dtype=np.float32).reshape(batch_shape))
        return out
