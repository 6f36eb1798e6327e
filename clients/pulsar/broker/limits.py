"""What one command may carry, checked when it arrives, before anything is changed or stored.

Each limit is a field of ``Limits`` (the broker's options: ``python -m protoframe.clients.pulsar
broker --max-name-length ...``, Pulsar's configuration name where it has one). A command over a
limit is answered with Pulsar's error response naming the limit and leaves no trace: no topic,
no producer, no cursor, no entry. Some limits also protect the log, whose records hold names
with a 16-bit length and integers as signed 64-bit: those cannot be raised past what the log
can hold (``LOG_NAME_LIMIT``, ``INT64_MAX``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from protoframe.generated.pulsar.pulsar_api import KeyValue

from .delayed import DEFAULT_MAX_DELAYED

__all__ = ["INT64_MAX", "LOG_NAME_LIMIT", "LimitExceeded", "Limits", "check_int64"]

# The log writes names with a u16 length.
LOG_NAME_LIMIT = 0xFFFF
# Sequence ids and publish times are written as int64 (clients mean them as Java longs).
INT64_MAX = (1 << 63) - 1

MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # Pulsar's maxMessageSize default
MAX_NAME_LENGTH = 1024
MAX_METADATA_ENTRIES = 64
MAX_METADATA_SIZE = 16 * 1024
# A batch's messages are tracked as a bit set per entry (ack sets); this bounds it.
MAX_MESSAGES_PER_BATCH = 1 << 16
MAX_HASH_RANGES = 1024
# Pulsar's brokerDeduplicationProducerInactivityTimeoutMinutes default (6 hours).
DEDUP_INACTIVITY_MINUTES = 360.0


class LimitExceeded(ValueError):
    """A command carries more than a limit allows; the message names the limit."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The broker's limits on what commands carry (the defaults are the option defaults)."""

    max_message_size: int = MAX_MESSAGE_SIZE
    # UTF-8 bytes of a fully qualified topic name, a producer, subscription or consumer name.
    max_name_length: int = MAX_NAME_LENGTH
    # Key-value pairs of a producer's or consumer's metadata or a subscription's properties.
    max_metadata_entries: int = MAX_METADATA_ENTRIES
    # Their keys and values together, in UTF-8 bytes.
    max_metadata_size: int = MAX_METADATA_SIZE
    max_messages_per_batch: int = MAX_MESSAGES_PER_BATCH
    max_hash_ranges: int = MAX_HASH_RANGES
    dedup_inactivity_minutes: float = DEDUP_INACTIVITY_MINUTES
    # Entries a Shared or Key_Shared subscription holds until their deliver_at_time.
    max_delayed_messages: int = DEFAULT_MAX_DELAYED

    def __post_init__(self) -> None:
        for field in fields(self):
            if getattr(self, field.name) <= 0:
                raise ValueError(f"{field.name} must be positive")
        if self.max_name_length > LOG_NAME_LIMIT:
            raise ValueError(f"max_name_length cannot exceed {LOG_NAME_LIMIT}: the log stores "
                             "names with a 16-bit length")

    @property
    def dedup_inactivity_seconds(self) -> float:
        return self.dedup_inactivity_minutes * 60.0

    def check_name(self, what: str, name: str) -> None:
        size = len(name.encode("utf-8", "surrogatepass"))
        if size > self.max_name_length:
            raise LimitExceeded(f"{what} is {size} bytes long, over the limit of "
                                f"{self.max_name_length} (--max-name-length)")

    def check_metadata(self, what: str, pairs: Iterable[KeyValue]) -> None:
        count = size = 0
        for pair in pairs:
            count += 1
            size += len(pair.key.encode("utf-8", "surrogatepass"))
            size += len(pair.value.encode("utf-8", "surrogatepass"))
        if count > self.max_metadata_entries:
            raise LimitExceeded(f"{what} has {count} entries, over the limit of "
                                f"{self.max_metadata_entries} (--max-metadata-entries)")
        if size > self.max_metadata_size:
            raise LimitExceeded(f"{what} is {size} bytes, over the limit of "
                                f"{self.max_metadata_size} (--max-metadata-size)")

    def check_batch_size(self, count: int) -> None:
        if not 1 <= count <= self.max_messages_per_batch:
            raise LimitExceeded(f"a batch of {count} messages is outside 1.."
                                f"{self.max_messages_per_batch} (--max-messages-per-batch)")

    def check_hash_ranges(self, ranges: list[tuple[int, int]], key_range: int) -> None:
        if len(ranges) > self.max_hash_ranges:
            raise LimitExceeded(f"{len(ranges)} hash ranges, over the limit of "
                                f"{self.max_hash_ranges} (--max-hash-ranges)")
        for start, end in ranges:
            if not 0 <= start <= end < key_range:
                raise LimitExceeded(f"hash range {start}..{end} is outside 0..{key_range - 1}")


def check_int64(what: str, value: int) -> None:
    """``value`` (a uint64 on the wire) must fit the signed 64 bits the log and clients use."""
    if value > INT64_MAX:
        raise LimitExceeded(f"{what} {value} is over the limit of {INT64_MAX} (2**63 - 1)")
