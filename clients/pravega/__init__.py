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
"""

from .connection import PravegaConnection
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
    UnexpectedCommand,
    WrongHost,
)
from .events import ReadEvent
from .reader import SegmentReader
from .store import EmbeddedSegmentStore
from .writer import SegmentWriter

__all__ = [
    "AppendRuleViolation",
    "AuthTokenCheckFailed",
    "ConditionalCheckFailed",
    "ControllerServer",
    "EmbeddedSegmentStore",
    "IncompatibleVersion",
    "NoSuchSegment",
    "OperationUnsupported",
    "PravegaConnection",
    "PravegaError",
    "ReadEvent",
    "SegmentAlreadyExists",
    "SegmentIsSealed",
    "SegmentIsTruncated",
    "SegmentReader",
    "SegmentWriter",
    "ServerError",
    "UnexpectedCommand",
    "WrongHost",
]
