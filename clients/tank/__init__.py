"""A typed asyncio client for TANK's binary protocol, on the bindings generated from
``specs/tank/tank.yaml``; ``clients.tank.broker`` holds an embedded broker to run it against.

```python
async with TankClient(host, port) as client:
    await client.produce("events", 0, [Message(b"v", key=b"k", timestamp=1_700_000_000_000)])
    result = await client.consume("events", 0, FIRST_AVAILABLE, max_bytes=64 * 1024)
    for message in result.messages: ...          # seq_num, timestamp, key, value
    more = await client.consume("events", 0, result.next_seq_num, max_wait=1.0)
```
"""

from .bundles import MalformedBundleError
from .client import FIRST_AVAILABLE, TAIL, TankClient
from .errors import (
    BoundaryCheckError,
    FetchTooSmallError,
    InsufficientReplicasError,
    InvalidMessageError,
    InvalidSeqNumError,
    IoFaultError,
    NoLeaderError,
    OtherLeaderError,
    PendingAcksError,
    ReadOnlyTopicError,
    SystemFaultError,
    TankError,
    TankServerError,
    UnknownPartitionError,
    UnknownTopicError,
)
from .messages import ConsumedMessage, ConsumeResult, Message
from .responses import MalformedResponseError

__all__ = [
    "FIRST_AVAILABLE",
    "TAIL",
    "BoundaryCheckError",
    "ConsumeResult",
    "ConsumedMessage",
    "FetchTooSmallError",
    "InsufficientReplicasError",
    "InvalidMessageError",
    "InvalidSeqNumError",
    "IoFaultError",
    "MalformedBundleError",
    "MalformedResponseError",
    "Message",
    "NoLeaderError",
    "OtherLeaderError",
    "PendingAcksError",
    "ReadOnlyTopicError",
    "SystemFaultError",
    "TankClient",
    "TankError",
    "TankServerError",
    "UnknownPartitionError",
    "UnknownTopicError",
]
