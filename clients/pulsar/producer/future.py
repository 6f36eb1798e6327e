"""What a send returns: ``SendFuture``, and the send op (one SEND frame) it belongs to.

A ``SendOp`` is one SEND: a whole batch or a single message, with its sequence ids, payload
and, once the broker answers, its position or error. A ``SendFuture`` is one message's view of
its op: the op and the message's index in the batch.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Generator
from typing import Any

from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.producer.memory import MemoryLimit
from protoframe.generated.pulsar.frames import Payload

__all__ = ["SendFuture", "SendOp"]

log = logging.getLogger(__name__)


class SendOp:
    """One SEND: a batch or a single message, and what waits for its receipt."""

    __slots__ = ("sequence_id", "highest_sequence_id", "num_messages", "batch_size", "payload",
                 "ledger_id", "entry_id", "error", "done", "callbacks", "created", "partition",
                 "loop", "reserved", "memory", "chunk")

    def __init__(self, partition: int, loop: asyncio.AbstractEventLoop | None,
                 created: float) -> None:
        self.partition = partition
        self.loop = loop
        self.sequence_id = -1
        self.highest_sequence_id = -1
        self.num_messages = 0
        self.batch_size = 0  # >0: a batch of this many messages
        self.payload: Payload | None = None
        self.ledger_id = -1
        self.entry_id = -1
        self.error: BaseException | None = None
        self.done = False
        # Called once the op is finished; made only when someone waits or asks to be told.
        self.callbacks: list[Callable[[], None]] | None = None
        self.created = created
        # Payload bytes held in the client's memory limit until the op finishes.
        self.reserved = 0
        self.memory: MemoryLimit | None = None
        self.chunk = False  # one chunk of a chunked message (SEND's is_chunk)

    def waiter(self) -> asyncio.Future[None]:
        """A new future for one waiter (cancelling it affects no one else)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.add_callback(lambda: self._settle(future))
        return future

    def _settle(self, future: asyncio.Future[None]) -> None:
        if future.done():
            return
        if self.error is not None:
            future.set_exception(self.error)
        else:
            future.set_result(None)

    def finish(self, ledger_id: int, entry_id: int, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.error = error
        self.payload = None  # nothing will be resent; let the bytes go
        if self.reserved and self.memory is not None:
            self.memory.release(self.reserved)
            self.reserved = 0
        if self.callbacks:
            callbacks, self.callbacks = self.callbacks, None
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    log.exception("send callback failed")

    def message_id(self, index: int) -> MessageId:
        if index >= 0:
            return MessageId(self.partition, self.ledger_id, self.entry_id, index,
                             self.batch_size)
        return MessageId(self.partition, self.ledger_id, self.entry_id, -1)

    def add_callback(self, callback: Callable[[], None]) -> None:
        if self.done:
            callback()
        elif self.callbacks is None:
            self.callbacks = [callback]
        else:
            self.callbacks.append(callback)

    def take_callbacks(self, handle: SendFuture, fn: object = None
                       ) -> list[_HandleCallback | _Waiter]:
        """Remove (and return) the done-callbacks ``handle`` registered (only ``fn``, if given;
        else its waiting tasks' too)."""
        callbacks = self.callbacks
        if not callbacks:
            return []
        taken = [c for c in callbacks if isinstance(c, _HandleCallback | _Waiter)
                 and c.future is handle and (fn is None or c.fn == fn)]
        if taken:
            self.callbacks = [c for c in callbacks if c not in taken]
        return taken


class _HandleCallback:
    """A done-callback of one ``SendFuture``: scheduled on the loop, as asyncio does."""

    __slots__ = ("future", "fn", "context", "loop")

    def __init__(self, future: SendFuture, fn: Callable[[SendFuture], object],
                 context: contextvars.Context | None, loop: asyncio.AbstractEventLoop) -> None:
        self.future = future
        self.fn = fn
        self.context = context
        self.loop = loop

    def __call__(self) -> None:
        self.loop.call_soon(self.fn, self.future, context=self.context)


class _Waiter:
    """A task awaiting one ``SendFuture``: woken when the send finishes or that future is
    cancelled (as a task awaiting an asyncio future is)."""

    __slots__ = ("future", "waiter")

    def __init__(self, future: SendFuture, waiter: asyncio.Future[None]) -> None:
        self.future = future
        self.waiter = waiter

    @property
    def fn(self) -> object:
        return self.waiter  # never a user's callback: remove_done_callback leaves it alone

    def __call__(self) -> None:
        if not self.waiter.done():
            self.waiter.set_result(None)


class SendFuture:
    """The result of ``send_async``: an ``asyncio.Future`` of the message's ``MessageId``.

    It implements the future protocol (``asyncio.isfuture`` is true, so ``await``, ``gather``,
    ``wait``, ``wait_for``, ``shield`` and ``add_done_callback`` work as with any future) while
    costing four slots per message: what it waits for belongs to the whole batch, and an
    asyncio future is made only for a caller that actually waits. Cancelling it stops the wait,
    not the send: the message may still be stored.

    Where asyncio itself reaches past the protocol (``gather`` asks a cancelled child for
    ``_cancel_message`` and ``_make_cancelled_error()``), it has those too, so it behaves as an
    asyncio future on 3.11 to 3.13 (tests/clients/pulsar/test_send_future.py compares the two).
    """

    __slots__ = ("_op", "_index", "_cancelled", "_cancel_message")

    # Marks this class as a future for asyncio.isfuture(); never set on instances, because
    # __await__ yields a real asyncio future rather than this object.
    _asyncio_future_blocking = False

    def __init__(self, op: SendOp, index: int) -> None:
        self._op = op
        self._index = index
        self._cancelled = False
        self._cancel_message: Any = None

    def done(self) -> bool:
        return self._cancelled or self._op.done

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting (the message itself is not withdrawn); False if already done."""
        if self.done():
            return False
        self._cancelled = True
        self._cancel_message = msg
        for callback in self._op.take_callbacks(self):
            callback()
        return True

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        if self._cancel_message is None:
            return asyncio.CancelledError()
        return asyncio.CancelledError(self._cancel_message)

    def result(self) -> MessageId:
        if self._cancelled:
            raise self._make_cancelled_error()
        op = self._op
        if not op.done:
            raise asyncio.InvalidStateError("the send is not finished")
        if op.error is not None:
            raise op.error
        return op.message_id(self._index)

    def exception(self) -> BaseException | None:
        if self._cancelled:
            raise self._make_cancelled_error()
        op = self._op
        if not op.done:
            raise asyncio.InvalidStateError("the send is not finished")
        return op.error

    def get_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._op.loop
        return loop if loop is not None else asyncio.get_running_loop()

    def add_done_callback(self, fn: Callable[[SendFuture], object], *,
                          context: contextvars.Context | None = None) -> None:
        """Call ``fn(self)`` (soon, on the loop) once the send is finished or cancelled."""
        callback = _HandleCallback(self, fn, context, self.get_loop())
        if self.done():
            callback()
        else:
            self._op.add_callback(callback)

    def remove_done_callback(self, fn: Callable[[SendFuture], object]) -> int:
        return len(self._op.take_callbacks(self, fn))

    def __await__(self) -> Generator[Any, None, MessageId]:
        if not self.done():
            waiter: asyncio.Future[None] = self.get_loop().create_future()
            self._op.add_callback(_Waiter(self, waiter))
            try:
                yield from waiter.__await__()
            except asyncio.CancelledError as exc:
                # A task cancels the future it waits on, which here is the waiter standing in
                # for this one: cancel this one too, as it would an asyncio future.
                # asyncio.wait_for() relies on that from 3.12 on (it cancels the awaiting task
                # where 3.11 called cancel() on the awaitable itself).
                if waiter.cancelled():
                    self.cancel(exc.args[0] if exc.args else None)
                raise
        return self.result()

    __iter__ = __await__

    def __repr__(self) -> str:
        if self._cancelled:
            state = "cancelled"
        else:
            state = "pending" if not self._op.done else ("failed" if self._op.error else "done")
        return f"<SendFuture {state}>"

