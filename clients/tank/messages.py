"""The messages the TANK client writes and reads, independent of how bundles lay them out."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ConsumeResult", "ConsumedMessage", "Message"]


@dataclass(frozen=True, slots=True)
class Message:
    """A message to produce.

    ``timestamp`` is in milliseconds since the epoch; None means "when it is produced".
    ``seq_num`` is only for ``produce_with_seqnum``, which names every message's seq num.
    """

    value: bytes
    key: bytes | None = None
    timestamp: int | None = None
    seq_num: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumedMessage:
    """A message read from a partition, with the seq num the broker gave it."""

    seq_num: int
    timestamp: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class ConsumeResult:
    """What one consume returned for one partition.

    ``next_seq_num`` is where the next consume continues: after the last whole bundle, so a
    bundle the fetch size cut short is read again in full. ``highwater_mark`` is the seq num
    of the partition's last message (0 when it has none).
    """

    messages: list[ConsumedMessage] = field(default_factory=list)
    next_seq_num: int = 0
    highwater_mark: int = 0
