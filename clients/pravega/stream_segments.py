"""Asking a controller, over gRPC, which segments make up a stream now.

```python
segments = await current_segments("tcp://127.0.0.1:9090", "scope", "stream")
group = await ReaderGroup.create(connection, "scope", "group", segments)
```

The call uses our generated controller messages as (de)serializers of a generic gRPC method,
as the test controller serves them, so no protoc stubs are needed.
"""

from __future__ import annotations

import grpc  # type: ignore[import-untyped]

from protoframe.generated.pravega import controller as pb

from .controller.server import SERVICE
from .controller.state import segment_name

__all__ = ["current_segments"]


def _target(uri: str) -> str:
    return uri.removeprefix("tcp://")


async def current_segments(controller: str, scope: str, stream: str, *,
                           timeout: float = 5.0) -> list[str]:
    """The store names of the open segments of ``scope``/``stream``, in key-range order
    (none for a sealed or unknown stream)."""
    async with grpc.aio.insecure_channel(_target(controller)) as channel:
        call = channel.unary_unary(f"/{SERVICE}/getCurrentSegments",
                                   request_serializer=lambda m: m.encode(),
                                   response_deserializer=pb.SegmentRanges.decode)
        reply: pb.SegmentRanges = await call(pb.StreamInfo(scope=scope, stream=stream),
                                             timeout=timeout)
    ranges = sorted(reply.segmentRanges, key=lambda r: r.minKey)
    return [segment_name(scope, stream, r.segmentId.segmentId) for r in ranges
            if r.segmentId is not None]
