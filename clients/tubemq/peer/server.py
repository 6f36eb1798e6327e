"""The embedded TubeMQ master and broker as servers: one session a connection, answering each
request with the handler of its name (``Master.handlers`` and ``Broker.handlers``).

Frames are checked against the spec's state machines from the server's side: a frame that
does not decode, or that the machines forbid, closes that connection and no other. A call
naming a method this peer does not serve is answered with an exception, as upstream servers
answer it; so is every master call while ``standby`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

from protoframe.clients.tubemq.broker_link import BrokerRegistration
from protoframe.clients.tubemq.errors import STANDBY_EXCEPTION
from protoframe.clients.tubemq.topics import BrokerInfo
from protoframe.generated.tubemq.frames import Frame
from protoframe.generated.tubemq.machines import (
    ProtocolViolation,
    TubemqProtocol,
    frame_of,
    frame_of_exception,
)
from protoframe.generated.tubemq.rpc import RspExceptionBody
from protoframe.runtime.errors import UnknownCommandError
from protoframe.runtime.io.server import Server, Session, serve

from .broker import Broker
from .master import Master
from .state import Part, PeerState, Stored

__all__ = ["UNSUPPORTED_EXCEPTION", "EmbeddedTubeMQ"]

log = logging.getLogger(__name__)

UNSUPPORTED_EXCEPTION = "java.lang.UnsupportedOperationException"

# The response command answering each request this peer serves.
_ANSWER = {"REGISTER_P2M": "REGISTER_M2P", "HEARTBEAT_P2M": "HEARTBEAT_M2P",
           "CLOSE_P2M": "CLOSE_M2P", "REGISTER_C2M": "REGISTER_M2C",
           "HEARTBEAT_C2M": "HEARTBEAT_M2C", "CLOSE_C2M": "CLOSE_M2C",
           "SEND_MESSAGE_P2B": "SEND_MESSAGE_B2P", "REGISTER_C2B": "REGISTER_B2C",
           "HEARTBEAT_C2B": "HEARTBEAT_B2C", "GET_MESSAGE_C2B": "GET_MESSAGE_B2C",
           "COMMIT_OFFSET_C2B": "COMMIT_OFFSET_B2C", "REGISTER_B2M": "REGISTER_M2B",
           "HEARTBEAT_B2M": "HEARTBEAT_M2B", "CLOSE_B2M": "CLOSE_M2B",
           "REGISTER_C2M_V2": "REGISTER_M2C_V2", "HEARTBEAT_C2M_V2": "HEARTBEAT_M2C_V2",
           "GET_PART_META_C2M": "GET_PART_META_M2C"}


def _pass_unknown_requests(error: ProtocolViolation | UnknownCommandError, frame: Frame) -> bool:
    """The peer's violation policy: a request naming a method the spec does not know is passed
    on (to be answered with an exception) instead of failing the whole read; anything else the
    machines refuse fails it.

    Every other frame is decoded, checked and recorded by the generated ``receive_data``, and
    ``command(frame)`` gives the session that decoded command: a request's body is decoded once.
    """
    if isinstance(error, UnknownCommandError) and frame.content.request is not None:
        return True
    raise error


class _Session(Session[Frame]):
    """One accepted connection to the master or the broker."""

    def __init__(self, peer: EmbeddedTubeMQ, role: str) -> None:
        self.protocol: TubemqProtocol
        super().__init__(TubemqProtocol(server=True, on_violation=_pass_unknown_requests))
        self.peer = peer
        self.role = role

    def frame_received(self, frame: Frame) -> None:
        try:
            # What receive_data decoded; only a request of an unknown method is named again
            # here, to raise the UnknownCommandError it raised there (no body is decoded).
            name, body = self.protocol.command(frame)
        except UnknownCommandError as exc:
            self.fail(frame, UNSUPPORTED_EXCEPTION, str(exc))
            return
        handler = self.peer.handlers.get(name)
        if handler is None or name not in _ANSWER:
            self.fail(frame, UNSUPPORTED_EXCEPTION, f"{self.role} does not serve {name}")
            return
        if self.peer.standby and name in self.peer.master_role.handlers:
            self.fail(frame, STANDBY_EXCEPTION, "this master is a standby")
            return
        try:
            answer = handler(body)
        except Exception as exc:
            log.exception("%s: %s failed", self.role, name)
            self.fail(frame, type(exc).__name__, str(exc))
            return
        self.connection.write(frame_of(_ANSWER[name], answer, serial_no=frame.serial_no))

    def fail(self, frame: Frame, name: str, text: str) -> None:
        self.connection.write(frame_of_exception(
            RspExceptionBody(exceptionName=name, stackTrace=text), serial_no=frame.serial_no))


class EmbeddedTubeMQ:
    """A master and a broker on ``host``; ``async with EmbeddedTubeMQ() as peer:`` starts both
    (``peer.master`` is the address clients are given). Port 0, the default, picks a free one."""

    def __init__(self, *, partitions: int = 2, host: str = "127.0.0.1",
                 broker_id: int = 1, master_port: int = 0, broker_port: int = 0,
                 consumer_timeout: float = 30.0, register_broker: bool = False) -> None:
        self.host = host
        self._sweeper: asyncio.Task[None] | None = None
        self.broker_id = broker_id
        # When set, the broker registers itself with the master at start (and heartbeats).
        self.register_broker = register_broker
        self.broker_link: BrokerRegistration | None = None
        self.state = PeerState(partitions)
        self.master_role = Master(self.state, lambda: self.broker,
                                  consumer_timeout=consumer_timeout)
        self.broker_role = Broker(self.state)
        self.standby = False  # while set, every master call is answered with StandbyException
        self._servers: list[Server[_Session]] = []
        self.master_port = master_port
        self.broker_port = broker_port
        # One table for both roles (a session answers by name; tests replace entries here).
        self.handlers: dict[str, Callable[[Any], Any]] = {**self.master_role.handlers,
                                                          **self.broker_role.handlers}

    @property
    def master(self) -> str:
        return f"{self.host}:{self.master_port}"

    @property
    def broker(self) -> BrokerInfo:
        return BrokerInfo(self.broker_id, self.host, self.broker_port)

    @property
    def consumer_timeout(self) -> float:
        """A consumer not heard from (register or heartbeat) for this long leaves its group."""
        return self.master_role.consumer_timeout

    @property
    def sessions(self) -> list[_Session]:
        """The sessions of the open connections, to the master and to the broker."""
        return [session for server in self._servers for session in server.sessions]

    async def start(self) -> None:
        for role in ("master", "broker"):
            wanted = self.master_port if role == "master" else self.broker_port
            server = await serve(self.host, wanted, functools.partial(_Session, self, role),
                                 name=f"TubeMQ {role}")
            self._servers.append(server)
            if role == "master":
                self.master_port = server.port
            else:
                self.broker_port = server.port
        self._sweeper = asyncio.get_running_loop().create_task(self.master_role.sweep_forever())
        if self.register_broker:
            self.broker_link = await BrokerRegistration.create(
                self.master, self.broker_id, partitions=self.state.partitions)

    async def stop(self) -> None:
        link, self.broker_link = self.broker_link, None
        if link is not None:
            try:
                await link.close()
            except Exception as exc:  # the peer stops either way
                log.warning("broker: leaving the master: %s", exc)
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        servers, self._servers = self._servers, []
        await asyncio.gather(*(server.stop() for server in servers))

    async def __aenter__(self) -> EmbeddedTubeMQ:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def messages(self, topic: str, partition: int) -> list[Stored]:
        """What the broker holds for one partition."""
        return self.broker_role.messages(topic, partition)

    def expire_consumers(self) -> list[str]:
        """Drop every consumer not heard from within ``consumer_timeout``; their ids."""
        return self.master_role.expire_consumers()

    def assignment(self, group: str) -> dict[str, set[Part]]:
        """Where ``group``'s partitions should be: consumer id -> (topic, partitionId)s."""
        return self.master_role.assignment(group)
