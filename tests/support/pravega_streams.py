"""Streams on our controller and store for tests: creating one over gRPC, and writing keyed
events to the segment that owns each routing key, as a Pravega writer routes them."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import grpc  # type: ignore[import-untyped]

from protoframe.clients.pravega import PravegaConnection, SegmentWriter
from protoframe.clients.pravega.controller.server import SERVICE
from protoframe.generated.pravega import controller as pb

__all__ = ["create_stream", "key_position", "route", "write_keyed"]


async def create_stream(controller: str, scope: str, stream: str, segments: int) -> None:
    """Create ``scope`` (if new) and ``stream`` with ``segments`` segments over gRPC."""
    async with grpc.aio.insecure_channel(controller.removeprefix("tcp://")) as channel:
        for method, message in [
                ("createScope", pb.ScopeInfo(scope=scope)),
                ("createStream", pb.StreamConfig(
                    streamInfo=pb.StreamInfo(scope=scope, stream=stream),
                    scalingPolicy=pb.ScalingPolicy(minNumSegments=segments)))]:
            await channel.unary_unary(
                f"/{SERVICE}/{method}", request_serializer=lambda m: m.encode(),
                response_deserializer=lambda b: b)(message, timeout=10.0)


def key_position(key: str) -> float:
    """Where ``key`` falls in the routing-key space [0, 1)."""
    return zlib.crc32(key.encode()) / 2**32


def route(key: str, segments: Sequence[tuple[str, float, float]]) -> str:
    """The segment of ``(name, low, high)`` whose range holds ``key``."""
    position = key_position(key)
    (name,) = [name for name, low, high in segments if low <= position < high]
    return name


async def write_keyed(connection: PravegaConnection,
                      segments: Sequence[tuple[str, float, float]],
                      events: Sequence[tuple[str, int]]) -> list[bytes]:
    """Write ``(key, sequence)`` events as ``b"key:sequence"`` to their keys' segments, in
    order per segment; the payloads."""
    writers: dict[str, SegmentWriter] = {}
    payloads = []
    for key, sequence in events:
        name = route(key, segments)
        if name not in writers:
            writers[name] = await SegmentWriter.open(connection, name)
        payload = f"{key}:{sequence}".encode()
        writers[name].write(payload)
        payloads.append(payload)
    for writer in writers.values():
        await writer.flush()
    return payloads
