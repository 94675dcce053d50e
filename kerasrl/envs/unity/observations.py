"""Agent infos from a player's message as kerasrl arrays: observations, rewards, flags, masks.

Vector observations arrive as float lists; visual ones as floats too, or as PNG images
(``compression_type`` PNG). A PNG is always decoded to RGB; more than 3 channels come as
several PNGs back to back, and ``compressed_channel_mapping`` says which decoded channel
feeds which observation channel (stacked grey images map three RGB channels onto one, which
is their average). Without a mapping a 1-channel observation is the average of R, G and B.
Pixel values become floats in [0, 1].
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import tensorflow as tf

from kerasrl.demo_format import layout
from kerasrl.demo_format._common import Corrupt
from kerasrl.demo_format.png import split_pngs
from kerasrl.exception import EnvironmentException
from kerasrl.protos import unity_protocol_pb2 as pb

__all__ = ["action_masks", "decode_png_observation", "observation_arrays"]


def decode_png_observation(data: bytes, shape: Sequence[int], mapping: Sequence[int] = ()) -> np.ndarray:
    """One PNG-compressed observation as a float32 ``(height, width, channels)`` array in [0, 1]."""
    height, width, channels = (int(d) for d in shape)
    try:
        pngs = split_pngs(data)
    except Corrupt as e:
        raise EnvironmentException(f"A compressed observation is not PNG data ({e}).") from None
    images = [tf.io.decode_png(png, channels=3).numpy() for png in pngs]
    decoded = np.concatenate(images, axis=2).astype(np.float32) * np.float32(1.0 / 255.0)
    if decoded.shape[:2] != (height, width):
        raise EnvironmentException(f"A PNG observation is {decoded.shape[0]}x{decoded.shape[1]}, its shape "
                                   f"says {height}x{width}.")
    if mapping:
        out = np.zeros((height, width, channels), np.float32)
        counts = np.zeros(channels, np.float32)
        for source, target in enumerate(list(mapping)[: decoded.shape[2]]):
            if target >= 0:
                out[:, :, target] += decoded[:, :, source]
                counts[target] += 1
        return out / np.maximum(counts, 1.0)
    if channels == 1:
        return decoded[:, :, :3].mean(axis=2, keepdims=True)
    if decoded.shape[2] < channels:
        raise EnvironmentException(f"A PNG observation has {decoded.shape[2]} channels, its shape says {channels}.")
    return decoded[:, :, :channels]


@tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
def _decode_pngs(data: tf.Tensor) -> tf.Tensor:
    """Every PNG of ``data`` (all of one size) as RGB ``uint8``, in one call."""
    return tf.map_fn(lambda png: tf.io.decode_png(png, channels=3), data, fn_output_signature=tf.uint8)


def _batch_of_pngs(protos: list[pb.ObservationProto], shape: tuple[int, ...]) -> np.ndarray:
    """One observation of many agents, each a single PNG of 1 to 3 channels, decoded in one call."""
    rgb = _decode_pngs(tf.constant([p.compressed_data for p in protos])).numpy()
    if rgb.shape[1:3] != shape[:2]:
        raise EnvironmentException(f"PNG observations are {rgb.shape[1]}x{rgb.shape[2]}, their shape says "
                                   f"{shape[0]}x{shape[1]}.")
    images = rgb.astype(np.float32) * np.float32(1.0 / 255.0)
    return images.mean(axis=3, keepdims=True) if shape[2] == 1 else images[..., : shape[2]]


def _one(proto: pb.ObservationProto, shape: tuple[int, ...]) -> np.ndarray:
    if proto.compression_type == pb.PNG:
        return decode_png_observation(proto.compressed_data, shape, proto.compressed_channel_mapping)
    data = np.asarray(proto.float_data.data, np.float32)
    if data.size != int(np.prod(shape)):
        raise EnvironmentException(f"An observation has {data.size} values, its shape {shape} needs "
                                   f"{int(np.prod(shape))}.")
    return layout.to_kerasrl_layout(data, proto, shape)


def observation_arrays(infos: Sequence[pb.AgentInfoProto], shapes: Sequence[tuple[int, ...]],
                       behavior: str) -> list[np.ndarray]:
    """Observation ``k`` of every agent in ``infos``, stacked: one ``[n, *shapes[k]]`` array per ``k``."""
    observations = [info.observations for info in infos]  # each read once: a field access costs ~0.3 µs
    for info, obs in zip(infos, observations):
        if len(obs) != len(shapes):
            raise EnvironmentException(f"Agent {info.id} of behavior '{behavior}' sent {len(obs)} "
                                       f"observations; the behavior has {len(shapes)}.")
    out = []
    for k, shape in enumerate(shapes):
        protos = [obs[k] for obs in observations]
        if len(shape) == 1 and all(p.compression_type == pb.NONE for p in protos):
            out.append(_stack_floats(protos, shape, k, behavior))
        elif len(shape) == 3 and shape[2] <= 3 and len(infos) > 1 and all(
                p.compression_type == pb.PNG and not p.compressed_channel_mapping for p in protos):
            out.append(_batch_of_pngs(protos, shape))
        else:
            out.append(np.stack([_one(p, shape) for p in protos]) if infos else np.zeros((0,) + shape, np.float32))
    return out


def _stack_floats(protos: list[pb.ObservationProto], shape: tuple[int, ...], k: int, behavior: str) -> np.ndarray:
    """One vector observation of many agents as ``[n, size]``. The values are read in one pass
    (``np.fromiter``): numpy's ``np.array`` of protobuf's repeated fields takes ~7 µs per agent."""
    flat = [p.float_data.data for p in protos]
    size = int(np.prod(shape))
    if any(len(data) != size for data in flat):
        raise EnvironmentException(f"Observation {k} of behavior '{behavior}' does not have shape {shape} "
                                   "for every agent.")
    return np.fromiter(itertools.chain.from_iterable(flat), np.float32, size * len(flat)).reshape((len(flat),) + shape)


def action_masks(infos: Sequence[pb.AgentInfoProto], width: int) -> np.ndarray:
    """The agents' action masks as float32 ``[n, width]``, 1 = allowed (a player's ``action_mask``
    says true for an action that is not); an agent without a mask of ``width`` values may take any.
    Read in one pass, as :func:`_stack_floats` reads observations."""
    masks = [info.action_mask for info in infos]
    if all(len(m) == width for m in masks):
        flags = np.fromiter(itertools.chain.from_iterable(masks), bool, width * len(masks)).reshape(len(masks), width)
        return (~flags).astype(np.float32)
    out = np.ones((len(masks), width), np.float32)
    for row, m in enumerate(masks):
        if len(m) == width:
            out[row] = ~np.array(m, bool)
    return out
