"""Reading the broker's answers against the request they answer, without any I/O.

A produce response is a flat run of status bytes: one per requested partition, grouped by
topic in request order, except that a topic the broker does not know (0xFF) or will not write
(0xFE) gets one byte for all its partitions. ``produce_outcomes`` puts them back against the
request. A consume response is a header naming each partition's outcome and chunk length, then
the chunks back to back in header order; ``consume_outcomes`` cuts them apart and
``read_partition`` turns one partition's outcome into messages or a typed error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protoframe.generated.tank import frames
from protoframe.runtime.errors import DecodeError

from .bundles import DEFAULT_MAX_UNCOMPRESSED, ChunkContents, read_chunk
from .errors import (
    BOUNDARY_CHECK,
    OK,
    READ_ONLY_TOPIC,
    SPARSE_FIRST_BUNDLE,
    UNKNOWN_TOPIC,
    BoundaryCheckError,
    TankServerError,
    UnknownTopicError,
    consume_error,
    produce_error,
)

__all__ = [
    "MalformedResponseError",
    "PartitionData",
    "consume_outcomes",
    "produce_outcomes",
    "read_partition",
]


class MalformedResponseError(DecodeError):
    """An answer that decodes but does not fit its request (too few statuses, chunk lengths
    that overrun the data, a partition missing)."""


def produce_outcomes(topics: Sequence[frames.ProduceTopic],
                     response: frames.ProduceResponse) -> list[TankServerError]:
    """The errors the response reports for the request's ``topics`` (empty: all written)."""
    statuses = response.statuses
    errors: list[TankServerError] = []
    at = 0
    for topic in topics:
        for i, partition in enumerate(topic.partitions):
            if at >= len(statuses):
                raise MalformedResponseError(f"produce response has {len(statuses)} statuses, "
                                             "fewer than the request's partitions")
            status = statuses[at]
            at += 1
            if i == 0 and status.error in (UNKNOWN_TOPIC, READ_ONLY_TOPIC):
                errors.append(produce_error(topic.name, None, status.error))
                break
            if status.error != OK:
                errors.append(produce_error(topic.name, partition.partition, status.error,
                                            status.leader_addr, status.leader_port))
    if at != len(statuses):
        raise MalformedResponseError(f"produce response has {len(statuses) - at} statuses more "
                                     "than the request's partitions")
    return errors


@dataclass(frozen=True, slots=True)
class PartitionData:
    """One partition of a consume response: its outcome and its chunk of bundles."""

    result: frames.ConsumePartitionResult
    chunk: bytes


def consume_outcomes(
    response: frames.ConsumeResponse,
) -> tuple[dict[tuple[str, int], PartitionData], set[str]]:
    """Every partition's outcome and chunk, by (topic, partition); and the unknown topics."""
    chunks = response.chunks
    at = 0
    out: dict[tuple[str, int], PartitionData] = {}
    unknown: set[str] = set()
    for topic in response.topics:
        if topic.unknown or topic.partitions is None:
            unknown.add(topic.name)
            continue
        for result in topic.partitions:
            length = result.chunk_length or 0
            if at + length > len(chunks):
                raise MalformedResponseError(
                    f"{topic.name}/{result.partition}: chunk of {length} bytes runs past the "
                    f"{len(chunks)} bytes of chunks")
            out[(topic.name, result.partition)] = PartitionData(result, chunks[at:at + length])
            at += length
    if at != len(chunks):
        raise MalformedResponseError(f"{len(chunks) - at} bytes of chunks belong to no partition")
    return out, unknown


def read_partition(response: frames.ConsumeResponse, topic: str, partition: int, *,
                   from_seq_num: int,
                   max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED) -> tuple[ChunkContents, int]:
    """The messages a consume response holds for one partition, and its high-water mark.

    Raises ``UnknownTopicError``, ``BoundaryCheckError`` or another ``TankServerError`` for the
    outcomes without data, and a ``DecodeError`` subclass for malformed data.
    """
    outcomes, unknown = consume_outcomes(response)
    if topic in unknown:
        raise UnknownTopicError(topic, None, UNKNOWN_TOPIC, "unknown topic")
    data = outcomes.get((topic, partition))
    if data is None:
        raise MalformedResponseError(f"consume response says nothing of {topic}/{partition}")
    result = data.result
    code = result.error_or_flags
    if code == BOUNDARY_CHECK:
        raise BoundaryCheckError(topic, partition, result.first_available_seqnum or 0,
                                 result.highwater_mark or 0)
    if code not in (OK, SPARSE_FIRST_BUNDLE):
        raise consume_error(topic, partition, code, result.leader_addr, result.leader_port)
    base = result.base_seqnum if code == OK else None
    contents = read_chunk(data.chunk, base, from_seq_num=from_seq_num,
                          max_uncompressed=max_uncompressed)
    return contents, result.highwater_mark or 0
