"""Demonstration files: write and load the experience that ``kerasrl.recording.record`` records.

Two formats are read, told apart by their first bytes (whatever the file's name): Unity ML-Agents'
demonstration files (what the package's DemonstrationRecorder writes; :mod:`kerasrl.demo_format`)
and kerasrl's own HDF5 files. :func:`write` writes either (``format``); ``recording.record`` picks
ML-Agents' format for a ``.demo`` path and HDF5 for any other (``.h5``, say).

kerasrl's HDF5 demo file::

    attrs  kerasrl_demo_version = 1
           behavior_spec        = JSON {"observation_shapes", "action_type", "action_shape"}
           behavior_name        = the behavior that was recorded
    /buffer                     = the experience, written by ``AgentBuffer.save_to_file``

Both are written to a temporary file beside ``path`` and renamed into place, so a failed
recording leaves nothing behind and an existing file untouched.

**Contract of the loaded** :class:`~kerasrl.buffer.AgentBuffer` (what BC and GAIL rely on).
Keys are ``Field`` names; rows are transitions, whole episodes one after another in the order
they ended (an agent's unfinished episode at the end of the recording comes last, cut short);
``N`` rows in all, exactly the ``num_steps`` recorded:

* ``Field.VECTOR_OBS`` float32 ``[N, V]`` and ``Field.NEXT_VECTOR_OBS`` float32 ``[N, V]``
  (when the spec has vector observations; concatenated in spec order);
* ``Field.visual_obs(j)`` / ``Field.next_visual_obs(j)`` float32 ``[N, h, w, c]`` per camera;
* ``Field.ACTIONS``: discrete int32 ``[N, n_branches]``; continuous float32 ``[N, action_size]``
  (the action sent to the environment);
* ``Field.ACTION_MASK`` float32 ``[N, Σ branches]`` (discrete only; 1 = allowed);
* ``Field.DONE``, ``Field.TERMINATED``, ``Field.TRUNCATED`` float32 ``[N]`` (``DONE`` is 1.0 on
  an episode's last step, terminated or truncated);
* ``Field.ENVIRONMENT_REWARDS`` float32 ``[N]``; ``Field.MASKS`` float32 ``[N]`` (all 1);
* ``Field.EPISODE_ID`` int64 ``[N]``: the episode a row belongs to, 0, 1, 2, ... in row order
  (recurrent BC cuts its sequences at episode boundaries with it).
"""
from __future__ import annotations

import json
import os
from typing import Optional, Union

import h5py
import numpy as np

from kerasrl.buffer import AgentBuffer, BufferException, atomic_h5_file
from kerasrl.demo_format import DemoError, is_hdf5, read_unity_demo, write_unity_demo
from kerasrl.exception import one_line
from kerasrl.fields import Field
from kerasrl.spec import BehaviorSpec

__all__ = ["DEMO_FORMAT_VERSION", "FORMATS", "DemoError", "describe_spec", "episode_layout", "format_for_path", "load",
           "load_demo", "write"]

DEMO_FORMAT_VERSION = 1
_VERSION_ATTR = "kerasrl_demo_version"
_SPEC_ATTR = "behavior_spec"
_NAME_ATTR = "behavior_name"
_BUFFER_GROUP = "buffer"
#: What :func:`write` writes: ML-Agents' demonstration format, or kerasrl's HDF5 file.
FORMATS = ("unity", "hdf5")


def describe_spec(spec: BehaviorSpec) -> str:
    """A spec on one line: ``observations [(1,)], discrete actions (2,)``."""
    shapes = ", ".join(str(s) for s in spec.observation_shapes)
    return f"observations [{shapes}], {spec.action_type.value} actions {spec.action_shape}"


def format_for_path(path: Union[str, os.PathLike[str]]) -> str:
    """The format a recording to ``path`` is written in: ``"unity"`` (ML-Agents' demonstration
    format) for a ``.demo`` name, ``"hdf5"`` for any other."""
    return "unity" if os.fspath(path).lower().endswith(".demo") else "hdf5"


def write(path: Union[str, os.PathLike[str]], spec: BehaviorSpec, buffer: AgentBuffer, behavior: str = "",
          format: str = "hdf5") -> None:
    """Write ``buffer`` with ``spec`` as a demo file, atomically (temporary file, then rename):
    kerasrl's HDF5 file (``format="hdf5"``) or ML-Agents' demonstration file (``"unity"``, which
    Unity's tools and ``mlagents`` read; the buffer must hold the fields of the contract above)."""
    if format not in FORMATS:
        raise DemoError(f"Unknown demonstration format {format!r}; the formats are {list(FORMATS)}.")
    path = os.fspath(path)
    if format == "unity":
        write_unity_demo(path, spec, buffer, behavior)
        return
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    try:
        with atomic_h5_file(path) as f:
            f.attrs[_VERSION_ATTR] = DEMO_FORMAT_VERSION
            f.attrs[_SPEC_ATTR] = json.dumps(spec.to_dict())
            f.attrs[_NAME_ATTR] = behavior
            buffer.save_to_file(f.create_group(_BUFFER_GROUP))
    except (OSError, BufferException) as e:
        raise DemoError(f"Unable to write the demonstration {path}: {one_line(e)}") from e


# -- loading -------------------------------------------------------------------------------
def _demo_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".demo"))
        if not files:
            raise DemoError(f"The demonstration folder {path} holds no .demo files.")
        return files
    if not os.path.exists(path):
        raise DemoError(f"The demonstration file {path} does not exist.")
    return [path]


def _load_file(path: str) -> tuple[BehaviorSpec, AgentBuffer]:
    try:
        hdf5 = is_hdf5(path)
    except OSError as e:
        raise DemoError(f"The demonstration file {path} could not be read: {one_line(e)}") from e
    if hdf5:
        spec, buffer = _load_hdf5(path)
    else:
        spec, buffer, _ = read_unity_demo(path)
    _check_contract(path, spec, buffer)
    return spec, buffer


def _load_hdf5(path: str) -> tuple[BehaviorSpec, AgentBuffer]:
    try:
        with h5py.File(path, "r") as f:
            version = f.attrs.get(_VERSION_ATTR)
            if version is None or _BUFFER_GROUP not in f or _SPEC_ATTR not in f.attrs:
                raise DemoError(f"{path} is not a kerasrl demonstration file (no {_VERSION_ATTR} and buffer).")
            if int(version) > DEMO_FORMAT_VERSION:
                raise DemoError(f"The demonstration {path} has format version {int(version)}; this kerasrl reads "
                                f"up to {DEMO_FORMAT_VERSION}.")
            spec = BehaviorSpec.from_dict(json.loads(str(f.attrs[_SPEC_ATTR])))
            buffer = AgentBuffer()
            buffer.load_from_file(f[_BUFFER_GROUP])
    except DemoError:
        raise
    except Exception as e:  # h5py's OSError for a foreign or truncated file, a bad spec, a bad dataset
        raise DemoError(f"The demonstration file {path} could not be read: {one_line(e)}") from e
    return spec, buffer


def _check_contract(path: str, spec: BehaviorSpec, buffer: AgentBuffer) -> None:
    """Every field the contract promises is there, with one length, finite."""
    needed = [Field.ACTIONS, Field.DONE, Field.ENVIRONMENT_REWARDS, Field.EPISODE_ID]
    if spec.vector_observation_size:
        needed.append(Field.VECTOR_OBS)
    needed += [Field.visual_obs(j) for j in range(len(spec.visual_observation_shapes))]
    if spec.has_action_mask:
        needed.append(Field.ACTION_MASK)
    missing = [k for k in needed if k not in buffer]
    if missing:
        raise DemoError(f"The demonstration file {path} lacks the fields {missing}.")
    if not buffer.check_length(list(buffer.keys())):
        raise DemoError(f"The demonstration file {path} has fields of different lengths.")
    if len(buffer[Field.ACTIONS].array) == 0:
        raise DemoError(f"The demonstration file {path} holds no steps.")
    for key in needed:
        arr = buffer[key].array
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise DemoError(f"The demonstration file {path} has NaN or inf in field {key}.")


def load(path: Union[str, os.PathLike[str]]) -> tuple[BehaviorSpec, AgentBuffer]:
    """The behavior spec and experience of a demo file (ML-Agents' or kerasrl's HDF5 format), or of
    every ``.demo`` file of a folder, in name order (which must share one spec; episode ids are
    renumbered to stay distinct)."""
    files = _demo_files(os.fspath(path))
    spec, buffer = _load_file(files[0])
    for other in files[1:]:
        other_spec, more = _load_file(other)
        if other_spec != spec:
            raise DemoError(f"The demonstration {other} is for {describe_spec(other_spec)}, but {files[0]} is for "
                            f"{describe_spec(spec)}.")
        offset = int(buffer[Field.EPISODE_ID].array.max(initial=-1)) + 1
        arrays = {k: np.asarray(v.array) for k, v in more.items()}
        arrays[Field.EPISODE_ID] = arrays[Field.EPISODE_ID] + offset
        for key in [k for k in buffer.keys() if k not in arrays]:  # files of both formats: the fields they share
            del buffer[key]
        buffer.extend_fields({k: arrays[k] for k in buffer.keys()})
    return spec, buffer


def load_demo(path: Union[str, os.PathLike[str]], expected_spec: Optional[BehaviorSpec] = None,
              behavior: str = "") -> tuple[BehaviorSpec, AgentBuffer]:
    """``load(path)``, refusing a demo whose spec is not ``expected_spec`` (the error names both)."""
    spec, buffer = load(path)
    if expected_spec is not None and spec != expected_spec:
        who = f"behavior {behavior}" if behavior else "the behavior"
        raise DemoError(f"The demonstration {os.fspath(path)} is for {describe_spec(spec)}, but {who} "
                        f"has {describe_spec(expected_spec)}.")
    return spec, buffer


def episode_layout(episode_ids: np.ndarray, sequence_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each row of a demonstration goes when it is cut into whole sequences: the source row of
    every output row (−1 for padding) and each source row's episode start flag.

    Episodes (runs of equal ids) are padded at their end to a multiple of ``sequence_length``.
    """
    n = len(episode_ids)
    first = np.ones(n, bool)
    first[1:] = episode_ids[1:] != episode_ids[:-1]
    starts = np.flatnonzero(first)
    lengths = np.diff(np.append(starts, n))
    if sequence_length == 1:
        return np.arange(n), first
    padded = -(-lengths // sequence_length) * sequence_length
    out_starts = np.concatenate([[0], np.cumsum(padded)[:-1]])
    source = np.full(int(padded.sum()), -1, np.int64)
    source[np.repeat(out_starts - starts, lengths) + np.arange(n)] = np.arange(n)
    return source, first
