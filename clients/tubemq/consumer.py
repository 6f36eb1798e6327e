"""A TubeMQ consumer in a group: registers with the master, takes the partitions the master
gives it, registers with their brokers and pulls messages, committing offsets when asked to.

Partitions come and go as the master rebalances the group (``clients.tubemq.rebalance``): a
heartbeat answer may carry an ``EventProto``; for a ``DISCONNECT`` the consumer unregisters
the partitions named in its ``subscribeInfo`` at their broker (``REGISTER_C2B``, opType 32),
for a ``CONNECT`` it registers them (opType 31), and either way it reports the event (same
``rebalanceId`` and ``opType``, ``status`` DONE or FAILED) with what it now holds
(``subscribeInfo``, ``reportSubscribeInfo``) in the next heartbeat, which ``heartbeat`` sends
at once so the master can go on with the rebalance. ``create`` sends the first heartbeat
itself, so a consumer alone in its group holds every partition when ``create`` returns.
``on_rebalance`` and ``wait_for_assignment`` let an application see its partitions change.

Offsets are committed explicitly (``manualCommitOffset``): ``get_messages`` reads on from the
last fetch, and ``commit`` makes that position the group's, so a consumer that takes a
partition later starts after the last commit. A partition with a fetched, uncommitted batch
is released only after that batch is committed (or ``release_timeout`` passes), so a
rebalance does not hand the batch to another consumer as well.

With ``master_protocol="v2"`` the consumer talks to the master with the v2 calls instead and
balances itself (upstream's client-side balancing): it registers as node ``node_id`` of
``source_count`` (``REGISTER_C2M_V2``), asks for the partition layout (``GET_PART_META_C2M``,
also ``partition_meta``), and takes every partition whose place in the layout (sorted by
broker id, then partition) is ``node_id`` modulo ``source_count``. Its heartbeats
(``HEARTBEAT_C2M_V2``) report what it holds and the versions of the broker list and layout it
has; an answer with a newer layout makes it take and release partitions to match. No
rebalance events arrive this way, so ``on_rebalance`` is not called; ``wait_for_assignment``
works for both. Either way the consumer leaves with ``CLOSE_C2M``.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Callable
from typing import Literal

from protoframe.clients.tubemq._common import Heartbeat, log, new_client_id
from protoframe.clients.tubemq.connection import DEFAULT_TIMEOUT, TubeMQConnection
from protoframe.clients.tubemq.errors import NOT_REGISTERED, ServerError, TubeMQError
from protoframe.clients.tubemq.partition import (
    OP_REGISTER,
    OP_UNREGISTER,
    HeldPartition,
    Message,
    Rebalance,
)
from protoframe.clients.tubemq.rebalance import (
    CONNECTS,
    DISCONNECTS,
    EventStatus,
    EventType,
    SubscribeInfo,
    node_share,
    parse_subscribe_info,
)
from protoframe.generated.tubemq.broker_service import (
    HeartBeatRequestC2B,
    RegisterRequestC2B,
)
from protoframe.generated.tubemq.master_service import (
    ClientSubRepInfo,
    CloseRequestC2M,
    EventProto,
    GetPartMetaRequestC2M,
    HeartRequestC2M,
    HeartRequestC2MV2,
    RegisterRequestC2M,
    RegisterRequestC2MV2,
)

__all__ = ["Consumer", "MasterProtocol", "Message", "OP_REGISTER", "OP_UNREGISTER",
           "Rebalance"]

# Which calls a consumer makes to the master: v1 (methods 4 to 6, rebalance events) or v2
# (methods 20 to 22 and 6, client-side balancing).
MasterProtocol = Literal["v1", "v2"]
UNKNOWN_VERSION = -1  # brokerConfigId / topicMetaInfoId of a list not received yet

def _check_options(master_protocol: str, source_count: int, node_id: int) -> None:
    if master_protocol not in ("v1", "v2"):
        raise ValueError(f"master_protocol must be 'v1' or 'v2', not {master_protocol!r}")
    if source_count <= 0 or not 0 <= node_id < source_count:
        raise ValueError(f"node_id {node_id} is not one of source_count {source_count}")


class Consumer:
    """Reads one topic as a member of ``group``; create it with ``await Consumer.create()``."""

    def __init__(self, master: TubeMQConnection, topic: str, group: str, client_id: str,
                 timeout: float, *, on_rebalance: Callable[[Rebalance], object] | None = None,
                 release_timeout: float = 5.0, master_protocol: MasterProtocol = "v1",
                 source_count: int = 1, node_id: int = 0) -> None:
        _check_options(master_protocol, source_count, node_id)
        self.master = master
        self.topic = topic
        self.group = group
        self.client_id = client_id
        self.timeout = timeout
        self.on_rebalance = on_rebalance
        self.release_timeout = release_timeout
        self.partitions: dict[int, HeldPartition] = {}
        self._brokers: dict[str, TubeMQConnection] = {}
        self._next = itertools.count()
        self._heartbeat: Heartbeat | None = None
        self._closed = False
        # Heartbeats carry event reports and event handling changes ``partitions``: one at a
        # time, whether from the background task or a direct call.
        self._beat_lock = asyncio.Lock()
        self._handled: int | None = None  # rebalanceId of the last event carried out
        self._report: EventProto | None = None  # its outcome, for the next heartbeat
        self._changed = asyncio.Event()  # set (and replaced) whenever ``partitions`` changes
        self.master_protocol: MasterProtocol = master_protocol
        # v2 only: this consumer's place among the group's, and the master's list versions.
        self.source_count = source_count
        self.node_id = node_id
        self.broker_config_id = UNKNOWN_VERSION
        self.topic_meta_id = UNKNOWN_VERSION

    @classmethod
    async def create(cls, master: str, topic: str, group: str, *,
                     client_id: str | None = None, heartbeat_interval: float | None = 10.0,
                     timeout: float = DEFAULT_TIMEOUT,
                     on_rebalance: Callable[[Rebalance], object] | None = None,
                     release_timeout: float = 5.0, master_protocol: MasterProtocol = "v1",
                     source_count: int = 1, node_id: int = 0) -> Consumer:
        """Join ``group`` at the master ``host:port`` and take the partitions of ``topic`` the
        master's first heartbeat answer gives (all of them when alone in the group).

        Later changes arrive with the heartbeats every ``heartbeat_interval`` seconds (None:
        only when ``heartbeat`` is called); ``on_rebalance`` is called after each event is
        carried out. A partition being released waits up to ``release_timeout`` seconds for
        its fetched batch to be committed.

        ``master_protocol="v2"`` uses the master's v2 calls: the consumer takes its share
        (``node_id`` of ``source_count``) of the partitions itself, before ``create`` returns.
        """
        _check_options(master_protocol, source_count, node_id)  # before connecting
        conn = await TubeMQConnection.open(master, timeout=timeout)
        self = cls(conn, topic, group, client_id or new_client_id("consumer"), timeout,
                   on_rebalance=on_rebalance, release_timeout=release_timeout,
                   master_protocol=master_protocol, source_count=source_count,
                   node_id=node_id)
        try:
            if master_protocol == "v2":
                await self._join_v2()
            else:
                await self._join_v1()
        except BaseException:
            for c in [conn, *self._brokers.values()]:
                c.close()
            raise
        self._heartbeat = Heartbeat(f"consumer {self.client_id}", heartbeat_interval,
                                    self.heartbeat)
        return self

    async def _join_v1(self) -> None:
        conn = self.master
        await conn.checked("REGISTER_C2M", conn.requests.register_consumer_to_master(
            RegisterRequestC2M(clientId=self.client_id, groupName=self.group,
                               hostName=socket.gethostname(), topicList=[self.topic],
                               requireBound=False)))
        # The master answers the register with the topic's layout only; what this consumer
        # holds comes as events, the first in this heartbeat's answer.
        await self._beat_master()

    # -- the v2 master calls: client-side balancing --------------------------------------------
    async def _join_v2(self) -> None:
        master = self.master
        answer = await master.checked_code(
            "REGISTER_C2M_V2", master.requests.register_consumer_to_master_v2(
                RegisterRequestC2MV2(clientId=self.client_id, groupName=self.group,
                                     hostName=socket.gethostname(),
                                     sourceCount=self.source_count, nodeId=self.node_id,
                                     topicList=[self.topic],
                                     subRepInfo=self._sub_rep_info(report=False))))
        if answer.brokerConfigId is not None:
            self.broker_config_id = answer.brokerConfigId
        async with self._beat_lock:
            await self._fetch_part_meta()

    def _sub_rep_info(self, *, report: bool) -> ClientSubRepInfo:
        return ClientSubRepInfo(
            brokerConfigId=self.broker_config_id, topicMetaInfoId=self.topic_meta_id,
            reportSubInfo=report,
            partSubInfo=self._subscribe_infos(list(self.partitions.values())) if report else [])

    async def partition_meta(self) -> frozenset[int]:
        """v2: ask the master where the topic's partitions are (``GET_PART_META_C2M``), take
        this consumer's share of them and release the rest; return what is held."""
        if self.master_protocol != "v2":
            raise TubeMQError("partition_meta needs master_protocol='v2'")
        async with self._beat_lock:
            await self._fetch_part_meta()
        return self.assignment

    async def _fetch_part_meta(self) -> None:
        master = self.master
        answer = await master.checked_code(
            "GET_PART_META_C2M", master.requests.get_part_meta_from_master(
                GetPartMetaRequestC2M(clientId=self.client_id, groupName=self.group,
                                      brokerConfigId=self.broker_config_id,
                                      topicMetaInfoId=self.topic_meta_id)))
        if answer.brokerConfigId is not None:
            self.broker_config_id = answer.brokerConfigId
        await self._take_share(answer.topicMetaInfoList)
        if answer.topicMetaInfoId is not None:
            self.topic_meta_id = answer.topicMetaInfoId

    async def _take_share(self, layout: list[str]) -> None:
        """Hold exactly this node's share of the topic's partitions in ``layout``."""
        mine, unreadable = node_share(layout, self.topic, self.source_count, self.node_id)
        for text in unreadable:
            log.warning("consumer %s: partition layout entry %r", self.client_id, text)
        changed = False
        for part in [p for n, p in self.partitions.items() if n not in mine]:
            part.releasing = True
            await self._release(part)
            changed = True
        for partition, broker in sorted(mine.items()):
            held = self.partitions.get(partition)
            if held is not None and held.broker == broker:
                continue
            try:
                conn = await self._broker(broker.address)
                await self._register(conn, partition)
            except TubeMQError as exc:  # ConnectionClosed is one too
                log.warning("consumer %s: taking partition %d: %s", self.client_id,
                            partition, exc)
                continue
            self.partitions[partition] = HeldPartition(broker, partition, conn)
            changed = True
        if changed:
            self._assignment_changed()

    async def _beat_master_v2(self) -> None:
        master = self.master
        try:
            answer = await master.checked_code(
                "HEARTBEAT_C2M_V2", master.requests.consumer_heartbeat_to_master_v2(
                    HeartRequestC2MV2(clientId=self.client_id, groupName=self.group,
                                      subRepInfo=self._sub_rep_info(report=True))))
        except ServerError as exc:
            if exc.err_code == NOT_REGISTERED:
                await self._release_all()  # the master forgot this consumer
            raise
        if answer.brokerConfigId is not None:
            self.broker_config_id = answer.brokerConfigId
        if answer.topicMetaInfoId is None or answer.topicMetaInfoId == self.topic_meta_id:
            return
        if answer.topicMetaInfoList:
            await self._take_share(answer.topicMetaInfoList)
            self.topic_meta_id = answer.topicMetaInfoId
        else:  # a newer layout, not sent along: ask for it
            await self._fetch_part_meta()

    async def _broker(self, address: str) -> TubeMQConnection:
        conn = self._brokers.get(address)
        if conn is None or not conn.is_open:
            conn = await TubeMQConnection.open(address, timeout=self.timeout)
            self._brokers[address] = conn
        return conn

    async def _register(self, broker: TubeMQConnection, partition: int,
                        op_type: int = OP_REGISTER) -> None:
        await broker.checked("REGISTER_C2B", broker.requests.register_consumer_to_broker(
            RegisterRequestC2B(opType=op_type, clientId=self.client_id, groupName=self.group,
                               topicName=self.topic, partitionId=partition, readStatus=0)))

    # -- assignment --------------------------------------------------------------------------
    @property
    def assignment(self) -> frozenset[int]:
        """The partitions this consumer holds now."""
        return frozenset(self.partitions)

    async def wait_for_assignment(self, predicate: Callable[[frozenset[int]], bool],
                                  timeout: float) -> frozenset[int]:
        """Wait until ``predicate(assignment)`` holds and return that assignment; raises
        ``TimeoutError`` after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            while not predicate(self.assignment):
                await self._changed.wait()
        return self.assignment

    def _assignment_changed(self) -> None:
        # Waiters hold the old event; wake them and give later waiters a fresh one.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _subscribe_infos(self, parts: list[HeldPartition]) -> list[str]:
        return [str(SubscribeInfo(self.client_id, self.group, p.broker, self.topic, p.partition))
                for p in parts]

    # -- heartbeats and rebalance events -----------------------------------------------------
    async def heartbeat(self) -> None:
        """Tell the master and every broker this consumer is alive, carrying out (and
        reporting) any rebalance event the master answers with."""
        await self._beat_master()
        by_conn: dict[int, tuple[TubeMQConnection, list[str]]] = {}
        for part in self.partitions.values():
            entry = by_conn.setdefault(id(part.conn), (part.conn, []))
            entry[1].append(f"{part.broker}:{self.topic}:{part.partition}:0")
        for conn, infos in by_conn.values():
            await conn.checked("HEARTBEAT_C2B", conn.requests.consumer_heartbeat_to_broker(
                HeartBeatRequestC2B(clientId=self.client_id, groupName=self.group, readStatus=0,
                                    partitionInfo=infos)))

    async def _beat_master(self) -> None:
        async with self._beat_lock:
            if self.master_protocol == "v2":
                await self._beat_master_v2()
                return
            # A handled event is reported at once, and the answer to that report may carry
            # the rebalance's next step (a CONNECT after the DISCONNECTs); a few rounds at
            # most, the rest waits for the next heartbeat.
            for _ in range(4):
                event = await self._heartbeat_master()
                if event is None or event.rebalanceId == self._handled:
                    # Nothing new: the master resends an event until it sees the report.
                    if self._report is None:
                        return
                    continue
                await self._carry_out(event)

    async def _heartbeat_master(self) -> EventProto | None:
        master = self.master
        report, self._report = self._report, None
        try:
            answer = await master.checked("HEARTBEAT_C2M",
                                          master.requests.consumer_heartbeat_to_master(
                HeartRequestC2M(clientId=self.client_id, groupName=self.group,
                                subscribeInfo=self._subscribe_infos(
                                    list(self.partitions.values())),
                                reportSubscribeInfo=True, event=report)))
        except ServerError as exc:
            if exc.err_code == NOT_REGISTERED:
                # The master dropped this consumer (it stayed quiet too long) and has given
                # its partitions to others: stop reading them.
                await self._release_all()
            else:
                self._report = self._report or report  # not delivered: try again
            raise
        except BaseException:
            self._report = self._report or report
            raise
        return answer.event

    async def _carry_out(self, event: EventProto) -> None:
        """Do what a rebalance event asks and keep its report for the next heartbeat."""
        ok = True
        changed: set[int] = set()
        infos: list[SubscribeInfo] = []
        for text in event.subscribeInfo:
            try:
                info = parse_subscribe_info(text)
            except ValueError:
                log.warning("consumer %s: rebalance entry %r", self.client_id, text)
                ok = False
                continue
            if info.topic == self.topic and info.group == self.group:
                infos.append(info)
        if event.opType in DISCONNECTS:
            parts = [self.partitions[i.partition] for i in infos if i.partition in self.partitions]
            for part in parts:
                part.releasing = True
            for part in parts:
                ok = await self._release(part) and ok
                changed.add(part.partition)
        elif event.opType in CONNECTS:
            for info in infos:
                if info.partition in self.partitions:
                    continue
                try:
                    broker = await self._broker(info.broker.address)
                    await self._register(broker, info.partition)
                except TubeMQError as exc:  # ConnectionClosed is one too
                    log.warning("consumer %s: taking partition %d: %s", self.client_id,
                                info.partition, exc)
                    ok = False
                    continue
                self.partitions[info.partition] = HeldPartition(info.broker, info.partition, broker)
                changed.add(info.partition)
        # REPORT and anything newer: nothing to do but answer with what is held.
        status = EventStatus.DONE if ok else EventStatus.FAILED
        self._handled = event.rebalanceId
        self._report = EventProto(rebalanceId=event.rebalanceId, opType=event.opType,
                                  status=int(status), subscribeInfo=list(event.subscribeInfo))
        if changed:
            self._assignment_changed()
        if self.on_rebalance is not None:
            try:
                op = EventType(event.opType)
            except ValueError:  # a type this client does not know: it only reported
                op = EventType.REPORT
            try:
                self.on_rebalance(Rebalance(event.rebalanceId, op, frozenset(changed),
                                            self.assignment, ok))
            except Exception:
                log.exception("consumer %s: on_rebalance failed", self.client_id)

    async def _release(self, part: HeldPartition) -> bool:
        """Unregister ``part`` at its broker once its fetched batch is committed."""
        try:
            async with asyncio.timeout(self.release_timeout):
                await part.idle.wait()
        except TimeoutError:
            # Not committed in time: the batch goes to the partition's next holder as well.
            log.warning("consumer %s: releasing partition %d with an uncommitted batch",
                        self.client_id, part.partition)
        self.partitions.pop(part.partition, None)
        if not part.conn.is_open:
            return True  # the broker dropped the registration with the connection
        try:
            await self._register(part.conn, part.partition, OP_UNREGISTER)
        except TubeMQError as exc:
            log.warning("consumer %s: releasing partition %d: %s", self.client_id,
                        part.partition, exc)
            return False
        return True

    async def _release_all(self) -> None:
        parts = list(self.partitions.values())
        for part in parts:
            part.releasing = True
            part.idle.set()  # the group has moved on: nothing left to wait for
        for part in parts:
            await self._release(part)
        if parts:
            self._assignment_changed()

    def _partition(self, partition: int | None) -> HeldPartition:
        if self._closed:
            raise TubeMQError(f"consumer {self.client_id} is closed")
        if not self.partitions:
            raise TubeMQError(f"{self.topic}: no partitions assigned to {self.client_id}")
        if partition is None:
            keys = sorted(p for p, part in self.partitions.items() if not part.releasing)
            if not keys:
                raise TubeMQError(f"{self.topic}: every partition of {self.client_id} is "
                                  "being released")
            return self.partitions[keys[next(self._next) % len(keys)]]
        part = self.partitions.get(partition)
        if part is None or part.releasing:
            raise TubeMQError(f"{self.topic}: partition {partition} is not assigned to "
                              f"{self.client_id}")
        return part

    async def get_messages(self, partition: int | None = None) -> list[Message]:
        """The next messages of one partition (round robin when None); [] when none wait.

        Until they are committed the partition stays with this consumer: a rebalance taking
        it away waits (up to ``release_timeout``) for ``commit``.
        """
        return await self._partition(partition).fetch(self.client_id, self.group, self.topic)

    async def commit(self, partition: int) -> int:
        """Commit what was fetched from ``partition``; return the committed offset.

        A partition being released can still be committed: that is what its release waits for.
        """
        if self._closed:
            raise TubeMQError(f"consumer {self.client_id} is closed")
        part = self.partitions.get(partition)
        if part is None:
            raise TubeMQError(f"{self.topic}: partition {partition} is not assigned to "
                              f"{self.client_id}")
        return await part.commit(self.client_id, self.group, self.topic)

    async def close(self) -> None:
        """Release every partition, leave the group, close the connections (once)."""
        if self._closed:
            return
        self._closed = True
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        try:
            for part in self.partitions.values():
                if part.conn.is_open:
                    try:
                        await self._register(part.conn, part.partition, OP_UNREGISTER)
                    except TubeMQError as exc:
                        log.warning("consumer %s: releasing partition %d: %s", self.client_id,
                                    part.partition, exc)
            if self.master.is_open:
                master = self.master
                await master.checked("CLOSE_C2M", master.requests.close_consumer_to_master(
                    CloseRequestC2M(clientId=self.client_id, groupName=self.group)))
        finally:
            for conn in [self.master, *self._brokers.values()]:
                conn.close()
            # Nothing is held any more; waiters on the assignment see that.
            self.partitions.clear()
            self._assignment_changed()
