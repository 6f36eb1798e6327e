"""The life of a producer or consumer on one topic: lookup, connect, register, create, reconnect.

``TopicHandle`` is written once for both. ``start`` looks the topic up, takes the broker's
connection from the session, registers the handle on it (so the connection can route frames to
it), sends the creating request (PRODUCER or SUBSCRIBE: the subclass's ``_create``) and, once
answered, calls the subclass's ``_ready``. Transient failures are tried again under the
session's create policy (``errors.RETRIABLE``). When the connection drops or the broker closes
the handle, it starts over in the background under the reconnect policy, until it succeeds,
the handle is closed, or an error of the subclass's ``_fatal`` ends it (``_lost``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Sequence
from typing import ClassVar, Generic, Protocol, TypeVar

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.session import Session
from protoframe.runtime.io.retry import RetryBudget, retry

__all__ = ["HandleState", "TopicHandle", "start_all"]

log = logging.getLogger(__name__)

A = TypeVar("A")


class HandleState(enum.Enum):
    CONNECTING = 0
    READY = 1
    CLOSING = 2
    CLOSED = 3
    FAILED = 4


_ENDED = (HandleState.CLOSING, HandleState.CLOSED)


def _retriable_on_create(exc: BaseException) -> bool:
    return isinstance(exc, errors.RETRIABLE)


class TopicHandle(Generic[A]):
    """A producer or consumer on one topic or partition; ``A`` is its creating answer."""

    # Errors after which connecting again cannot help.
    _fatal: ClassVar[tuple[type[BaseException], ...]] = ()
    # What creating is called in errors: "create producer on", "subscribe to".
    _creating: ClassVar[str] = "connect to"

    def __init__(self, session: Session, topic: str, partition: int) -> None:
        self.session = session
        self.topic = topic
        self.partition = partition
        self.cnx: ClientConnection | None = None
        self.state = HandleState.CONNECTING
        self._reconnect_task: asyncio.Task[None] | None = None

    # ---- what the subclass does -------------------------------------------------------------

    def _register(self, cnx: ClientConnection) -> None:
        """Be found by ``cnx`` (in its producers or consumers)."""
        raise NotImplementedError

    def _unregister(self, cnx: ClientConnection) -> None:
        raise NotImplementedError

    async def _create(self, cnx: ClientConnection) -> A:
        """Send the creating request on ``cnx`` and return its answer."""
        raise NotImplementedError

    def _ready(self, cnx: ClientConnection, answer: A) -> None:
        """Created on ``cnx`` (now ``self.cnx``, state READY): resume work."""

    def _before_register(self) -> None:
        """Called before each registration (a consumer drops what the old connection queued)."""

    def _detach(self, cnx: ClientConnection) -> None:
        """``cnx`` is no longer ours (before reconnecting)."""

    def _lost(self, exc: BaseException) -> None:
        """Reconnecting failed for good with ``exc`` (the state is FAILED)."""

    # ---- connecting -------------------------------------------------------------------------

    async def start(self) -> None:
        """Create on the broker; retries transient failures under the create policy."""
        what = f"{self._creating} {self.topic}"

        def give_up(budget: RetryBudget, lost: BaseException | None,
                    failure: BaseException | None) -> BaseException:
            if failure is None:
                return errors.Timeout(f"{what}: no attempt within the retry policy")
            return errors.wrap_error(failure, what)

        try:
            await retry(self._connect, RetryBudget(self.session.create_retry),
                        give_up=give_up, retriable=_retriable_on_create, immediate=True,
                        name=repr(self))
        except BaseException:
            self.state = HandleState.FAILED
            raise

    async def _connect(self) -> None:
        cnx = await self.session.connection_for(self.topic)
        if self.state in _ENDED:
            raise errors.AlreadyClosed(f"{self!r} was closed")
        self._before_register()
        self._register(cnx)
        try:
            answer = await self._create(cnx)
        except BaseException as exc:
            self._unregister(cnx)
            raise errors.wrap_error(exc, f"{self._creating} {self.topic}") from None
        if self.state in _ENDED:
            self._unregister(cnx)
            return
        if not cnx.is_open:  # lost between the answer and now: its close listener missed us
            raise errors.ConnectError(f"{cnx!r} closed while creating {self!r}")
        self.cnx = cnx
        self.state = HandleState.READY
        self._ready(cnx, answer)

    def connection_closed(self, cnx: ClientConnection, exc: BaseException) -> None:
        """The connection this handle used has ended."""
        if cnx is not self.cnx:
            return
        self._disconnected(cnx)

    def closed_by_broker(self, cnx: ClientConnection) -> None:
        """The broker closed this handle (topic moved or unloaded): find the topic again."""
        if cnx is not self.cnx:
            return
        log.info("%r: closed by the broker; connecting again", self)
        self._disconnected(cnx)

    def _disconnected(self, cnx: ClientConnection) -> None:
        self._detach(cnx)
        self.cnx = None
        if self.state is HandleState.READY:
            self.state = HandleState.CONNECTING
        if self.state is HandleState.CONNECTING and (
                self._reconnect_task is None or self._reconnect_task.done()):
            self._reconnect_task = asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        fatal = self._fatal

        async def attempt() -> None:
            if self.state is HandleState.CONNECTING:
                await self._connect()

        def retriable(exc: BaseException) -> bool:
            return isinstance(exc, Exception) and not isinstance(exc, fatal)

        def give_up(budget: RetryBudget, lost: BaseException | None,
                    failure: BaseException | None) -> BaseException:
            return errors.ConnectError(f"{self!r}: could not connect again in "
                                       f"{budget.attempts} attempts: {failure}")

        try:
            await retry(attempt, RetryBudget(self.session.reconnect_retry), give_up=give_up,
                        retriable=retriable, name=repr(self))
        except Exception as exc:
            log.warning("%r: cannot connect again: %s", self, exc)
            self.state = HandleState.FAILED
            self._lost(exc)

    def _stop_reconnecting(self) -> None:
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()

    def is_connected(self) -> bool:
        return self.state is HandleState.READY and self.cnx is not None and self.cnx.is_open


class _Startable(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


async def start_all(handles: Sequence[_Startable]) -> None:
    """Start every topic's or partition's handle; if any fails, close them all."""
    try:
        await asyncio.gather(*(h.start() for h in handles))
    except BaseException:
        await asyncio.gather(*(h.close() for h in handles), return_exceptions=True)
        raise
