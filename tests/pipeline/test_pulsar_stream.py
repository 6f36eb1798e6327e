"""``readStream.format("pulsar")``: micro-batches, checkpoints and limits, on the embedded broker
and on Apache Pulsar (``pulsar_service``)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from tests.support.spark import skip_module_without_java  # noqa: E402

skip_module_without_java()

from protoframe.clients.pulsar.broker import BrokerThread  # noqa: E402
from protoframe.clients.pulsar.message import MessageId  # noqa: E402
from protoframe.generated.demo.events import OrderPlaced  # noqa: E402
from protoframe.pipeline.pulsar_stream import (  # noqa: E402
    BEFORE_FIRST,
    _is_after,
    decode_position,
    encode_position,
)
from tests.support.demo_orders import produce_numbered as produce  # noqa: E402
from tests.support.pulsar_service import ON_BOTH_BROKERS, PulsarService  # noqa: E402

_names = itertools.count()
QUERY_SECONDS = 240


def run(spark: Any, service: PulsarService, topic: str, out: Path, checkpoint: Path,
        fails: bool = False, **options: str) -> Any:
    stream = (spark.readStream.format("pulsar").option("service_url", service.url)
              .option("topic", topic).option("read_timeout_ms", "15000")
              .option("value_type", OrderPlaced.FULL_NAME))
    for name, value in options.items():
        stream = stream.option(name, value)
    query = (stream.load().selectExpr("cast(properties['n'] as int) as n", "partition",
                                      "message_id", "decoded.order_id as order_id")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    if fails:
        with pytest.raises(Exception, match="no longer exists"):
            query.awaitTermination(QUERY_SECONDS)
        return query
    # awaitTermination returns False once its time is up: a query still running then (the
    # first of a session, cold Python workers on a loaded machine) must fail here, not later
    # as missing output.
    assert query.awaitTermination(QUERY_SECONDS), f"not done in {QUERY_SECONDS} s"
    assert query.exception() is None
    return query


def numbers(spark: Any, out: Path) -> list[int]:
    return sorted(r.n for r in spark.read.parquet(str(out)).collect())


def test_positions() -> None:
    mid = MessageId(3, 12, 7, 2)
    assert encode_position(mid) == "12:7:2"
    back = decode_position("12:7:2")
    assert back is not None and (back.ledger_id(), back.entry_id(), back.batch_index()) == (
        12, 7, 2)
    assert decode_position(BEFORE_FIRST) is None
    assert _is_after(decode_position("12:8:-1"), decode_position("12:7:-1"))
    assert not _is_after(decode_position("12:7:-1"), decode_position("12:7:-1"))
    assert _is_after(decode_position("12:7:3"), decode_position("12:7:2"))
    assert _is_after(decode_position("1:0:-1"), None)
    assert not _is_after(None, None)


@ON_BOTH_BROKERS
def test_stream_restarts_from_checkpoint(spark: Any, pulsar_service: PulsarService,
                                         tmp_path: Path) -> None:
    topic = pulsar_service.create_partitioned_topic(
        f"persistent://public/default/stream-{next(_names)}", 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    asyncio.run(produce(pulsar_service.url, topic, 0, 40))
    run(spark, pulsar_service, topic, out, checkpoint)
    assert numbers(spark, out) == list(range(40))
    rows = spark.read.parquet(str(out)).collect()
    assert {r.partition for r in rows} == {0, 1}
    assert all(r.order_id == f"o-{r.n}" for r in rows)

    asyncio.run(produce(pulsar_service.url, topic, 40, 25))
    run(spark, pulsar_service, topic, out, checkpoint)
    assert numbers(spark, out) == list(range(65))  # no loss, no duplicates

    # Nothing new: another run adds nothing.
    run(spark, pulsar_service, topic, out, checkpoint)
    assert numbers(spark, out) == list(range(65))


def test_max_records_per_trigger(spark: Any, pulsar_service: PulsarService, tmp_path: Path) -> None:
    # Embedded only, for time (five micro-batches): the limit is the source's own planning,
    # over the ids a broker returns, which test_stream_restarts_from_checkpoint shows on both.
    topic = f"persistent://public/default/stream-limit-{next(_names)}"
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    asyncio.run(produce(pulsar_service.url, topic, 0, 23))
    query = run(spark, pulsar_service, topic, out, checkpoint, max_records_per_trigger="10")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 3]
    assert numbers(spark, out) == list(range(23))
    assert {r.partition for r in spark.read.parquet(str(out)).collect()} == {-1}

    asyncio.run(produce(pulsar_service.url, topic, 23, 12))
    query = run(spark, pulsar_service, topic, out, checkpoint, max_records_per_trigger="10")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [10, 2]
    assert numbers(spark, out) == list(range(35))


def test_starting_offsets_latest(spark: Any, pulsar_service: PulsarService, tmp_path: Path) -> None:
    # Embedded only, for time: "latest" asks the broker for the last message id, which the
    # batch read of test_read_partitioned_topic_with_decoded_values checks on both brokers.
    topic = f"persistent://public/default/stream-latest-{next(_names)}"
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    asyncio.run(produce(pulsar_service.url, topic, 0, 5))
    run(spark, pulsar_service, topic, out, checkpoint, starting_offsets="latest")
    asyncio.run(produce(pulsar_service.url, topic, 5, 4))
    run(spark, pulsar_service, topic, out, checkpoint, starting_offsets="latest")
    assert numbers(spark, out) == [5, 6, 7, 8]


def drop_oldest(broker: BrokerThread, topic: str, count: int) -> None:
    """Simulate retention: the broker forgets the ``count`` oldest entries of ``topic``."""

    def drop() -> None:
        stored = broker.broker.state.topics[topic]
        stored.size -= sum(e.size for e in stored.entries[:count] if e is not None)
        del stored.entries[:count]
        stored.first_id += count

    broker.call(drop)


def test_fail_on_data_loss(spark: Any, broker: BrokerThread, tmp_path: Path) -> None:
    # Embedded only: losing entries that a checkpoint still points at takes retention trimming
    # ledgers away under a paused query; the embedded broker's store can be cut directly, the
    # standalone's ledgers only by rolling and trimming them on its own schedule.
    service = PulsarService.of_embedded(broker)
    topic = f"persistent://public/default/stream-loss-{next(_names)}"
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    asyncio.run(produce(broker.url, topic, 0, 10, batching=False))  # one entry each
    run(spark, service, topic, out, checkpoint)
    asyncio.run(produce(broker.url, topic, 10, 5, batching=False))
    drop_oldest(broker, topic, 12)  # the last one read (9) and two unread (10, 11) are gone
    run(spark, service, topic, out, checkpoint, fails=True)
    assert numbers(spark, out) == list(range(10))
    run(spark, service, topic, out, checkpoint, fail_on_data_loss="false")
    assert numbers(spark, out) == [*range(10), 12, 13, 14]
