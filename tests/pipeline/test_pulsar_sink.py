"""``df.writeStream.format("pulsar")`` and retried writes, against the embedded broker and
Apache Pulsar (``pulsar_service``).

The embedded broker de-duplicates by producer name and sequence id, as a Pulsar broker with
deduplication enabled does (on the standalone these tests write to a namespace with it enabled),
so a micro-batch that Spark runs again must not store its rows twice; the control case (a new
producer-name prefix) shows that the re-run really sends.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from tests.support.spark import skip_module_without_java  # noqa: E402

skip_module_without_java()

from protoframe.clients.pulsar import PulsarClient  # noqa: E402
from protoframe.pipeline.pulsar_sink import BATCH_SEQUENCE_SPAN, stream_prefix, write_rows  # noqa: E402
from tests.support.pulsar_service import ON_BOTH_BROKERS, PulsarService  # noqa: E402

_names = itertools.count()


def write_inputs(directory: Path, files: int, rows: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = [json.dumps({"value": f"f{f}-r{r}", "key": f"k{r % 3}", "n": f * rows + r})
                 for r in range(rows)]
        (directory / f"part-{f:03d}.json").write_text("\n".join(lines) + "\n")


def stream_to_pulsar(spark: Any, service: PulsarService, source: Path, topic: str,
                     checkpoint: Path, **options: str) -> None:
    frame = (spark.readStream.format("json").schema("value string, key string, n long")
             .option("maxFilesPerTrigger", "1").load(str(source))
             .selectExpr("value", "key", "map('n', cast(n as string)) as properties"))
    writer = (frame.writeStream.format("pulsar").option("service_url", service.url)
              .option("topic", topic).option("checkpointLocation", str(checkpoint)))
    for name, value in options.items():
        writer = writer.option(name, value)
    query = writer.trigger(availableNow=True).start()
    # False once its time is up: a query still running must fail here, not as missing rows.
    assert query.awaitTermination(240), "not done in 240 s"
    assert query.exception() is None


def forget_commit(checkpoint: Path, batch: int) -> None:
    """Delete the record that micro-batch ``batch`` was committed (and its checksum file)."""
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)


def stored(service: PulsarService, topic: str) -> list[tuple[str, str, str]]:
    """(value, key, producer name) of every message in ``topic``, in order."""

    async def read() -> list[tuple[str, str, str]]:
        async with PulsarClient(service.url) as client:
            consumer = await client.subscribe(topic, f"check-{next(_names)}", durable=False,
                                              initial_position="earliest")
            last = await consumer.get_last_message_id()
            out: list[tuple[str, str, str]] = []
            while last.entry_id() >= 0:
                msg = await consumer.receive(timeout_millis=10_000)
                out.append((msg.data().decode(), msg.partition_key(), msg.producer_name()))
                mid = msg.message_id()
                if (mid.ledger_id(), mid.entry_id()) == (last.ledger_id(), last.entry_id()) \
                        and mid.batch_index() >= max(last.batch_index(), 0):
                    break
            await consumer.close()
            return out

    return asyncio.run(read())


@ON_BOTH_BROKERS
def test_streaming_write_is_exactly_once_when_a_batch_runs_again(
        spark: Any, pulsar_service: PulsarService, tmp_path: Path) -> None:
    namespace = pulsar_service.deduplicated_namespace()
    topic = f"persistent://{namespace}/spark-sink-{next(_names)}"
    source = tmp_path / "in"
    checkpoint = tmp_path / "checkpoint"
    write_inputs(source, files=3, rows=5)
    stream_to_pulsar(spark, pulsar_service, source, topic, checkpoint)
    first = stored(pulsar_service, topic)
    assert sorted(v for v, _, _ in first) == sorted(f"f{f}-r{r}" for f in range(3)
                                                   for r in range(5))
    assert {k for _, k, _ in first} == {"k0", "k1", "k2"}

    # Forget that batch 2 was committed: the restarted query runs it again, sending its five
    # rows under the same producer names and sequence ids, and the broker drops them.
    forget_commit(checkpoint, 2)
    stream_to_pulsar(spark, pulsar_service, source, topic, checkpoint)
    assert (checkpoint / "commits" / "2").exists()
    assert stored(pulsar_service, topic) == first

    # New input continues in later batches.
    write_inputs(tmp_path / "more", files=1, rows=4)
    shutil.copy(tmp_path / "more" / "part-000.json", source / "part-100.json")
    stream_to_pulsar(spark, pulsar_service, source, topic, checkpoint)
    assert len(stored(pulsar_service, topic)) == 19

    # Control: the same re-run under another prefix is not recognised as a repeat.
    forget_commit(checkpoint, 3)
    stream_to_pulsar(spark, pulsar_service, source, topic, checkpoint,
                     producer_name_prefix="another-writer")
    assert len(stored(pulsar_service, topic)) == 23


def test_stream_prefix_is_stable_per_checkpoint_and_topic() -> None:
    options = {"topic": "t", "checkpointLocation": "/ck/a"}
    assert stream_prefix(options) == stream_prefix(dict(options))
    assert stream_prefix(options) != stream_prefix({**options, "topic": "u"})
    assert stream_prefix({**options, "producer_name_prefix": "mine"}) == "mine"
    with pytest.raises(ValueError, match="checkpointLocation"):
        stream_prefix({"topic": "t"})


@ON_BOTH_BROKERS
def test_retried_batch_write_task_is_dropped_by_dedup(pulsar_service: PulsarService) -> None:
    """What a retried task attempt does: the same producer name sends the same rows again."""
    import pyarrow as pa

    namespace = pulsar_service.deduplicated_namespace()
    topic = f"persistent://{namespace}/spark-retry-{next(_names)}"
    options = {"service_url": pulsar_service.url, "topic": topic}
    batch = pa.RecordBatch.from_pydict({"value": [b"a", b"b", b"c"]})
    assert asyncio.run(write_rows(options, "job-0", iter([batch]))) == 3
    assert asyncio.run(write_rows(options, "job-0", iter([batch]))) == 3
    assert [v for v, _, _ in stored(pulsar_service, topic)] == ["a", "b", "c"]
    # A later micro-batch's ids are above every id of the batch before.
    more = pa.RecordBatch.from_pydict({"value": [b"d"]})
    asyncio.run(write_rows(options, "job-0", iter([more]), BATCH_SEQUENCE_SPAN))
    assert [v for v, _, _ in stored(pulsar_service, topic)] == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="at most 2 rows"):
        asyncio.run(write_rows(options, "job-1", iter([batch]), 0, max_rows=2))
