"""The pieces of ``bench spark_decode``'s protobuf comparison that run without fetching anything:
the values, the descriptor set from_protobuf is given, ours as a ``mapInArrow`` function, and
what the spark-protobuf resolver reports.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from bench import spark_orders, spark_protobuf  # noqa: E402
from protoframe.generated.demo import spark as demo_spark  # noqa: E402
from protoframe.generated.demo.events import OrderPlaced  # noqa: E402


def test_values_are_distinct_and_cover_defaults() -> None:
    values = spark_orders.order_values(200)
    assert len(set(values)) == 200
    orders = [OrderPlaced.decode(v) for v in values]
    assert any(o.amount_cents == 0 for o in orders)  # proto3 defaults are not on the wire
    assert {len(o.items) for o in orders} == {0, 1, 2, 3}


def test_descriptor_set_describes_order_placed(tmp_path: Path) -> None:
    from google.protobuf import descriptor_pb2

    path = spark_orders.write_descriptor_set(tmp_path / "events.desc")
    files = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file
    (events,) = [f for f in files if f.name == "events.proto"]
    (message,) = [m for m in events.message_type if m.name == "OrderPlaced"]
    assert events.package + "." + message.name == spark_orders.MESSAGE
    assert [f.name for f in message.field] == [
        f.name for f in demo_spark.OrderPlaced.spark_schema.fields]


def test_decode_batches_gives_the_codec_rows() -> None:
    values = spark_orders.order_values(50)
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["value"])
    (out,) = list(spark_orders.decode_batches(iter([batch])))
    rows = out.column(0).to_pylist()
    assert rows == [demo_spark.OrderPlaced.to_row(OrderPlaced.decode(v)) for v in values]
    assert out.schema.field("order").type == demo_spark.OrderPlaced.arrow_type


def test_parquet_cycles_the_values(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    values = spark_orders.order_values(7)
    spark_orders.write_values(tmp_path / "v.parquet", 30, values)
    column = pq.read_table(tmp_path / "v.parquet").column("value").to_pylist()
    assert column == [values[i % 7] for i in range(30)]


def test_coordinate_follows_the_installed_pyspark() -> None:
    import pyspark

    coordinate = spark_protobuf.coordinate()
    assert re.fullmatch(r"org\.apache\.spark:spark-protobuf_2\.1[0-9]:" + re.escape(
        pyspark.__version__), coordinate), coordinate


def test_session_conf_only_when_resolved() -> None:
    ready = spark_protobuf.Package("g:a:1", None)
    assert ready.session_conf()["spark.jars.packages"] == "g:a:1"
    assert spark_protobuf.Package("g:a:1", "no network").session_conf() == {}


def test_a_local_build_is_loaded_by_path(tmp_path: Path, monkeypatch: Any) -> None:
    jar, runtime = tmp_path / "spark-protobuf.jar", tmp_path / "protobuf-java.jar"
    jar.write_bytes(b"PK")
    runtime.write_bytes(b"PK")
    monkeypatch.setenv(spark_protobuf.LOCAL_JARS_ENV, f"{jar},{runtime}")
    package = spark_protobuf.resolve()
    assert package.error is None
    assert package.session_conf() == {"spark.jars": f"{jar},{runtime}"}
    assert "spark-protobuf.jar" in package.coordinate
    monkeypatch.setenv(spark_protobuf.LOCAL_JARS_ENV, f"{jar},{tmp_path / 'gone.jar'}")
    missing = spark_protobuf.resolve()
    assert missing.error is not None and "gone.jar" in missing.error
    assert missing.session_conf() == {}


def test_error_summary_keeps_the_reason() -> None:
    output = "\n".join([
        ":: resolving dependencies :: org.apache.spark#spark-submit-parent;1.0",
        "\tconfs: [default]",
        ":: UNRESOLVED DEPENDENCIES ::",
        "Exception in thread \"main\" java.lang.RuntimeException: [unresolved dependency: "
        "org.apache.spark#spark-protobuf_2.13;9.9.9: not found]",
    ])
    summary = spark_protobuf.error_summary(output)
    assert "unresolved dependency: org.apache.spark#spark-protobuf_2.13;9.9.9" in summary
    assert "confs" not in summary
    assert spark_protobuf.error_summary("\n\nlast words\n") == "last words"


def test_ours_in_spark(spark: Any, tmp_path: Path) -> None:
    values = spark_orders.order_values(40)
    spark_orders.write_values(tmp_path / "v.parquet", 100, values)
    df = spark_orders.ours(spark.read.parquet(str(tmp_path / "v.parquet")))
    rows = [r["order"].asDict(recursive=True) for r in df.collect()]
    assert rows == [demo_spark.OrderPlaced.to_row(OrderPlaced.decode(values[i % 40]))
                    for i in range(100)]
