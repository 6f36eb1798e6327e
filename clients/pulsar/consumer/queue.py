"""A consumer's receive queue: what its partitions received and the application has not taken.

Every ``TopicConsumer`` of a ``Consumer`` puts into the same ``ReceiveQueue``; ``receive`` and
its variants take from it and wait on it. The deques are never replaced (a consumer keeps a
reference to them for its hot path), only emptied and refilled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.message import Message, ReceivedEntry

__all__ = ["ReceiveQueue"]


class ReceiveQueue:
    """Received messages (or, for ``deliver_entries``, entries) and the receives waiting."""

    def __init__(self) -> None:
        self.messages: deque[Message] = deque()
        self.entries: deque[ReceivedEntry] = deque()
        # One future per waiting receive(): cancelling one wait must not disturb the others.
        self._waiters: list[asyncio.Future[None]] = []
        self.closed = False
        self.error: BaseException | None = None
        # True while one topic consumer feeds the queue: dropping its messages empties it.
        self.single_source = True

    def put(self, msg: Message) -> None:
        self.messages.append(msg)
        if self._waiters:
            self.wake()

    def put_many(self, msgs: list[Message]) -> None:
        self.messages.extend(msgs)
        if self._waiters:
            self.wake()

    def put_entry(self, entry: ReceivedEntry) -> None:
        self.entries.append(entry)
        if self._waiters:
            self.wake()

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def drop(self, source: object) -> int:
        """Remove the messages (entries) of topic consumer ``source``; return how many
        messages there were."""
        entries = self.entries
        if entries:
            kept_entries = [e for e in entries if e.info.consumer is not source]
            dropped_messages = sum(e.info.batch_size or 1 for e in entries
                                   if e.info.consumer is source)
            entries.clear()
            entries.extend(kept_entries)
            return dropped_messages
        queue = self.messages
        if not queue:
            return 0
        if self.single_source:
            dropped = len(queue)
            queue.clear()
            return dropped
        kept = [m for m in queue if m._entry.consumer is not source]
        dropped = len(queue) - len(kept)
        queue.clear()
        queue.extend(kept)
        return dropped

    def fail(self, exc: BaseException) -> None:
        """A topic consumer failed for good: waiting receives raise ``exc``."""
        self.error = exc
        self.wake()

    def close(self) -> None:
        self.closed = True
        self.messages.clear()
        self.entries.clear()
        self.wake()

    async def wait(self, timeout_millis: int | None) -> None:
        """Until something is queued; raises ``Timeout``, ``AlreadyClosed`` or the error of
        ``fail``."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_millis is None else loop.time() + timeout_millis / 1000.0
        while not self.messages and not self.entries:
            if self.closed:
                raise errors.AlreadyClosed("the consumer is closed")
            if self.error is not None:
                raise self.error
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise errors.Timeout(f"no message within {timeout_millis} ms")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                if remaining is None:
                    await waiter
                else:
                    await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                raise errors.Timeout(f"no message within {timeout_millis} ms") from None
            finally:
                if not waiter.done() or waiter.cancelled():
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
