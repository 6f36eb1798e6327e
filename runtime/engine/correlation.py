"""Request correlation: one future per request, found again by the fields that answer it.

Keys are whatever the generated client derives from the spec (for Pulsar: the request kind
plus request_id, or producer_id and sequence_id for sends). Two requests may share a key (a
peer may reuse ids); answers then go to the oldest one, first come first served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any

from protoframe.runtime.errors import ConnectionClosed, RequestTimeout


class RequestTable:
    """Pending requests of one connection."""

    def __init__(self) -> None:
        self._waiting: dict[Hashable, list[asyncio.Future[Any]]] = {}
        # Requests answered by a stream: what each has collected, and what ends it.
        self._streams: dict[asyncio.Future[Any], tuple[list[Any], Callable[[Any], bool]]] = {}
        # Streams whose request gave up (timed out or was cancelled), oldest first: each keeps
        # its place and swallows the rest of its stream, so that a later request on the same
        # key never gets rows that were not its own. At most MAX_ABANDONED are kept: a peer
        # that never ends its streams must not make the table grow without bound.
        self._abandoned: list[tuple[Hashable, asyncio.Future[Any]]] = []
        self._closed: BaseException | None = None

    MAX_ABANDONED = 64

    def __len__(self) -> int:
        """Requests still waiting for an answer (abandoned streams being drained excluded)."""
        return sum(len(v) for v in self._waiting.values()) - len(self._abandoned)

    def expect(self, key: Hashable, until: Callable[[Any], bool] | None = None) \
            -> asyncio.Future[Any]:
        """Register a request about to be sent; its answer will complete the future.

        With ``until``, the request is answered by a stream: every answer is collected, in
        order, until one for which ``until`` holds, and the future gets the list of them all
        (that one last). Until then the request keeps its place, so that no answer of its
        stream, the last one included, goes to a request sent after it.
        """
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        if until is not None:
            self._streams[future] = ([], until)
        return future

    def answer(self, key: Hashable, value: Any) -> bool:
        """Give ``value`` to the oldest request waiting on ``key`` (which it completes, unless
        it collects a stream that ``value`` does not end); False if none was waiting."""
        waiting = self._waiting.get(key)
        while waiting:
            future = waiting[0]
            stream = self._streams.get(future)
            if stream is not None:
                if not future.done():
                    stream[0].append(value)
                if not stream[1](value):
                    return True  # collected, or swallowed by an abandoned stream
                if future.done():  # the abandoned stream's last message: it is over
                    self.forget(key, future)
                    return True
            waiting.pop(0)
            if not waiting:
                del self._waiting[key]
            self._streams.pop(future, None)
            if not future.done():
                future.set_result(value if stream is None else stream[0])
                return True
            waiting = self._waiting.get(key)
        return False

    def forget(self, key: Hashable, future: asyncio.Future[Any]) -> None:
        self._streams.pop(future, None)
        if (key, future) in self._abandoned:
            self._abandoned.remove((key, future))
        waiting = self._waiting.get(key)
        if waiting and future in waiting:
            waiting.remove(future)
            if not waiting:
                del self._waiting[key]

    async def wait(self, key: Hashable, future: asyncio.Future[Any], timeout: float | None,
                   what: str) -> Any:
        """Wait for an answer; on timeout forget the request and raise ``RequestTimeout`` (a
        stream's request is not forgotten but abandoned: it swallows the rest of its stream)."""
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._give_up(key, future)
            raise RequestTimeout(f"{what}: no answer within {timeout} s") from None
        except asyncio.CancelledError:
            self._give_up(key, future)
            raise

    def _give_up(self, key: Hashable, future: asyncio.Future[Any]) -> None:
        if future not in self._streams:
            self.forget(key, future)
            return
        self._abandoned.append((key, future))
        if len(self._abandoned) > self.MAX_ABANDONED:
            self.forget(*self._abandoned[0])

    def fail_all(self, exc: BaseException) -> None:
        """Fail every pending request (the connection is gone); later ``expect`` calls fail too."""
        self._closed = exc
        self._streams.clear()
        self._abandoned.clear()
        waiting, self._waiting = self._waiting, {}
        for futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(exc)


class IdAllocator:
    """Request ids: ``start``, ``start + 1``, ... wrapping at ``limit`` back to 0, or to 1 with
    ``skip_zero`` (for protocols where 0 means "no id", such as MQTT's packet identifiers)."""

    def __init__(self, limit: int = 2**63, *, start: int = 0, skip_zero: bool = False) -> None:
        if not 0 <= start < limit:
            raise ValueError(f"start {start} is outside the id range [0, {limit})")
        if skip_zero and limit < 2:
            raise ValueError("skip_zero leaves no id below a limit of 1")
        self._next = start
        self._limit = limit
        self._skip_zero = skip_zero

    def __call__(self) -> int:
        value = self._next
        if value == 0 and self._skip_zero:
            value = 1
        self._next = (value + 1) % self._limit
        return value
