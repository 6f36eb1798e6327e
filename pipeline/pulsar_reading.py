"""Reading Pulsar topics for Spark: what the batch source (``pipeline.pulsar_source``) and the
streaming source (``pipeline.pulsar_stream``) share.

Both plan ``PulsarPartition``s on the driver (which topics, ``resolve_topics``; where each
topic partition ends, ``last_message_ids``) and read each one in a task the same way
(``read_partition``: a fresh non-durable subscription at the entry of the planned start,
Arrow batches of the messages in range, ``check_start`` for data lost to retention). The
value types a read can decode into a ``decoded`` column are found by ``message_codec``.
Sources sit on top of this module and never on each other.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import pkgutil
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.consumer import entry_messages
from protoframe.clients.pulsar.errors import Timeout
from protoframe.clients.pulsar.message import MessageId
from protoframe.pipeline.pulsar_options import client as client_for
from protoframe.pipeline.pulsar_positions import ReadRange, entry_of
from protoframe.pipeline.pulsar_rows import RowBatchBuilder
from protoframe.runtime.errors import DecodeError
from protoframe.runtime.spark.rows import RowCodec

log = logging.getLogger(__name__)


# --- value types ----------------------------------------------------------------------------------


def message_codec(full_name: str) -> RowCodec[Any]:
    """The generated ``RowCodec`` of the message ``full_name`` ("demo.events.OrderPlaced").

    A plain full name is looked for in every ``protoframe.generated.<protocol>.spark`` module's
    ``MESSAGES``; ``"<package>:<full name>"`` names the generated protocol package it is in,
    for bindings generated in a user's own project with the spark output
    (``"myapp.proto.telemetry:telemetry.Reading"`` reads ``myapp.proto.telemetry.spark``).
    """
    if ":" in full_name:
        package, _, name = full_name.partition(":")
        try:
            module = importlib.import_module(f"{package}.spark")
        except ModuleNotFoundError as exc:
            raise ValueError(f"value_type {full_name!r}: cannot import {package}.spark ({exc}); "
                             "generate that package with the spark output") from None
        codec = getattr(module, "MESSAGES", {}).get(name)
        if codec is None:
            raise ValueError(f"value_type {full_name!r}: {package}.spark has no message {name!r}")
        return codec  # type: ignore[no-any-return]
    from protoframe import generated
    for info in pkgutil.iter_modules(generated.__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"protoframe.generated.{info.name}.spark")
        except ModuleNotFoundError:
            continue
        codec = getattr(module, "MESSAGES", {}).get(full_name)
        if codec is not None:
            return codec  # type: ignore[no-any-return]
    raise ValueError(f"value_type {full_name!r}: no generated message has that full name "
                     "(for your own generated package, write \"<package>:<full name>\")")


# --- options --------------------------------------------------------------------------------------


def _named_topics(options: dict[str, str]) -> list[str]:
    topics = [t.strip() for t in options.get("topics", "").split(",") if t.strip()]
    if options.get("topic"):
        topics.insert(0, options["topic"].strip())
    return list(dict.fromkeys(topics))


def check_topic_options(options: dict[str, str]) -> None:
    """Fail early (on the driver) unless exactly one way of naming topics is given."""
    given = [o for o in ("topic", "topics", "topics_pattern") if options.get(o, "").strip()]
    if not given:
        raise ValueError("the pulsar data source needs the option 'topic', 'topics' or "
                         "'topics_pattern'")
    if "topics_pattern" in given and len(given) > 1:
        raise ValueError("topics_pattern cannot be combined with topic or topics")


async def resolve_topics(client: PulsarClient, options: dict[str, str]) -> list[str]:
    """The topics to read: those named, or those matching ``topics_pattern`` now."""
    check_topic_options(options)
    pattern = options.get("topics_pattern", "").strip()
    if pattern:
        return await client.get_topics_matching(pattern)
    return _named_topics(options)


# --- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PulsarPartition(InputPartition):
    """One topic partition and the planned range of one task.

    Ids are ``MessageIdData`` encodings. ``start`` None means from the earliest message;
    ``last`` is the final message to read (inclusive); ``end``, when set, stops the read
    before that id. ``start_time``/``end_time`` bound the publish time (ms, [start, end)).
    With ``min_partitions`` one topic partition may have several of these, one per piece
    of its range: a piece's ``start``, ``last`` and ``end`` may be entry-wide ids (batch
    index -1), which stand for the whole entry (``pipeline.pulsar_positions``).
    """

    topic: str
    partition: int
    start: bytes | None
    start_inclusive: bool
    last: bytes
    end: bytes | None = None
    start_time: int | None = None
    end_time: int | None = None


def subscription_name() -> str:
    """A fresh name for a non-durable subscription (one per read; none outlives it)."""
    return f"spark-pulsar-{uuid.uuid4().hex[:12]}"


async def last_message_ids(client: PulsarClient, topic: str) -> list[tuple[str, MessageId]]:
    """Every partition of ``topic`` with the id of its last message (entry -1: empty)."""
    consumer = await client.subscribe(topic, subscription_name(), durable=False,
                                      initial_position="latest", receiver_queue_size=1000)
    try:
        lasts = await consumer.get_last_message_ids()
    finally:
        await consumer.close()
    return list(zip(await client.get_topic_partitions(topic), lasts, strict=True))


async def first_message_id(client: PulsarClient, topic: str, timeout_ms: int
                           ) -> MessageId | None:
    """The id of the first message still stored in ``topic`` (one partition), or None when
    none arrives within ``timeout_ms``: one message received at the earliest position."""
    consumer = await client.subscribe(topic, subscription_name(), durable=False,
                                      initial_position="earliest", receiver_queue_size=1)
    try:
        msg = await consumer.receive(timeout_millis=timeout_ms)
    except Timeout:
        return None
    finally:
        await consumer.close()
    return msg.message_id()


def check_start(topic: str, first: MessageId, after: MessageId | None, fail: bool) -> None:
    """Raise when ``fail`` and the first message still stored comes after ``after``.

    Reads subscribe at ``after``'s entry, so while ``after`` (the last message already
    read) is stored it is received first; when it is not, retention has deleted it and
    possibly unread messages after it.
    """
    if fail and after is not None and \
            (first.ledger_id(), first.entry_id()) > (after.ledger_id(), after.entry_id()):
        raise RuntimeError(f"{topic}: the start position {after} no longer exists (retention?); "
                           f"the earliest message is {first}. Set fail_on_data_loss=false to "
                           "skip what was lost")


async def read_partition(options: dict[str, str], part: PulsarPartition,
                         codec: RowCodec[Any] | None, batch_rows: int,
                         fail_on_data_loss: bool = False) -> AsyncIterator[pa.RecordBatch]:
    """The Arrow batches of one planned partition, ``batch_rows`` messages at most each.

    The subscription starts at the entry of the planned start, so nothing before it is
    transferred; messages of that entry before the start are skipped here.
    """
    last = MessageId.deserialize(part.last)
    start = MessageId.deserialize(part.start) if part.start is not None else None
    end = MessageId.deserialize(part.end) if part.end is not None else None
    wanted = ReadRange(start, part.start_inclusive, last, end, part.start_time, part.end_time)
    timeout = int(options.get("read_timeout_ms", "30000"))
    rows = RowBatchBuilder(codec, part.partition)
    async with client_for(options) as client:
        consumer = await client.subscribe(
            part.topic, subscription_name(), durable=False, initial_position="earliest",
            start_message_id=entry_of(start) if start is not None else None,
            receiver_queue_size=int(options.get("receiver_queue_size", "5000")),
            deliver_entries=True)
        done = False
        first = True
        while not done:
            try:
                entries = await consumer.receive_entries(256, timeout_millis=timeout)
            except Exception as exc:
                raise RuntimeError(f"{part.topic}: no message within {timeout} ms before the "
                                   f"planned end {last}") from exc
            if first:
                info = entries[0].info
                check_start(part.topic, MessageId(-1, info.ledger_id, info.entry_id),
                            None if part.start_inclusive else start, fail_on_data_loss)
                first = False
            for entry in entries:
                if wanted.takes_whole(entry.info):
                    rows.add_entry(entry)
                else:
                    try:
                        msgs = entry_messages(entry)
                    except DecodeError as exc:
                        # As the consumer does with messages: a batch that does not split is
                        # dropped with a warning rather than failing the whole read.
                        log.warning("%s: skipping entry %d:%d: %s", part.topic,
                                    entry.info.ledger_id, entry.info.entry_id, exc)
                        continue
                    kept, done = wanted.select(msgs)
                    rows.extend(kept)
                if len(rows) >= batch_rows:
                    yield rows.take()
                if done:
                    break
        await consumer.close()
    if len(rows):
        yield rows.take()


def iterate(batches: AsyncIterator[Any]) -> Iterator[Any]:
    """Drive an async iterator from synchronous code, one item per ``next``.

    Spark's ``read`` must be a plain generator; the event loop stays between items (not
    running: the socket's buffers hold what arrives meanwhile), so a partition is streamed
    batch by batch instead of being read whole first.
    """
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                item = loop.run_until_complete(anext(batches))
            except StopAsyncIteration:
                return
            yield item
    finally:
        try:
            loop.run_until_complete(batches.aclose())  # type: ignore[attr-defined]
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
