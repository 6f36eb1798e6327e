"""The text formats TubeMQ masters use to tell clients where partitions are.

Masters describe brokers as ``brokerId:host:port`` and a topic's partitions on a broker as
``brokerId:host:port-topic:partitionNum`` (the formats the .proto files document on
``brokerInfos``, ``topicInfos`` and ``topicInfo``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BrokerInfo", "TopicPartitions", "parse_broker", "parse_topic_info"]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """``partitions`` partitions (0 .. partitions - 1) of ``topic`` on ``broker``."""

    broker: BrokerInfo
    topic: str
    partitions: int

    def __str__(self) -> str:
        return f"{self.broker}-{self.topic}:{self.partitions}"


_BROKER = re.compile(r"(\d+):([^:]+):(\d+)")
_TOPIC_INFO = re.compile(r"(\d+:[^:]+:\d+)-(.+):(\d+)")


def parse_broker(text: str) -> BrokerInfo:
    """``brokerId:host:port``; raises ``ValueError`` on anything else."""
    m = _BROKER.fullmatch(text)
    if m is None:
        raise ValueError(f"not a brokerId:host:port broker description: {text!r}")
    return BrokerInfo(int(m[1]), m[2], int(m[3]))


def parse_topic_info(text: str) -> TopicPartitions:
    """``brokerId:host:port-topic:partitionNum``; raises ``ValueError`` on anything else."""
    m = _TOPIC_INFO.fullmatch(text)
    if m is None:
        raise ValueError(f"not a brokerId:host:port-topic:partitionNum description: {text!r}")
    return TopicPartitions(parse_broker(m[1]), m[2], int(m[3]))
