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

The master also serves the v2 consumer calls, for consumers that choose their own partitions
(client-side balancing): a v2 register is answered with the broker list, and the v2
heartbeat and GET_PART_META with the partition layout, each list with a version number
(``brokerConfigId``, ``topicMetaInfoId``) so that a consumer reporting the current versions
gets ids only. The lists use the v1 formats: ``brokerId:host:port`` per broker and
``brokerId:host:port-topic:partitionNum`` per topic (``clients.tubemq.topics``). Brokers may
register with the master too (``clients.tubemq.broker_link``): the master records each one
(``brokers``) with its status and reported configuration, asks for the configuration again
(``needReportData``) when a heartbeat names a version it has not seen, and fails the heartbeat
of a broker it does not know so that it registers again. With ``register_broker`` the
embedded broker registers itself with the embedded master at ``start``. Clients are still
sent to the embedded broker alone.

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

from protoframe.clients.tubemq._common import checksum
from protoframe.clients.tubemq.broker_link import BrokerRegistration
from protoframe.clients.tubemq.consumer import OP_REGISTER, OP_UNREGISTER
from protoframe.clients.tubemq.errors import (
    BAD_REQUEST,
    NOT_FOUND,
    NOT_REGISTERED,
    STANDBY_EXCEPTION,
    SUCCESS,
)
from protoframe.clients.tubemq.rebalance import (
    EventStatus,
    EventType,
    SubscribeInfo,
    assign_partitions,
    parse_subscribe_info,
)
from protoframe.clients.tubemq.topics import BrokerInfo, TopicPartitions
from protoframe.generated.tubemq import broker_service as bs
from protoframe.generated.tubemq import master_service as ms
from protoframe.generated.tubemq.frames import Frame
from protoframe.generated.tubemq.machines import TubemqProtocol, frame_of, frame_of_exception
from protoframe.generated.tubemq.rpc import RspExceptionBody
from protoframe.runtime.errors import UnknownCommandError
from protoframe.runtime.io.connection import Connection

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
           "COMMIT_OFFSET_C2B": "COMMIT_OFFSET_B2C", "REGISTER_B2M": "REGISTER_M2B",
           "HEARTBEAT_B2M": "HEARTBEAT_M2B", "CLOSE_B2M": "CLOSE_M2B",
           "REGISTER_C2M_V2": "REGISTER_M2C_V2", "HEARTBEAT_C2M_V2": "HEARTBEAT_M2C_V2",
           "GET_PART_META_C2M": "GET_PART_META_M2C"}
_MASTER_CALLS = frozenset({"REGISTER_P2M", "HEARTBEAT_P2M", "CLOSE_P2M", "REGISTER_C2M",
                           "HEARTBEAT_C2M", "CLOSE_C2M", "REGISTER_B2M", "HEARTBEAT_B2M",
                           "CLOSE_B2M", "REGISTER_C2M_V2", "HEARTBEAT_C2M_V2",
                           "GET_PART_META_C2M"})
# The version numbers of the master's broker list and partition layout: the embedded broker
# and its partition count do not change while the peer runs.
BROKER_CONFIG_ID = 1
TOPIC_META_ID = 1


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
class _BalancedMember:
    """A v2 consumer: it chose its own partitions, and the master only records them."""

    client_id: str
    group: str
    topics: list[str]
    source_count: int
    node_id: int
    last_seen: float
    held: set[_Part] = field(default_factory=set)


@dataclass
class RegisteredBroker:
    """A broker registered with the master, as it last reported itself."""

    broker_id: str
    online: bool
    read_status: int
    write_status: int
    conf_id: int
    conf_checksum: int
    default_conf: str
    topic_confs: list[str]
    last_seen: float
    heartbeats: int = 0


@dataclass
class _State:
    partitions: int
    topics: dict[str, list[list[Stored]]] = field(default_factory=dict)
    groups: dict[tuple[str, str, int], _Group] = field(default_factory=dict)
    producers: dict[str, list[str]] = field(default_factory=dict)
    consumers: dict[str, _Member] = field(default_factory=dict)
    balanced: dict[str, _BalancedMember] = field(default_factory=dict)  # v2 consumers
    brokers: dict[str, RegisteredBroker] = field(default_factory=dict)
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
                 consumer_timeout: float = 30.0, register_broker: bool = False) -> None:
        self.host = host
        # A consumer not heard from (register or heartbeat) for this long leaves its group.
        self.consumer_timeout = consumer_timeout
        self._sweeper: asyncio.Task[None] | None = None
        self.broker_id = broker_id
        # When set, the broker registers itself with the master at start (and heartbeats).
        self.register_broker = register_broker
        self.broker_link: BrokerRegistration | None = None
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
            "COMMIT_OFFSET_C2B": self._commit_offset, "REGISTER_B2M": self._register_b2m,
            "HEARTBEAT_B2M": self._heartbeat_b2m, "CLOSE_B2M": self._close_b2m,
            "REGISTER_C2M_V2": self._register_c2m_v2,
            "HEARTBEAT_C2M_V2": self._heartbeat_c2m_v2,
            "GET_PART_META_C2M": self._get_part_meta,
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
        if self.register_broker:
            self.broker_link = await BrokerRegistration.create(
                self.master, self.broker_id, partitions=self.state.partitions)

    def _accept(self, role: str) -> Connection[Frame]:
        session = _Session(self, role)
        self.sessions.append(session)
        session.conn.on_close(lambda _: self.sessions.remove(session))
        return session.conn

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
        self.state.balanced.pop(body.clientId, None)  # a v2 consumer turning v1
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
        # v2 consumers leave with the same call.
        self.state.balanced.pop(body.clientId, None)
        return ms.CloseResponseM2C(success=True, errCode=SUCCESS, errMsg="OK")

    # -- master: v2 consumers ----------------------------------------------------------------
    def _broker_list(self, known: int | None) -> list[str]:
        """The broker list, unless the client already has version ``known`` of it."""
        return [] if known == BROKER_CONFIG_ID else [str(self.broker)]

    def _register_c2m_v2(self, body: ms.RegisterRequestC2MV2) -> ms.RegisterResponseM2CV2:
        problem = None
        if not body.groupName or not body.topicList:
            problem = "groupName and topicList are required"
        elif body.sourceCount <= 0 or not 0 <= body.nodeId < body.sourceCount:
            problem = f"nodeId {body.nodeId} is not one of sourceCount {body.sourceCount}"
        elif body.clientId in self.state.consumers:
            problem = f"{body.clientId} is registered as a v1 consumer"
        if problem is not None:
            return ms.RegisterResponseM2CV2(errCode=BAD_REQUEST, errMsg=problem)
        self.expire_consumers()
        member = _BalancedMember(body.clientId, body.groupName,
                                 list(dict.fromkeys(body.topicList)), body.sourceCount,
                                 body.nodeId, time.monotonic())
        report = body.subRepInfo
        if report is not None:
            member.held = self._held_v2(member, report)
        self.state.balanced[body.clientId] = member
        known = report.brokerConfigId if report is not None else None
        return ms.RegisterResponseM2CV2(errCode=SUCCESS, errMsg="OK",
                                        brokerConfigId=BROKER_CONFIG_ID,
                                        brokerConfigList=self._broker_list(known))

    def _member_v2(self, client_id: str, group: str) -> _BalancedMember | None:
        self.expire_consumers()
        member = self.state.balanced.get(client_id)
        return member if member is not None and member.group == group else None

    def _heartbeat_c2m_v2(self, body: ms.HeartRequestC2MV2) -> ms.HeartResponseM2CV2:
        member = self._member_v2(body.clientId, body.groupName)
        if member is None:
            return ms.HeartResponseM2CV2(errCode=NOT_REGISTERED,
                                         errMsg=f"{body.clientId} is not registered in "
                                                f"{body.groupName}")
        member.last_seen = time.monotonic()
        report = body.subRepInfo
        if report is not None and report.reportSubInfo:
            member.held = self._held_v2(member, report)
        stale = report is None or report.topicMetaInfoId != TOPIC_META_ID
        return ms.HeartResponseM2CV2(
            errCode=SUCCESS, errMsg="OK", brokerConfigId=BROKER_CONFIG_ID,
            brokerConfigList=self._broker_list(report.brokerConfigId if report else None),
            topicMetaInfoId=TOPIC_META_ID,
            topicMetaInfoList=self._layout(member.topics) if stale else [])

    def _get_part_meta(self, body: ms.GetPartMetaRequestC2M) -> ms.GetPartMetaResponseM2C:
        member = self._member_v2(body.clientId, body.groupName)
        if member is None:
            return ms.GetPartMetaResponseM2C(errCode=NOT_REGISTERED,
                                             errMsg=f"{body.clientId} is not registered in "
                                                    f"{body.groupName}")
        member.last_seen = time.monotonic()
        # Asked for, so sent whatever the client says it has.
        return ms.GetPartMetaResponseM2C(errCode=SUCCESS, errMsg="OK",
                                         brokerConfigId=BROKER_CONFIG_ID,
                                         topicMetaInfoId=TOPIC_META_ID,
                                         topicMetaInfoList=self._layout(member.topics),
                                         brokerConfigList=[str(self.broker)])

    def _held_v2(self, member: _BalancedMember, report: ms.ClientSubRepInfo) -> set[_Part]:
        probe = _Member(member.client_id, member.group, member.topics, member.last_seen)
        return self._reported(probe, report.partSubInfo)

    # -- master: brokers ----------------------------------------------------------------------
    def _register_b2m(self, body: ms.RegisterRequestB2M) -> ms.RegisterResponseM2B:
        if not body.clientId:
            return ms.RegisterResponseM2B(success=False, errCode=BAD_REQUEST,
                                          errMsg="clientId (the broker id) is required",
                                          stopRead=True, stopWrite=True, takeConfInfo=False)
        self.state.brokers[body.clientId] = RegisteredBroker(
            body.clientId, body.brokerOnline, body.readStatusRpt, body.writeStatusRpt,
            body.curBrokerConfId, body.confCheckSumId, body.brokerDefaultConfInfo,
            list(body.brokerTopicSetConfInfo), time.monotonic())
        log.info("master: broker %s registered", body.clientId)
        # The broker's own configuration stands: nothing to take, nothing stopped.
        return ms.RegisterResponseM2B(
            success=True, errCode=SUCCESS, errMsg="OK", stopRead=False, stopWrite=False,
            takeConfInfo=False,
            enableBrokerInfo=ms.EnableBrokerFunInfo(
                enableConsumeAuthenticate=False, enableConsumeAuthorize=False,
                enableProduceAuthenticate=False, enableProduceAuthorize=False),
            curBrokerConfId=body.curBrokerConfId, confCheckSumId=body.confCheckSumId)

    def _heartbeat_b2m(self, body: ms.HeartRequestB2M) -> ms.HeartResponseM2B:
        broker = self.state.brokers.get(body.brokerId)
        if broker is None:
            # As for consumers: a broker the master does not know must register again.
            return ms.HeartResponseM2B(
                success=False, errCode=NOT_REGISTERED,
                errMsg=f"broker {body.brokerId} is not registered", stopRead=False,
                stopWrite=False, curBrokerConfId=body.curBrokerConfId,
                confCheckSumId=body.confCheckSumId, needReportData=True, takeConfInfo=False,
                takeRemoveTopicInfo=False)
        broker.online = body.brokerOnline
        broker.read_status = body.readStatusRpt
        broker.write_status = body.writeStatusRpt
        broker.last_seen = time.monotonic()
        broker.heartbeats += 1
        if body.takeConfInfo:
            broker.conf_id = body.curBrokerConfId
            broker.conf_checksum = body.confCheckSumId
            if body.brokerDefaultConfInfo is not None:
                broker.default_conf = body.brokerDefaultConfInfo
            broker.topic_confs = list(body.brokerTopicSetConfInfo)
        # A configuration version the master has not seen: ask for the configuration.
        unseen = (body.curBrokerConfId, body.confCheckSumId) != (broker.conf_id,
                                                                 broker.conf_checksum)
        return ms.HeartResponseM2B(
            success=True, errCode=SUCCESS, errMsg="OK", stopRead=False, stopWrite=False,
            curBrokerConfId=broker.conf_id, confCheckSumId=broker.conf_checksum,
            needReportData=unseen, takeConfInfo=False, takeRemoveTopicInfo=False)

    def _close_b2m(self, body: ms.CloseRequestB2M) -> ms.CloseResponseM2B:
        if self.state.brokers.pop(body.brokerId, None) is not None:
            log.info("master: broker %s went offline", body.brokerId)
        return ms.CloseResponseM2B(success=True, errCode=SUCCESS, errMsg="OK")

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
        gone_v2 = [m for m in self.state.balanced.values() if m.last_seen < deadline]
        for balanced in gone_v2:
            log.info("master: v2 consumer %s of %s expired", balanced.client_id,
                     balanced.group)
            del self.state.balanced[balanced.client_id]
            self._drop_holdings(balanced.client_id, balanced.group)
        gone = [m for m in self.state.consumers.values() if m.last_seen < deadline]
        for member in gone:
            log.info("master: consumer %s of %s expired", member.client_id, member.group)
            self._drop_holdings(member.client_id, member.group)
            self._leave(member)
        return [m.client_id for m in gone_v2] + [m.client_id for m in gone]

    def _drop_holdings(self, client_id: str, group_name: str) -> None:
        # The broker forgets an expired consumer too: its reads and commits fail from now on,
        # and what it fetched without committing is handed out again.
        for where, holder in list(self.state.holders.items()):
            if holder == client_id and where[0] == group_name:
                del self.state.holders[where]
                group = self.state.groups.get(where)
                if group is not None:
                    group.fetched = group.committed

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
