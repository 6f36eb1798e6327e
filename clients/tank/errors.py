"""Exceptions of the TANK client, one per broker outcome that is not a success.

TANK answers with one status byte per partition (and per topic, for a topic the broker does not
know or will not write); ``produce_error`` and ``consume_error`` turn those bytes into the
exception classes below. Every class derives from ``TankError``; the ones the broker chose carry
the topic, the partition and the byte it sent. Transport problems are the runtime's
``ConnectionClosed`` and ``RequestTimeout``, and a malformed answer is a ``DecodeError``.
"""

from __future__ import annotations

import socket
import struct

from protoframe.runtime.errors import ProtoframeError

__all__ = [
    "BoundaryCheckError",
    "FetchTooSmallError",
    "InsufficientReplicasError",
    "InvalidMessageError",
    "InvalidSeqNumError",
    "IoFaultError",
    "NoLeaderError",
    "OtherLeaderError",
    "PendingAcksError",
    "ReadOnlyTopicError",
    "SystemFaultError",
    "TankError",
    "TankServerError",
    "UnknownPartitionError",
    "UnknownTopicError",
    "consume_error",
    "produce_error",
]

# Status bytes shared by produce and consume answers.
OK = 0x00
UNKNOWN_PARTITION_PRODUCE = 0x01
IO_FAULT = 0x02
PENDING_ACKS = 0x03
INSUFFICIENT_REPLICAS = 0x04
INVALID_SEQ_NUMS = 0x0A
SYSTEM_FAULT = 0xFB
OTHER_LEADER = 0xFC
NO_LEADER = 0xFD
READ_ONLY_TOPIC = 0xFE
UNKNOWN_TOPIC = 0xFF
# Consume only: 0x01 is the boundary check, 0xFE data starting with a sparse bundle, 0xFF an
# unknown partition.
BOUNDARY_CHECK = 0x01
SPARSE_FIRST_BUNDLE = 0xFE
UNKNOWN_PARTITION_CONSUME = 0xFF


class TankError(ProtoframeError):
    """Base class of the TANK client's own exceptions."""


class InvalidMessageError(TankError, ValueError):
    """A message cannot be written as TANK asks (a key over 255 bytes, seq nums out of order)."""


class TankServerError(TankError):
    """The broker refused a request for one topic or partition.

    ``code`` is the status byte it sent; ``partition`` is None when the answer covers the
    whole topic.
    """

    def __init__(self, topic: str, partition: int | None, code: int, what: str) -> None:
        where = topic if partition is None else f"{topic}/{partition}"
        super().__init__(f"{where}: {what} (status 0x{code:02x})")
        self.topic = topic
        self.partition = partition
        self.code = code


class UnknownTopicError(TankServerError):
    """The broker does not know the topic."""


class UnknownPartitionError(TankServerError):
    """The topic has no such partition."""


class ReadOnlyTopicError(TankServerError):
    """The topic accepts no writes."""


class IoFaultError(TankServerError):
    """The broker could not write to its log."""


class PendingAcksError(TankServerError):
    """The broker could not get the acknowledgements it needs in time."""


class InsufficientReplicasError(TankServerError):
    """Too few replicas are in sync to accept the write."""


class InvalidSeqNumError(TankServerError):
    """Produce-with-seqnum named seq nums at or below what the partition already holds."""


class NoLeaderError(TankServerError):
    """The partition has no leader right now."""


class SystemFaultError(TankServerError):
    """The broker failed while serving the partition."""


class OtherLeaderError(TankServerError):
    """Another broker leads the partition; ``leader_host``:``leader_port`` is where to go."""

    def __init__(self, topic: str, partition: int | None, code: int, what: str,
                 leader_addr: int, leader_port: int) -> None:
        # The broker copies the in_addr's bytes as they lie in memory (network order) into a
        # little-endian u32, so packing it back little-endian restores them.
        self.leader_host = socket.inet_ntoa(struct.pack("<I", leader_addr))
        self.leader_port = leader_port
        super().__init__(topic, partition, code, f"{what} {self.leader_host}:{leader_port}")


class BoundaryCheckError(TankServerError):
    """The requested seq num is outside what the partition holds.

    Consuming again from ``first_available_seqnum`` (or from 0, "first available") or from
    ``highwater_mark + 1`` (the tail) succeeds.
    """

    def __init__(self, topic: str, partition: int, first_available_seqnum: int,
                 highwater_mark: int) -> None:
        super().__init__(topic, partition, BOUNDARY_CHECK,
                         f"seq num outside {first_available_seqnum}..{highwater_mark}")
        self.first_available_seqnum = first_available_seqnum
        self.highwater_mark = highwater_mark


_PRODUCE: dict[int, tuple[type[TankServerError], str]] = {
    UNKNOWN_PARTITION_PRODUCE: (UnknownPartitionError, "unknown partition"),
    IO_FAULT: (IoFaultError, "I/O fault"),
    PENDING_ACKS: (PendingAcksError, "acknowledgements pending"),
    INSUFFICIENT_REPLICAS: (InsufficientReplicasError, "insufficient replicas"),
    INVALID_SEQ_NUMS: (InvalidSeqNumError, "invalid seq nums"),
    NO_LEADER: (NoLeaderError, "no leader"),
    READ_ONLY_TOPIC: (ReadOnlyTopicError, "read-only topic"),
    UNKNOWN_TOPIC: (UnknownTopicError, "unknown topic"),
}

_CONSUME: dict[int, tuple[type[TankServerError], str]] = {
    UNKNOWN_PARTITION_CONSUME: (UnknownPartitionError, "unknown partition"),
    NO_LEADER: (NoLeaderError, "no leader"),
    SYSTEM_FAULT: (SystemFaultError, "system fault"),
}


def _error(table: dict[int, tuple[type[TankServerError], str]], topic: str,
           partition: int | None, code: int, leader_addr: int | None,
           leader_port: int | None) -> TankServerError:
    if code == OTHER_LEADER and leader_addr is not None and leader_port is not None:
        return OtherLeaderError(topic, partition, code, "led by", leader_addr, leader_port)
    cls, what = table.get(code, (TankServerError, "unknown status"))
    return cls(topic, partition, code, what)


def produce_error(topic: str, partition: int | None, code: int,
                  leader_addr: int | None = None,
                  leader_port: int | None = None) -> TankServerError:
    """The exception for a non-zero produce status byte."""
    return _error(_PRODUCE, topic, partition, code, leader_addr, leader_port)


def consume_error(topic: str, partition: int, code: int, leader_addr: int | None = None,
                  leader_port: int | None = None) -> TankServerError:
    """The exception for a consume partition outcome that carries no data."""
    return _error(_CONSUME, topic, partition, code, leader_addr, leader_port)


class FetchTooSmallError(TankError):
    """A single bundle is larger than the client's largest fetch size, so it can never be read
    whole; raise ``max_fetch_size``."""
