"""An embedded TubeMQ master and broker for tests and demos: two asyncio TCP servers on one
host, built from the same generated frames, machines and builders as the client.

The master registers producers and consumers and tells them where topics live (every topic
has ``partitions`` partitions on the one broker); the broker stores messages in memory per
topic and partition and hands them to consumer groups, each with its own fetch position and
committed offset per partition.

The master also balances each group's partitions across the group's consumers, as upstream
masters do (see ``clients.tubemq.rebalance``): it keeps every consumer it has heard from within
``consumer_timeout`` seconds, deals each topic's partitions round-robin over the subscribed
consumers sorted by id, and moves partitions with rebalance events in heartbeat answers, one
event per consumer at a time, each resent until the consumer reports it. Every ``DISCONNECT``
goes out first; a partition is only offered in a ``CONNECT`` once no other consumer of the
group holds it (by the consumers' reports) or is being offered it, so no two consumers of a
group ever hold one partition at once. A consumer that closes or expires leaves the group at
once (an expired one's broker registrations are dropped too, so its reads fail).

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clients.tubemq._common import checksum
from clients.tubemq.consumer import OP_REGISTER, OP_UNREGISTER
from clients.tubemq.errors import (
    BAD_REQUEST,
    NOT_FOUND,
    NOT_REGISTERED,
    STANDBY_EXCEPTION,
    SUCCESS,
)
from clients.tubemq.rebalance import (
    EventStatus,
    EventType,
    SubscribeInfo,
    assign_partitions,
    parse_subscribe_info,
)
from clients.tubemq.topics import BrokerInfo, TopicPartitions
from generated.tubemq import broker_service as bs
from generated.tubemq import master_service as ms
from generated.tubemq.frames import Frame
from generated.tubemq.machines import TubemqProtocol, frame_of, frame_of_exception
from generated.tubemq.rpc import RspExceptionBody
from runtime.connection import Connection
from runtime.errors import UnknownCommandError

__all__ = ["EmbeddedTubeMQ"]

log = logging.getLogger(__name__)

UNSUPPORTED_EXCEPTION = "java.lang.UnsupportedOperationException"
MAX_BATCH = 32  # messages per GET_MESSAGE answer

# The response command answering each request this peer serves.
_ANSWER = {"REGISTER_P2M": "REGISTER_M2P", "HEARTBEAT_P2M": "HEARTBEAT_M2P",
           "CLOSE_P2M": "CLOSE_M2P", "REGISTER_C2M": "REGISTER_M2C",
           "HEARTBEAT_C2M": "HEARTBEAT_M2C", "CLOSE_C2M": "CLOSE_M2C",
           "SEND_MESSAGE_P2B": "SEND_MESSAGE_B2P", "REGISTER_C2B": "REGISTER_B2C",
           "HEARTBEAT_C2B": "HEARTBEAT_B2C", "GET_MESSAGE_C2B": "GET_MESSAGE_B2C",
           "COMMIT_OFFSET_C2B": "COMMIT_OFFSET_B2C"}
_MASTER_CALLS = frozenset({"REGISTER_P2M", "HEARTBEAT_P2M", "CLOSE_P2M", "REGISTER_C2M",
                           "HEARTBEAT_C2M", "CLOSE_C2M"})


@dataclass(frozen=True, slots=True)
class Stored:
    message_id: int
    data: bytes
    flag: int
    checksum: int
    append_time: int


@dataclass
class _Group:
    """A consumer group's positions in one partition."""

    committed: int = 0
    fetched: int = 0


# A partition of a topic, as the master balances them: (topic, partitionId).
_Part = tuple[str, int]


@dataclass(frozen=True, slots=True)
class _Event:
    """A rebalance event sent to a consumer and not yet reported back."""

    rebalance_id: int
    op: EventType
    parts: frozenset[_Part]


@dataclass
class _Member:
    """A consumer in a group, as the master knows it."""

    client_id: str
    group: str
    topics: list[str]
    last_seen: float  # time.monotonic() of its last register or heartbeat
    # What it holds, by its own last report (HeartRequestC2M.subscribeInfo).
    held: set[_Part] = field(default_factory=set)
    pending: _Event | None = None


@dataclass
class _State:
    partitions: int
    topics: dict[str, list[list[Stored]]] = field(default_factory=dict)
    groups: dict[tuple[str, str, int], _Group] = field(default_factory=dict)
    producers: dict[str, list[str]] = field(default_factory=dict)
    consumers: dict[str, _Member] = field(default_factory=dict)
    # (group, topic, partition) -> the client holding it
    holders: dict[tuple[str, str, int], str] = field(default_factory=dict)
    next_id: int = 1
    next_rebalance_id: int = 1

    def log_of(self, topic: str) -> list[list[Stored]]:
        return self.topics.setdefault(topic, [[] for _ in range(self.partitions)])


class _PeerProtocol(TubemqProtocol):
    """The server's side of the machines; a request naming a method the spec does not know is
    passed on (to be answered with an exception) instead of failing the whole read.

    Every other frame is decoded, checked and recorded by the generated ``receive_data``, and
    ``command(frame)`` gives the session that decoded command: a request's body is decoded once.
    """

    def __init__(self) -> None:
        super().__init__(server=True)

    def _handle(self, frame: Frame) -> None:
        try:
            super()._handle(frame)
        except UnknownCommandError:
            if frame.content.request is None:
                raise


class _Session:
    """One accepted connection to the master or the broker."""

    def __init__(self, peer: EmbeddedTubeMQ, role: str) -> None:
        self.peer = peer
        self.role = role
        self.protocol = _PeerProtocol()
        self.conn: Connection[Frame] = Connection(self.protocol, self.on_frame,
                                                  keepalive_interval=None, name=role)

    def on_frame(self, frame: Frame) -> None:
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
        if self.peer.standby and name in _MASTER_CALLS:
            self.fail(frame, STANDBY_EXCEPTION, "this master is a standby")
            return
        try:
            answer = handler(body)
        except Exception as exc:
            log.exception("%s: %s failed", self.role, name)
            self.fail(frame, type(exc).__name__, str(exc))
            return
        self.conn.write(frame_of(_ANSWER[name], answer, serial_no=frame.serial_no))

    def fail(self, frame: Frame, name: str, text: str) -> None:
        self.conn.write(frame_of_exception(RspExceptionBody(exceptionName=name, stackTrace=text),
                                           serial_no=frame.serial_no))


class EmbeddedTubeMQ:
    """A master and a broker on ``host``; ``async with EmbeddedTubeMQ() as peer:`` starts both
    (``peer.master`` is the address clients are given). Port 0, the default, picks a free one."""

    def __init__(self, *, partitions: int = 2, host: str = "127.0.0.1",
                 broker_id: int = 1, master_port: int = 0, broker_port: int = 0,
                 consumer_timeout: float = 30.0) -> None:
        self.host = host
        # A consumer not heard from (register or heartbeat) for this long leaves its group.
        self.consumer_timeout = consumer_timeout
        self._sweeper: asyncio.Task[None] | None = None
        self.broker_id = broker_id
        self.state = _State(partitions)
        self.standby = False  # while set, every master call is answered with StandbyException
        self.sessions: list[_Session] = []
        self._servers: list[asyncio.Server] = []
        self.master_port = master_port
        self.broker_port = broker_port
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "REGISTER_P2M": self._register_p2m, "HEARTBEAT_P2M": self._heartbeat_p2m,
            "CLOSE_P2M": self._close_p2m, "REGISTER_C2M": self._register_c2m,
            "HEARTBEAT_C2M": self._heartbeat_c2m, "CLOSE_C2M": self._close_c2m,
            "SEND_MESSAGE_P2B": self._send_message, "REGISTER_C2B": self._register_c2b,
            "HEARTBEAT_C2B": self._heartbeat_c2b, "GET_MESSAGE_C2B": self._get_message,
            "COMMIT_OFFSET_C2B": self._commit_offset,
        }

    @property
    def master(self) -> str:
        return f"{self.host}:{self.master_port}"

    @property
    def broker(self) -> BrokerInfo:
        return BrokerInfo(self.broker_id, self.host, self.broker_port)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for role in ("master", "broker"):
            wanted = self.master_port if role == "master" else self.broker_port
            server = await loop.create_server(functools.partial(self._accept, role),
                                              self.host, wanted)
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            if role == "master":
                self.master_port = port
            else:
                self.broker_port = port
        self._sweeper = loop.create_task(self._sweep_forever())

    def _accept(self, role: str) -> Connection[Frame]:
        session = _Session(self, role)
        self.sessions.append(session)
        session.conn.on_close(lambda _: self.sessions.remove(session))
        return session.conn

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        for server in self._servers:
            server.close()
        for session in list(self.sessions):
            session.conn.abort()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    async def __aenter__(self) -> EmbeddedTubeMQ:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def messages(self, topic: str, partition: int) -> list[Stored]:
        """What the broker holds for one partition."""
        return list(self.state.log_of(topic)[partition])

    def _layout(self, topics: list[str]) -> list[str]:
        return [str(TopicPartitions(self.broker, t, self.state.partitions)) for t in topics]

    # -- master ------------------------------------------------------------------------------
    def _register_p2m(self, body: ms.RegisterRequestP2M) -> ms.RegisterResponseM2P:
        self.state.producers[body.clientId] = list(body.topicList)
        return ms.RegisterResponseM2P(success=True, errCode=SUCCESS, errMsg="OK",
                                      brokerCheckSum=1, brokerInfos=[str(self.broker)])

    def _heartbeat_p2m(self, body: ms.HeartRequestP2M) -> ms.HeartResponseM2P:
        topics = list(body.topicList) or self.state.producers.get(body.clientId, [])
        return ms.HeartResponseM2P(success=True, errCode=SUCCESS, errMsg="OK", brokerCheckSum=1,
                                   topicInfos=self._layout(topics),
                                   brokerInfos=[str(self.broker)])

    def _close_p2m(self, body: ms.CloseRequestP2M) -> ms.CloseResponseM2P:
        self.state.producers.pop(body.clientId, None)
        return ms.CloseResponseM2P(success=True, errCode=SUCCESS, errMsg="OK")

    def _register_c2m(self, body: ms.RegisterRequestC2M) -> ms.RegisterResponseM2C:
        if not body.groupName or not body.topicList:
            return ms.RegisterResponseM2C(success=False, errCode=BAD_REQUEST,
                                          errMsg="groupName and topicList are required")
        self.expire_consumers()
        member = self.state.consumers.get(body.clientId)
        if member is None or member.group != body.groupName:
            if member is not None:  # the same id in another group: it left the first one
                self._leave(member)
            member = _Member(body.clientId, body.groupName, [], time.monotonic())
            self.state.consumers[body.clientId] = member
            # A consumer registering again says what it still holds (subscribeInfo).
            member.held = self._reported(member, body.subscribeInfo)
        member.topics = list(dict.fromkeys(body.topicList))
        member.last_seen = time.monotonic()
        self._rebalance(member.group)
        # The partitions themselves come as CONNECT events in heartbeat answers.
        return ms.RegisterResponseM2C(success=True, errCode=SUCCESS, errMsg="OK",
                                      topicInfo=self._layout(member.topics))

    def _heartbeat_c2m(self, body: ms.HeartRequestC2M) -> ms.HeartResponseM2C:
        self.expire_consumers()
        member = self.state.consumers.get(body.clientId)
        if member is None or member.group != body.groupName:
            # Upstream answers a consumer it no longer knows the same way: it must register.
            return ms.HeartResponseM2C(success=False, errCode=NOT_REGISTERED,
                                       errMsg=f"{body.clientId} is not registered in "
                                              f"{body.groupName}")
        member.last_seen = time.monotonic()
        report = body.event
        if (report is not None and member.pending is not None
                and report.rebalanceId == member.pending.rebalance_id):
            if not body.reportSubscribeInfo:
                # No holdings reported: take the event's outcome at its word.
                if report.status == EventStatus.DONE and member.pending.op == EventType.CONNECT:
                    member.held |= member.pending.parts
                elif member.pending.op == EventType.DISCONNECT:
                    member.held -= member.pending.parts
            member.pending = None
        if body.reportSubscribeInfo:
            member.held = self._reported(member, body.subscribeInfo)
        self._rebalance(member.group)
        return ms.HeartResponseM2C(success=True, errCode=SUCCESS, errMsg="OK",
                                   event=self._event_proto(member))

    def _close_c2m(self, body: ms.CloseRequestC2M) -> ms.CloseResponseM2C:
        member = self.state.consumers.get(body.clientId)
        if member is not None:
            self._leave(member)
        return ms.CloseResponseM2C(success=True, errCode=SUCCESS, errMsg="OK")

    # -- master: group membership and rebalancing ---------------------------------------------
    def _reported(self, member: _Member, infos: list[str]) -> set[_Part]:
        """The partitions of ``member``'s own entries in a consumer's subscribeInfo list."""
        held: set[_Part] = set()
        for text in infos:
            try:
                info = parse_subscribe_info(text)
            except ValueError:
                log.warning("master: %s reported %r", member.client_id, text)
                continue
            if info.consumer_id == member.client_id and info.group == member.group:
                held.add((info.topic, info.partition))
        return held

    def _event_proto(self, member: _Member) -> ms.EventProto | None:
        event = member.pending
        if event is None:
            return None
        infos = [str(SubscribeInfo(member.client_id, member.group, self.broker, topic, p))
                 for topic, p in sorted(event.parts)]
        return ms.EventProto(rebalanceId=event.rebalance_id, opType=int(event.op),
                             status=int(EventStatus.TODO), subscribeInfo=infos)

    def _leave(self, member: _Member) -> None:
        """``member`` is out of its group; whatever it held is free for the others."""
        self.state.consumers.pop(member.client_id, None)
        self._rebalance(member.group)

    def expire_consumers(self) -> list[str]:
        """Drop every consumer not heard from within ``consumer_timeout``; their ids."""
        deadline = time.monotonic() - self.consumer_timeout
        gone = [m for m in self.state.consumers.values() if m.last_seen < deadline]
        for member in gone:
            log.info("master: consumer %s of %s expired", member.client_id, member.group)
            # The broker forgets it too: its reads and commits fail from now on, and what it
            # fetched without committing is handed out again.
            for where, holder in list(self.state.holders.items()):
                if holder == member.client_id and where[0] == member.group:
                    del self.state.holders[where]
                    group = self.state.groups.get(where)
                    if group is not None:
                        group.fetched = group.committed
            self._leave(member)
        return [m.client_id for m in gone]

    async def _sweep_forever(self) -> None:
        # Expiry also runs on every consumer call to the master; this catches a group whose
        # consumers all went quiet.
        interval = min(1.0, max(0.01, self.consumer_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            self.expire_consumers()

    def assignment(self, group: str) -> dict[str, set[_Part]]:
        """Where ``group``'s partitions should be: consumer id -> (topic, partitionId)s."""
        members = [m for m in self.state.consumers.values() if m.group == group]
        target: dict[str, set[_Part]] = {m.client_id: set() for m in members}
        for topic in sorted({t for m in members for t in m.topics}):
            readers = [m.client_id for m in members if topic in m.topics]
            dealt = assign_partitions(range(self.state.partitions), readers)
            for client_id, parts in dealt.items():
                target[client_id] |= {(topic, p) for p in parts}
        return target

    def _rebalance(self, group: str) -> None:
        """Queue the next events that move ``group`` towards ``assignment(group)``.

        A consumer with an unreported event gets nothing new. Releases go out first; a
        partition is offered only when no other member holds it or is being offered it, so the
        CONNECT for a moved partition waits for its DISCONNECT's report (or its holder's exit).
        """
        target = self.assignment(group)
        members = sorted((m for m in self.state.consumers.values() if m.group == group),
                         key=lambda m: m.client_id)
        for member in members:
            lost = member.held - target[member.client_id]
            if member.pending is None and lost:
                member.pending = self._new_event(EventType.DISCONNECT, lost)
        claimed: dict[_Part, str] = {}
        for member in members:
            for part in member.held:
                claimed[part] = member.client_id
            if member.pending is not None and member.pending.op == EventType.CONNECT:
                for part in member.pending.parts:
                    claimed[part] = member.client_id
        for member in members:
            if member.pending is not None:
                continue
            free = {part for part in target[member.client_id] - member.held
                    if claimed.setdefault(part, member.client_id) == member.client_id}
            if free:
                member.pending = self._new_event(EventType.CONNECT, free)

    def _new_event(self, op: EventType, parts: set[_Part]) -> _Event:
        event = _Event(self.state.next_rebalance_id, op, frozenset(parts))
        self.state.next_rebalance_id += 1
        return event

    # -- broker ------------------------------------------------------------------------------
    def _partition_error(self, topic: str, partition: int) -> str | None:
        if not topic:
            return "topicName is required"
        if not 0 <= partition < self.state.partitions:
            return f"{topic} has no partition {partition}"
        return None

    def _send_message(self, body: bs.SendMessageRequestP2B) -> bs.SendMessageResponseB2P:
        problem = self._partition_error(body.topicName, body.partitionId)
        if problem is None and body.checkSum != -1 and body.checkSum != checksum(body.data):
            problem = "checkSum does not match the data"
        if problem is not None:
            return bs.SendMessageResponseB2P(success=False, errCode=BAD_REQUEST, errMsg=problem)
        log_ = self.state.log_of(body.topicName)[body.partitionId]
        now = int(time.time() * 1000)
        stored = Stored(self.state.next_id, body.data, body.flag, checksum(body.data), now)
        self.state.next_id += 1
        log_.append(stored)
        return bs.SendMessageResponseB2P(success=True, errCode=SUCCESS, errMsg="OK",
                                         messageId=stored.message_id, appendTime=now,
                                         appendOffset=len(log_) - 1)

    def _register_c2b(self, body: bs.RegisterRequestC2B) -> bs.RegisterResponseB2C:
        problem = self._partition_error(body.topicName, body.partitionId)
        if problem is not None or body.opType not in (OP_REGISTER, OP_UNREGISTER):
            return bs.RegisterResponseB2C(success=False, errCode=BAD_REQUEST,
                                          errMsg=problem or f"unknown opType {body.opType}")
        where = (body.groupName, body.topicName, body.partitionId)
        group = self.state.groups.setdefault(where, _Group())
        size = len(self.state.log_of(body.topicName)[body.partitionId])
        if body.opType == OP_UNREGISTER:
            # Only the holder's release counts: a consumer the master already moved on from
            # must not free a partition someone else has taken since.
            if self.state.holders.get(where) == body.clientId:
                del self.state.holders[where]
        else:
            self.state.holders[where] = body.clientId
            group.fetched = group.committed  # what was fetched and not committed comes again
        return bs.RegisterResponseB2C(success=True, errCode=SUCCESS, errMsg="OK",
                                      currOffset=group.committed, maxOffset=size)

    def _heartbeat_c2b(self, body: bs.HeartBeatRequestC2B) -> bs.HeartBeatResponseB2C:
        return bs.HeartBeatResponseB2C(success=True, errCode=SUCCESS, errMsg="OK")

    def _get_message(self, body: bs.GetMessageRequestC2B) -> bs.GetMessageResponseB2C:
        where = (body.groupName, body.topicName, body.partitionId)
        if self.state.holders.get(where) != body.clientId:
            return bs.GetMessageResponseB2C(success=False, errCode=BAD_REQUEST,
                                            errMsg="the partition is not registered")
        group = self.state.groups[where]
        log_ = self.state.log_of(body.topicName)[body.partitionId]
        batch = log_[group.fetched:group.fetched + MAX_BATCH]
        if not batch:
            return bs.GetMessageResponseB2C(success=False, errCode=NOT_FOUND,
                                            errMsg="no new message", currOffset=group.fetched,
                                            maxOffset=len(log_))
        group.fetched += len(batch)
        if not body.manualCommitOffset:
            group.committed = group.fetched
        return bs.GetMessageResponseB2C(
            success=True, errCode=SUCCESS, errMsg="OK", currOffset=group.fetched,
            maxOffset=len(log_),
            messages=[bs.TransferedMessage(messageId=m.message_id, checkSum=m.checksum,
                                           payLoadData=m.data, flag=m.flag) for m in batch])

    def _commit_offset(self, body: bs.CommitOffsetRequestC2B) -> bs.CommitOffsetResponseB2C:
        where = (body.groupName, body.topicName, body.partitionId)
        group = self.state.groups.get(where)
        if group is None or self.state.holders.get(where) != body.clientId:
            return bs.CommitOffsetResponseB2C(success=False, errCode=BAD_REQUEST,
                                              errMsg="the partition is not registered")
        if body.lastPackConsumed:
            group.committed = group.fetched
        size = len(self.state.log_of(body.topicName)[body.partitionId])
        return bs.CommitOffsetResponseB2C(success=True, errCode=SUCCESS, errMsg="OK",
                                          currOffset=group.committed, maxOffset=size)
