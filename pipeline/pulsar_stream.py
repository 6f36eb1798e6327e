"""Streaming reads of Pulsar topics: ``spark.readStream.format("pulsar")``.

Registered through ``PulsarDataSource.streamReader`` (``pipeline.pulsar_source``); takes the
batch reader's options (``service_url``, ``topic``/``topics``/``topics_pattern``,
``starting_offsets`` — only "earliest" or "latest", used when a query starts without a
checkpoint — ``value_type``, ``read_timeout_ms``, ``operation_timeout_seconds``;
``ending_offsets`` is ignored) plus:

``max_records_per_trigger``
    at most this many messages per micro-batch (default: unlimited). The budget is split
    evenly over the topic partitions that have new messages, at least one message each (so
    a micro-batch holds at most ``max(limit, number of such partitions)`` messages).
``fail_on_data_loss``
    "true" (default): fail when the position a partition is to continue from has been
    deleted (retention) — conservatively, when the last message already read is gone;
    "false": continue with whatever is still stored.

Offsets are JSON objects ``{"<partition topic name>": "ledger:entry:batch_index"}``: the id
of the last message included so far in that topic partition, ``"-1:-1:-1"`` before its
first message. A micro-batch ``(start, end]`` therefore has one input partition per topic
partition whose end is past its start, read exactly like a batch read (the same
``PulsarPartition`` and reading code: subscribed at the entry of ``start``, keeping the
messages after ``start`` and up to ``end``). Every end is a concrete message id fixed on
the driver while planning — the last message id (GET_LAST_MESSAGE_ID) without a limit, or,
with ``max_records_per_trigger``, the id of the k-th message after the start found by
reading the ids on the driver — so re-running a micro-batch from the checkpoint's offset
log reads the same messages again, and a restarted query neither loses nor repeats
committed batches. Topic partitions added later (new partitions, or new topics matching
``topics_pattern``, listed again for every micro-batch) start from their first message.

``trigger(availableNow=True)`` is supported (``SupportsTriggerAvailableNow``): the last
message ids when the query starts are the target, and micro-batches (limited as above) run
until it is reached.

The ``partition`` column comes from the topic partition name (``...-partition-N`` gives N,
anything else -1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.lookup import TopicName
from protoframe.clients.pulsar.message import MessageId
from protoframe.pipeline.pulsar_options import client as client_for
from protoframe.pipeline.pulsar_positions import (
    EARLIEST,
    after_start,
    before_last,
    entry_of,
    parse_offsets,
)
from protoframe.pipeline.pulsar_reading import (
    PulsarPartition,
    check_start,
    check_topic_options,
    iterate,
    last_message_ids,
    message_codec,
    read_partition,
    resolve_topics,
    subscription_name,
)

BEFORE_FIRST = "-1:-1:-1"


def encode_position(msg_id: MessageId) -> str:
    """``"ledger:entry:batch_index"`` of ``msg_id``."""
    return f"{msg_id.ledger_id()}:{msg_id.entry_id()}:{msg_id.batch_index()}"


def decode_position(text: str) -> MessageId | None:
    """The message id of an offset position; None before the first message."""
    ledger, entry, batch = (int(p) for p in text.split(":"))
    if ledger < 0 or entry < 0:
        return None
    return MessageId(-1, ledger, entry, batch)


def _is_after(end: MessageId | None, start: MessageId | None) -> bool:
    """Does the position ``end`` include messages after ``start``?"""
    if end is None:
        return False
    if start is None:
        return True
    here = (end.ledger_id(), end.entry_id())
    there = (start.ledger_id(), start.entry_id())
    if here != there:
        return here > there
    if start.batch_index() < 0:  # the whole entry is already read
        return False
    return end.batch_index() < 0 or end.batch_index() > start.batch_index()


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name, str(default)).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name} must be 'true' or 'false', not {value!r}")
    return value == "true"


async def last_positions(options: dict[str, str]) -> dict[str, str]:
    """Every topic partition's last message id, as offset positions."""
    out: dict[str, str] = {}
    async with client_for(options) as client:
        topics = await resolve_topics(client, options)
        for names in await asyncio.gather(*(last_message_ids(client, t) for t in topics)):
            for name, last in names:
                out[name] = encode_position(last) if last.entry_id() >= 0 else BEFORE_FIRST
    return dict(sorted(out.items()))


async def _nth_after(client: PulsarClient, topic: str, after: MessageId | None,
                     last: MessageId, count: int, timeout: int, fail: bool) -> MessageId:
    """The id of the ``count``-th message after ``after``, or ``last`` if that comes first."""
    consumer = await client.subscribe(
        topic, subscription_name(), durable=False, initial_position="earliest",
        start_message_id=entry_of(after) if after is not None else None,
        receiver_queue_size=1000)
    try:
        taken = 0
        result = last
        first = True
        while True:
            try:
                msg = await consumer.receive(timeout_millis=timeout)
            except Exception as exc:
                raise RuntimeError(f"{topic}: no message within {timeout} ms before {last}"
                                   ) from exc
            mid = msg.message_id()
            if first:
                check_start(topic, mid, after, fail)
                first = False
            take, done = before_last(mid, last)
            if after is not None and not after_start(mid, after, False):
                take = False
            if take:
                taken += 1
                if taken >= count:
                    return MessageId(-1, mid.ledger_id(), mid.entry_id(), mid.batch_index())
            if done:
                return result
    finally:
        await consumer.close()


async def plan_end(options: dict[str, str], start: dict[str, str], latest: dict[str, str],
                   max_rows: int | None, fail: bool) -> dict[str, str]:
    """The end offset of the next micro-batch: ``latest``, capped to ``max_rows`` messages."""
    end = dict(start)
    pending = {name: pos for name, pos in latest.items()
               if _is_after(decode_position(pos), decode_position(start.get(name, BEFORE_FIRST)))}
    for name in latest:
        end.setdefault(name, BEFORE_FIRST)
    if max_rows is None:
        end.update(pending)
        return dict(sorted(end.items()))
    if not pending:
        return dict(sorted(end.items()))
    share = max(1, max_rows // len(pending))
    timeout = int(options.get("read_timeout_ms", "30000"))
    async with client_for(options) as client:
        for name, pos in sorted(pending.items()):
            last = decode_position(pos)
            assert last is not None
            after = decode_position(start.get(name, BEFORE_FIRST))
            nth = await _nth_after(client, name, after, last, share, timeout, fail)
            end[name] = encode_position(nth)
    return dict(sorted(end.items()))


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of Pulsar messages (module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.value_type = options.get("value_type") or None
        self.batch_rows = int(options.get("batch_rows", "10000"))
        self.fail_on_data_loss = _flag(options, "fail_on_data_loss", True)
        limit = options.get("max_records_per_trigger")
        self.max_records = int(limit) if limit else None
        if self.max_records is not None and self.max_records <= 0:
            raise ValueError("max_records_per_trigger must be positive")
        check_topic_options(options)
        start = parse_offsets(options, "starting_offsets", EARLIEST)
        if start.named is None:
            raise ValueError("a streaming read starts at 'earliest' or 'latest'; message ids "
                             "as starting_offsets are for batch reads")
        self.start_position = start.named
        self.target: dict[str, str] | None = None

    def initialOffset(self) -> dict[str, str]:
        latest = asyncio.run(last_positions(self.options))
        if self.start_position == EARLIEST:
            return {name: BEFORE_FIRST for name in latest}
        return latest

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_records is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_records)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = asyncio.run(last_positions(self.options))

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        latest = (self.target if self.target is not None
                  else asyncio.run(last_positions(self.options)))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return asyncio.run(plan_end(self.options, start, latest, max_rows,
                                    self.fail_on_data_loss))

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        parts: list[InputPartition] = []
        for name, pos in sorted(end.items()):
            last = decode_position(pos)
            after = decode_position(start.get(name, BEFORE_FIRST))
            if last is None or not _is_after(last, after):
                continue
            parts.append(PulsarPartition(name, TopicName.parse(name).partition_index,
                                         after.serialize() if after is not None else None,
                                         False, last.serialize()))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, PulsarPartition)
        codec = message_codec(self.value_type) if self.value_type else None
        yield from iterate(read_partition(self.options, partition, codec, self.batch_rows,
                                          self.fail_on_data_loss))

    def commit(self, end: dict[str, str]) -> None:
        """Nothing to do: reads use non-durable subscriptions, Spark keeps the offsets."""
