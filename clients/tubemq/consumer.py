"""A TubeMQ consumer in a group: registers with the master, takes the partitions it is given,
registers with their brokers and pulls messages, committing offsets when asked to.

Our master assigns partitions in its register answer (``topicInfo``); upstream masters may
instead move partitions with rebalance events in heartbeat answers, which this client does
not follow. Offsets are committed explicitly (``manualCommitOffset``): ``get_messages`` reads
on from the last fetch, and ``commit`` makes that position the group's, so a consumer that
registers again later starts after the last commit.
"""

from __future__ import annotations

import itertools
import socket
from dataclasses import dataclass

from clients.tubemq._common import Heartbeat, log, new_client_id
from clients.tubemq.connection import DEFAULT_TIMEOUT, TubeMQConnection
from clients.tubemq.errors import NOT_FOUND, ServerError, TubeMQError
from clients.tubemq.topics import BrokerInfo, parse_topic_info
from generated.tubemq.broker_service import (
    CommitOffsetRequestC2B,
    GetMessageRequestC2B,
    HeartBeatRequestC2B,
    RegisterRequestC2B,
)
from generated.tubemq.master_service import (
    CloseRequestC2M,
    HeartRequestC2M,
    RegisterRequestC2M,
)

__all__ = ["Consumer", "Message", "OP_REGISTER", "OP_UNREGISTER"]

OP_REGISTER = 31  # RegisterRequestC2B.opType: take a partition
OP_UNREGISTER = 32  # ... and release it


@dataclass(frozen=True, slots=True)
class Message:
    """One message as a broker hands it out."""

    partition: int
    message_id: int
    data: bytes
    flag: int
    checksum: int


@dataclass(slots=True)
class _Partition:
    broker: BrokerInfo
    partition: int
    conn: TubeMQConnection


class Consumer:
    """Reads one topic as a member of ``group``; create it with ``await Consumer.create()``."""

    def __init__(self, master: TubeMQConnection, topic: str, group: str, client_id: str,
                 timeout: float) -> None:
        self.master = master
        self.topic = topic
        self.group = group
        self.client_id = client_id
        self.timeout = timeout
        self.partitions: dict[int, _Partition] = {}
        self._brokers: dict[str, TubeMQConnection] = {}
        self._next = itertools.count()
        self._heartbeat: Heartbeat | None = None
        self._closed = False

    @classmethod
    async def create(cls, master: str, topic: str, group: str, *,
                     client_id: str | None = None, heartbeat_interval: float | None = 10.0,
                     timeout: float = DEFAULT_TIMEOUT) -> Consumer:
        """Join ``group`` at the master ``host:port`` and register for every partition of
        ``topic`` the master assigns."""
        conn = await TubeMQConnection.open(master, timeout=timeout)
        self = cls(conn, topic, group, client_id or new_client_id("consumer"), timeout)
        try:
            answer = await conn.checked("REGISTER_C2M", conn.requests.register_consumer_to_master(
                RegisterRequestC2M(clientId=self.client_id, groupName=group,
                                   hostName=socket.gethostname(), topicList=[topic],
                                   requireBound=False)))
            for text in answer.topicInfo:
                info = parse_topic_info(text)
                if info.topic != topic:
                    continue
                broker = await self._broker(info.broker.address)
                for p in range(info.partitions):
                    await self._register(broker, p)
                    self.partitions[p] = _Partition(info.broker, p, broker)
        except BaseException:
            for c in [conn, *self._brokers.values()]:
                c.close()
            raise
        self._heartbeat = Heartbeat(f"consumer {self.client_id}", heartbeat_interval,
                                    self.heartbeat)
        return self

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

    async def heartbeat(self) -> None:
        """Tell the master and every broker this consumer is alive."""
        master = self.master
        await master.checked("HEARTBEAT_C2M", master.requests.consumer_heartbeat_to_master(
            HeartRequestC2M(clientId=self.client_id, groupName=self.group,
                            reportSubscribeInfo=False)))
        by_conn: dict[int, tuple[TubeMQConnection, list[str]]] = {}
        for part in self.partitions.values():
            entry = by_conn.setdefault(id(part.conn), (part.conn, []))
            entry[1].append(f"{part.broker}:{self.topic}:{part.partition}:0")
        for conn, infos in by_conn.values():
            await conn.checked("HEARTBEAT_C2B", conn.requests.consumer_heartbeat_to_broker(
                HeartBeatRequestC2B(clientId=self.client_id, groupName=self.group, readStatus=0,
                                    partitionInfo=infos)))

    def _partition(self, partition: int | None) -> _Partition:
        if self._closed:
            raise TubeMQError(f"consumer {self.client_id} is closed")
        if not self.partitions:
            raise TubeMQError(f"{self.topic}: no partitions assigned to {self.client_id}")
        if partition is None:
            keys = sorted(self.partitions)
            return self.partitions[keys[next(self._next) % len(keys)]]
        try:
            return self.partitions[partition]
        except KeyError:
            raise TubeMQError(f"{self.topic}: partition {partition} is not assigned to "
                              f"{self.client_id}") from None

    async def get_messages(self, partition: int | None = None) -> list[Message]:
        """The next messages of one partition (round robin when None); [] when none wait."""
        part = self._partition(partition)
        conn = part.conn
        try:
            answer = await conn.checked("GET_MESSAGE_C2B", conn.requests.get_message_from_broker(
                GetMessageRequestC2B(clientId=self.client_id, partitionId=part.partition,
                                     groupName=self.group, topicName=self.topic,
                                     lastPackConsumed=True, manualCommitOffset=True)))
        except ServerError as exc:
            if exc.err_code == NOT_FOUND:
                return []
            raise
        return [Message(part.partition, m.messageId, m.payLoadData, m.flag, m.checkSum)
                for m in answer.messages]

    async def commit(self, partition: int) -> int:
        """Commit what was fetched from ``partition``; return the committed offset."""
        part = self._partition(partition)
        conn = part.conn
        answer = await conn.checked("COMMIT_OFFSET_C2B", conn.requests.commit_offset_to_broker(
            CommitOffsetRequestC2B(clientId=self.client_id, topicName=self.topic,
                                   partitionId=part.partition, groupName=self.group,
                                   lastPackConsumed=True)))
        return answer.currOffset

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
