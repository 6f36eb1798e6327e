"""``f32`` and ``f64``: IEEE 754 single and double numbers in either byte order (AMQP 0-9-1's
field-table values 'f' and 'd'), against bytes packed by hand with ``struct``, optional and
trailing ones, a number an ``f32`` cannot hold refused on encode, short input refused on
decode, round trips, the Python codec coding a struct whose numbers are conditional (the
compiled one takes plain ones: tests/runtime/test_compiled_floats_and_runs.py), and the misuses
refused at their position."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.codec import compiled
from protoframe.runtime.errors import SizeMismatchError, TruncatedError, ValueOutOfRangeError
from tests.support.generate import generate_text, write_spec

SPEC = """\
protocol: fl
doc: Readings as floating-point numbers.
byte_order: big
structs:
  Reading:
    fields:
      - {name: flags, type: u8}
      - {name: single, type: f32}
      - {name: double, type: f64, order: little}
      - {name: extra, type: f64, when: "flags & 1"}
      - {name: last, type: f32, when_remaining: true}
frame:
  name: Frame
  fields:
    - {name: size, type: u16, size_of: rest}
    - {name: kind, type: u8}
    - {name: body, type: switch, on: kind, cases: {1: Reading}}
"""


@pytest.fixture(scope="module")
def fl(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("floats"), "fl", SPEC, "fl_pkg")


def test_numbers_packed_by_hand(fl: ModuleType) -> None:
    reading = fl.Reading(flags=1, single=1.5, double=-2.25, extra=1e300, last=0.5)
    wire = (struct.pack(">Bf", 1, 1.5) + struct.pack("<d", -2.25)
            + struct.pack(">df", 1e300, 0.5))
    assert reading.encode() == wire
    assert fl.Reading.decode(wire) == reading
    bare = fl.Reading(flags=0, single=-0.0, double=math.inf)
    wire = struct.pack(">Bf", 0, -0.0) + struct.pack("<d", math.inf)
    assert bare.encode() == wire
    assert fl.Reading.decode(wire) == bare
    frame = fl.Frame(body=bare)
    assert frame.encode() == struct.pack(">HB", len(wire) + 1, 1) + wire
    assert fl.Frame.decode(frame.encode()) == frame


def test_an_f32_holds_the_nearest_single(fl: ModuleType) -> None:
    wire = fl.Reading(flags=0, single=0.1, double=0.1).encode()
    decoded = fl.Reading.decode(wire)
    assert decoded.single == struct.unpack(">f", struct.pack(">f", 0.1))[0] != 0.1
    assert decoded.double == 0.1
    nan = fl.Reading.decode(fl.Reading(flags=0, single=math.nan, double=math.nan).encode())
    assert math.isnan(nan.single) and math.isnan(nan.double)


def test_what_cannot_be_coded_is_refused(fl: ModuleType) -> None:
    with pytest.raises(ValueOutOfRangeError, match="Reading.single: 1e.39 is beyond f32"):
        fl.Reading(flags=0, single=1e39, double=0.0).encode()
    with pytest.raises(ValueOutOfRangeError, match="Reading"):  # struct.error, as for ints
        fl.Reading(flags=0, single=0.0, double=10**400).encode()
    wire = fl.Reading(flags=0, single=1.0, double=2.0).encode()
    with pytest.raises((TruncatedError, SizeMismatchError)):
        fl.Reading.decode(wire[:-1])
    with pytest.raises(SizeMismatchError):  # three bytes left: no whole f32 remains
        fl.Reading.decode(wire + b"\x00\x00\x00")


singles = st.floats(width=32, allow_nan=False)
doubles = st.floats(allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(singles, doubles, st.none() | doubles, st.none() | singles)
def test_round_trips(fl: ModuleType, single: float, double: float, extra: float | None,
                     last: float | None) -> None:
    reading = fl.Reading(flags=int(extra is not None), single=single, double=double,
                         extra=extra, last=last)
    frame = fl.Frame(body=reading)
    assert fl.Frame.decode(frame.encode()) == frame
    stream = fl.StreamDecoder()
    assert stream.feed(frame.encode() * 2) == [frame, frame]


def test_the_python_codec_codes_them(fl: ModuleType) -> None:
    assert not compiled.is_compiled(fl.Reading)
    frame = fl.Frame(body=fl.Reading(flags=1, single=2.5, double=3.5, extra=4.5))
    wire = frame.encode()
    with compiled.pure_python():
        assert frame.encode() == wire
        assert fl.Frame.decode(wire) == frame


@pytest.mark.parametrize(("extra", "key", "message"), [
    ('value: "flags"', "value", "value: needs an integer or varint field"),
    ("const: 1", "const", "const: needs an integer, varint or bool field"),
    ("min: 0", "min", "min: needs an integer or varint field"),
    ("size_of: double", "size_of", "a size field must be an integer"),
])
def test_misuses_are_refused_at_their_position(tmp_path: Path, extra: str, key: str,
                                               message: str) -> None:
    old = "{name: single, type: f32}"
    text = SPEC.replace(old, f"{{name: single, type: f32, {extra}}}")
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "fl", text), "specs", ["fl"])
    errors = [str(e) for e in info.value.errors]
    error = next((e for e in errors if message in e), errors[0])
    assert message in error, errors
    line_start = text.index("{name: single, type: f32,")
    at = text.index(f"{key}:", line_start) + len(f"{key}: ")
    if key == "size_of":  # the error is at the type
        at = text.index("f32", line_start)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/fl/fl.yaml:{line}:{column}:"), error
