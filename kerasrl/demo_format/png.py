"""PNG images of visual observations, without TensorFlow: a decoder for 8-bit, non-interlaced
images (grey, grey+alpha, RGB, RGBA, palette; every scanline filter) and an RGB encoder."""
from __future__ import annotations

import struct
import zlib

import numpy as np

from kerasrl.demo_format._common import INV_255, PNG_SIGNATURE, Corrupt
from kerasrl.protos import unity_protocol_pb2 as pb

__all__ = ["decode_png", "encode_png", "png_observation", "split_pngs"]


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb_, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb_ and pa <= pc:
        return a
    return b if pb_ <= pc else c


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    """The scanlines of a non-interlaced image, their filters undone: uint8 ``[height, stride]``."""
    if len(raw) < height * (stride + 1):
        raise Corrupt(f"a PNG image holds {len(raw)} bytes of pixels, its size needs {height * (stride + 1)}")
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.uint8)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, np.uint8, stride, start + 1)
        if kind == 0:
            row = line.copy()
        elif kind == 1:  # Sub: a running sum per byte of a pixel, modulo 256
            row = np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.uint8).reshape(-1)
        elif kind == 2:  # Up
            row = line + prev
        elif kind in (3, 4):  # Average, Paeth: each byte needs the one decoded before it
            cur = bytearray(line.tobytes())
            up = prev.tobytes()
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if kind == 3:
                    cur[i] = (cur[i] + ((left + up[i]) >> 1)) & 0xFF
                else:
                    cur[i] = (cur[i] + _paeth(left, up[i], up[i - bpp] if i >= bpp else 0)) & 0xFF
            row = np.frombuffer(bytes(cur), np.uint8)
        else:
            raise Corrupt(f"a PNG scanline has filter type {kind}")
        out[y] = row
        prev = row
    return out


def decode_png(data: bytes) -> np.ndarray:
    """One PNG image (8-bit grey, grey+alpha, RGB, RGBA or palette; not interlaced) as RGB
    ``uint8 [height, width, 3]``: grey repeated in the three channels, alpha dropped."""
    if data[:8] != PNG_SIGNATURE:
        raise Corrupt("a compressed observation is not PNG data")
    pos, header, palette, idat = 8, b"", b"", []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise Corrupt("a PNG image is cut short")
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"PLTE":
            palette = body
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if len(header) != 13:
        raise Corrupt("a PNG image has no header")
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color)
    if channels is None or depth != 8 or interlace:
        raise Corrupt(f"a PNG image has bit depth {depth}, color type {color}, interlace {interlace}: kerasrl reads "
                   "8-bit, non-interlaced images")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        raise Corrupt(f"a PNG image's pixels do not decompress: {e}") from e
    pixels = _unfilter(raw, height, width * channels, channels).reshape(height, width, channels)
    if color == 3:
        table = np.frombuffer(palette, np.uint8)
        if table.size % 3 or pixels.max(initial=0) >= table.size // 3:
            raise Corrupt("a PNG image's palette is missing or too short")
        return table.reshape(-1, 3)[pixels[:, :, 0]]
    if channels <= 2:
        return np.repeat(pixels[:, :, :1], 3, axis=2)
    return np.ascontiguousarray(pixels[:, :, :3])


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def encode_png(image: np.ndarray) -> bytes:
    """An RGB ``uint8 [height, width, 3]`` image as a PNG file (each scanline Sub-filtered)."""
    height, width, _ = image.shape
    rgb = np.ascontiguousarray(image, np.uint8)
    filtered = rgb.copy()
    filtered[:, 1:] -= rgb[:, :-1]  # Sub: each byte minus the same byte of the pixel to its left (mod 256)
    lines = np.concatenate([np.ones((height, 1), np.uint8), filtered.reshape(height, width * 3)], axis=1)
    return (PNG_SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(lines.tobytes(), 6)) + _chunk(b"IEND", b""))


def split_pngs(data: bytes) -> list[bytes]:
    """The PNG files concatenated in ``data`` (more than 3 channels come as several)."""
    starts = []
    at = data.find(PNG_SIGNATURE)
    while at != -1:
        starts.append(at)
        at = data.find(PNG_SIGNATURE, at + len(PNG_SIGNATURE))
    if not starts or starts[0] != 0:
        raise Corrupt("a compressed observation is not PNG data")
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


def png_observation(proto: pb.ObservationProto, shape: tuple[int, ...]) -> np.ndarray:
    """A PNG-compressed observation as float32 ``(height, width, channels)`` in [0, 1], as
    kerasrl's Unity environment decodes it (a channel mapping averages the channels it joins;
    without one, a 1-channel observation is the average of R, G and B)."""
    height, width, channels = shape
    decoded = np.concatenate([decode_png(png) for png in split_pngs(proto.compressed_data)], axis=2)
    if decoded.shape[:2] != (height, width):
        raise Corrupt(f"a PNG observation is {decoded.shape[0]}x{decoded.shape[1]}, its shape says {height}x{width}")
    mapping = list(proto.compressed_channel_mapping)
    if mapping:
        sums = np.zeros((height, width, channels), np.int32)
        counts = np.zeros(channels, np.int32)
        for source, target in enumerate(mapping[: decoded.shape[2]]):
            if 0 <= target < channels:
                sums[:, :, target] += decoded[:, :, source]
                counts[target] += 1
        return (sums / np.maximum(counts, 1)).astype(np.float32) * INV_255
    if channels == 1:  # integer sum first: a grey pixel (R = G = B) reads back exactly
        return (decoded[:, :, :3].sum(axis=2, dtype=np.int32, keepdims=True) / 3).astype(np.float32) * INV_255
    if decoded.shape[2] < channels:
        raise Corrupt(f"a PNG observation has {decoded.shape[2]} channels, its shape says {channels}")
    return decoded[:, :, :channels].astype(np.float32) * INV_255
