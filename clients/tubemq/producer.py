"""A TubeMQ producer: registers with the master, keeps the registration alive, sends messages
to the brokers that hold the topic's partitions.

The master tells the producer which brokers exist (``brokerInfos`` in the register answer) and,
in heartbeat answers, where each topic's partitions are (``topicInfos``); the producer asks
for a heartbeat right after registering so that it can send at once. Messages go to the
broker of the chosen partition, round robin over the partitions unless one is given.
"""

from __future__ import annotations

import itertools
import socket
import time
from dataclasses import dataclass

from protoframe.clients.tubemq._common import Heartbeat, checksum, local_ipv4, log, new_client_id
from protoframe.clients.tubemq.connection import DEFAULT_TIMEOUT, TubeMQConnection
from protoframe.clients.tubemq.errors import TubeMQError
from protoframe.clients.tubemq.topics import TopicPartitions, parse_topic_info
from protoframe.generated.tubemq.broker_service import SendMessageRequestP2B
from protoframe.generated.tubemq.master_service import (
    CloseRequestP2M,
    HeartRequestP2M,
    RegisterRequestP2M,
)

__all__ = ["Producer", "SendResult"]


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where the broker stored a message."""

    partition: int
    message_id: int
    offset: int
    append_time: int


class Producer:
    """Publishes to one topic; create it with ``await Producer.create(master, topic)``."""

    def __init__(self, master: TubeMQConnection, topic: str, client_id: str,
                 timeout: float) -> None:
        self.master = master
        self.topic = topic
        self.client_id = client_id
        self.timeout = timeout
        self.partitions: list[TopicPartitions] = []
        self.broker_check_sum = -1
        self._brokers: dict[str, TubeMQConnection] = {}
        self._next = itertools.count()
        self._heartbeat: Heartbeat | None = None
        self._closed = False

    @classmethod
    async def create(cls, master: str, topic: str, *, client_id: str | None = None,
                     heartbeat_interval: float | None = 10.0,
                     timeout: float = DEFAULT_TIMEOUT) -> Producer:
        """Register with the master at ``host:port`` and learn where ``topic`` lives."""
        conn = await TubeMQConnection.open(master, timeout=timeout)
        self = cls(conn, topic, client_id or new_client_id("producer"), timeout)
        try:
            answer = await conn.checked("REGISTER_P2M", conn.requests.register_producer_to_master(
                RegisterRequestP2M(clientId=self.client_id, topicList=[topic],
                                   brokerCheckSum=self.broker_check_sum,
                                   hostName=socket.gethostname())))
            self.broker_check_sum = answer.brokerCheckSum
            await self.heartbeat()
        except BaseException:
            conn.close()
            raise
        self._heartbeat = Heartbeat(f"producer {self.client_id}", heartbeat_interval,
                                    self.heartbeat)
        return self

    async def heartbeat(self) -> None:
        """Tell the master this producer is alive; take the partition layout it sends back."""
        answer = await self.master.checked(
            "HEARTBEAT_P2M", self.master.requests.producer_heartbeat_to_master(
                HeartRequestP2M(clientId=self.client_id, brokerCheckSum=self.broker_check_sum,
                                hostName=socket.gethostname(), topicList=[self.topic])))
        self.broker_check_sum = answer.brokerCheckSum
        layout = []
        for text in answer.topicInfos:
            try:
                info = parse_topic_info(text)
            except ValueError as exc:
                log.warning("producer %s: %s", self.client_id, exc)
                continue
            if info.topic == self.topic:
                layout.append(info)
        if layout:
            self.partitions = layout

    def _route(self, partition: int | None) -> tuple[TopicPartitions, int]:
        places = [(info, p) for info in self.partitions for p in range(info.partitions)]
        if not places:
            raise TubeMQError(f"{self.topic}: the master named no partitions")
        if partition is None:
            return places[next(self._next) % len(places)]
        for info, p in places:
            if p == partition:
                return info, p
        raise TubeMQError(f"{self.topic}: no partition {partition}")

    async def _broker(self, address: str) -> TubeMQConnection:
        conn = self._brokers.get(address)
        if conn is None or not conn.is_open:
            conn = await TubeMQConnection.open(address, timeout=self.timeout)
            self._brokers[address] = conn
        return conn

    async def send(self, data: bytes, *, partition: int | None = None,
                   msg_type: str | None = None) -> SendResult:
        """Send one message; return where the broker stored it."""
        if self._closed:
            raise TubeMQError(f"producer {self.client_id} is closed")
        info, p = self._route(partition)
        broker = await self._broker(info.broker.address)
        answer = await broker.checked("SEND_MESSAGE_P2B", broker.requests.send_message_to_broker(
            SendMessageRequestP2B(clientId=self.client_id, topicName=self.topic, partitionId=p,
                                  data=data, flag=0, checkSum=checksum(data),
                                  sentAddr=local_ipv4(broker), msgType=msg_type,
                                  msgTime=time.strftime("%Y%m%d%H%M"))))
        return SendResult(p, answer.messageId, answer.appendOffset, answer.appendTime)

    async def close(self) -> None:
        """Leave the master and close every connection (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        try:
            if self.master.is_open:
                master = self.master
                await master.checked("CLOSE_P2M", master.requests.close_producer_to_master(
                    CloseRequestP2M(clientId=self.client_id)))
        finally:
            for conn in [self.master, *self._brokers.values()]:
                conn.close()
