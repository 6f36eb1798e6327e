"""A ``size_of`` field that measures an array in bytes: AMQP 0-9-1's field tables (a long-uint
byte size, then name/value entries up to it), against bytes packed by hand with ``struct``,
elements that run past the size or leave part of it refused with ``SizeMismatchError``, and
round trips. The decoder once read an ``until_end`` array to the end of the whole region,
past its size."""

from __future__ import annotations

import struct
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.errors import SizeMismatchError
from tests.support.generate import generate_text

SPEC = """\
protocol: sized
doc: Tables measured in bytes.
byte_order: big
structs:
  Entry:
    fields:
      - {name: key, type: u8}
      - {name: value, type: u16}
  Table:
    fields:
      - {name: size, type: u32, size_of: entries}
      - {name: entries, type: array, of: Entry, until_end: true}
  Pair:
    fields:
      - {name: table, type: struct, struct: Table}
      - {name: tail, type: u8}
  Counted:
    fields:
      - {name: size, type: u8, size_of: items}
      - {name: items, type: array, of: u16, count: "2"}
frame:
  name: Frame
  fields:
    - {name: type, type: u8}
    - {name: size, type: u32, size_of: rest}
    - {name: payload, type: switch, on: type, cases: {1: Pair, 3: Counted}}
"""


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("sized"), "sized", SPEC, "sized_pkg")


def table(*entries: tuple[int, int]) -> bytes:
    body = b"".join(struct.pack(">BH", k, v) for k, v in entries)
    return struct.pack(">I", len(body)) + body


def test_a_size_of_field_bounds_an_array(sized: ModuleType) -> None:
    wire = table((1, 2), (3, 4)) + b"\x07"
    pair = sized.Pair(table=sized.Table(entries=[sized.Entry(key=1, value=2),
                                                 sized.Entry(key=3, value=4)]), tail=7)
    assert pair.encode() == wire
    assert sized.Pair.decode(wire) == pair
    assert sized.Pair.decode(table() + b"\x00") == sized.Pair(table=sized.Table(entries=[]),
                                                              tail=0)
    frame = sized.Frame(payload=pair)
    assert frame.encode() == struct.pack(">BI", 1, len(wire)) + wire
    assert sized.Frame.decode(frame.encode()) == frame


def test_an_array_that_does_not_fill_its_size_is_refused(sized: ModuleType) -> None:
    with pytest.raises(SizeMismatchError):  # the size ends inside the second entry
        sized.Pair.decode(struct.pack(">I", 5) + struct.pack(">BHBH", 1, 2, 3, 4) + b"\x07")
    with pytest.raises(SizeMismatchError):  # the size runs past the struct
        sized.Pair.decode(struct.pack(">I", 9) + struct.pack(">BH", 1, 2) + b"\x07")
    counted = sized.Counted(items=[1, 2])
    assert counted.encode() == struct.pack(">BHH", 4, 1, 2)
    assert sized.Counted.decode(counted.encode()) == counted
    with pytest.raises(SizeMismatchError):  # two items take 4 bytes, not 5
        sized.Counted.decode(struct.pack(">BHHB", 5, 1, 2, 0))
    with pytest.raises(SizeMismatchError):  # nor 3
        sized.Counted.decode(struct.pack(">BHB", 3, 1, 2))


entries = st.lists(st.tuples(st.integers(0, 255), st.integers(0, 65535)), max_size=6)


@settings(max_examples=100, deadline=None)
@given(entries, st.integers(0, 255))
def test_round_trips(sized: ModuleType, pairs: list[tuple[int, int]], tail: int) -> None:
    pair = sized.Pair(table=sized.Table(entries=[sized.Entry(key=k, value=v)
                                                 for k, v in pairs]), tail=tail)
    assert pair.encode() == table(*pairs) + bytes([tail])
    frame = sized.Frame(payload=pair)
    assert sized.Frame.decode(frame.encode()) == frame
