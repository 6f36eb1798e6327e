"""One connection to a TubeMQ master or broker, with the generated typed requests on it.

``TubeMQConnection`` drives a ``runtime.io.connection.Connection`` with the generated
``TubemqProtocol`` (every frame is checked against the spec's state machines) and offers the
generated ``TubemqRequests`` as ``requests``: each call numbers its frame with a fresh
``serial_no`` and waits for the response carrying the same one. A response's body is decoded
once, by the machines; the requests are given that decoded command. ``call`` turns the two ways a
call can fail into typed errors (``RpcException`` for an exception answer, ``ServerError`` for
``success = false``, or for an error code other than 200 in the v2 answers, which have no
``success``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from protoframe.clients.tubemq.errors import SUCCESS, ServerError, rpc_exception
from protoframe.generated.tubemq.client import TubemqRequests
from protoframe.generated.tubemq.frames import Frame
from protoframe.generated.tubemq.machines import TubemqProtocol
from protoframe.generated.tubemq.rpc import RspExceptionBody
from protoframe.runtime.errors import ConnectionClosed, DecodeError, RequestFailed
from protoframe.runtime.io.connection import Connection

__all__ = ["CodeOutcome", "Outcome", "TubeMQConnection", "parse_address"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0


class Outcome(Protocol):
    """What every TubeMQ response message says about the call's success."""

    @property
    def success(self) -> bool: ...

    @property
    def errCode(self) -> int: ...  # noqa: N802 - the .proto's name

    @property
    def errMsg(self) -> str: ...  # noqa: N802 - the .proto's name


class CodeOutcome(Protocol):
    """What a v2 response message says about the call's success: errCode 200 alone."""

    @property
    def errCode(self) -> int: ...  # noqa: N802 - the .proto's name

    @property
    def errMsg(self) -> str: ...  # noqa: N802 - the .proto's name


R = TypeVar("R")
OutcomeT = TypeVar("OutcomeT", bound=Outcome)
CodeOutcomeT = TypeVar("CodeOutcomeT", bound=CodeOutcome)


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets) as a pair."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a host:port address: {address!r}")
    return host.strip("[]"), int(port)


class TubeMQConnection:
    """A connection to one master or broker, opened with ``open``."""

    def __init__(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.protocol = TubemqProtocol()
        self.conn: Connection[Frame] = Connection(self.protocol, self._on_frame,
                                                  keepalive_interval=None, name=name)
        self.requests = TubemqRequests(self.conn, timeout=timeout)
        self.conn.on_close(self.requests.connection_lost)

    @classmethod
    async def open(cls, address: str, *, timeout: float = DEFAULT_TIMEOUT) -> TubeMQConnection:
        """Connect to ``host:port``; raises ``ConnectionClosed`` when that fails."""
        host, port = parse_address(address)
        self = cls(address, timeout=timeout)
        await self.conn.connect(host, port, timeout=timeout)
        return self

    @property
    def is_open(self) -> bool:
        return self.conn.is_open

    def _on_frame(self, frame: Frame) -> None:
        # The machines decoded the frame's body when it arrived; hand that on rather than have
        # the requests decode it again. (A frame whose method or body could not be read failed
        # in receive_data already, closing the connection; the guard is for anything else.)
        try:
            answered = self.requests.handle_frame(frame, self.protocol.command(frame))
        except DecodeError as exc:
            self.conn.abort(exc)
            return
        if not answered:
            log.debug("%r: a frame no request waits for (serial %d)", self.conn, frame.serial_no)

    async def call(self, method: str, request: Awaitable[R]) -> R:
        """Await a generated request; an exception answer raises ``RpcException``."""
        try:
            return await request
        except RequestFailed as exc:
            if isinstance(exc.body, RspExceptionBody):
                raise rpc_exception(method, exc.body.exceptionName,
                                    exc.body.stackTrace) from None
            raise

    async def checked(self, method: str, request: Awaitable[OutcomeT]) -> OutcomeT:
        """``call``, and a response with ``success = false`` raises ``ServerError``."""
        response = await self.call(method, request)
        if not response.success:
            raise ServerError(method, response.errCode, response.errMsg)
        if response.errCode not in (0, SUCCESS):
            log.debug("%s: success with error code %d", method, response.errCode)
        return response

    async def checked_code(self, method: str,
                           request: Awaitable[CodeOutcomeT]) -> CodeOutcomeT:
        """``call`` for a v2 answer: an errCode other than 200 raises ``ServerError``."""
        response = await self.call(method, request)
        if response.errCode != SUCCESS:
            raise ServerError(method, response.errCode, response.errMsg)
        return response

    def close(self) -> None:
        """Close the connection; requests still waiting fail with ``ConnectionClosed``."""
        self.conn.close(ConnectionClosed(f"{self.conn.name}: closed by the client"))

    async def wait_closed(self) -> None:
        await self.conn.wait_closed()
