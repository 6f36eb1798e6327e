"""A controller's segment table for a segment store in another process.

``ControllerState`` creates, seals, truncates and deletes a stream's segments through a
``SegmentTable``. Sharing the store's table works only in one process; ``RemoteSegmentTable``
keeps the controller's own (in-memory, dataless) view and queues each change, and ``sync``
sends the queue to the store as CREATE_SEGMENT, SEAL_SEGMENT, TRUNCATE_SEGMENT and
DELETE_SEGMENT over the wire protocol. Given to
``ControllerServer`` as ``after_call``, it runs before every RPC is answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Literal

from protoframe.runtime.errors import ConnectionClosed, RequestFailed, RequestTimeout

from ..connection import PravegaConnection
from ..errors import reply_error
from ..store.segments import Segment, SegmentTable

__all__ = ["RemoteSegmentTable"]

log = logging.getLogger(__name__)

Operation = Literal["create", "seal", "truncate", "delete"]

# The refusal that means the store is already as the operation would leave it.
_ALREADY_DONE: dict[Operation, str] = {"create": "SEGMENT_ALREADY_EXISTS",
                                       "delete": "NO_SUCH_SEGMENT"}


class RemoteSegmentTable(SegmentTable):
    """The segments this controller made, each change also sent to the store at ``store``.

    A change the store cannot be reached for stays queued (``sync`` raises and the next call
    retries it); one the store refuses is logged and dropped, since sending it again would be
    refused again. Creating a segment the store already has, or deleting a missing one, counts
    as done: that is the state wanted (e.g. a restarted controller recreating a stream whose
    segments a store kept on disk). The store answers a seal of a sealed segment as a success.
    """

    def __init__(self, store: tuple[str, int], *, timeout: float = 10.0) -> None:
        super().__init__()
        self.store = store
        self.timeout = timeout
        self.pending: deque[tuple[Operation, str]] = deque()
        # Where each queued truncation cuts: the latest one asked, which the store takes as
        # well as any earlier one (truncating at the start offset again changes nothing).
        self.truncate_at: dict[str, int] = {}
        self._connection: PravegaConnection | None = None
        self._lock = asyncio.Lock()

    def create(self, name: str) -> Segment | None:
        segment = super().create(name)
        if segment is not None:
            self.pending.append(("create", name))
        return segment

    def seal(self, segment: Segment) -> None:
        super().seal(segment)
        self.pending.append(("seal", segment.name))

    def truncation_limit(self, segment: Segment) -> int | None:
        return None  # the view holds no data: the store refuses an offset past its end

    def truncate(self, segment: Segment, offset: int) -> None:
        if offset < segment.start_offset:
            raise ValueError(f"truncation offset {offset} below {segment.start_offset}")
        segment.start_offset = offset  # the view's length follows; it has no bytes to drop
        self.truncate_at[segment.name] = offset
        self.pending.append(("truncate", segment.name))

    def delete(self, name: str) -> bool:
        deleted = super().delete(name)
        if deleted:
            self.pending.append(("delete", name))
        return deleted

    async def sync(self) -> None:
        """Send the queued changes in order; raises ``ConnectionClosed`` or ``RequestTimeout``
        if the store cannot be reached (what is left stays queued)."""
        async with self._lock:
            while self.pending:
                operation, name = self.pending[0]
                try:
                    await self._send(operation, name)
                except RequestFailed as exc:
                    if _ALREADY_DONE.get(operation) != exc.command:
                        log.warning("segment store refused to %s %s: %s", operation, name,
                                    reply_error(exc))
                except (ConnectionClosed, RequestTimeout):
                    await self._drop_connection()
                    raise
                self.pending.popleft()

    async def close(self) -> None:
        """Close the connection to the store (the queue is kept)."""
        async with self._lock:
            await self._drop_connection()

    async def _send(self, operation: Operation, name: str) -> None:
        connection = self._connection
        if connection is None or not connection.is_open:
            connection = await PravegaConnection.connect(
                *self.store, request_timeout=self.timeout, connect_timeout=self.timeout)
            self._connection = connection
        requests = connection.requests
        if operation == "create":
            await requests.create_segment(name, 0, 0, "")
        elif operation == "seal":
            await requests.seal_segment(name, "")
        elif operation == "truncate":
            await requests.truncate_segment(name, self.truncate_at[name], "")
        else:
            await requests.delete_segment(name, "")

    async def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
