"""Request correlation: one future per request, found again by the fields that answer it.

Keys are whatever the generated client derives from the spec (for Pulsar: the request kind
plus request_id, or producer_id and sequence_id for sends). Two requests may share a key (a
peer may reuse ids); answers then go to the oldest one, first come first served.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from protoframe.runtime.errors import ConnectionClosed, RequestTimeout, StreamOverflow


class RequestTable:
    """Pending requests of one connection."""

    def __init__(self) -> None:
        self._waiting: dict[Hashable, list[asyncio.Future[Any]]] = {}
        # Requests answered by a stream: what each has collected, and what ends it.
        # What each collects into: a list (the whole stream at once), or an ``AnswerStream``
        # its consumer reads as the messages arrive.
        self._streams: dict[asyncio.Future[Any],
                            tuple[list[Any] | AnswerStream, Callable[[Any], bool]]] = {}
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
                collected, until = stream
                last = until(value)
                if future.done():  # an abandoned stream swallows it
                    pass
                elif isinstance(collected, list):
                    collected.append(value)
                elif not collected.put(value, last):  # overflowed: the stream is abandoned
                    self.give_up(key, future)
                if not last:
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

    def stream(self, key: Hashable, until: Callable[[Any], bool], limit: int,
               timeout: float | None, what: str) -> AnswerStream:
        """Register a request answered by a stream that its caller reads as it arrives.

        Like ``expect(key, until)``, the request keeps its place until the stream's last
        message (the one ``until`` holds for), which the ``AnswerStream`` gives last. At most
        ``limit`` messages wait unread (the last one may come on top of them); one more fails
        the stream with ``StreamOverflow``. ``timeout`` bounds each wait for the next message.
        Closing the ``AnswerStream`` before its end abandons the request, as a timeout does.
        """
        if limit < 1:
            raise ValueError(f"a stream's buffer must hold at least one message, not {limit}")
        future = self.expect(key)
        answers = AnswerStream(self, key, future, limit, timeout, what)
        self._streams[future] = (answers, until)
        return answers

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

    def give_up(self, key: Hashable, future: asyncio.Future[Any]) -> None:
        """The caller no longer waits for ``future``: forget it, or for a stream's request,
        keep its place so that it swallows the rest of its stream."""
        if not future.done():
            future.cancel()
        self._give_up(key, future)

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
        for collected, _ in self._streams.values():
            if isinstance(collected, AnswerStream):
                collected.fail(exc)
        self._streams.clear()
        self._abandoned.clear()
        waiting, self._waiting = self._waiting, {}
        for futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(exc)


class AnswerStream:
    """The messages of one streamed answer, read as they arrive: ``async for`` over it.

    ``RequestTable.stream`` makes it. The table puts each message of the request's stream
    into a buffer of at most ``limit`` unread messages (the stream's last one may come on top);
    one more means the consumer has stopped keeping up: the stream is abandoned (the table
    swallows the rest of it) and, once the messages already buffered are read, the iteration
    raises ``StreamOverflow``. Waiting more than ``timeout`` seconds for a message raises
    ``RequestTimeout``, and ``close()`` before the end abandons the stream the same way, so
    that the connection's next request on the same key gets only its own answers.
    """

    def __init__(self, table: RequestTable, key: Hashable, future: asyncio.Future[Any],
                 limit: int, timeout: float | None, what: str) -> None:
        self._table = table
        self._key = key
        self._future = future  # the request's place in the table
        self._limit = limit
        self._timeout = timeout
        self._what = what
        self._items: deque[Any] = deque()
        self._ended = False  # the last message is in the buffer (or was read)
        self._error: BaseException | None = None  # raised once the buffer is read
        self._wakeup: asyncio.Future[None] | None = None
        # Nothing awaits the request's future itself: a failure set on it is seen here.
        future.add_done_callback(_retrieve)

    def __len__(self) -> int:
        """Messages received and not yet read."""
        return len(self._items)

    def put(self, value: Any, last: bool) -> bool:
        """Buffer the stream's next message; False (and nothing buffered) on overflow."""
        if len(self._items) >= self._limit and not last:
            self._fail(StreamOverflow(
                f"{self._what}: more than {self._limit} messages of the stream were not read"))
            return False
        self._items.append(value)
        self._ended = last
        self._wake()
        return True

    def fail(self, exc: BaseException) -> None:
        """End the stream with ``exc`` (the connection is gone), raised once the buffer is read."""
        self._fail(exc)

    def forget(self) -> None:
        """The request was never sent (sending it failed): it leaves the table at once."""
        self._table.forget(self._key, self._future)
        self._ended = True

    def close(self) -> None:
        """Stop reading: before the end, the request is abandoned and the rest swallowed."""
        self._items.clear()
        if not self._ended and self._error is None:
            self._table.give_up(self._key, self._future)
        self._ended = True
        self._error = None

    def __aiter__(self) -> AnswerStream:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self._error is not None:
                raise self._error
            if self._ended:
                raise StopAsyncIteration
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._wakeup, self._timeout)
            except TimeoutError:
                self._error = RequestTimeout(
                    f"{self._what}: no message of the stream within {self._timeout} s")
                self._table.give_up(self._key, self._future)
                raise self._error from None
            except asyncio.CancelledError:
                self.close()
                raise
            finally:
                self._wakeup = None
        return self._items.popleft()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None and not self._ended:
            self._error = exc
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


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
