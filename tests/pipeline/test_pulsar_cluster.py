"""``format("pulsar")`` on a Spark standalone cluster: a master and two workers, each its own JVM
(tests/support/spark_cluster.py), so that the data source's tasks run in two executor JVMs and
their Python workers, which connect to the broker over TCP, as they would on a real cluster.

Every row carries where its task ran (``executor_of_this_process``, a UDF evaluated in the same
task as the read or the write), and each test checks that two executors of this application
did the work, each a JVM started by one of the cluster's workers, neither the driver's JVM nor
this process: in local mode every task runs in the driver's JVM, and these tests fail.
They run against the embedded broker only, to bound their time: each costs tens of seconds on
a loaded machine.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from tests.support.spark import skip_module_without_java  # noqa: E402

skip_module_without_java()

if not Path("/proc/self/status").exists():
    pytest.skip("telling executor JVMs apart reads /proc (Linux)", allow_module_level=True)

from pyspark.sql.functions import create_map, lit, udf  # noqa: E402

from protoframe.clients.pulsar.broker import BrokerThread  # noqa: E402
from protoframe.generated.demo import spark as demo_rows  # noqa: E402
from protoframe.generated.demo.events import OrderPlaced  # noqa: E402
from tests.support.demo_orders import orders, produce, produce_numbered  # noqa: E402
from tests.support.spark_cluster import (  # noqa: E402
    SparkCluster,
    executor_of_this_process,
    jvm_pid,
)

# pytest-timeout counts the session fixtures' start against the first test: three JVMs for the
# cluster, then the driver's and two executors', minutes in all on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

_names = itertools.count()
T = TypeVar("T")
SLOW_PYTHON_START = "Timed out while waiting for the Python worker to connect back"


@pytest.fixture(scope="module")
def embedded_broker() -> Iterator[BrokerThread]:
    with BrokerThread() as thread:
        yield thread


def retried(action: Callable[[], T]) -> T:
    """``action()``, run again (twice at most) when the driver's Python planner or streaming
    source did not connect back to its JVM within Spark's fixed 10 s: a loaded machine, not the
    data source (a task that fails on an executor Spark retries itself)."""
    for attempt in range(3):
        try:
            return action()
        except Exception as error:
            if SLOW_PYTHON_START not in str(error) or attempt == 2:
                raise
            warnings.warn(f"retrying: {SLOW_PYTHON_START}", stacklevel=2)
    raise AssertionError("unreachable")


def where() -> Any:
    """A column: where the task computing the row ran (``executor_of_this_process``)."""
    return udf(executor_of_this_process, "string").asNondeterministic()()


def spark_map_of_executor() -> Any:
    return create_map(lit("executor"), where()).alias("properties")


@dataclass(frozen=True)
class Executor:
    """One executor, as a task saw it: its id, its JVM's pid, its working directory."""

    id: str
    jvm: int
    directory: Path

    @classmethod
    def parse(cls, text: str) -> Executor:
        found = json.loads(text)
        return cls(found["executor"], found["jvm"], Path(found["cwd"]))


def parent_pid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def assert_ran_on_two_executors(spark: Any, cluster: SparkCluster, seen: set[str]) -> None:
    """The tasks behind ``seen`` (values of ``where()``) ran in two executor JVMs of this
    application, each started by a different worker of ``cluster``, none of them the driver."""
    executors = {Executor.parse(text) for text in seen}
    assert len({e.id for e in executors}) >= 2, executors
    assert len({e.jvm for e in executors}) == len({e.id for e in executors}), executors
    app = cluster.work_dir / spark.sparkContext.applicationId
    assert all(e.directory == app / e.id for e in executors), (app, executors)
    assert not {e.jvm for e in executors} & {jvm_pid(spark), os.getpid()}
    workers = {process.pid for process in cluster.processes[1:]}
    parents = {parent_pid(e.jvm) for e in executors}
    assert parents <= workers and len(parents) >= 2, (parents, workers)


def test_batch_read_on_two_executors(cluster_spark: Any, spark_cluster: SparkCluster,
                                     embedded_broker: BrokerThread) -> None:
    spark, pulsar = cluster_spark, embedded_broker
    topic = pulsar.create_partitioned_topic(
        f"persistent://public/default/cluster-read-{next(_names)}", 2)
    sent = orders(200)
    asyncio.run(produce(pulsar.url, topic, sent))

    rows = retried(lambda: spark.read.format("pulsar").option("service_url", pulsar.url)
                   .option("topic", topic).option("read_timeout_ms", "30000")
                   .option("value_type", OrderPlaced.FULL_NAME).load()
                   .withColumn("executor", where()).collect())
    by_n = {int(r.properties["n"]): r for r in rows}
    assert len(rows) == len(sent) and sorted(by_n) == list(range(len(sent)))
    for n, row in by_n.items():
        assert row.value == sent[n].encode()
        assert demo_rows.OrderPlaced.from_row(row.decoded) == sent[n]
    # One task per topic partition, each in one executor, the two in different ones.
    per_partition = {p: {r.executor for r in rows if r.partition == p} for p in (0, 1)}
    assert all(len(places) == 1 for places in per_partition.values()), per_partition
    assert_ran_on_two_executors(spark, spark_cluster, {r.executor for r in rows})


def test_streaming_read_on_two_executors(cluster_spark: Any, spark_cluster: SparkCluster,
                                         embedded_broker: BrokerThread, tmp_path: Path) -> None:
    spark, pulsar = cluster_spark, embedded_broker
    topic = pulsar.create_partitioned_topic(
        f"persistent://public/default/cluster-stream-{next(_names)}", 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    asyncio.run(produce_numbered(pulsar.url, topic, 0, 40))

    def run() -> Any:
        query = (spark.readStream.format("pulsar").option("service_url", pulsar.url)
                 .option("topic", topic).option("read_timeout_ms", "30000").load()
                 .selectExpr("cast(properties['n'] as int) as n", "partition")
                 .withColumn("executor", where())
                 .writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        if query.exception() is not None:
            raise query.exception()
        return query

    # A run again after a failed start goes on from the checkpoint (the file sink commits a
    # micro-batch once), so the rows below are those of one run either way.
    query = retried(run)
    assert sum(p["numInputRows"] for p in query.recentProgress) <= 40
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.n for r in rows) == list(range(40))
    assert_ran_on_two_executors(spark, spark_cluster, {r.executor for r in rows})


def test_write_on_two_executors(cluster_spark: Any, spark_cluster: SparkCluster,
                                embedded_broker: BrokerThread) -> None:
    spark, pulsar = cluster_spark, embedded_broker
    source = pulsar.create_partitioned_topic(
        f"persistent://public/default/cluster-src-{next(_names)}", 2)
    target = f"persistent://public/default/cluster-dst-{next(_names)}"
    sent = orders(120)
    asyncio.run(produce(pulsar.url, source, sent))

    def read(topic: str) -> Any:
        return (spark.read.format("pulsar").option("service_url", pulsar.url)
                .option("topic", topic).option("read_timeout_ms", "30000").load())

    # The property says which executor's task wrote the message (the UDF runs in that task).
    retried(lambda: read(source).select("key", "value", spark_map_of_executor())
            .write.format("pulsar").option("service_url", pulsar.url).option("topic", target)
            .mode("append").save())
    back = retried(lambda: read(target).collect())
    assert sorted((r.key, r.value) for r in back) == sorted(
        (o.customer.encode(), o.encode()) for o in sent)
    # One producer per write task.
    assert len({r.producer_name for r in back}) == 2
    assert_ran_on_two_executors(spark, spark_cluster, {r.properties["executor"] for r in back})
