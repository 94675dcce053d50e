"""Side channels: messages beside the steps, in both directions, each channel named by a UUID.

On the wire a message's side-channel bytes are a sequence of ``[16-byte channel UUID (as .NET
writes a Guid: little-endian fields), int32 length, payload]``. A payload is built from
little-endian int32, float32, bool (one byte) and strings (int32 byte count, then UTF-8).

kerasrl ships the channels ML-Agents players understand: engine configuration (time scale,
quality level, screen size, frame rates), environment parameters (the values curricula and
samplers set) and statistics (what a scene records with its ``StatsRecorder``). A user's own
channel subclasses :class:`SideChannel` with the UUID its C# counterpart registers.
"""
from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Mapping, Optional, Sequence

from kerasrl.exception import EnvironmentException

__all__ = [
    "EngineConfig", "EngineConfigurationChannel", "EnvironmentParametersChannel", "IncomingMessage",
    "OutgoingMessage", "SideChannel", "StatsAggregation", "StatsSideChannel", "decode_side_channels",
    "encode_side_channels",
]

logger = logging.getLogger("kerasrl")


class OutgoingMessage:
    """A payload being written (trainer -> player)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write_bool(self, value: bool) -> None:
        self.buffer += struct.pack("<?", value)

    def write_int32(self, value: int) -> None:
        self.buffer += struct.pack("<i", value)

    def write_float32(self, value: float) -> None:
        self.buffer += struct.pack("<f", value)

    def write_float32_list(self, values: Iterable[float]) -> None:
        values = list(values)
        self.write_int32(len(values))
        self.buffer += struct.pack(f"<{len(values)}f", *values)

    def write_string(self, value: str) -> None:
        data = value.encode("utf-8")
        self.write_int32(len(data))
        self.buffer += data


class IncomingMessage:
    """A payload being read (player -> trainer); reading past its end raises ``EnvironmentException``."""

    def __init__(self, buffer: bytes) -> None:
        self.buffer = bytes(buffer)
        self.offset = 0

    def _unpack(self, fmt: str, size: int) -> tuple:
        if self.offset + size > len(self.buffer):
            raise EnvironmentException(f"A side-channel message ended early ({len(self.buffer)} bytes, "
                                       f"reading {size} at {self.offset}).")
        values = struct.unpack_from(fmt, self.buffer, self.offset)
        self.offset += size
        return values

    def read_bool(self) -> bool:
        return bool(self._unpack("<?", 1)[0])

    def read_int32(self) -> int:
        return int(self._unpack("<i", 4)[0])

    def read_float32(self) -> float:
        return float(self._unpack("<f", 4)[0])

    def read_float32_list(self) -> list[float]:
        n = self.read_int32()
        return list(self._unpack(f"<{n}f", 4 * n))

    def read_string(self) -> str:
        n = self.read_int32()
        return bytes(self._unpack(f"<{n}s", n)[0]).decode("utf-8")


class SideChannel:
    """One channel: ``channel_id`` is the UUID both sides register; ``on_message_received`` gets
    each payload from the player; :meth:`queue_message` sends one with the next step."""

    def __init__(self, channel_id: uuid.UUID) -> None:
        self.channel_id = channel_id
        self.outgoing: list[bytes] = []

    def queue_message(self, message: OutgoingMessage) -> None:
        self.outgoing.append(bytes(message.buffer))

    def on_message_received(self, message: IncomingMessage) -> None:
        """Called with each message the player sent on this channel (the default ignores it)."""


def encode_side_channels(channels: Iterable[SideChannel]) -> bytes:
    """Every queued message of ``channels``, framed, in one byte string (the queues are emptied)."""
    out = bytearray()
    for channel in channels:
        for payload in channel.outgoing:
            out += channel.channel_id.bytes_le + struct.pack("<i", len(payload)) + payload
        channel.outgoing.clear()
    return bytes(out)


def decode_side_channels(data: bytes, channels: Mapping[uuid.UUID, SideChannel]) -> None:
    """Hand each framed message of ``data`` to its channel; one for an unknown channel is logged once per id."""
    offset = 0
    while offset < len(data):
        if offset + 20 > len(data):
            raise EnvironmentException(f"The player's side-channel bytes are cut short ({len(data)} bytes, "
                                       f"a frame header at {offset}).")
        channel_id = uuid.UUID(bytes_le=bytes(data[offset:offset + 16]))
        (size,) = struct.unpack_from("<i", data, offset + 16)
        offset += 20
        if size < 0 or offset + size > len(data):
            raise EnvironmentException(f"A side-channel frame of channel {channel_id} claims {size} bytes; "
                                       f"{len(data) - offset} are left.")
        payload = data[offset:offset + size]
        offset += size
        channel = channels.get(channel_id)
        if channel is None:
            if channel_id not in _warned:
                _warned.add(channel_id)
                logger.warning("The player sent a message on side channel %s, which kerasrl has not registered; "
                               "it is ignored.", channel_id)
            continue
        channel.on_message_received(IncomingMessage(payload))


_warned: set[uuid.UUID] = set()


@dataclass(frozen=True)
class EngineConfig:
    """How the player runs: ``None`` leaves a setting as the player has it."""

    width: Optional[int] = None
    height: Optional[int] = None
    quality_level: Optional[int] = None
    time_scale: Optional[float] = None
    target_frame_rate: Optional[int] = None
    capture_frame_rate: Optional[int] = None


class EngineConfigurationChannel(SideChannel):
    """Sets the player's screen size, quality level, time scale and frame rates."""

    CHANNEL_ID = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")

    class Setting(IntEnum):
        SCREEN_RESOLUTION = 0
        QUALITY_LEVEL = 1
        TIME_SCALE = 2
        TARGET_FRAME_RATE = 3
        CAPTURE_FRAME_RATE = 4

    def __init__(self) -> None:
        super().__init__(self.CHANNEL_ID)

    def _send(self, setting: "EngineConfigurationChannel.Setting", *values: tuple[str, float]) -> None:
        message = OutgoingMessage()
        message.write_int32(int(setting))
        for kind, value in values:
            if kind == "f":
                message.write_float32(float(value))
            else:
                message.write_int32(int(value))
        self.queue_message(message)

    def set_configuration(self, config: EngineConfig) -> None:
        """Queue every setting of ``config`` that is not ``None``."""
        if (config.width is None) != (config.height is None):
            raise EnvironmentException("The player's screen size needs both a width and a height "
                                       f"(got width={config.width}, height={config.height}).")
        if config.width is not None and config.height is not None:
            self._send(self.Setting.SCREEN_RESOLUTION, ("i", config.width), ("i", config.height))
        if config.quality_level is not None:
            self._send(self.Setting.QUALITY_LEVEL, ("i", config.quality_level))
        if config.time_scale is not None:
            self._send(self.Setting.TIME_SCALE, ("f", config.time_scale))
        if config.target_frame_rate is not None:
            self._send(self.Setting.TARGET_FRAME_RATE, ("i", config.target_frame_rate))
        if config.capture_frame_rate is not None:
            self._send(self.Setting.CAPTURE_FRAME_RATE, ("i", config.capture_frame_rate))

    def on_message_received(self, message: IncomingMessage) -> None:
        raise EnvironmentException("The player sent a message on the engine-configuration channel, which only "
                                   "the trainer writes.")


class EnvironmentParametersChannel(SideChannel):
    """Sets parameters the scene reads with ``Academy.Instance.EnvironmentParameters``: a float, or
    a sampler the scene draws from anew at each episode (``uniform``: min, max; ``gaussian``:
    mean, standard deviation; ``multirangeuniform``: the intervals' ends, flattened)."""

    CHANNEL_ID = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
    FLOAT = 0
    SAMPLER = 1
    SAMPLER_TYPES = {"uniform": 0, "gaussian": 1, "multirangeuniform": 2}

    def __init__(self) -> None:
        super().__init__(self.CHANNEL_ID)
        self.values: dict[str, float] = {}

    def set_float_parameter(self, key: str, value: float) -> None:
        message = OutgoingMessage()
        message.write_string(key)
        message.write_int32(self.FLOAT)
        message.write_float32(float(value))
        self.queue_message(message)
        self.values[key] = float(value)

    def set_sampler(self, key: str, kind: str, values: Sequence[float], seed: int) -> None:
        """The scene draws ``key`` from a ``kind`` sampler of ``values`` (seeded) at each episode."""
        if kind not in self.SAMPLER_TYPES:
            raise EnvironmentException(f"Environment parameter {key}: no {kind!r} sampler (known: "
                                       f"{', '.join(self.SAMPLER_TYPES)}).")
        message = OutgoingMessage()
        message.write_string(key)
        message.write_int32(self.SAMPLER)
        message.write_int32(int(seed))
        message.write_int32(self.SAMPLER_TYPES[kind])
        if kind == "multirangeuniform":
            message.write_float32_list(values)
        else:
            for value in values:
                message.write_float32(float(value))
        self.queue_message(message)


class StatsAggregation(IntEnum):
    """How a scene asked its statistic to be summarized over a summary period."""

    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3


class StatsSideChannel(SideChannel):
    """Collects what the scene records with ``Academy.Instance.StatsRecorder.Add``: ``take()``
    returns ``{key: (values, aggregation)}`` since the last call."""

    CHANNEL_ID = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")

    def __init__(self) -> None:
        super().__init__(self.CHANNEL_ID)
        self.stats: dict[str, tuple[list[float], StatsAggregation]] = {}

    def on_message_received(self, message: IncomingMessage) -> None:
        key = message.read_string()
        value = message.read_float32()
        aggregation = StatsAggregation(message.read_int32())
        values, _ = self.stats.setdefault(key, ([], aggregation))
        values.append(value)
        self.stats[key] = (values, aggregation)

    def take(self) -> dict[str, tuple[list[float], StatsAggregation]]:
        stats, self.stats = self.stats, {}
        return stats
