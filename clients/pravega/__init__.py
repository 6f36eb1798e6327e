"""Pravega on top of the generated segment-store protocol: a typed asyncio client (connection,
writer, reader), an embedded segment store and a minimal gRPC controller for tests.

```python
async with EmbeddedSegmentStore() as store:
    connection = await PravegaConnection.connect(*store.address)
    await connection.requests.create_segment("scope/stream/0.#epoch.0", 0, 0, "")
    writer = await SegmentWriter.open(connection, "scope/stream/0.#epoch.0")
    await writer.write(b"event")                 # the event number, once acknowledged
    events = await SegmentReader(connection, "scope/stream/0.#epoch.0").read_all()
```

``TableSegmentClient`` reads and writes a table segment (versioned keys and values, conditional
updates, paged scans).

``ReaderGroup`` keeps a reader group's state (who holds which segment, and each segment's
read position) in a table segment; ``GroupReader`` joins it, reads its fair share of the
segments and records its positions, so a successor resumes where it stopped;
``current_segments`` asks a controller for the segments of a stream to build it on. When a
held segment ends sealed, the reader asks the controller (``successors``) for the segments that
replaced it, and the group adds each one once all its predecessors are read to their end.

``scale_stream`` seals segments and creates their successors through the controller;
``truncate_stream`` drops a stream's data before a ``StreamCut`` (the controller truncates each
segment of the cut and deletes the segments before it).

``truncate_segment`` drops a segment's data before an offset (reads below it then raise
``SegmentIsTruncated``); ``segment_info`` gives its start offset and length.

``SegmentWriter.connect(host, port, segment, retry=RetryPolicy(...))`` opens a writer on a
connection of its own that survives losing it: events are sent again after a reconnect
without being lost or stored twice, until the policy gives up (``StoreUnreachable``).
"""

from .connection import ConnectionOptions, PravegaConnection
from .controller import ControllerServer
from .errors import (
    AppendRuleViolation,
    AuthTokenCheckFailed,
    ConditionalCheckFailed,
    IncompatibleVersion,
    NoSuchSegment,
    OperationUnsupported,
    PravegaError,
    SegmentAlreadyExists,
    SegmentIsSealed,
    SegmentIsTruncated,
    ServerError,
    StoreUnreachable,
    TableKeyBadVersion,
    TableKeyDoesNotExist,
    TableSegmentNotEmpty,
    UnexpectedCommand,
    WrongHost,
)
from .events import ReadEvent
from .group_reader import GroupEvent, GroupReader
from .reader import SegmentReader
from .reader_group import ReaderGroup, SegmentNotHeld
from .reconnect import RetryPolicy
from .segments import SegmentInfo, segment_info, truncate_segment
from .store import EmbeddedSegmentStore
from .stream_segments import (
    ControllerError,
    ScaleFailed,
    StreamCut,
    TruncationFailed,
    current_segments,
    scale_stream,
    successors,
    truncate_stream,
)
from .tables import NO_VERSION, NOT_EXISTS, TableChanges, TableEntry, TableSegmentClient
from .writer import SegmentWriter

__all__ = [
    "NOT_EXISTS",
    "NO_VERSION",
    "AppendRuleViolation",
    "AuthTokenCheckFailed",
    "ConditionalCheckFailed",
    "ConnectionOptions",
    "ControllerError",
    "ControllerServer",
    "GroupEvent",
    "GroupReader",
    "EmbeddedSegmentStore",
    "IncompatibleVersion",
    "NoSuchSegment",
    "OperationUnsupported",
    "PravegaConnection",
    "PravegaError",
    "ReadEvent",
    "ReaderGroup",
    "RetryPolicy",
    "ScaleFailed",
    "SegmentAlreadyExists",
    "SegmentInfo",
    "SegmentIsSealed",
    "SegmentIsTruncated",
    "SegmentNotHeld",
    "SegmentReader",
    "SegmentWriter",
    "ServerError",
    "StoreUnreachable",
    "StreamCut",
    "TableChanges",
    "TableEntry",
    "TableKeyBadVersion",
    "TableKeyDoesNotExist",
    "TableSegmentClient",
    "TableSegmentNotEmpty",
    "TruncationFailed",
    "UnexpectedCommand",
    "WrongHost",
    "current_segments",
    "scale_stream",
    "segment_info",
    "successors",
    "truncate_segment",
    "truncate_stream",
]
