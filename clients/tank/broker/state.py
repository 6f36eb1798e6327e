"""What the embedded broker knows and how it answers, without any I/O.

``BrokerState`` holds the topics (each a list of ``PartitionLog``) and turns a decoded produce
or consume request into its response. A bundle that parses but cannot be read (corrupt Snappy,
seq nums that go backwards, a reused timestamp with none before it) is a ``BadBundle``: the
connection that sent it is closed, as for any other malformed frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from protoframe.clients.tank.bundles import (
    CODEC_NONE,
    CODEC_SNAPPY,
    build_bundle,
    bundle_messages,
    seq_nums_of,
)
from protoframe.clients.tank.errors import (
    BOUNDARY_CHECK,
    INVALID_SEQ_NUMS,
    OK,
    SPARSE_FIRST_BUNDLE,
    UNKNOWN_PARTITION_CONSUME,
    UNKNOWN_PARTITION_PRODUCE,
    UNKNOWN_TOPIC,
)
from protoframe.clients.tank.messages import Message
from protoframe.generated.tank import frames
from protoframe.runtime.errors import DecodeError, ProtoframeError

from .log import PartitionLog

__all__ = ["BadBundle", "BrokerState", "MAX_FETCH_SIZE", "TAIL"]

TAIL = 2**64 - 1
# TANK clamps fetch sizes and min_bytes to 64 MiB.
MAX_FETCH_SIZE = 64 * 1024 * 1024
MAX_PARTITIONS = 65530

ProduceBody = frames.ProduceRequest | frames.ProduceWithSeqnumRequest


class BadBundle(ProtoframeError):
    """A produced bundle that cannot be read; the connection that sent it is closed."""


class BrokerState:
    """Topics and their partition logs.

    ``topics`` maps names to partition counts. ``auto_create`` gives a topic nobody declared
    that many partitions on first use instead of answering "unknown topic". With
    ``compress=True`` every bundle is stored (and so sent to consumers) Snappy-compressed.
    """

    def __init__(self, topics: Mapping[str, int] | None = None, *,
                 auto_create: int | None = None, compress: bool = False) -> None:
        self.topics: dict[str, list[PartitionLog]] = {}
        self.auto_create = auto_create
        self.compress = compress
        self.appended = 0  # bundles stored so far: waiting consumers compare it
        for name, partitions in (topics or {}).items():
            self.create_topic(name, partitions)

    def create_topic(self, name: str, partitions: int) -> None:
        """Declare ``name`` with ``partitions`` empty partitions (more are added if it exists)."""
        if not 0 < partitions <= MAX_PARTITIONS:
            raise ValueError(f"a topic has 1 to {MAX_PARTITIONS} partitions, not {partitions}")
        logs = self.topics.setdefault(name, [])
        logs.extend(PartitionLog() for _ in range(partitions - len(logs)))

    def partitions(self, topic: str) -> list[PartitionLog] | None:
        """The topic's logs, creating it when ``auto_create`` allows; None if unknown."""
        logs = self.topics.get(topic)
        if logs is None and self.auto_create:
            self.create_topic(topic, self.auto_create)
            logs = self.topics[topic]
        return logs

    # -- produce --------------------------------------------------------------------------------

    def produce(self, request: ProduceBody) -> frames.ProduceResponse:
        """Append every partition's bundle; one status per partition, one per unknown topic."""
        with_seqnum = isinstance(request, frames.ProduceWithSeqnumRequest)
        statuses: list[frames.ProduceStatus] = []
        for topic in request.topics:
            logs = self.partitions(topic.name)
            if logs is None:
                if topic.partitions:
                    statuses.append(frames.ProduceStatus(error=UNKNOWN_TOPIC))
                continue
            for part in topic.partitions:
                if part.partition >= len(logs):
                    code = UNKNOWN_PARTITION_PRODUCE
                else:
                    code = self._append(logs[part.partition], part, with_seqnum)
                statuses.append(frames.ProduceStatus(error=code))
        return frames.ProduceResponse(request_id=request.request_id, statuses=statuses)

    def _append(self, log: PartitionLog, part: frames.ProducePartition, with_seqnum: bool) -> int:
        bundle = part.bundle
        try:
            messages = bundle_messages(bundle)
            stored = _resolved(messages)
            if bundle.sparse:
                seq_nums = seq_nums_of(bundle, messages, None)
            else:
                first = part.first_msg_seqnum if with_seqnum else None
                seq_nums = seq_nums_of(bundle, messages,
                                       log.highwater_mark + 1 if first is None else first)
        except DecodeError as exc:
            raise BadBundle(f"unreadable bundle for partition {part.partition}: {exc}") from exc
        if not seq_nums:
            return OK
        if seq_nums[0] <= log.highwater_mark:
            return INVALID_SEQ_NUMS
        if with_seqnum and part.first_msg_seqnum != seq_nums[0]:
            return INVALID_SEQ_NUMS
        # A bundle after a gap must carry its seq nums, or consumers would count them from the
        # bundle before; a compressing broker rewrites every plain bundle.
        gap = not bundle.sparse and seq_nums[0] != log.highwater_mark + 1
        if gap or (self.compress and bundle.codec == CODEC_NONE):
            sparse = bundle.sparse or gap
            messages_in = [Message(m.value, m.key, m.timestamp, seq)
                           for m, seq in zip(stored, seq_nums, strict=True)]
            bundle = build_bundle(messages_in, sparse=sparse,
                                  compression=self.compress or bundle.codec == CODEC_SNAPPY)
        log.append(bundle.encode(), seq_nums[0], seq_nums[-1], bundle.sparse)
        self.appended += 1
        return OK

    # -- consume --------------------------------------------------------------------------------

    def pin_tail(self, request: frames.ConsumeRequest) -> frames.ConsumeRequest:
        """``request`` with "from the tail" replaced by the seq num after the last message now,
        so that a consume waiting for data gets what is appended while it waits."""
        topics: list[frames.ConsumeTopic] = []
        for topic in request.topics:
            logs = self.topics.get(topic.name, [])
            topics.append(frames.ConsumeTopic(name=topic.name, partitions=[
                frames.ConsumePartition(partition=p.partition, fetch_size=p.fetch_size,
                                        abs_seq_num=logs[p.partition].highwater_mark + 1)
                if p.abs_seq_num == TAIL and p.partition < len(logs) else p
                for p in topic.partitions]))
        return frames.ConsumeRequest(
            client_version=request.client_version, request_id=request.request_id,
            client_id=request.client_id, max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes, op_flags=request.op_flags, topics=topics)

    def consume(self, request: frames.ConsumeRequest) -> tuple[frames.ConsumeResponse, bool]:
        """The response as things stand, and whether it may go now: it holds at least
        ``min_bytes`` (at least one byte when that is 0) or an outcome without data."""
        topics: list[frames.ConsumeTopicResult] = []
        chunks: list[bytes] = []
        available = 0
        settled = False
        for topic in request.topics:
            logs = self.partitions(topic.name)
            if logs is None:
                topics.append(frames.ConsumeTopicResult(
                    name=topic.name, partitions_cnt=len(topic.partitions), unknown=True))
                settled = True
                continue
            results: list[frames.ConsumePartitionResult] = []
            for part in topic.partitions:
                if part.partition >= len(logs):
                    results.append(frames.ConsumePartitionResult(
                        partition=part.partition, error_or_flags=UNKNOWN_PARTITION_CONSUME))
                    settled = True
                    continue
                result, chunk, ready = _read(logs[part.partition], part)
                results.append(result)
                chunks.append(chunk)
                available += ready
                settled = settled or result.error_or_flags == BOUNDARY_CHECK
            topics.append(frames.ConsumeTopicResult(
                name=topic.name, partitions_cnt=len(results), partitions=results))
        response = frames.ConsumeResponse(request_id=request.request_id, topics=topics,
                                          chunks=b"".join(chunks))
        wanted = max(1, min(request.min_bytes, MAX_FETCH_SIZE))
        return response, settled or available >= wanted


def _read(log: PartitionLog,
          part: frames.ConsumePartition) -> tuple[frames.ConsumePartitionResult, bytes, int]:
    seq = part.abs_seq_num
    hw = log.highwater_mark
    if seq == TAIL:
        seq = hw + 1
    elif seq == 0:
        seq = log.first_available
    elif seq > hw + 1 or seq < log.first_available:
        return frames.ConsumePartitionResult(
            partition=part.partition, error_or_flags=BOUNDARY_CHECK, base_seqnum=0,
            highwater_mark=hw, chunk_length=0,
            first_available_seqnum=log.first_available), b"", 0
    read = log.read(seq, max(1, min(part.fetch_size, MAX_FETCH_SIZE)))
    if read.chunk and read.first_sparse:
        result = frames.ConsumePartitionResult(
            partition=part.partition, error_or_flags=SPARSE_FIRST_BUNDLE, highwater_mark=hw,
            chunk_length=len(read.chunk))
    else:
        result = frames.ConsumePartitionResult(
            partition=part.partition, error_or_flags=OK, base_seqnum=read.base_seq,
            highwater_mark=hw, chunk_length=len(read.chunk))
    return result, read.chunk, read.available


def _resolved(messages: Sequence[frames.Message]) -> list[Message]:
    """The messages with every timestamp spelled out (a reused one copied from before)."""
    out: list[Message] = []
    last_ts: int | None = None
    for message in messages:
        if message.timestamp is not None:
            last_ts = message.timestamp
        elif last_ts is None:
            raise BadBundle("a message reuses the timestamp before any was given")
        out.append(Message(message.content, message.key, last_ts))
    return out
