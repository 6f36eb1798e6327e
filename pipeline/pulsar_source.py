"""Pulsar topics as Spark DataFrames: a Python data source (``spark.read/write.format("pulsar")``).

Register it once per session (``register(spark)`` or
``spark.dataSource.register(PulsarDataSource)``), then::

    df = (spark.read.format("pulsar")
          .option("service_url", "pulsar://127.0.0.1:6650")
          .option("topic", "persistent://public/default/orders")
          .option("value_type", "demo.events.OrderPlaced")     # optional: a `decoded` column
          .load())
    out.write.format("pulsar").option("service_url", url).option("topic", t) \\
        .mode("append").save()

Streaming reads (``spark.readStream.format("pulsar")``, micro-batches, checkpoints,
``max_records_per_trigger``, ``fail_on_data_loss``, ``trigger(availableNow=True)``) are in
``pipeline.pulsar_stream``; writes, batch and streaming, in ``pipeline.pulsar_sink``.

Reading (batch)
---------------
Options: ``service_url`` (required); the topics: ``topic``, ``topics`` (comma-separated)
or ``topics_pattern``, a regular expression over complete topic names whose namespace is
listed when the read is planned (``persistent://public/default/orders-.*``); the range:
``starting_offsets``, ``ending_offsets``, ``starting_time``, ``ending_time``
(``pipeline.pulsar_positions``: earliest, latest, message ids per partition, publish
times); ``value_type``, the protobuf full name of a generated message (any
``generated/<protocol>/spark.py`` ``MESSAGES`` entry, or ``"<package>:<full name>"`` for a
package generated in the user's project with the spark output), which adds a typed ``decoded``
struct column (null where the value does not decode); ``read_timeout_ms`` (default 30000),
how long a task waits for the next message before failing; ``batch_rows`` (default 10000),
rows per Arrow batch; ``receiver_queue_size`` (default 5000), messages a task's consumer may
have in flight; ``operation_timeout_seconds``; ``min_partitions`` (default: unset), the
number of input partitions to aim for when the topic partitions are fewer (below).

The range is fixed once, on the driver while planning (as Spark's Kafka source does): for
every topic partition a non-durable subscription asks the broker for its last message id
(``Consumer.get_last_message_ids``), and "latest" as the end means up to and including that
message; as the start, after it. Each topic partition becomes one input partition; its
task subscribes with our ``PulsarClient`` (created inside ``read()``: clients hold sockets
and locks, which do not pickle) on a fresh non-durable subscription positioned at the
start's entry, receives whole entries (``deliver_entries``: a batch of fixed-size records
becomes Arrow columns straight from its buffer; other entries are split into messages), and
streams Arrow batches of ``batch_rows`` until it has passed the planned end. So a read
returns exactly the messages that were there when it was planned, however many are
published meanwhile; a partition with nothing in range is not even subscribed to.
A message that never comes (deleted by retention while reading) fails the task after
``read_timeout_ms`` rather than returning a silently shorter result.

``min_partitions`` (like the Kafka source's ``minPartitions``): when the planned topic
partitions are fewer than this, their ranges are cut into consecutive runs of whole
entries, so that about ``min_partitions`` tasks read in parallel, each on its own
non-durable subscription positioned at its first entry and stopping after its last
(``pipeline.pulsar_positions.split_range``). Bigger ranges get more pieces, in proportion
to their entry counts, never more than one per entry, and the pieces together return
exactly the rows of the unsplit read (a start or end inside a batch entry stays with the
first or last piece; publish-time bounds filter every piece). Only a range whose start and
end lie in one ledger is cut, since entry ids are only known to be consecutive within a
ledger; a range spanning ledgers (a broker that rolled its ledger over) stays one input
partition. For an "earliest" start the driver finds the first stored entry by receiving
one message on a subscription at the earliest position.

Rows follow Spark's Kafka source::

    key               binary      the partition key (UTF-8), null when the message has none
    value             binary      the payload
    topic             string      the partition's topic name (``...-partition-N``)
    partition         int         the partition index, -1 for a non-partitioned topic
    message_id        string      "(ledger,entry,partition,batch_index)"
    message_id_bytes  binary      the ``MessageIdData`` protobuf encoding
                                  (``MessageId.deserialize`` reads it back)
    publish_time      timestamp
    event_time        timestamp   null when the producer set none
    properties        map<string,string>
    producer_name     string
    redelivery_count  int
    decoded           struct      only with ``value_type``
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructField, StructType

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.lookup import TopicName
from protoframe.clients.pulsar.message import MessageId
from protoframe.pipeline.pulsar_options import client as client_for
from protoframe.pipeline.pulsar_positions import (
    EARLIEST,
    LATEST,
    Bounds,
    Offsets,
    after_start,
    compare,
    entry_span,
    parse_offsets,
    parse_time,
    split_counts,
    split_range,
)
from protoframe.pipeline.pulsar_reading import (
    PulsarPartition,
    check_topic_options,
    first_message_id,
    iterate,
    last_message_ids,
    message_codec,
    read_partition,
    resolve_topics,
)
from protoframe.pipeline.pulsar_rows import MESSAGE_FIELDS, MESSAGE_SCHEMA
from protoframe.pipeline.pulsar_sink import PulsarStreamWriter, PulsarWriter
from protoframe.pipeline.pulsar_stream import PulsarStreamReader

SOURCE_NAME = "pulsar"


def register(spark: SparkSession) -> None:
    """Make ``format("pulsar")`` available in ``spark``."""
    spark.dataSource.register(PulsarDataSource)


# --- reading --------------------------------------------------------------------------------------


def _start_of(offsets: Offsets, name: str, last: MessageId
              ) -> tuple[MessageId | None, bool] | None:
    """(start, inclusive) of partition ``name``; None when the read is empty from the start."""
    if name in offsets.ids:
        return offsets.ids[name], True
    if offsets.named == LATEST:
        return None if last.entry_id() < 0 else (last, False)
    return None, True


async def plan_partitions(options: dict[str, str]) -> list[PulsarPartition]:
    """The input partitions of a batch read (see the module docstrings)."""
    starts = parse_offsets(options, "starting_offsets", EARLIEST)
    ends = parse_offsets(options, "ending_offsets", LATEST)
    start_time = parse_time(options, "starting_time")
    end_time = parse_time(options, "ending_time")
    parts: list[PulsarPartition] = []
    async with client_for(options) as client:
        topics = await resolve_topics(client, options)
        found = await asyncio.gather(*(last_message_ids(client, t) for t in topics))
        for names in found:
            for name, last in names:
                if last.entry_id() < 0 or ends.named == EARLIEST:
                    continue
                start = _start_of(starts, name, last)
                if start is None or (start[0] is not None
                                     and not after_start(last, start[0], start[1])):
                    continue  # nothing between the start and the last message
                end = ends.ids.get(name)
                if end is not None and compare(end, last) > 0:
                    end = None  # past the last message: "latest" bounds it anyway
                parts.append(PulsarPartition(
                    name, TopicName.parse(name).partition_index,
                    start[0].serialize() if start[0] is not None else None, start[1],
                    last.serialize(), end.serialize() if end is not None else None,
                    start_time, end_time))
        wanted = min_partitions(options)
        if wanted is not None and len(parts) < wanted:
            parts = await split_partitions(client, parts, wanted,
                                           int(options.get("read_timeout_ms", "30000")))
    return parts


def min_partitions(options: dict[str, str]) -> int | None:
    """The ``min_partitions`` option: a positive number, or None when it is not set."""
    raw = options.get("min_partitions", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"min_partitions must be a positive integer, not {raw!r}")
    return value


def _bounds(part: PulsarPartition) -> Bounds:
    return Bounds(MessageId.deserialize(part.start) if part.start is not None else None,
                  part.start_inclusive, MessageId.deserialize(part.last),
                  MessageId.deserialize(part.end) if part.end is not None else None)


async def split_partitions(client: PulsarClient, parts: list[PulsarPartition], wanted: int,
                           timeout_ms: int) -> list[PulsarPartition]:
    """``parts`` with their ranges cut into about ``wanted`` pieces in all (module docstring).

    Ranges are cut in proportion to their entry counts; one that does not lie in a single
    ledger (or whose earliest start cannot be found) stays whole.
    """
    bounds = [_bounds(part) for part in parts]

    async def first_of(part: PulsarPartition, bound: Bounds) -> MessageId | None:
        if bound.start is not None:
            return None
        return await first_message_id(client, part.topic, timeout_ms)

    firsts = await asyncio.gather(*(first_of(p, b) for p, b in zip(parts, bounds, strict=True)))
    sizes = []
    for bound, first in zip(bounds, firsts, strict=True):
        span = entry_span(bound, first)
        sizes.append(1 if span is None else span[2] - span[1] + 1)
    out: list[PulsarPartition] = []
    for part, bound, first, count in zip(parts, bounds, firsts, split_counts(sizes, wanted),
                                         strict=True):
        if count <= 1:
            out.append(part)
            continue
        for piece in split_range(bound, first, count):
            out.append(dataclasses.replace(
                part, start=piece.start.serialize() if piece.start is not None else None,
                start_inclusive=piece.start_inclusive, last=piece.last.serialize(),
                end=piece.end.serialize() if piece.end is not None else None))
    return out


class PulsarReader(DataSourceReader):
    """Plans one input partition per topic partition (or more, with ``min_partitions``)
    and reads them (module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        check_topic_options(options)
        min_partitions(options)
        self.value_type = options.get("value_type") or None
        self.batch_rows = int(options.get("batch_rows", "10000"))

    def partitions(self) -> Sequence[InputPartition]:
        parts = asyncio.run(plan_partitions(self.options))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, PulsarPartition):
            return  # nothing planned: Spark then reads one empty partition of its own
        codec = message_codec(self.value_type) if self.value_type else None
        yield from iterate(read_partition(self.options, partition, codec, self.batch_rows))


# --- the data source ------------------------------------------------------------------------------


class PulsarDataSource(DataSource):
    """``format("pulsar")``: batch and streaming reads and writes (see the module docstrings)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        value_type = self.options.get("value_type")
        if not value_type:
            return MESSAGE_SCHEMA
        codec = message_codec(value_type)
        return StructType([*MESSAGE_FIELDS, StructField("decoded", codec.spark_schema, True)])

    def reader(self, schema: StructType) -> DataSourceReader:
        return PulsarReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PulsarStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("the pulsar data source only appends: use mode('append')")
        return PulsarWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise ValueError("the pulsar data source only appends: use outputMode('append')")
        return PulsarStreamWriter(dict(self.options), schema)
