"""What a TubeMQ consumer hands out and keeps: messages, rebalance records, held partitions
(and a held partition's fetches and commits at its broker)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from protoframe.clients.tubemq.connection import TubeMQConnection
from protoframe.clients.tubemq.errors import NOT_FOUND, ServerError
from protoframe.clients.tubemq.rebalance import EventType
from protoframe.clients.tubemq.topics import BrokerInfo
from protoframe.generated.tubemq.broker_service import CommitOffsetRequestC2B, GetMessageRequestC2B

__all__ = ["OP_REGISTER", "OP_UNREGISTER", "HeldPartition", "Message", "Rebalance"]

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


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One rebalance event as this consumer carried it out (what ``on_rebalance`` is given).

    ``changed`` are the partitions the event named (taken for a CONNECT, released for a
    DISCONNECT), ``partitions`` those held afterwards, ``ok`` whether every step succeeded.
    """

    rebalance_id: int
    op: EventType
    changed: frozenset[int]
    partitions: frozenset[int]
    ok: bool


def _idle_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclass(slots=True)
class HeldPartition:
    """A partition this consumer holds: where it is, and whether it may be fetched from."""

    broker: BrokerInfo
    partition: int
    conn: TubeMQConnection
    releasing: bool = False  # a DISCONNECT is under way: no new fetches
    # Cleared from a fetch until its batch is committed (or the fetch found nothing).
    idle: asyncio.Event = field(default_factory=_idle_event)

    async def fetch(self, client_id: str, group: str, topic: str) -> list[Message]:
        """The next messages (GET_MESSAGE_C2B); [] when none wait. Until ``commit`` the
        partition is not idle (a release waits for it)."""
        conn = self.conn
        self.idle.clear()
        try:
            answer = await conn.checked("GET_MESSAGE_C2B", conn.requests.get_message_from_broker(
                GetMessageRequestC2B(clientId=client_id, partitionId=self.partition,
                                     groupName=group, topicName=topic,
                                     lastPackConsumed=True, manualCommitOffset=True)))
        except ServerError as exc:
            self.idle.set()
            if exc.err_code == NOT_FOUND:
                return []
            raise
        except BaseException:
            self.idle.set()
            raise
        if not answer.messages:
            self.idle.set()
        return [Message(self.partition, m.messageId, m.payLoadData, m.flag, m.checkSum)
                for m in answer.messages]

    async def commit(self, client_id: str, group: str, topic: str) -> int:
        """Commit what was fetched (COMMIT_OFFSET_C2B); return the committed offset."""
        conn = self.conn
        try:
            answer = await conn.checked("COMMIT_OFFSET_C2B",
                                        conn.requests.commit_offset_to_broker(
                CommitOffsetRequestC2B(clientId=client_id, topicName=topic,
                                       partitionId=self.partition, groupName=group,
                                       lastPackConsumed=True)))
        finally:
            self.idle.set()
        return answer.currOffset
