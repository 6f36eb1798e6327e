"""The compiled frame codec's ``float`` rows (IEEE 754 singles and doubles in either byte order),
its sized ``struct_run`` rows (nested structs up to the end of the bytes the size right before
them measures: AMQP's field tables and arrays) and its ``int_array`` rows (integers counted by
their ``count_of`` field: Pravega's table versions), against the Python methods: random values,
every truncation, random damage, sizes and counts that disagree with the content, odd values,
and well-formed values that never reach the Python methods."""

from __future__ import annotations

import math
import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    check_random_damage,
    check_truncations,
    outcome,
    python_calls,
    same,
    same_decodes,
)
from tests.support.compiled_ops import needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: fruns
doc: Floating-point numbers and lists sized by the field before them.
byte_order: big
structs:
  Num:
    doc: A single, a double of the other byte order, and a byte.
    fields:
      - {name: single, type: f32}
      - {name: double, type: f64, order: little}
      - {name: tag, type: u8}
  Entry:
    doc: A named number.
    fields:
      - {name: name, type: string, prefix: u8}
      - {name: num, type: struct, struct: Num}
  Table:
    doc: Entries up to the end of the size before them, then a trailing byte.
    fields:
      - {name: size, type: u32, size_of: entries}
      - {name: entries, type: array, of: Entry, until_end: true}
      - {name: after, type: u8}
  Nested:
    doc: A table of tables (the size of each counted in the outer one's).
    fields:
      - {name: size, type: u16, size_of: tables}
      - {name: tables, type: array, of: Table, until_end: true}
  Versions:
    doc: Integers counted by the field before them, of two widths (in the spec's byte order).
    fields:
      - {name: count, type: i32, count_of: versions}
      - {name: versions, type: array, of: i64}
      - {name: small_count, type: u8, count_of: small}
      - {name: small, type: array, of: u16}
frame:
  name: Frame
  fields:
    - {name: size, type: u32, size_of: rest}
    - {name: kind, type: u8}
    - {name: body, type: switch, on: kind, cases: {1: Num, 2: Table, 3: Nested, 4: Versions}}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("fruns"), "fruns", SPEC, "fruns_pkg")


def _bits(value: float, width: int) -> bytes:
    return struct.pack(">f" if width == 4 else ">d", value)


def test_the_structs_are_compiled(m: ModuleType) -> None:
    for name in ("Num", "Entry", "Table", "Nested", "Versions", "Frame"):
        assert compiled.is_compiled(getattr(m, name)), name


def test_numbers_and_sizes_are_as_packed_by_hand(m: ModuleType) -> None:
    num = m.Num(single=1.5, double=-2.25, tag=7)
    wire = struct.pack(">f", 1.5) + struct.pack("<d", -2.25) + b"\x07"
    assert num.encode() == wire and m.Num.decode(wire) == num
    table = m.Table(entries=[m.Entry(name="a", num=num), m.Entry(name="", num=num)], after=9)
    entries = b"\x01a" + wire + b"\x00" + wire
    assert table.encode() == struct.pack(">I", len(entries)) + entries + b"\x09"
    assert m.Table.decode(table.encode()) == table
    empty = m.Table(entries=[], after=0)
    assert empty.encode() == b"\x00\x00\x00\x00\x00"
    assert m.Table.decode(empty.encode()) == empty


singles = st.floats(width=32)
doubles = st.floats()


def _num(m: ModuleType, single: float, double: float, tag: int) -> Any:
    return m.Num(single=single, double=double, tag=tag)


@settings(max_examples=scaled(200), deadline=None)
@given(st.lists(st.tuples(st.text(max_size=5), singles, doubles, st.integers(0, 255)),
                max_size=5), st.integers(0, 255), st.integers(0, 3))
def test_random_values_code_alike(m: ModuleType, items: list[tuple[str, float, float, int]],
                                  after: int, copies: int) -> None:
    table = m.Table(entries=[m.Entry(name=n, num=_num(m, s, d, t)) for n, s, d, t in items],
                    after=after)
    assert same(table.encode)[0] == "value"
    frames = [m.Frame(body=table), m.Frame(body=m.Nested(tables=[table] * copies))]
    if items:
        frames.append(m.Frame(body=table.entries[0].num))
    for frame in frames:
        data = frame.encode()
        assert same(frame.encode)[0] == "value"
        assert same_decodes(m.Frame, data) == "value"
        # NaN is not equal to itself: the numbers' bits are compared by encoding again.
        assert m.Frame.decode(data).encode() == data
        with compiled.pure_python():
            assert m.Frame.decode(data).encode() == data


def test_nan_and_infinities_keep_their_bits(m: ModuleType) -> None:
    for single in (math.nan, -math.nan, math.inf, -math.inf, -0.0, 3.4028234663852886e38,
                   1.401298464324817e-45):
        num = m.Num(single=single, double=single, tag=0)
        data = num.encode()
        with compiled.pure_python():
            assert num.encode() == data
        assert data[:4] == _bits(single, 4)
        assert m.Num.decode(data).encode() == data
    # NaNs with payloads, quiet and signalling, read back as both codecs read them.
    for head in (b"\x7f\xc0\x00\x01", b"\x7f\x80\x00\x01", b"\xff\xff\xff\xff"):
        raw = head + b"\x01\x00\x00\x00\x00\x00\xf8\x7f" + b"\x00"
        again = m.Num.decode(raw).encode()
        with compiled.pure_python():
            assert m.Num.decode(raw).encode() == again


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    num = m.Num(single=0.1, double=1e300, tag=3)
    table = m.Table(entries=[m.Entry(name="alpha", num=num), m.Entry(name="é", num=num)],
                    after=1)
    nested = m.Nested(tables=[table, m.Table(entries=[], after=2), table])
    versions = m.Versions(versions=[0, -1, 2**63 - 1, -2**63], small=[1, 0xFFFF])
    bodies = (num, table, nested, versions, m.Versions(versions=[], small=[]))
    return [(m.Frame, m.Frame(body=b).encode()) for b in bodies] + [
        (m.Num, num.encode()), (m.Table, table.encode()), (m.Nested, nested.encode()),
        (m.Versions, versions.encode())]


def test_every_truncation_decodes_alike(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_decodes_alike(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=21, rounds=scaled(300))


def test_sizes_that_disagree_with_the_entries_decode_alike(m: ModuleType) -> None:
    num = m.Num(single=1.0, double=2.0, tag=3).encode()
    entry = b"\x01a" + num
    for size in range(0, 2 * len(entry) + 3):
        for content in (entry, entry * 2, b"", entry[:-1]):
            data = struct.pack(">I", size) + content + b"\x05"
            same_decodes(m.Table, data)
            same_decodes(m.Frame, struct.pack(">IB", len(data) + 1, 2) + data)
    same_decodes(m.Table, b"\xff\xff\xff\xff" + entry)


def test_odd_values_encode_alike(m: ModuleType) -> None:
    for single in (1e39, -1e39, 10**400, 3, True, "1.0", None, 2**1000, 1.5 + 0j):
        same(m.Num(single=single, double=0.0, tag=0).encode)
    for double in (10**400, -(10**309), 7, False, b"x", math.nan):
        same(m.Num(single=0.0, double=double, tag=0).encode)
    entry = m.Entry(name="x", num=m.Num(single=0.0, double=0.0, tag=0))
    kinds = set()
    for entries in ([entry], (entry,), None, [entry, None], [entry, m.Num(single=0.0, double=0.0,
                                                                        tag=0)], "ab"):
        table = m.Table(entries=entries, after=0)
        kinds.add(same(table.encode)[0])
        same(m.Frame(body=table).encode)
        same(m.Nested(tables=[table]).encode)
    assert kinds == {"value", "raised"}
    big = m.Nested(tables=[m.Table(entries=[entry] * 5000, after=0)])  # past a u16 size
    assert same(big.encode)[0] == "raised"


def test_integer_arrays_are_as_packed_by_hand(m: ModuleType) -> None:
    versions = m.Versions(versions=[5, -2], small=[0x0102])
    wire = struct.pack(">iqqBH", 2, 5, -2, 1, 0x0102)
    assert versions.encode() == wire and m.Versions.decode(wire) == versions


@settings(max_examples=scaled(200), deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), max_size=20),
       st.lists(st.integers(0, 0xFFFF), max_size=20))
def test_random_integer_arrays_code_alike(m: ModuleType, versions: list[int],
                                          small: list[int]) -> None:
    value = m.Versions(versions=versions, small=small)
    assert same(value.encode)[0] == "value"
    assert same_decodes(m.Versions, value.encode()) == "value"
    assert same_decodes(m.Frame, m.Frame(body=value).encode()) == "value"


def test_counts_that_disagree_with_the_integers_decode_alike(m: ModuleType) -> None:
    tail = b"\x00"
    for count in (-1, -2**31, 0, 1, 2, 3, 2**31 - 1):
        for items in (b"", b"\x00" * 8, b"\x00" * 16, b"\x00" * 15):
            same_decodes(m.Versions, struct.pack(">i", count) + items + tail)
    same_decodes(m.Versions, struct.pack(">iB", 0, 200) + b"\x01\x00" * 3)


def test_odd_integer_arrays_encode_alike(m: ModuleType) -> None:
    kinds = set()
    for versions in ([2**63], [-2**63 - 1], [True, False], [1.0], ["1"], [None], (1, 2), None,
                     [1] * 3, "ab", [2**64]):
        for small in ([0], [-1], [0x10000], [0] * 256, []):
            value = m.Versions(versions=versions, small=small)
            kinds.add(same(value.encode)[0])
            same(m.Frame(body=value).encode)
    assert kinds == {"value", "raised"}


def test_emptied_slots_encode_alike(m: ModuleType) -> None:
    for cls, wire in _samples(m)[3:]:
        for name in cls.__slots__:
            broken = cls.decode(wire)
            delattr(broken, name)
            same(broken.encode)


def test_well_formed_values_stay_in_c(m: ModuleType) -> None:
    for cls, wire in _samples(m):
        value = cls.decode(wire)
        assert python_calls(m, lambda: cls.decode(wire)) == [], cls  # noqa: B023
        assert python_calls(m, value.encode) == [], cls
    # A give-up does run them: the check above would see it.
    assert python_calls(m, lambda: outcome(lambda: m.Table.decode(b"\x00\x00\x00\x09"))) != []


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec, vocabulary

    cls = make_dataclass("Odd", [("key", object), ("items", object)], slots=True)
    inner = make_dataclass("Inner", [("x", object)], slots=True)

    def codec(owner: type, *rows: tuple[Any, ...]) -> object:
        return _framecodec.FrameCodec(owner, rows, True, lambda value: b"",
                                      lambda cls, data: None, lambda cls, buf, pos, end: None)

    ops = vocabulary.OPS
    with pytest.raises(ValueError, match="4 or 8 bytes"):
        codec(cls, (ops["float"], "key", 2, 0, -1, 0, None, None, None, None))
    nested = codec(inner, (ops["int"], "x", 1, 0, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="right after its size"):
        codec(cls, (ops["size"], None, 4, 0, 2, 0, None, None, None, None),
              (ops["int"], "key", 1, 0, -1, 0, None, None, None, None),
              (ops["struct_run"], "items", 0, 0, 0, 0, nested, None, None, None))
