"""Asking a controller, over gRPC, about a stream's segments, and scaling or truncating it.

```python
segments = await current_segments("tcp://127.0.0.1:9090", "scope", "stream")
group = await ReaderGroup.create(connection, "scope", "group", segments)
new = await scale_stream(uri, "scope", "stream", segments, [(0.0, 0.5), (0.5, 1.0)])
after = await successors(uri, segments[0])   # successor -> all its predecessors
await truncate_stream(uri, StreamCut("scope", "stream", {new[0]: 120, new[1]: 0}))
```

Segments are named as the segment store names them (``scope/stream/N.#epoch.E``). The calls
use our generated controller messages as (de)serializers of a generic gRPC method, as the test
controller serves them, so no protoc stubs are needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc  # type: ignore[import-untyped]

from protoframe.generated.pravega import controller as pb

from .controller.server import SERVICE
from .controller.state import parse_segment_name, segment_name
from .errors import PravegaError

__all__ = ["ControllerError", "ScaleFailed", "StreamCut", "TruncationFailed",
           "current_segments", "scale_stream", "successors", "truncate_stream"]


class ControllerError(PravegaError):
    """The controller could not be asked (unreachable, or the call failed): ``reply`` is the
    gRPC error."""


class ScaleFailed(PravegaError):
    """The controller refused a scale (``reply.status`` says why)."""


class TruncationFailed(PravegaError):
    """The controller refused a stream truncation (``reply.status`` says why)."""


@dataclass(frozen=True)
class StreamCut:
    """A position in a whole stream: an offset in each of segments covering its key space."""

    scope: str
    stream: str
    offsets: Mapping[str, int] = field(default_factory=dict)  # segment name -> offset


def _target(uri: str) -> str:
    return uri.removeprefix("tcp://")


async def _call(controller: str, method: str, request: Any, response: type[Any],
                timeout: float) -> Any:
    try:
        async with grpc.aio.insecure_channel(_target(controller)) as channel:
            call = channel.unary_unary(f"/{SERVICE}/{method}",
                                       request_serializer=lambda m: m.encode(),
                                       response_deserializer=response.decode)
            return await call(request, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        raise ControllerError(f"{controller}: {method} failed: {exc.code()}", exc) from None


async def current_segments(controller: str, scope: str, stream: str, *,
                           timeout: float = 5.0) -> list[str]:
    """The store names of the open segments of ``scope``/``stream``, in key-range order
    (none for a sealed or unknown stream)."""
    reply: pb.SegmentRanges = await _call(controller, "getCurrentSegments",
                                          pb.StreamInfo(scope=scope, stream=stream),
                                          pb.SegmentRanges, timeout)
    ranges = sorted(reply.segmentRanges, key=lambda r: r.minKey)
    return [segment_name(scope, stream, r.segmentId.segmentId) for r in ranges
            if r.segmentId is not None]


async def successors(controller: str, segment: str, *, timeout: float = 5.0
                     ) -> dict[str, list[str]]:
    """The segments that replaced the sealed ``segment``, each with all its predecessors
    (empty while ``segment`` is open)."""
    scope, stream, segment_id = parse_segment_name(segment)
    reply: pb.SuccessorResponse = await _call(
        controller, "getSegmentsImmediatelyFollowing",
        pb.SegmentId(streamInfo=pb.StreamInfo(scope=scope, stream=stream),
                     segmentId=segment_id), pb.SuccessorResponse, timeout)
    out: dict[str, list[str]] = {}
    for entry in reply.segments:
        if entry.segment is None or entry.segment.segmentId is None:
            continue
        name = segment_name(scope, stream, entry.segment.segmentId.segmentId)
        out[name] = sorted(segment_name(scope, stream, p) for p in entry.value)
    return out


async def scale_stream(controller: str, scope: str, stream: str, sealed: Sequence[str],
                       key_ranges: Sequence[tuple[float, float]], *, timeout: float = 5.0
                       ) -> list[str]:
    """Seal the ``sealed`` segments and create segments owning ``key_ranges`` (which must
    cover exactly what the sealed ones owned); the new segments, in key order."""
    ids = []
    for name in sealed:
        owner_scope, owner_stream, segment_id = parse_segment_name(name)
        if (owner_scope, owner_stream) != (scope, stream):
            raise ValueError(f"{name} is not a segment of {scope}/{stream}")
        ids.append(segment_id)
    request = pb.ScaleRequest(
        streamInfo=pb.StreamInfo(scope=scope, stream=stream), sealedSegments=ids,
        newKeyRanges=[pb.ScaleRequest.KeyRangeEntry(start=low, end=high)
                      for low, high in key_ranges])
    reply: pb.ScaleResponse = await _call(controller, "scale", request, pb.ScaleResponse,
                                          timeout)
    if reply.status != pb.ScaleResponse.ScaleStreamStatus.STARTED:
        raise ScaleFailed(f"{scope}/{stream}: scale refused ({reply.status!r})", reply)
    ranges = sorted(reply.segments, key=lambda r: r.minKey)
    return [segment_name(scope, stream, r.segmentId.segmentId) for r in ranges
            if r.segmentId is not None]


async def truncate_stream(controller: str, cut: StreamCut, *, timeout: float = 5.0) -> None:
    """Drop the stream's data before ``cut``: the controller truncates each of its segments
    at its offset and deletes the segments before them. ``TruncationFailed`` if the cut is
    not a position of the whole stream or an offset lies past its segment's end."""
    ids: dict[int, int] = {}
    for name, offset in cut.offsets.items():
        scope, stream, segment_id = parse_segment_name(name)
        if (scope, stream) != (cut.scope, cut.stream):
            raise ValueError(f"{name} is not a segment of {cut.scope}/{cut.stream}")
        ids[segment_id] = offset
    request = pb.StreamCut(streamInfo=pb.StreamInfo(scope=cut.scope, stream=cut.stream),
                           cut=ids)
    reply: pb.UpdateStreamStatus = await _call(controller, "truncateStream", request,
                                               pb.UpdateStreamStatus, timeout)
    if reply.status != pb.UpdateStreamStatus.Status.SUCCESS:
        raise TruncationFailed(f"{cut.scope}/{cut.stream}: truncation refused "
                               f"({reply.status!r})", reply)
