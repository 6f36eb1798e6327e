"""Received Pulsar messages as Arrow record batches, with the data source's row schema.

Columns are built per entry where they can be: the messages of one entry (a producer's
batch) share their ledger and entry id, publish time, producer name, topic and redelivery
count, so those are computed once per entry and repeated, and the ``message_id_bytes``
encoding is assembled from a per-entry prefix and the message's batch index. That keeps
the per-message work to what really differs: payload, key, properties and event time.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from clients.pulsar.message import EntryInfo, Message, MessageId
from runtime.protowire import SMALL_VARINTS, varint_bytes
from runtime.spark_rows import RowCodec

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
_PROPERTIES = pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))
ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("message_id", pa.string(), nullable=False),
    pa.field("message_id_bytes", pa.binary(), nullable=False),
    pa.field("publish_time", _TIMESTAMP),
    pa.field("event_time", _TIMESTAMP),
    pa.field("properties", _PROPERTIES),
    pa.field("producer_name", pa.string()),
    pa.field("redelivery_count", pa.int32(), nullable=False),
]


def arrow_schema(codec: RowCodec[Any] | None) -> pa.Schema:
    """The Arrow schema of the rows read, with a ``decoded`` column when there is a codec."""
    return pa.schema(ARROW_FIELDS + (
        [pa.field("decoded", codec.arrow_type)] if codec is not None else []))


def _micros(ms: int) -> int | None:
    return ms * 1000 if ms > 0 else None


class _EntryColumns:
    """What every message of one entry shares, worked out once."""

    __slots__ = ("id_text", "id_head", "id_tail", "publish", "producer", "topic",
                 "redelivery", "batched", "meta")

    def __init__(self, entry: EntryInfo, partition: int) -> None:
        # The ids of the rows carry the read partition's index (the entry knows it too).
        whole = MessageId(partition, entry.ledger_id, entry.entry_id)
        self.id_text = f"({entry.ledger_id},{entry.entry_id},{partition},"
        self.id_head = whole.serialize()  # fields 1-3; batch index and size follow
        self.id_tail = b"\x30" + varint_bytes(entry.batch_size) if entry.batch_size else b""
        meta = entry.metadata
        self.meta = meta
        self.publish = _micros(meta.publish_time)
        self.producer = meta.producer_name
        self.topic = entry.topic
        self.redelivery = entry.redelivery_count
        self.batched = entry.batch_size > 0


def _key(text: str) -> bytes | None:
    return text.encode() if text else None


class RowBatchBuilder:
    """Collects received messages and turns them into Arrow batches of the row schema."""

    def __init__(self, codec: RowCodec[Any] | None, partition: int) -> None:
        self.codec = codec
        self.partition = partition
        self.schema = arrow_schema(codec)
        self.msgs: list[Message] = []

    def add(self, msg: Message) -> None:
        self.msgs.append(msg)

    def extend(self, msgs: list[Message]) -> None:
        self.msgs.extend(msgs)

    def __len__(self) -> int:
        return len(self.msgs)

    def take(self) -> pa.RecordBatch:
        """The Arrow batch of the messages added so far; the builder starts empty again."""
        msgs, self.msgs = self.msgs, []
        keys: list[bytes | None] = []
        ids: list[str] = []
        id_bytes: list[bytes] = []
        publish: list[int | None] = []
        events: list[int | None] = []
        props: list[list[tuple[str, str]]] = []
        producers: list[str] = []
        topics: list[str] = []
        redeliveries: list[int] = []
        part = self.partition
        no_props: list[tuple[str, str]] = []
        for entry, group in groupby(msgs, Message.entry):
            run = list(group)
            k = len(run)
            cols = _EntryColumns(entry, part)
            publish += [cols.publish] * k
            producers += [cols.producer] * k
            topics += [cols.topic] * k
            redeliveries += [cols.redelivery] * k
            if not cols.batched:
                meta = cols.meta
                ids += [f"{cols.id_text}-1)"] * k
                id_bytes += [cols.id_head] * k
                keys += [meta.partition_key.encode() if meta.has_partition_key() else None] * k
                events += [_micros(meta.event_time)] * k
                props += [[(kv.key, kv.value) for kv in meta.properties]] * k
                continue
            indexes = [m.batch_index() for m in run]
            text, head, tail = cols.id_text, cols.id_head, cols.id_tail
            ids += [f"{text}{i})" for i in indexes]
            id_bytes += [head + b"\x20" + SMALL_VARINTS[i] + tail if i < 128
                         else head + b"\x20" + varint_bytes(i) + tail for i in indexes]
            smetas = [m.single_metadata() for m in run]
            if all(s is None for s in smetas):  # a uniform batch: no per-message metadata
                keys += [None] * k
                events += [None] * k
                props += [no_props] * k
                continue
            for smeta in smetas:
                if smeta is None:
                    keys.append(None)
                    events.append(None)
                    props.append(no_props)
                else:
                    keys.append(smeta.partition_key.encode() if smeta.has_partition_key()
                                else None)
                    events.append(smeta.event_time * 1000 if smeta.event_time > 0 else None)
                    props.append([(kv.key, kv.value) for kv in smeta.properties])
        values = [m.data() for m in msgs]
        columns = [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(topics, pa.string()),
            pa.array([part] * len(msgs), pa.int32()),
            pa.array(ids, pa.string()),
            pa.array(id_bytes, pa.binary()),
            pa.array(publish, _TIMESTAMP),
            pa.array(events, _TIMESTAMP),
            pa.array(props, _PROPERTIES),
            pa.array(producers, pa.string()),
            pa.array(redeliveries, pa.int32()),
        ]
        if self.codec is not None:
            decode = self.codec.python_type.decode
            decoded: list[Any] = []
            for value in values:
                try:
                    decoded.append(decode(value))
                except Exception:
                    decoded.append(None)
            columns.append(self.codec.to_arrow(decoded))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)
