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
``pipeline.pulsar_stream``.

Reading (batch)
---------------
Options: ``service_url`` (required); ``topic``, or ``topics`` (comma-separated); and
``starting_offsets`` / ``ending_offsets``, each "earliest" or "latest" (defaults: earliest,
latest); ``value_type``, the protobuf full name of a generated message (any
``generated/<protocol>/spark.py`` ``MESSAGES`` entry), adds a typed ``decoded`` struct
column (null where the value does not decode); ``read_timeout_ms`` (default 30000), how long
a task waits for the next message before failing; ``operation_timeout_seconds``.

The positions are resolved once, on the driver while planning (as Spark's Kafka source
does): for every topic partition a non-durable subscription asks the broker for
GET_LAST_MESSAGE_ID. "latest" as the end means up to and including that message; as the start,
after it. Each topic partition becomes one input partition; its task subscribes with our
``PulsarClient`` (created inside ``read()``: clients hold sockets and locks, which do not
pickle) on a fresh non-durable subscription from the earliest message, and reads until it
has passed the planned end id. So a read returns exactly the messages that were there when
it was planned, however many are published meanwhile; a partition the planner found empty
is not even subscribed to. A message that never comes (deleted by retention while reading)
fails the task after ``read_timeout_ms`` rather than returning a silently shorter result.

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

Writing (batch)
---------------
Options: ``service_url``, ``topic`` (required). Columns: ``value`` (binary or string,
required), and optionally ``key`` (binary or string: the partition key), ``properties``
(map<string,string>) and ``event_time`` (timestamp); others are ignored. Only
``mode("append")`` is supported. Every task creates its client and producer, sends its rows,
flushes and waits for every receipt before it reports success, so the write is
at-least-once. Producers are named ``<job id>-<spark partition>`` and number their messages
from 0 (sequence ids), so a broker with deduplication enabled drops what a retried task
attempt sends again.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from clients.pulsar import PulsarClient
from clients.pulsar.message import Message, MessageId
from runtime.spark_rows import RowCodec

SOURCE_NAME = "pulsar"

MESSAGE_FIELDS = [
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("message_id", StringType(), False),
    StructField("message_id_bytes", BinaryType(), False),
    StructField("publish_time", TimestampType(), True),
    StructField("event_time", TimestampType(), True),
    StructField("properties", MapType(StringType(), StringType(), False), True),
    StructField("producer_name", StringType(), True),
    StructField("redelivery_count", IntegerType(), False),
]
MESSAGE_SCHEMA = StructType(MESSAGE_FIELDS)

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("message_id", pa.string(), nullable=False),
    pa.field("message_id_bytes", pa.binary(), nullable=False),
    pa.field("publish_time", _TIMESTAMP),
    pa.field("event_time", _TIMESTAMP),
    pa.field("properties", pa.map_(pa.string(), pa.field("value", pa.string(),
                                                          nullable=False))),
    pa.field("producer_name", pa.string()),
    pa.field("redelivery_count", pa.int32(), nullable=False),
]

_EARLIEST = "earliest"
_LATEST = "latest"


def register(spark: SparkSession) -> None:
    """Make ``format("pulsar")`` available in ``spark``."""
    spark.dataSource.register(PulsarDataSource)


# --- value types ----------------------------------------------------------------------------------


def message_codec(full_name: str) -> RowCodec[Any]:
    """The generated ``RowCodec`` of the message ``full_name`` ("demo.events.OrderPlaced").

    Looks through every ``generated.<protocol>.spark`` module's ``MESSAGES``.
    """
    import generated

    for info in pkgutil.iter_modules(generated.__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"generated.{info.name}.spark")
        except ModuleNotFoundError:
            continue
        codec = getattr(module, "MESSAGES", {}).get(full_name)
        if codec is not None:
            return codec  # type: ignore[no-any-return]
    raise ValueError(f"value_type {full_name!r}: no generated message has that full name")


# --- options --------------------------------------------------------------------------------------


def _required(options: dict[str, str], name: str) -> str:
    value = options.get(name)
    if not value:
        raise ValueError(f"the pulsar data source needs the option {name!r}")
    return value


def _topics(options: dict[str, str]) -> list[str]:
    topics = [t.strip() for t in options.get("topics", "").split(",") if t.strip()]
    if options.get("topic"):
        topics.insert(0, options["topic"].strip())
    if not topics:
        raise ValueError("the pulsar data source needs the option 'topic' or 'topics'")
    return list(dict.fromkeys(topics))


def _position(options: dict[str, str], name: str, default: str) -> str:
    value = options.get(name, default).strip().lower()
    if value not in (_EARLIEST, _LATEST):
        raise ValueError(f"{name} must be 'earliest' or 'latest', not {value!r}")
    return value


def _client(options: dict[str, str]) -> PulsarClient:
    return PulsarClient(_required(options, "service_url"),
                        operation_timeout_seconds=float(
                            options.get("operation_timeout_seconds", "30")))


# --- reading --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PulsarPartition(InputPartition):
    """One topic partition and the planned range: after ``after``, up to ``last`` inclusive.

    Both are ``MessageIdData`` encodings; ``after`` None means from the earliest message.
    """

    topic: str
    partition: int
    after: bytes | None
    last: bytes


def _subscription() -> str:
    return f"spark-pulsar-{uuid.uuid4().hex[:12]}"


async def _last_message_id(client: PulsarClient, topic: str) -> MessageId:
    """The id of the last message of one (partition) topic; entry id -1 when it is empty."""
    consumer = await client.subscribe(topic, _subscription(), durable=False,
                                      initial_position="latest", receiver_queue_size=1)
    try:
        child = consumer._children[0]
        assert child.cnx is not None
        answer = await child.cnx.requests.get_last_message_id(child.consumer_id)
        return MessageId.from_proto(answer.last_message_id)
    finally:
        await consumer.close()


async def plan_partitions(options: dict[str, str]) -> list[PulsarPartition]:
    """The input partitions of a read (see the module docstring)."""
    start = _position(options, "starting_offsets", _EARLIEST)
    end = _position(options, "ending_offsets", _LATEST)
    parts: list[PulsarPartition] = []
    async with _client(options) as client:
        for topic in _topics(options):
            names = await client.get_topic_partitions(topic)
            lasts = await asyncio.gather(*(_last_message_id(client, n) for n in names))
            for index, (name, last) in enumerate(zip(names, lasts, strict=True)):
                if last.entry_id() < 0 or end == _EARLIEST or start == _LATEST:
                    continue  # nothing between the start and the end
                parts.append(PulsarPartition(name, index if len(names) > 1 else -1, None,
                                             last.serialize()))
    return parts


def _passed(msg_id: MessageId, last: MessageId) -> tuple[bool, bool]:
    """(take it, done): is ``msg_id`` at most ``last``, and is it ``last`` or later?"""
    here = (msg_id.ledger_id(), msg_id.entry_id())
    end = (last.ledger_id(), last.entry_id())
    if here < end:
        return True, False
    if here > end:
        return False, True
    index = msg_id.batch_index()
    if last.batch_index() < 0 or index < 0:
        return True, True
    return index <= last.batch_index(), index >= last.batch_index()


def _millis(ms: int) -> int | None:
    return ms * 1000 if ms > 0 else None


class _Batch:
    """Columns of received messages, turned into one Arrow batch."""

    def __init__(self, codec: RowCodec[Any] | None, schema: Any, partition: int) -> None:
        self.codec = codec
        self.partition = partition
        self.schema = schema
        self.clear()

    def clear(self) -> None:
        self.msgs: list[Message] = []

    def add(self, msg: Message) -> None:
        self.msgs.append(msg)

    def __len__(self) -> int:
        return len(self.msgs)

    def build(self) -> Any:
        msgs = self.msgs
        part = self.partition
        ids = [MessageId(part, i.ledger_id(), i.entry_id(), i.batch_index(), i.batch_size())
               for i in (m.message_id() for m in msgs)]
        columns = [
            pa.array([m.partition_key().encode() if m.has_partition_key() else None
                      for m in msgs], pa.binary()),
            pa.array([m.data() for m in msgs], pa.binary()),
            pa.array([m.topic_name() for m in msgs], pa.string()),
            pa.array([part] * len(msgs), pa.int32()),
            pa.array([str(i) for i in ids], pa.string()),
            pa.array([i.serialize() for i in ids], pa.binary()),
            pa.array([_millis(m.publish_timestamp()) for m in msgs], _TIMESTAMP),
            pa.array([_millis(m.event_timestamp()) for m in msgs], _TIMESTAMP),
            pa.array([list(m.properties().items()) for m in msgs], self.schema.field(8).type),
            pa.array([m.producer_name() for m in msgs], pa.string()),
            pa.array([m.redelivery_count() for m in msgs], pa.int32()),
        ]
        if self.codec is not None:
            decode = self.codec.python_type.decode
            values: list[Any] = []
            for m in msgs:
                try:
                    values.append(decode(m.data()))
                except Exception:
                    values.append(None)
            columns.append(self.codec.to_arrow(values))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _check_start(topic: str, first: MessageId, after: MessageId | None, fail: bool) -> None:
    """Raise when ``fail`` and the first message still stored comes after ``after``.

    Reads subscribe from the earliest message, so while ``after`` (the last message already
    read) is stored it is received first or later; when it is not, retention has deleted it
    and possibly unread messages after it.
    """
    if fail and after is not None and \
            (first.ledger_id(), first.entry_id()) > (after.ledger_id(), after.entry_id()):
        raise RuntimeError(f"{topic}: the start position {after} no longer exists (retention?); "
                           f"the earliest message is {first}. Set fail_on_data_loss=false to "
                           "skip what was lost")


async def _read_partition(options: dict[str, str], part: PulsarPartition, codec: RowCodec[Any]
                          | None, schema: Any, batch_rows: int,
                          fail_on_data_loss: bool = False) -> list[Any]:
    last = MessageId.deserialize(part.last)
    timeout = int(options.get("read_timeout_ms", "30000"))
    out: list[Any] = []
    batch = _Batch(codec, schema, part.partition)
    async with _client(options) as client:
        consumer = await client.subscribe(part.topic, _subscription(), durable=False,
                                          initial_position="earliest",
                                          start_message_id=None, receiver_queue_size=1000)
        after = MessageId.deserialize(part.after) if part.after is not None else None
        done = False
        first = True
        while not done:
            try:
                msg = await consumer.receive(timeout_millis=timeout)
            except Exception as exc:
                raise RuntimeError(f"{part.topic}: no message within {timeout} ms before the "
                                   f"planned end {last}") from exc
            mid = msg.message_id()
            if first:
                _check_start(part.topic, mid, after, fail_on_data_loss)
                first = False
            take, done = _passed(mid, last)
            if after is not None and _passed(mid, after)[0]:
                take = False
            if take:
                batch.add(msg)
                if len(batch) >= batch_rows:
                    out.append(batch.build())
                    batch.clear()
        await consumer.close()
    if len(batch):
        out.append(batch.build())
    return out


class PulsarReader(DataSourceReader):
    """Plans one input partition per topic partition and reads them (module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.value_type = options.get("value_type") or None
        self.batch_rows = int(options.get("batch_rows", "10000"))

    def partitions(self) -> Sequence[InputPartition]:
        parts = asyncio.run(plan_partitions(self.options))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, PulsarPartition):
            return  # nothing planned: Spark then reads one empty partition of its own
        codec = message_codec(self.value_type) if self.value_type else None
        schema = pa.schema(_ARROW_FIELDS + (
            [pa.field("decoded", codec.arrow_type)] if codec is not None else []))
        # The whole partition is read before the first batch is yielded: a generator cannot
        # keep an event loop running between yields. Batches are built as messages arrive.
        yield from asyncio.run(_read_partition(self.options, partition, codec, schema,
                                               self.batch_rows))


# --- writing --------------------------------------------------------------------------------------


@dataclass
class PulsarCommit(WriterCommitMessage):
    """What one task wrote."""

    producer_name: str
    messages: int


def _texts(column: Any) -> list[str | None]:
    values: list[Any] = column.to_pylist()
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def _epoch_millis(column: Any) -> list[int | None]:
    """Milliseconds since the epoch of a timestamp column (exact integer arithmetic)."""
    micros = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    return [None if m is None else m // 1000 for m in micros]


async def _write(options: dict[str, str], name: str, batches: Iterator[Any]) -> int:
    topic = _required(options, "topic")
    sent = 0
    async with _client(options) as client:
        producer = await client.create_producer(topic, producer_name=name,
                                                block_if_queue_full=True,
                                                batching_enabled=True)
        for batch in batches:
            names = batch.schema.names
            if "value" not in names:
                raise ValueError("writing to pulsar needs a 'value' column")
            values: list[Any] = batch.column("value").to_pylist()
            keys = _texts(batch.column("key")) if "key" in names else [None] * len(values)
            props: list[Any] = (batch.column("properties").to_pylist() if "properties" in names
                                else [None] * len(values))
            times: list[int | None] = (_epoch_millis(batch.column("event_time"))
                                       if "event_time" in names else [None] * len(values))
            for value, key, prop, when in zip(values, keys, props, times, strict=True):
                data = value.encode() if isinstance(value, str) else (value or b"")
                producer.send_async(
                    data, properties=dict(prop) if prop else None, partition_key=key,
                    event_timestamp=when,
                    sequence_id=sent)
                sent += 1
                if sent % 5000 == 0:  # bounds what waits for receipts
                    await producer.flush()
        await producer.flush()
        await producer.close()
    return sent


class PulsarWriter(DataSourceArrowWriter):
    """Sends each task's rows with one producer; at-least-once (module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        _required(options, "service_url")
        _required(options, "topic")
        if "value" not in schema.fieldNames():
            raise ValueError("writing to pulsar needs a 'value' column")
        self.job = options.get("producer_name_prefix") or f"spark-{uuid.uuid4().hex[:12]}"
        self.total = 0

    def write(self, iterator: Iterator[Any]) -> PulsarCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else uuid.uuid4().hex[:8]
        name = f"{self.job}-{task}"
        sent = asyncio.run(_write(self.options, name, iterator))
        return PulsarCommit(name, sent)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.total = sum(m.messages for m in messages if isinstance(m, PulsarCommit))


class PulsarDataSource(DataSource):
    """``format("pulsar")``: batch and streaming reads, appends (see the module docstrings)."""

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
        from pipeline.pulsar_stream import PulsarStreamReader

        return PulsarStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("the pulsar data source only appends: use mode('append')")
        return PulsarWriter(dict(self.options), schema)
