"""Generated Spark schemas and row/Arrow conversions (generated/<protocol>/spark.py).

- schemas follow the documented type mapping (uint64 as DecimalType(20, 0), enums as names,
  nullability from presence) and the Arrow schemas are exactly what Spark derives from them;
- for every Pulsar message, hypothesis values survive message -> row -> message and
  messages -> RecordBatch -> messages, and rows shaped as Spark returns them (Row objects);
- unknown enum numbers stay visible and are written back; bad rows raise RowError;
- a real local Spark session takes rows and Arrow tables with the generated schemas and
  gives back equal values.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from protoframe.generated.pulsar import frames, pulsar_api  # noqa: E402
from protoframe.generated.pulsar import spark as pulsar_spark  # noqa: E402
from protoframe.generator.build import generate  # noqa: E402
from protoframe.generator.output import write_files  # noqa: E402
from protoframe.runtime.spark.rows import RowCodec, RowError  # noqa: E402
from tests.support.generate import generate_package, import_generated  # noqa: E402
from tests.support.official import official_module  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.support.proto_values import build_ours, class_index, message_values  # noqa: E402
from tests.support.spark_rows import DEMO_YAML, spark_shaped  # noqa: E402

pytestmark = pytest.mark.spark  # needs the spark extra; some tests start a Spark session

VECTORS = ROOT / "tests" / "data" / "pulsar_vectors"
PB = official_module("pulsar", "PulsarApi.proto")
OURS = class_index(pulsar_api)


def _descriptors() -> list[Any]:
    out: list[Any] = []

    def walk(desc: Any) -> None:
        if desc.GetOptions().map_entry:
            return
        out.append(desc)
        for nested in desc.nested_types:
            walk(nested)

    for desc in PB.DESCRIPTOR.message_types_by_name.values():
        walk(desc)
    return out


DESCRIPTORS = _descriptors()


def _message(desc: Any, tree: dict[str, Any]) -> Any:
    """Our message for a value tree, normalized as decoding makes it (enum members, not ints)."""
    msg = build_ours(OURS, desc, tree)
    return type(msg).decode(msg.encode())


# --- generated packages outside generated/ --------------------------------------------------


CLOSED_PROTO = """\
syntax = "proto2";
package closed.v1;

enum Mode {
    A = 0;
    B = 1;
}

message Closed {
    optional Mode one = 1;
    repeated Mode many = 2;
    required Mode must = 3;
    required uint64 big = 4;
    optional Closed again = 5;
    repeated Closed more = 6;
}
"""



def _generate_inline(tmp: Path, protocol: str, files: dict[str, str], package: str) -> None:
    spec_dir = tmp / "specs" / protocol
    spec_dir.mkdir(parents=True)
    for name, text in files.items():
        (spec_dir / name).write_text(text)
    out = generate(tmp / "specs", "specs", [protocol])
    write_files(tmp / package, out.files, out.protocols)


@pytest.fixture(scope="module")
def proto3(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("spark_proto3")
    generate_package(tmp, "proto3", "spark_proto3_pkg")
    return import_generated(tmp, "proto3.spark", "spark_proto3_pkg")


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("spark_closed")
    _generate_inline(tmp, "closed", {"closed.proto": CLOSED_PROTO}, "spark_closed_pkg")
    return import_generated(tmp, "closed.spark", "spark_closed_pkg")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("spark_demo")
    _generate_inline(tmp, "demo", {"demo.yaml": DEMO_YAML}, "spark_demo_pkg")
    return import_generated(tmp, "demo.spark", "spark_demo_pkg")


def _module_of(spark_module: ModuleType, name: str) -> ModuleType:
    """A sibling of a generated spark module (it imports them: ``from . import frames``)."""
    module = getattr(spark_module, name)
    assert isinstance(module, ModuleType)
    return module


# --- schemas ----------------------------------------------------------------------------------


def _field(schema: StructType, name: str) -> tuple[DataType, bool]:
    f = schema[name]
    return f.dataType, f.nullable


def test_message_id_data_schema_follows_the_mapping() -> None:
    schema = pulsar_spark.MessageIdData.spark_schema
    assert _field(schema, "ledgerId") == (DecimalType(20, 0), False)
    assert _field(schema, "entryId") == (DecimalType(20, 0), False)
    assert _field(schema, "partition") == (IntegerType(), True)
    assert _field(schema, "batch_index") == (IntegerType(), True)
    assert _field(schema, "ack_set") == (ArrayType(LongType(), False), False)
    # A MessageIdData inside a MessageIdData: Spark schemas cannot recurse, so it is bytes.
    assert _field(schema, "first_chunk_message_id") == (BinaryType(), True)


def test_pulsar_schemas_name_fields_as_the_proto_does() -> None:
    command = pulsar_spark.BaseCommand.spark_schema
    assert _field(command, "type") == (StringType(), False)  # an enum, required
    assert _field(command, "send") == (pulsar_spark.CommandSend.spark_schema, True)
    send = pulsar_spark.CommandSend.spark_schema
    assert _field(send, "producer_id") == (DecimalType(20, 0), False)
    assert _field(send, "message_id") == (pulsar_spark.MessageIdData.spark_schema, True)
    metadata = pulsar_spark.MessageMetadata.spark_schema
    assert _field(metadata, "compression") == (StringType(), True)
    assert _field(metadata, "properties") == (
        ArrayType(pulsar_spark.KeyValue.spark_schema, False), False)
    assert _field(metadata, "uncompressed_size") == (LongType(), True)  # uint32
    frame = pulsar_spark.FRAME.spark_schema
    assert _field(frame, "command") == (command, False)
    payload = pulsar_spark.Payload.spark_schema
    assert _field(frame, "payload") == (payload, True)
    assert [f.name for f in payload.fields] == ["broker_entry", "metadata", "data"]


def test_proto3_scalars_follow_the_mapping(proto3: ModuleType) -> None:
    expected = {
        "d": DoubleType(), "f": FloatType(), "i64": LongType(), "u64": DecimalType(20, 0),
        "i32": IntegerType(), "fx64": DecimalType(20, 0), "fx32": LongType(),
        "b": BooleanType(), "s": StringType(), "raw": BinaryType(), "u32": LongType(),
        "sfx32": IntegerType(), "sfx64": LongType(), "si32": IntegerType(),
        "si64": LongType(), "colour": StringType(),
    }
    schema = proto3.Scalars.spark_schema
    assert {f.name: f.dataType for f in schema.fields} == expected
    assert not any(f.nullable for f in schema.fields)  # implicit presence: always a value
    holder = proto3.Holder.spark_schema
    assert _field(holder, "maybe") == (IntegerType(), True)  # proto3 `optional`
    assert _field(holder, "counts") == (MapType(StringType(), LongType(), False), False)
    assert _field(holder, "inners") == (
        MapType(IntegerType(), proto3.Inner.spark_schema, False), False)
    assert _field(holder, "text") == (StringType(), True)  # oneof member
    assert _field(holder, "colours") == (ArrayType(StringType(), False), False)
    assert [f.name for f in holder.fields][-3:] == ["from", "type", "encode"]


def test_frame_kinds_follow_the_mapping(demo: ModuleType) -> None:
    hello = demo.Hello.spark_schema
    expected = {
        "id": StringType(), "small": IntegerType(), "medium": IntegerType(),
        "signed": IntegerType(), "wide": LongType(), "big": LongType(),
        "huge": DecimalType(20, 0), "var": DecimalType(20, 0), "flag": BooleanType(),
        "name": StringType(), "blob": BinaryType(),
        "numbers": ArrayType(DecimalType(20, 0), False),
        "items": ArrayType(demo.Item.spark_schema, False), "has_extra": IntegerType(),
        "extra": LongType(),
    }
    assert {f.name: f.dataType for f in hello.fields} == expected
    assert [f.name for f in hello.fields if f.nullable] == ["extra"]  # conditional
    body = demo.FRAME.spark_schema["body"].dataType
    assert [(f.name, f.nullable) for f in body.fields] == [("Hello", True), ("Bye", True)]


def _generated_spark_modules() -> list[ModuleType]:
    import importlib

    out = []
    for path in sorted((ROOT / "generated").glob("*/spark.py")):
        out.append(importlib.import_module(f"protoframe.generated.{path.parent.name}.spark"))
    return out


def _codecs(module: ModuleType) -> list[RowCodec[Any]]:
    return [*module.MESSAGES.values(), *module.STRUCTS.values()]


def test_arrow_schemas_are_the_ones_spark_derives(proto3: ModuleType, closed: ModuleType,
                                                  demo: ModuleType) -> None:
    modules = [*_generated_spark_modules(), proto3, closed, demo]
    checked = 0
    for module in modules:
        for codec in _codecs(module):
            assert codec.arrow_schema.equals(to_arrow_schema(codec.spark_schema)), codec.name
            checked += 1
    assert checked > 100


def test_every_message_and_frame_struct_has_a_codec() -> None:
    assert set(pulsar_spark.MESSAGES) == {d.full_name for d in DESCRIPTORS}
    assert set(pulsar_spark.STRUCTS) == {"BrokerEntry", "Payload", "BatchEntry", "Batch",
                                         "Frame"}
    assert pulsar_spark.FRAME is pulsar_spark.STRUCTS["Frame"]
    for name, codec in pulsar_spark.MESSAGES.items():
        assert codec.python_type.FULL_NAME == name


def test_nothing_else_in_generated_imports_the_spark_module() -> None:
    pattern = re.compile(r"^\s*(from|import)\s.*\bspark\b", re.M)
    for path in (ROOT / "generated").rglob("*.py"):
        if path.name != "spark.py":
            assert not pattern.search(path.read_text()), path


def test_generation_is_deterministic(tmp_path: Path) -> None:
    spec = tmp_path / "specs"
    shutil.copytree(ROOT / "specs" / "pulsar", spec / "pulsar")
    first = generate(spec, "specs", ["pulsar"]).files["pulsar/spark.py"]
    assert generate(spec, "specs", ["pulsar"]).files["pulsar/spark.py"] == first
    assert first == (ROOT / "generated" / "pulsar" / "spark.py").read_text()


# --- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: d.full_name.split(".", 2)[-1])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_message_row_message(desc: Any, data: st.DataObject) -> None:
    msg = _message(desc, data.draw(message_values(desc)))
    codec = pulsar_spark.MESSAGES[desc.full_name]
    row = codec.to_row(msg)
    assert list(row) == codec.spark_schema.fieldNames()
    assert codec.from_row(row) == msg
    assert codec.from_row(spark_shaped(row, codec.spark_schema)) == msg


@pytest.mark.parametrize("desc", DESCRIPTORS, ids=lambda d: d.full_name.split(".", 2)[-1])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_messages_record_batch_messages(desc: Any, data: st.DataObject) -> None:
    msgs = [_message(desc, t) for t in data.draw(st.lists(message_values(desc), max_size=4))]
    codec = pulsar_spark.MESSAGES[desc.full_name]
    batch = codec.to_record_batch(msgs)
    assert batch.schema.equals(codec.arrow_schema)
    assert batch.num_rows == len(msgs)
    assert codec.from_record_batch(batch) == msgs
    # A column with null rows (an optional field somewhere up) keeps them in place, and
    # stays valid for a strict cast: no nulls in non-nullable fields, even below a null.
    column = codec.to_arrow([None, *msgs, None])
    assert codec.from_arrow(column) == [None, *msgs, None]
    column.validate(full=True)
    pa.table({"c": column}).cast(pa.schema([pa.field("c", codec.arrow_type)]))


def _frame_values() -> st.SearchStrategy[frames.Frame]:
    command = message_values(PB.BaseCommand.DESCRIPTOR).map(
        lambda t: _message(PB.BaseCommand.DESCRIPTOR, t))
    metadata = message_values(PB.MessageMetadata.DESCRIPTOR).map(
        lambda t: _message(PB.MessageMetadata.DESCRIPTOR, t))
    broker = message_values(PB.BrokerEntryMetadata.DESCRIPTOR).map(
        lambda t: _message(PB.BrokerEntryMetadata.DESCRIPTOR, t))
    payload = st.builds(
        frames.Payload, metadata=metadata, data=st.binary(max_size=20),
        broker_entry=st.none() | broker.map(lambda m: frames.BrokerEntry(metadata=m)))
    return st.builds(frames.Frame, command=command, payload=st.none() | payload)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_frame_values(), max_size=4))
def test_frames_round_trip(values: list[frames.Frame]) -> None:
    codec = pulsar_spark.FRAME
    for frame in values:
        assert codec.from_row(codec.to_row(frame)) == frame
    assert codec.from_record_batch(codec.to_record_batch(values)) == values


def test_peer_vectors_round_trip() -> None:
    codec = pulsar_spark.FRAME
    for name in ("rs_payload_send.bin", "rs_simple_connect.bin"):
        frame = frames.Frame.decode((VECTORS / name).read_bytes())
        assert codec.from_row(codec.to_row(frame)) == frame
        assert pulsar_spark.decode_frame((VECTORS / name).read_bytes()) == (frame, None)
    send = frames.Frame.decode((VECTORS / "rs_payload_send.bin").read_bytes())
    assert pulsar_spark.command_name(send) == "SEND"
    row = codec.to_row(send)
    assert row["command"]["type"] == "SEND"
    assert isinstance(row["payload"]["metadata"]["sequence_id"], Decimal)


def test_uint64_extremes_are_exact() -> None:
    mid = pulsar_api.MessageIdData(ledgerId=2**64 - 1, entryId=2**63, partition=-1)
    row = pulsar_spark.MessageIdData.to_row(mid)
    assert row["ledgerId"] == Decimal(2**64 - 1) and row["entryId"] == Decimal(2**63)
    batch = pulsar_spark.MessageIdData.to_record_batch([mid])
    assert batch.column("ledgerId").type == pa.decimal128(20, 0)
    assert batch.column("ledgerId")[0].as_py() == Decimal(2**64 - 1)
    assert pulsar_spark.MessageIdData.from_record_batch(batch) == [mid]


def test_unset_optional_fields_are_null_not_their_default() -> None:
    mid = pulsar_api.MessageIdData(ledgerId=1, entryId=2)
    assert mid.partition == -1 and not mid.has_partition()
    row = pulsar_spark.MessageIdData.to_row(mid)
    assert row["partition"] is None
    back = pulsar_spark.MessageIdData.from_row(row)
    assert not back.has_partition() and back == mid


def test_recursive_field_is_the_protobuf_encoding() -> None:
    first = pulsar_api.MessageIdData(ledgerId=7, entryId=8)
    mid = pulsar_api.MessageIdData(ledgerId=1, entryId=2, first_chunk_message_id=first)
    row = pulsar_spark.MessageIdData.to_row(mid)
    assert row["first_chunk_message_id"] == first.encode()
    assert pulsar_spark.MessageIdData.from_row(row) == mid


# --- enums ----------------------------------------------------------------------------------------


def test_closed_enum_unknown_numbers_stay_visible(closed: ModuleType) -> None:
    pb = _module_of(closed, "closed")
    # one = 9, many = [1, 9, 0], must = 1, big = 5: 9 is not a Mode.
    data = bytes.fromhex("0809 1001 1009 1000 1801 2005")
    msg = pb.Closed.decode(data)
    assert not msg.has_one() and msg.many == [pb.Mode.B, pb.Mode.A]
    row = closed.Closed.to_row(msg)
    assert row["one"] == "9" and row["many"] == ["B", "A", "9"] and row["must"] == "B"
    back = closed.Closed.from_row(row)
    assert back.encode() == msg.encode()
    batch = closed.Closed.to_record_batch([msg, back])
    assert batch.column("one").to_pylist() == ["9", "9"]
    assert batch.column("many").to_pylist() == [["B", "A", "9"]] * 2
    assert [m.encode() for m in closed.Closed.from_record_batch(batch)] == [msg.encode()] * 2


def test_closed_enum_recursion_and_lists_of_recursive_messages(closed: ModuleType) -> None:
    pb = _module_of(closed, "closed")
    inner = pb.Closed(must=pb.Mode.A, big=1)
    msg = pb.Closed(must=pb.Mode.B, big=2**64 - 1, again=inner, more=[inner, inner])
    row = closed.Closed.to_row(msg)
    assert row["again"] == inner.encode() and row["more"] == [inner.encode()] * 2
    assert closed.Closed.from_row(row) == msg
    assert closed.Closed.from_record_batch(closed.Closed.to_record_batch([msg])) == [msg]


def test_open_enum_unknown_numbers_are_decimal_text(proto3: ModuleType) -> None:
    sample = _module_of(proto3, "sample3")
    scalars = sample.Scalars(colour=7)
    row = proto3.Scalars.to_row(scalars)
    assert row["colour"] == "7"
    assert proto3.Scalars.from_row(row).colour == 7
    holder = sample.Holder(colours=[sample.Colour.RED, 9])
    assert proto3.Holder.to_row(holder)["colours"] == ["RED", "9"]
    assert proto3.Holder.from_row(proto3.Holder.to_row(holder)) == holder


def test_proto3_maps_oneofs_and_renamed_fields(proto3: ModuleType) -> None:
    sample = _module_of(proto3, "sample3")
    holder = sample.Holder(maybe=0, numbers=[1, 2], counts={"a": 1, "b": -5},
                           inners={3: sample.Inner(name="x")}, boxed=sample.Inner(name="b"),
                           tags=["t"], from_=5, type_="k", encode_=True)
    row = proto3.Holder.to_row(holder)
    assert row["counts"] == {"a": 1, "b": -5} and row["from"] == 5 and row["text"] is None
    assert proto3.Holder.from_row(row) == holder
    assert proto3.Holder.from_row(spark_shaped(row, proto3.Holder.spark_schema)) == holder
    values = [holder, sample.Holder()]
    assert proto3.Holder.from_record_batch(proto3.Holder.to_record_batch(values)) == values


# --- frame structs of a made-up protocol ----------------------------------------------------------


def test_frame_kinds_round_trip(demo: ModuleType) -> None:
    import uuid

    f = _module_of(demo, "frames")
    hello = f.Hello(id=uuid.UUID(int=42), small=-3, medium=65535, signed=-2**31, wide=2**32 - 1,
                    big=-2**63, huge=2**64 - 1, var=2**64 - 1, flag=True, name="hé",
                    blob=b"\x00\x01", numbers=[1, 2**64 - 1],
                    items=[f.Item(tag=1, weight=-2)], has_extra=1, extra=7)
    values = [f.Frame(body=hello), f.Frame(body=f.Bye(reason="done"))]
    row = demo.FRAME.to_row(values[0])
    assert row["body"]["Bye"] is None
    assert row["body"]["Hello"]["id"] == "00000000-0000-0000-0000-00000000002a"
    for value in values:
        assert demo.FRAME.from_row(demo.FRAME.to_row(value)) == value
    assert demo.FRAME.from_record_batch(demo.FRAME.to_record_batch(values)) == values
    assert [demo.command_name(v) for v in values] == ["HELLO", "BYE"]
    assert demo.decode_frame(values[1].encode()) == (values[1], None)
    frame, error = demo.decode_frame(b"\x00\x00\x00\x01\x09")
    assert frame is None and error is not None and error.startswith("UnknownCommandTypeError")


# --- bad rows ----------------------------------------------------------------------------------


def test_bad_rows_raise_row_error() -> None:
    codec = pulsar_spark.MessageIdData
    good = codec.to_row(pulsar_api.MessageIdData(ledgerId=1, entryId=2))
    with pytest.raises(RowError, match="ledgerId is required"):
        codec.from_row({**good, "ledgerId": None})
    with pytest.raises(RowError, match="not an unsigned 64-bit"):
        codec.from_row({**good, "ledgerId": Decimal(-1)})
    with pytest.raises(RowError, match="not an unsigned 64-bit"):
        codec.from_row({**good, "ledgerId": Decimal(2**64)})
    command = pulsar_spark.BaseCommand.to_row(pulsar_api.BaseCommand(
        type_=pulsar_api.BaseCommand.Type.PING, ping=pulsar_api.CommandPing()))
    assert command["ping"] == {}
    with pytest.raises(RowError, match="neither a member"):
        pulsar_spark.BaseCommand.from_row({**command, "type": "NOPE"})
    with pytest.raises(RowError, match="unknown number"):
        pulsar_spark.BaseCommand.from_row({**command, "type": "12345"})
    with pytest.raises(RowError, match="expected a dict or a pyspark Row"):
        codec.from_row(cast(Any, ["not", "a", "row"]))


# --- a real Spark session ---------------------------------------------------------------------


SPARK_TYPES = ["MessageIdData", "CommandSend", "MessageMetadata", "BaseCommand"]


@pytest.mark.parametrize("name", SPARK_TYPES)
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_spark_dataframe_from_rows(spark: SparkSession, name: str, data: st.DataObject) -> None:
    desc = PB.DESCRIPTOR.message_types_by_name[name]
    msgs = [_message(desc, t) for t in data.draw(st.lists(message_values(desc), min_size=1,
                                                         max_size=12))]
    codec = pulsar_spark.MESSAGES[desc.full_name]
    df = spark.createDataFrame(codec.to_rows(msgs), codec.spark_schema)
    assert df.schema == codec.spark_schema
    assert codec.from_rows(df.collect()) == msgs


def test_spark_dataframe_from_arrow_and_back(spark: SparkSession) -> None:
    send = frames.Frame.decode((VECTORS / "rs_payload_send.bin").read_bytes())
    connect = frames.Frame.decode((VECTORS / "rs_simple_connect.bin").read_bytes())
    values = [send, connect, send]
    codec = pulsar_spark.FRAME
    table = pa.Table.from_batches([codec.to_record_batch(values)])
    df = spark.createDataFrame(table, codec.spark_schema)
    assert codec.from_rows(df.collect()) == values
    picked = df.selectExpr("command.type AS type",
                           "payload.metadata.producer_name AS producer").collect()
    assert [tuple(r) for r in picked] == [
        ("SEND", send.payload.metadata.producer_name if send.payload else None),
        ("CONNECT", None),
        ("SEND", send.payload.metadata.producer_name if send.payload else None),
    ]
    # (Not df.toArrow(): pyspark 4.3 casts Spark's own Arrow output, which holds nulls in
    # non-nullable fields below null structs, and the cast rejects them.)


def test_documented_mapping_is_in_the_generated_module() -> None:
    doc = textwrap.dedent(pulsar_spark.__doc__ or "")
    assert "uint64, fixed64                     DecimalType(20, 0)" in doc
    assert "Why uint64 is DecimalType(20, 0)" in doc
