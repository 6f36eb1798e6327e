"""DataFrames into Pulsar: ``df.write.format("pulsar")`` and ``df.writeStream.format("pulsar")``.

Options: ``service_url``, ``topic`` (required); ``producer_name_prefix``; and
``operation_timeout_seconds``. Columns: ``value`` (binary or string, required), and
optionally ``key`` (binary or string: the partition key), ``properties``
(map<string,string>) and ``event_time`` (timestamp); other columns are ignored. Only
appending is supported.

Every task creates its client and one producer, sends its rows in order, and reports
success only after the broker has acknowledged every one of them (a send receipt per
message), so each write is at least once.

Exactly once, where the broker de-duplicates
---------------------------------------------
Each task's producer is named ``<prefix>-<spark partition>`` and numbers its rows with
explicit sequence ids. A broker with deduplication enabled remembers, per producer name,
the highest sequence id it has stored and drops any message at or below it.

* Batch writes: the prefix is new for every write unless ``producer_name_prefix`` is
  given; sequence ids count from 0 in each task. A retried task attempt sends the same
  rows under the same name again and the broker drops what the failed attempt stored.
* Streaming writes: the prefix is fixed per query — ``producer_name_prefix``, or derived
  from the checkpoint location and the topic — and a row's sequence id is
  ``batch_id * 2**32 + its index in the task``. A micro-batch that Spark runs again (a
  retried task, or the batch re-run after a restart because its commit was not yet
  recorded in the checkpoint) reproduces the same names and ids, so each row is stored
  once, provided the source replays the batch's rows into the same partitions in the
  same order (Spark's file sources and our Pulsar source do). Without deduplication on
  the broker, writes are at least once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from protoframe.pipeline.pulsar_options import client as client_for
from protoframe.pipeline.pulsar_options import required

log = logging.getLogger(__name__)

#: Rows one task may write in one micro-batch: a row's sequence id keeps the batch id above.
BATCH_SEQUENCE_SPAN = 1 << 32
# Spark tells a micro-batch's tasks their batch id through this local property.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


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


async def write_rows(options: dict[str, str], name: str, batches: Iterator[Any],
                     first_sequence_id: int = 0, max_rows: int | None = None) -> int:
    """Send every row of ``batches`` with a producer called ``name``; the count sent.

    Returns only when the broker has acknowledged each message.
    """
    topic = required(options, "topic")
    sent = 0
    async with client_for(options) as client:
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
            if max_rows is not None and sent + len(values) > max_rows:
                raise ValueError(f"a task may write at most {max_rows} rows per micro-batch")
            for value, key, prop, when in zip(values, keys, props, times, strict=True):
                data = value.encode() if isinstance(value, str) else (value or b"")
                producer.send_async(
                    data, properties=dict(prop) if prop else None, partition_key=key,
                    event_timestamp=when, sequence_id=first_sequence_id + sent)
                sent += 1
                if sent % 5000 == 0:  # bounds what waits for receipts
                    await producer.flush()
        await producer.flush()
        await producer.close()
    return sent


def _check_schema(options: dict[str, str], schema: StructType) -> None:
    required(options, "service_url")
    required(options, "topic")
    if "value" not in schema.fieldNames():
        raise ValueError("writing to pulsar needs a 'value' column")


def _task() -> tuple[Any, int | str]:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context, (context.partitionId() if context is not None else uuid.uuid4().hex[:8])


class PulsarWriter(DataSourceArrowWriter):
    """Sends each task's rows with one producer (module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        _check_schema(options, schema)
        self.options = options
        self.prefix = options.get("producer_name_prefix") or f"spark-{uuid.uuid4().hex[:12]}"
        self.total = 0

    def write(self, iterator: Iterator[Any]) -> PulsarCommit:
        _, task = _task()
        name = f"{self.prefix}-{task}"
        sent = asyncio.run(write_rows(self.options, name, iterator))
        return PulsarCommit(name, sent)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.total = sum(m.messages for m in messages if isinstance(m, PulsarCommit))


def stream_prefix(options: dict[str, str]) -> str:
    """The producer-name prefix of a streaming query: given, or stable per checkpoint+topic."""
    given = options.get("producer_name_prefix")
    if given:
        return given
    checkpoint = options.get("checkpointLocation") or options.get("checkpointlocation")
    if not checkpoint:
        raise ValueError("a streaming write to pulsar needs a checkpointLocation or a "
                         "producer_name_prefix: producer names must survive restarts")
    digest = hashlib.sha256(f"{checkpoint}\n{options['topic']}".encode()).hexdigest()
    return f"spark-{digest[:16]}"


class PulsarStreamWriter(DataSourceStreamArrowWriter):
    """Micro-batches to Pulsar, exactly once per batch with broker dedup (module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        _check_schema(options, schema)
        self.options = options
        self.prefix = stream_prefix(options)

    def write(self, iterator: Iterator[Any]) -> PulsarCommit:
        context, task = _task()
        batch_text = context.getLocalProperty(_BATCH_ID_PROPERTY) if context else None
        if batch_text is None:
            raise RuntimeError("a streaming write task did not get its micro-batch id")
        name = f"{self.prefix}-{task}"
        sent = asyncio.run(write_rows(self.options, name, iterator,
                                      int(batch_text) * BATCH_SEQUENCE_SPAN,
                                      BATCH_SEQUENCE_SPAN))
        return PulsarCommit(name, sent)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every row was acknowledged by the broker before its task ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Sent messages cannot be taken back; the batch's re-run is de-duplicated.
        sent = sum(m.messages for m in messages if isinstance(m, PulsarCommit))
        log.warning("micro-batch %d aborted after %d messages were stored", batchId, sent)
