"""The columnar path (runtime/spark/columnar.py, runtime/codec/_columnar.c) against the row path.

For every message of the demo, of Pulsar and of the test protocols under tests/data (allkinds,
mapsoneofs, proto3, nested, sparse), batches of hypothesis-generated wire bytes (valid
messages of every field kind, and damaged ones: cut short, flipped bytes, wrong wire types,
unknown fields, invalid UTF-8, undeclared enum numbers) decode to the same Arrow column,
type for type and value for value, by ``decode_column`` as by decoding each value with the
generated class and ``RowCodec.to_arrow``; errors (``errors="raise"``) are the row path's.
Which types are columnar is checked too, and the C part neither
leaks nor holds references.
"""

from __future__ import annotations

import gc
import math
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from protoframe.generated.demo import spark as demo_spark  # noqa: E402
from protoframe.generated.demo.events import OrderPlaced  # noqa: E402
from protoframe.generated.pulsar import pulsar_api  # noqa: E402
from protoframe.generated.pulsar import spark as pulsar_spark  # noqa: E402
from protoframe.runtime.codec import compiled  # noqa: E402
from protoframe.runtime.spark import columnar  # noqa: E402
from protoframe.runtime.spark.columnar import decode_column, row_column  # noqa: E402
from protoframe.runtime.spark.rows import RowCodec  # noqa: E402
from tests.support.generate import generate_package, import_generated  # noqa: E402
from tests.support.official import official_module  # noqa: E402
from tests.support.proto_values import build_ours, class_index, message_values  # noqa: E402
from tests.support.varints import EDGES, varint  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not columnar.available(), reason="runtime.codec._columnar is not built"),
]

TEST_PROTOCOLS = ("allkinds", "mapsoneofs", "proto3", "nested", "sparse")


@pytest.fixture(scope="module")
def test_modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    out = {}
    for protocol in TEST_PROTOCOLS:
        tmp: Path = tmp_path_factory.mktemp(protocol)
        package = f"columnar_{protocol}_pkg"
        generate_package(tmp, protocol, package)
        out[protocol] = import_generated(tmp, f"{protocol}.spark", package)
    return out


def _codecs(module: ModuleType) -> list[RowCodec[Any]]:
    return list(module.MESSAGES.values())


# --- random wire bytes from a layout table ------------------------------------------------------


_WIRE = {"fixed64": 1, "sfixed64": 1, "double": 1, "fixed32": 5, "sfixed32": 5, "float": 5,
         "string": 2, "bytes": 2, "message": 2}
_INTS = st.one_of(st.sampled_from([*EDGES, -1]), st.integers(0, 2**64 - 1))


def _payload(draw: Any, kind: str, extra: Any, depth: int) -> bytes:
    """The bytes of one value of ``kind`` after its tag (a length prefix included)."""
    if kind in ("fixed64", "sfixed64", "double"):
        fixed: bytes = draw(st.binary(min_size=8, max_size=8))
        return fixed
    if kind in ("fixed32", "sfixed32", "float"):
        fixed = draw(st.binary(min_size=4, max_size=4))
        return fixed
    if kind in ("string", "bytes"):
        text: bytes = draw(st.one_of(st.text(max_size=8).map(str.encode),
                                     st.binary(max_size=6)))
        return varint(len(text)) + text
    if kind == "message":
        body = _message(draw, extra, depth + 1)
        return varint(len(body)) + body
    if kind in ("enum", "open_enum"):
        declared = sorted(extra) if isinstance(extra, dict) else [0]
        number = draw(st.one_of(st.sampled_from(declared), st.integers(-3, 200)))
        return varint(number)
    return varint(draw(_INTS))


def _message(draw: Any, cls: type, depth: int = 0) -> bytes:
    table = compiled.layout(cls) or ()
    out = bytearray()
    count = draw(st.integers(0, 6 if depth < 2 else 2))
    for _ in range(count):
        if not table or draw(st.integers(0, 9)) == 0:  # an unknown field
            number = draw(st.integers(1, 40))
            out += varint(number << 3) + varint(draw(_INTS))
            continue
        number, kind, mode, _, extra, *aux = draw(st.sampled_from(table))
        if mode == "map":  # an entry: key (1) and value (2), either may be missing or twice
            key_kind = aux[0][0]
            entry = bytearray()
            for entry_number, entry_kind, entry_extra in draw(st.lists(st.sampled_from(
                    [(1, key_kind, None), (2, kind, extra)]), max_size=3)):
                entry += varint(entry_number << 3 | _WIRE.get(entry_kind, 0))
                entry += _payload(draw, entry_kind, entry_extra, depth)
            out += varint(number << 3 | 2) + varint(len(entry)) + entry
            continue
        wire = _WIRE.get(kind, 0)
        if depth >= 3 and kind == "message":
            continue
        if mode in ("repeated", "packed") and wire != 2 and draw(st.booleans()):
            items = b"".join(_payload(draw, kind, extra, depth)
                             for _ in range(draw(st.integers(0, 3))))
            out += varint(number << 3 | 2) + varint(len(items)) + items
            continue
        out += varint(number << 3 | wire) + _payload(draw, kind, extra, depth)
    return bytes(out)


@st.composite
def wire_values(draw: Any, cls: type) -> bytes | None:
    """A value for ``cls``: mostly well-formed, sometimes null, cut short or with a bad byte."""
    data = _message(draw, cls)
    damage = draw(st.integers(0, 9))
    if damage == 0:
        return None
    if damage == 1 and data:
        cut: int = draw(st.integers(0, len(data) - 1))
        return data[:cut]
    if damage == 2 and data:
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    if damage == 3:
        tail: bytes = draw(st.sampled_from([b"\x0b", b"\x80", b"\x07\x01", b"\x00\x01"]))
        return data + tail
    return data


def _plain(value: Any) -> Any:
    """``value`` (from ``to_pylist``) with NaN as a string, so that equal columns compare equal."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _same(codec: RowCodec[Any], values: list[bytes | None]) -> None:
    array = pa.array(values, pa.binary())
    mine = decode_column(codec, array)
    theirs = row_column(codec, values)
    mine.validate(full=True)
    assert mine.type == theirs.type == codec.arrow_type
    assert _plain(mine.to_pylist()) == _plain(theirs.to_pylist())
    for start in (1, len(values) // 2):  # an array with an offset
        part = array.slice(start)
        assert _plain(decode_column(codec, part).to_pylist()) \
            == _plain(theirs.slice(start).to_pylist())


def _check_some(codecs: list[RowCodec[Any]], data: st.DataObject) -> None:
    for _ in range(3):
        codec = data.draw(st.sampled_from(codecs), label="codec")
        values = data.draw(st.lists(wire_values(codec.python_type), max_size=10),
                           label=codec.name)
        _same(codec, values)


_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(st.data())
def test_demo_and_pulsar_messages_match_the_row_path(data: st.DataObject) -> None:
    _check_some([demo_spark.OrderPlaced, pulsar_spark.MessageMetadata], data)
    _check_some([*_codecs(demo_spark), *_codecs(pulsar_spark)], data)


@pytest.mark.parametrize("protocol", TEST_PROTOCOLS)
@_SETTINGS
@given(data=st.data())
def test_test_protocols_match_the_row_path(test_modules: dict[str, ModuleType], protocol: str,
                                           data: st.DataObject) -> None:
    _check_some(_codecs(test_modules[protocol]), data)


# --- which types are columnar --------------------------------------------------------------------


def test_columnar_types(test_modules: dict[str, ModuleType]) -> None:
    assert columnar.plan(demo_spark.OrderPlaced) is not None
    assert columnar.plan(pulsar_spark.MessageMetadata) is not None
    # MessageIdData holds itself (first_chunk_message_id is a binary column): columnar, with
    # the rows that set it left to the row path.
    ids = columnar.plan(pulsar_spark.MessageIdData)
    assert ids is not None and columnar.plan(pulsar_spark.BaseCommand) is not None
    first = pulsar_api.MessageIdData(ledgerId=1, entryId=2).encode()
    chunked = pulsar_api.MessageIdData(
        ledgerId=3, entryId=4,
        first_chunk_message_id=pulsar_api.MessageIdData(ledgerId=5, entryId=6)).encode()
    column, bad = ids.decode(pa.array([first, chunked], pa.binary()))
    assert bad == [1]
    assert decode_column(pulsar_spark.MessageIdData, pa.array([first, chunked])).to_pylist() \
        == row_column(pulsar_spark.MessageIdData, [first, chunked]).to_pylist()
    proto3 = test_modules["proto3"]
    assert columnar.plan(proto3.MESSAGES["sample.v3.Scalars"]) is not None
    assert columnar.plan(proto3.MESSAGES["sample.v3.Holder"]) is not None  # maps, a oneof
    assert columnar.plan(test_modules["mapsoneofs"].MESSAGES["mapsoneofs3.Maps"]) is not None
    assert columnar.plan(test_modules["mapsoneofs"].MESSAGES["mapsoneofs3.Choice"]) is not None
    planned = {name for module in test_modules.values()
               for name, codec in module.MESSAGES.items() if columnar.plan(codec) is not None}
    assert len(planned) >= 5, planned


def test_row_path_without_the_extension_or_a_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Frame structs have no protobuf layout table: never columnar.
    assert columnar.plan(pulsar_spark.STRUCTS["Payload"]) is None
    wire = [OrderPlaced(order_id="o", items=["a"]).encode(), b"\x0a\x05ab", None]
    expected = row_column(demo_spark.OrderPlaced, wire).to_pylist()
    monkeypatch.setenv("PROTOFRAME_PURE_PYTHON", "1")
    assert not columnar.available() and columnar.plan(demo_spark.OrderPlaced) is None
    assert decode_column(demo_spark.OrderPlaced, pa.array(wire, pa.binary())).to_pylist() \
        == expected


# --- vectors packed by hand ------------------------------------------------------------------


def test_order_placed_vector() -> None:
    items = b"".join(b"\x2a" + bytes([len(s)]) + s for s in (b"sku-1", b"sku-22"))
    wire = (b"\x0a\x08o-000042" + b"\x12\x03ann" + b"\x18" + varint(12345)
            + b"\x22\x03EUR" + items + b"\x30" + varint(1_700_000_000_000))
    column = decode_column(demo_spark.OrderPlaced, pa.array([wire, None, b""], pa.binary()))
    assert column.to_pylist() == [
        {"order_id": "o-000042", "customer": "ann", "amount_cents": 12345, "currency": "EUR",
         "items": ["sku-1", "sku-22"], "placed_at_ms": 1_700_000_000_000},
        None,
        {"order_id": "", "customer": "", "amount_cents": 0, "currency": "", "items": [],
         "placed_at_ms": 0},
    ]
    assert OrderPlaced.decode(wire).items == ["sku-1", "sku-22"]


def test_message_metadata_vector() -> None:
    # producer_name=1, sequence_id=2, publish_time=3, properties=4 (KeyValue key=1 value=2),
    # compression=8 (LZ4), uncompressed_size=9, schema_version=16 (bytes), and field 30 as a
    # fixed64 (unknown here: it is not a field of MessageMetadata's).
    kv = b"\x0a\x03app\x12\x06orders"
    wire = (b"\x0a\x02p0" + b"\x10" + varint(2**64 - 1) + b"\x18" + varint(7)
            + b"\x22" + bytes([len(kv)]) + kv + b"\x40\x01" + b"\x48" + varint(64)
            + b"\x82\x01\x02\x00\xff" + b"\xf1\x01" + struct.pack("<q", -5))
    column = decode_column(pulsar_spark.MessageMetadata, pa.array([wire], pa.binary()))
    row = column.to_pylist()[0]
    assert row["producer_name"] == "p0"
    assert int(row["sequence_id"]) == 2**64 - 1
    assert row["properties"] == [{"key": "app", "value": "orders"}]
    assert row["compression"] == "LZ4"
    assert row["schema_version"] == b"\x00\xff"
    assert row["replicated_from"] is None and row["replicate_to"] == []
    assert column.to_pylist() == row_column(pulsar_spark.MessageMetadata, [wire]).to_pylist()


# --- errors are the row path's -------------------------------------------------------------------


@pytest.mark.parametrize("wire", [
    b"\x0a\x05ab",  # string cut short
    b"\x0a\x02\xff\xfe",  # invalid UTF-8
    b"\x0b\x00",  # a group start
    b"\x18" + b"\xff" * 11,  # a varint past ten bytes
])
def test_damaged_values_raise_the_row_path_error(wire: bytes) -> None:
    codec = demo_spark.OrderPlaced
    with pytest.raises(Exception) as row_error:
        OrderPlaced.decode(wire)
    with pytest.raises(type(row_error.value)) as mine:
        decode_column(codec, pa.array([b"", wire], pa.binary()), errors="raise")
    assert str(mine.value) == str(row_error.value)
    assert decode_column(codec, pa.array([wire], pa.binary())).to_pylist() == [None]


def test_maps(test_modules: dict[str, ModuleType]) -> None:
    codec = test_modules["mapsoneofs"].MESSAGES["mapsoneofs3.Maps"]
    # by_int32 (1): {7: "a", -1: "b"}; hues (12): {"x": PALE}; leaves (13): {"k": Leaf("l", 3)}
    entries = [b"\x0a\x05\x08\x07\x12\x01a",
               b"\x0a\x0e\x08" + varint(-1) + b"\x12\x01b",
               b"\x62\x05\x0a\x01x\x10\x01",
               b"\x6a\x0a\x0a\x01k\x12\x05\x0a\x01l\x10\x03"]
    wire = b"".join(entries)
    twice = b"\x0a\x05\x08\x07\x12\x01a" * 2  # the same key twice: the row path's case
    no_value = b"\x6a\x03\x0a\x01k"  # a message value missing: the row path's case
    plan = columnar.plan(codec)
    assert plan is not None
    column, bad = plan.decode(pa.array([wire, twice, no_value], pa.binary()))
    assert bad == [1, 2]
    row = column.to_pylist()[0]
    assert row["by_int32"] == [(7, "a"), (-1, "b")]
    assert row["hues"] == [("x", "PALE")]
    assert row["leaves"] == [("k", {"label": "l", "weight": 3})]
    values = [wire, twice, no_value, b""]
    assert decode_column(codec, pa.array(values)).to_pylist() \
        == row_column(codec, values).to_pylist()


def test_nan_and_scalar_edges(test_modules: dict[str, ModuleType]) -> None:
    codec = test_modules["proto3"].MESSAGES["sample.v3.Scalars"]
    # d (1) a NaN double, f (2) a NaN float, i32 (5) -1 as ten bytes, u32 (11) a varint wider
    # than 32 bits (the low 32 bits count), si32 (14) zigzag 3 -> -2
    wire = (b"\x09" + struct.pack("<Q", 0x7FF8_0000_0000_0001)
            + b"\x15" + struct.pack("<I", 0x7FC0_0001) + b"\x28" + varint(-1)
            + b"\x58" + varint(2**32 + 5) + b"\x70\x03")
    row = decode_column(codec, pa.array([wire], pa.binary())).to_pylist()[0]
    assert math.isnan(row["d"]) and math.isnan(row["f"])
    assert (row["i32"], row["u32"], row["si32"]) == (-1, 5, -2)
    _same(codec, [wire, None, b""])


def test_oneof_members_clear_each_other(test_modules: dict[str, ModuleType]) -> None:
    codec = test_modules["mapsoneofs"].MESSAGES["mapsoneofs3.Choice"]
    # pick: text=2 then number=3 (number wins), other: ratio=7 then flag=8 then ratio=7 again;
    # then leaf=4 and text=2 after it (a message member then another: the row path's case).
    wire = (b"\x12\x02hi" + b"\x18\x05" + b"\x39" + struct.pack("<d", 0.5) + b"\x40\x01"
            + b"\x39" + struct.pack("<d", 1.5))
    after_leaf = b"\x22\x02\x0a\x00" + b"\x12\x01x"
    plan = columnar.plan(codec)
    assert plan is not None
    column, bad = plan.decode(pa.array([wire, after_leaf], pa.binary()))
    assert bad == [1]
    row = column.to_pylist()[0]
    assert (row["text"], row["number"], row["ratio"], row["flag"]) == (None, 5, 1.5, None)
    assert decode_column(codec, pa.array([wire, after_leaf])).to_pylist() \
        == row_column(codec, [wire, after_leaf]).to_pylist()


def test_required_missing_and_undeclared_enum_go_to_the_row_path() -> None:
    codec = pulsar_spark.KeyValue  # key and value are required
    wire = b"\x0a\x01k"
    with pytest.raises(Exception) as row_error:
        pulsar_api.KeyValue.decode(wire)
    with pytest.raises(type(row_error.value)):
        decode_column(codec, pa.array([wire], pa.binary()), errors="raise")
    # compression 9 is not a CompressionType: the row shows the number, via the row path
    meta = pulsar_spark.MessageMetadata
    wire = b"\x0a\x01p\x10\x01\x18\x02\x40\x09"
    assert decode_column(meta, pa.array([wire], pa.binary())).to_pylist() \
        == row_column(meta, [wire]).to_pylist()
    assert decode_column(meta, pa.array([wire], pa.binary())).to_pylist()[0]["compression"] \
        == "9"


# --- the C part: references and memory ------------------------------------------------------


@pytest.mark.parametrize("which", ["MessageMetadata", "Maps", "Choice"])
def test_no_reference_leaks(test_modules: dict[str, ModuleType], which: str) -> None:
    codec: RowCodec[Any]
    if which == "MessageMetadata":
        codec = pulsar_spark.MessageMetadata
        good = pulsar_api.MessageMetadata(
            producer_name="p", sequence_id=1, publish_time=2,
            properties=[pulsar_api.KeyValue(key="a", value="b")]).encode()
    elif which == "Maps":
        codec = test_modules["mapsoneofs"].MESSAGES["mapsoneofs3.Maps"]
        good = b"\x0a\x05\x08\x07\x12\x01a\x6a\x0a\x0a\x01k\x12\x05\x0a\x01l\x10\x03"
    else:
        codec = test_modules["mapsoneofs"].MESSAGES["mapsoneofs3.Choice"]
        good = b"\x12\x02hi\x18\x05\x22\x02\x0a\x00\x40\x01"
    array = pa.array([good, None, good[:-1], b"\x0a\x02\xff\xfe"] * 50, pa.binary())
    plan = columnar.plan(codec)
    assert plan is not None
    buffers = array.buffers()

    def refs() -> tuple[int, ...]:
        return tuple(sys.getrefcount(b) for b in buffers) + (sys.getrefcount(plan.c_plan),)

    def run(times: int) -> None:
        for _ in range(times):
            decode_column(codec, array)
            try:
                plan.c_plan.decode(b"\x00", b"", None, 0, 5)
            except ValueError:
                pass

    run(20)
    gc.collect()
    before, blocks = refs(), sys.getallocatedblocks()
    run(200)
    gc.collect()
    assert refs() == before
    assert sys.getallocatedblocks() - blocks < 200


def test_plan_rejects_what_it_cannot_decode() -> None:
    from protoframe.runtime.codec import _columnar

    kinds, modes = compiled.KINDS, compiled.MODES
    with pytest.raises(ValueError, match="mode 99"):
        _columnar.Plan(((1, kinds["int32"], 99, False, None),))
    with pytest.raises(ValueError, match="map entry"):
        _columnar.Plan(((1, kinds["int32"], modes["map"], False,
                         ((1, kinds["int32"], modes["implicit"], False, None),)),))
    with pytest.raises(ValueError, match="oneof"):
        _columnar.Plan(((1, kinds["int32"], modes["oneof"], False, None, 0),))
    with pytest.raises(ValueError, match="field number"):
        _columnar.Plan(((0, kinds["int32"], modes["required"], False, None),))
    with pytest.raises(TypeError):
        _columnar.Plan(((1, kinds["enum"], modes["optional"], True, None),))
    plan = _columnar.Plan(((1, kinds["int32"], modes["optional"], True, None),))
    with pytest.raises(ValueError, match="too short"):
        plan.decode(b"\x00\x00\x00\x00", b"", None, 0, 3)


# --- well-formed values stay on the columnar path -------------------------------------------------

PB = official_module("pulsar", "PulsarApi.proto")
OURS = class_index(pulsar_api)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message_values(PB.MessageMetadata.DESCRIPTOR), min_size=1, max_size=8))
def test_encoded_message_metadata_is_all_columnar(trees: list[dict[str, Any]]) -> None:
    values = [build_ours(OURS, PB.MessageMetadata.DESCRIPTOR, t).encode() for t in trees]
    plan = columnar.plan(pulsar_spark.MessageMetadata)
    assert plan is not None
    column, bad = plan.decode(pa.array(values, pa.binary()))
    assert bad == []
    assert column.to_pylist() == row_column(pulsar_spark.MessageMetadata, values).to_pylist()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.builds(OrderPlaced, order_id=st.text(max_size=8), customer=st.text(max_size=8),
                          amount_cents=st.integers(-(2**63), 2**63 - 1),
                          currency=st.text(max_size=3), items=st.lists(st.text(max_size=5)),
                          placed_at_ms=st.integers(-(2**63), 2**63 - 1)), max_size=8))
def test_encoded_orders_are_all_columnar(orders: list[OrderPlaced]) -> None:
    values = [o.encode() for o in orders]
    plan = columnar.plan(demo_spark.OrderPlaced)
    assert plan is not None
    column, bad = plan.decode(pa.array(values, pa.binary()))
    assert bad == []
    assert [demo_spark.OrderPlaced.from_row(r) for r in column.to_pylist()] == orders
