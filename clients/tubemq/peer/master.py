"""The embedded TubeMQ master: producers, consumers (v1 balanced here, v2 balancing
themselves), brokers registering, and the rebalance events that move a group's partitions.

Each handler takes a decoded request body and returns the response body; ``handlers`` maps
the request names to them (``server`` answers frames with them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from protoframe.clients.tubemq.errors import BAD_REQUEST, NOT_REGISTERED, SUCCESS
from protoframe.clients.tubemq.rebalance import (
    EventStatus,
    EventType,
    SubscribeInfo,
    assign_partitions,
    parse_subscribe_info,
)
from protoframe.clients.tubemq.topics import BrokerInfo, TopicPartitions
from protoframe.generated.tubemq import master_service as ms

from .state import BalancedMember, Event, Member, Part, PeerState, RegisteredBroker

__all__ = ["BROKER_CONFIG_ID", "TOPIC_META_ID", "Master"]

log = logging.getLogger(__name__)

# The version numbers of the master's broker list and partition layout: the embedded broker
# and its partition count do not change while the peer runs.
BROKER_CONFIG_ID = 1
TOPIC_META_ID = 1


class Master:
    """The master's calls over ``state``; ``broker()`` is the broker clients are sent to."""

    def __init__(self, state: PeerState, broker: Callable[[], BrokerInfo], *,
                 consumer_timeout: float) -> None:
        self.state = state
        self._broker = broker
        # A consumer not heard from (register or heartbeat) for this long leaves its group.
        self.consumer_timeout = consumer_timeout
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "REGISTER_P2M": self._register_p2m, "HEARTBEAT_P2M": self._heartbeat_p2m,
            "CLOSE_P2M": self._close_p2m, "REGISTER_C2M": self._register_c2m,
            "HEARTBEAT_C2M": self._heartbeat_c2m, "CLOSE_C2M": self._close_c2m,
            "REGISTER_B2M": self._register_b2m, "HEARTBEAT_B2M": self._heartbeat_b2m,
            "CLOSE_B2M": self._close_b2m, "REGISTER_C2M_V2": self._register_c2m_v2,
            "HEARTBEAT_C2M_V2": self._heartbeat_c2m_v2, "GET_PART_META_C2M": self._get_part_meta,
        }

    @property
    def broker(self) -> BrokerInfo:
        return self._broker()

    def _layout(self, topics: list[str]) -> list[str]:
        return [str(TopicPartitions(self.broker, t, self.state.partitions)) for t in topics]

    # -- producers and v1 consumers ---------------------------------------------------------
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
            member = Member(body.clientId, body.groupName, [], time.monotonic())
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
        member = BalancedMember(body.clientId, body.groupName,
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

    def _member_v2(self, client_id: str, group: str) -> BalancedMember | None:
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

    def _held_v2(self, member: BalancedMember, report: ms.ClientSubRepInfo) -> set[Part]:
        probe = Member(member.client_id, member.group, member.topics, member.last_seen)
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
    def _reported(self, member: Member, infos: list[str]) -> set[Part]:
        """The partitions of ``member``'s own entries in a consumer's subscribeInfo list."""
        held: set[Part] = set()
        for text in infos:
            try:
                info = parse_subscribe_info(text)
            except ValueError:
                log.warning("master: %s reported %r", member.client_id, text)
                continue
            if info.consumer_id == member.client_id and info.group == member.group:
                held.add((info.topic, info.partition))
        return held

    def _event_proto(self, member: Member) -> ms.EventProto | None:
        event = member.pending
        if event is None:
            return None
        infos = [str(SubscribeInfo(member.client_id, member.group, self.broker, topic, p))
                 for topic, p in sorted(event.parts)]
        return ms.EventProto(rebalanceId=event.rebalance_id, opType=int(event.op),
                             status=int(EventStatus.TODO), subscribeInfo=infos)

    def _leave(self, member: Member) -> None:
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

    async def sweep_forever(self) -> None:
        """Expire quiet consumers every so often, until cancelled."""
        # Expiry also runs on every consumer call to the master; this catches a group whose
        # consumers all went quiet.
        interval = min(1.0, max(0.01, self.consumer_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            self.expire_consumers()

    def assignment(self, group: str) -> dict[str, set[Part]]:
        """Where ``group``'s partitions should be: consumer id -> (topic, partitionId)s."""
        members = [m for m in self.state.consumers.values() if m.group == group]
        target: dict[str, set[Part]] = {m.client_id: set() for m in members}
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
        claimed: dict[Part, str] = {}
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

    def _new_event(self, op: EventType, parts: set[Part]) -> Event:
        event = Event(self.state.next_rebalance_id, op, frozenset(parts))
        self.state.next_rebalance_id += 1
        return event

