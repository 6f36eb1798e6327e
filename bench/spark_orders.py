"""Protobuf values decoded in Spark: ours against Spark's ``from_protobuf`` (bench spark_decode).

The values are the demo's ``demo.events.OrderPlaced`` events (specs/demo/events.proto, proto3),
one binary column ``value`` in a Parquet file. Both decoders produce one struct column
``order`` of the same type (``generated.demo.spark.OrderPlaced.spark_schema``):

* ours (columnar): ``mapInArrow``, each Arrow batch's binary column decoded straight into
  the struct column's buffers by ``runtime.spark.columnar.decode_column`` (the C extension
  ``_columnar``; no Python object per value);
* ours (row path): ``mapInArrow``, each value decoded with the generated
  ``OrderPlaced.decode`` and the values turned into a struct column by the generated
  ``RowCodec`` (what ours did before the columnar path);
* from_protobuf: Spark's JVM codec from the spark-protobuf package, given the descriptor set
  of the same .proto (the generated module's ``FILE_DESCRIPTOR_SET``), with
  ``emit.default.values`` so that proto3 fields holding their default (an empty ``items``, a
  zero amount) are the default, as in ours, rather than null.

Only the nullability of the fields differs: from_protobuf makes every field nullable.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MESSAGE = "demo.events.OrderPlaced"
CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF")


def order_values(count: int) -> list[bytes]:
    """``count`` distinct encoded OrderPlaced events (0 to 3 items, some amounts zero)."""
    from protoframe.generated.demo.events import OrderPlaced

    return [OrderPlaced(
        order_id=f"o-{i:06d}", customer=f"customer-{i % 977}",
        amount_cents=0 if i % 50 == 0 else 199 + 37 * i, currency=CURRENCIES[i % 5],
        items=[f"sku-{(i + k) % 1000:04d}" for k in range(i % 4)],
        placed_at_ms=1_700_000_000_000 + 1_000 * i).encode() for i in range(count)]


def write_values(path: Path, count: int, values: list[bytes]) -> None:
    """A Parquet file with ``count`` rows of one binary column ``value``, ``values`` cycled."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.array([values[i % len(values)] for i in range(count)], pa.binary())
    pq.write_table(pa.table({"value": column}), path, row_group_size=128 * 1024)


def write_descriptor_set(path: Path) -> Path:
    """The FileDescriptorSet of events.proto, as ``protoc --descriptor_set_out`` writes it."""
    from protoframe.generated.demo import events

    path.write_bytes(base64.b64decode("".join(events.FILE_DESCRIPTOR_SET)))
    return path


def decode_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function of ours, columnar: ``value`` batches -> ``order`` batches."""
    import pyarrow as pa

    from protoframe.generated.demo import spark as demo_spark
    from protoframe.runtime.spark.columnar import decode_column

    codec = demo_spark.OrderPlaced
    for batch in batches:
        yield pa.RecordBatch.from_arrays([decode_column(codec, batch.column(0))],
                                         names=["order"])


def decode_batches_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function of ours, row path: a decoded value per row first."""
    import pyarrow as pa

    from protoframe.generated.demo import spark as demo_spark
    from protoframe.generated.demo.events import OrderPlaced

    codec = demo_spark.OrderPlaced
    decode = OrderPlaced.decode
    for batch in batches:
        orders = [decode(v) for v in batch.column(0).to_pylist()]
        yield pa.RecordBatch.from_arrays([codec.to_arrow(orders)], names=["order"])


def ours(df: Any, columnar: bool = True) -> Any:
    from pyspark.sql.types import StructField, StructType

    from protoframe.generated.demo import spark as demo_spark

    schema = StructType([StructField("order", demo_spark.OrderPlaced.spark_schema, True)])
    return df.mapInArrow(decode_batches if columnar else decode_batches_rows, schema)


def from_protobuf(df: Any, descriptor_set: Path) -> Any:
    from pyspark.sql.protobuf.functions import from_protobuf as spark_from_protobuf

    return df.select(spark_from_protobuf(
        "value", MESSAGE, descFilePath=str(descriptor_set),
        options={"emit.default.values": "true"}).alias("order"))


def without_nullability(data_type: Any) -> str:
    """A Spark type's simple string, which leaves out whether fields may be null."""
    text: str = data_type.simpleString()
    return text
