"""One connection to a TubeMQ master or broker, with the generated typed requests on it.

``TubeMQConnection`` is a ``runtime.io.endpoint.Endpoint``: a connection driving the generated
``TubemqProtocol`` (every frame is checked against the spec's state machines), with the
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
from protoframe.runtime.errors import ConnectionClosed, RequestFailed
from protoframe.runtime.io.connection import Connection
from protoframe.runtime.io.endpoint import Endpoint

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


class TubeMQConnection(Endpoint[Frame, TubemqRequests]):
    """A connection to one master or broker, opened with ``open``."""

    def __init__(self, name: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        protocol = TubemqProtocol()
        super().__init__(protocol, lambda c: TubemqRequests(c, timeout=timeout), name=name)
        self.protocol: TubemqProtocol = protocol
        self.conn: Connection[Frame] = self.connection

    @classmethod
    async def open(cls, address: str, *, timeout: float = DEFAULT_TIMEOUT) -> TubeMQConnection:
        """Connect to ``host:port``; raises ``ConnectionClosed`` when that fails."""
        host, port = parse_address(address)
        self = cls(address, timeout=timeout)
        await self.connect(host, port, timeout=timeout)
        return self

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

    def close(self, reason: BaseException | None = None) -> None:
        """Close the connection; requests still waiting fail with ``ConnectionClosed``."""
        super().close(reason or ConnectionClosed(f"{self.conn.name}: closed by the client"))
