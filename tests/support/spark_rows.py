"""Spark row helpers for the tests of the generated Spark codecs and of the pipeline: rows as
``DataFrame.collect()`` hands them back, and a made-up frame spec with every field kind
``spark.py`` maps. It imports pyspark: import it only after ``pytest.importorskip("pyspark")``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Row
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

DEMO_YAML = """\
protocol: demo
doc: A made-up protocol with every frame field kind spark.py maps.
byte_order: big
structs:
  Item:
    fields:
      - {name: tag, type: u8}
      - {name: weight, type: i16}
  Hello:
    fields:
      - {name: id, type: uuid}
      - {name: small, type: i8}
      - {name: medium, type: u16}
      - {name: signed, type: i32}
      - {name: wide, type: u32}
      - {name: big, type: i64}
      - {name: huge, type: u64}
      - {name: var, type: varint}
      - {name: flag, type: bool}
      - {name: name, type: string, prefix: u16}
      - {name: blob, type: bytes, prefix: u32}
      - {name: count, type: u16, count_of: numbers}
      - {name: numbers, type: array, of: u64}
      - {name: item_count, type: u8, count_of: items}
      - {name: items, type: array, of: Item}
      - {name: has_extra, type: u8}
      - {name: extra, type: u32, when: "has_extra != 0"}
  Bye:
    fields:
      - {name: reason, type: string, size: rest}
frame:
  name: Frame
  fields:
    - {name: size, type: u32, size_of: rest}
    - {name: kind, type: u8}
    - {name: body, type: switch, on: kind, cases: {1: Hello, 2: Bye}}
"""


def spark_shaped(value: Any, data_type: DataType) -> Any:
    """A to_row value as ``DataFrame.collect()`` returns it: structs as Row objects."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return Row(**{f.name: spark_shaped(value[f.name], f.dataType) for f in data_type.fields})
    if isinstance(data_type, ArrayType):
        return [spark_shaped(v, data_type.elementType) for v in value]
    if isinstance(data_type, MapType):
        return {k: spark_shaped(v, data_type.valueType) for k, v in value.items()}
    return value
