"""Masked bytes (``mask:``) and rules (``require:``) in the compiled frame codec (issue #21,
WebSocket's frame), against the Python methods.

WebSocket's own frame also needs bit fields, so the layouts here hold its pieces with plain
fields: a masking key there when a u8 or bool flag says so (a u32, a u8, or bytes), masked bytes
sized by a size field, a derived integer or the rest, and the rules
of control frames. Each is checked as ``test_compiled_frame_ops.py`` checks its rows: the same
bytes, values and errors with both codecs on random values, odd values, every truncation and
random damage; well-formed frames never reach the Python methods.
"""

from __future__ import annotations

import enum
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec import compiled
from protoframe.runtime.codec.masking import xor_mask
from tests.support.codec_agreement import (
    check_emptied_slots,
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
protocol: mops
doc: Masked bytes and rules in the compiled frame codec.
byte_order: big
structs:
  Sized:
    doc: Bytes sized by their size, masked by a u32 key there when a flag bit is set.
    require: ["kind < 8 or fin", "kind < 8 or len(payload) <= 125"]
    fields:
      - {name: fin, type: bool}
      - {name: kind, type: u8}
      - {name: masked, type: u8}
      - {name: length, type: u16, size_of: payload}
      - {name: key, type: u32, when: "masked & 1"}
      - {name: payload, type: bytes, size: length, mask: key}
  Derived:
    doc: A size derived from an earlier integer, a key there when a bool says so.
    require: ["not masked or has(key)"]
    fields:
      - {name: masked, type: bool}
      - {name: n, type: u8}
      - {name: length, type: u16, derive: "n + 1"}
      - {name: key, type: u32, when: masked, order: little}
      - {name: payload, type: bytes, size: length, mask: key}
  Varied:
    doc: A one-byte key always there, bytes sized by a little-endian u24.
    fields:
      - {name: key, type: u8}
      - {name: size, type: u24, order: little}
      - {name: data, type: bytes, size: size, mask: key}
  Rest:
    doc: A key of bytes, and the masked bytes to the end.
    fields:
      - {name: key, type: bytes, length: 3}
      - {name: data, type: bytes, size: rest, mask: key}
frame:
  name: Frame
  doc: One frame.
  fields:
    - {name: type, type: u8}
    - {name: length, type: u32, size_of: body}
    - name: body
      type: switch
      on: type
      cases:
        1: Sized
        2: Derived
        3: Varied
        4: Rest
"""




class Kind(enum.IntEnum):
    """Opcodes, as a caller may pass them (an int subclass the rules read as its int)."""

    TEXT = 1
    BINARY = 2
    CLOSE = 8
    PING = 9


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("mops"), "mops", SPEC, "mops_pkg")


def test_masked_bytes_and_rules_are_compiled(m: ModuleType) -> None:
    for name in ("Frame", "Sized", "Derived", "Varied", "Rest"):
        assert compiled.is_compiled(getattr(m, name)), name


def test_the_bytes_are_masked_as_rfc_6455_says(m: ModuleType) -> None:
    # RFC 6455 5.7: "Hello" masked with 37 fa 21 3d.
    value = m.Sized(fin=True, kind=Kind.TEXT, masked=1, key=0x37FA213D, payload=b"Hello")
    assert value.encode() == bytes.fromhex("010101000537fa213d7f9f4d5158")
    assert m.Sized.decode(value.encode()) == value
    keyed = m.Rest(key=b"\x37\xfa\x21", data=b"Hello")
    assert keyed.encode() == b"\x37\xfa\x21" + xor_mask(b"Hello", b"\x37\xfa\x21")
    little = m.Derived(masked=True, n=4, key=0x3D21FA37, payload=b"Hello")
    assert little.encode() == bytes.fromhex("0104") + bytes.fromhex("37fa213d7f9f4d5158")


# --- random values ------------------------------------------------------------------------------

_payload = st.binary(max_size=40) | st.binary(min_size=120, max_size=300)


@st.composite
def _bodies(draw: st.DrawFn, m: ModuleType) -> Any:
    kind = draw(st.sampled_from(["sized", "derived", "varied", "rest"]))
    payload = draw(_payload)
    if kind == "sized":
        masked = draw(st.integers(0, 3))
        key = draw(st.integers(0, 2**32 - 1)) if masked & 1 else None
        return m.Sized(fin=draw(st.booleans()), kind=draw(st.sampled_from([*Kind, 0, 7, 8, 255])),
                       masked=masked, key=key, payload=payload)
    if kind == "derived":
        masked = draw(st.booleans())
        n = draw(st.integers(0, 254))
        return m.Derived(masked=masked, n=n,
                         key=draw(st.integers(0, 2**32 - 1)) if masked else None,
                         payload=draw(st.binary(min_size=n + 1, max_size=n + 1)))
    if kind == "varied":
        return m.Varied(key=draw(st.integers(0, 255)), data=payload)
    return m.Rest(key=draw(st.binary(min_size=3, max_size=3)), data=payload)


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_frames_round_trip_the_same_with_both_codecs(m: ModuleType,
                                                            data: st.DataObject) -> None:
    body = data.draw(_bodies(m))
    frame = m.Frame(body=body)
    kind, _ = same(frame.encode)
    same(body.encode)
    if kind == "value":
        wire = frame.encode()
        assert same_decodes(m.Frame, wire) == "value"
        assert m.Frame.decode(wire) == frame
        assert same_decodes(type(body), body.encode()) == "value"


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    bodies = [m.Sized(fin=True, kind=Kind.BINARY, masked=1, key=0x01020304, payload=b"x" * 9),
              m.Sized(fin=False, kind=Kind.TEXT, masked=2, key=None, payload=b"plain"),
              m.Sized(fin=True, kind=Kind.PING, masked=3, key=0, payload=b""),
              m.Derived(masked=True, n=6, key=0xA0B0C0D0, payload=b"seven b"),
              m.Derived(masked=False, n=0, key=None, payload=b"1"),
              m.Varied(key=0x5A, data=b"v" * 130), m.Varied(key=0, data=b""),
              m.Rest(key=b"abc", data=b"the rest of it")]
    out = [(m.Frame, m.Frame(body=b).encode()) for b in bodies]
    out += [(type(b), b.encode()) for b in bodies]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=6455, rounds=scaled(150))


@pytest.mark.parametrize("head", [
    "00010100", "00080000", "01080000", "00090001", "01090001",  # rules: fin, length
    "01010105", "01010205", "010103ff", "0103000100",  # sizes past the end, an unknown kind
])
def test_rules_and_sizes_on_decode_match(m: ModuleType, head: str) -> None:
    for tail in (b"", b"\x01\x02\x03\x04", b"\x01\x02\x03\x04" + b"p" * 130):
        same_decodes(m.Sized, bytes.fromhex(head) + tail)
    for wire in (b"\x01\x00", b"\x00\x05abcdef", b"\x01\x00\x01\x02\x03\x04x", b"\x01\xfe"):
        same_decodes(m.Derived, wire)
    for wire in (b"\x01\x80\x00\x00", b"\x01\x80\x00\x00" + b"x" * 128, b"\x01" + b"\xff" * 10,
                 b"\x01\x03\x00\x00ab"):
        same_decodes(m.Varied, wire)


# --- odd values on encode -----------------------------------------------------------------------


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    good: dict[str, Any] = {"fin": True, "kind": Kind.TEXT, "masked": 1, "key": 7,
                            "payload": b"p"}
    for change in ({"key": None}, {"masked": 0}, {"masked": 0, "key": None}, {"key": -1},
                   {"key": 2**32}, {"key": True}, {"key": "k"}, {"payload": None},
                   {"payload": bytearray(b"p")}, {"payload": "text"}, {"payload": b"x" * 0x10000},
                   {"kind": Kind.CLOSE, "fin": False}, {"kind": Kind.CLOSE},
                   {"kind": 8, "fin": 0}, {"kind": 9, "payload": b"x" * 126},
                   {"kind": 9, "payload": b"x" * 125}, {"kind": 9.0}, {"kind": None},
                   {"fin": None}, {"fin": "yes", "kind": 9}, {"kind": 2**70}):
        value = m.Sized(**{**good, **change})
        same(value.encode)
        same(m.Frame(body=value).encode)
    derived: dict[str, Any] = {"masked": True, "n": 1, "key": 1, "payload": b"ab"}
    for change in ({"key": None}, {"masked": False}, {"payload": b"abc"}, {"masked": 1},
                   {"masked": None}, {"key": 2**32}, {"n": 255}, {"n": -1}):
        same(m.Derived(**{**derived, **change}).encode)
    varied: list[tuple[Any, Any]] = [(256, b""), (-1, b""), (None, b""), (1, None),
                                     (1, memoryview(b"x"))]
    for key, data in varied:
        same(m.Varied(key=key, data=data).encode)
    rest: list[tuple[Any, Any]] = [(b"ab", b""), (b"abcd", b"x"), (bytearray(b"abc"), b"x"),
                                   (None, b""), ("abc", b"x"), (b"abc", "x")]
    for key, data in rest:
        same(m.Rest(key=key, data=data).encode)


def test_a_slot_left_empty_gives_the_python_codecs_error(m: ModuleType) -> None:
    check_emptied_slots(_samples(m))


# --- C stays in C -------------------------------------------------------------------------------


def test_well_formed_frames_stay_in_c(m: ModuleType) -> None:
    for cls, wire in _samples(m):
        value = cls.decode(wire)
        calls = python_calls(m, lambda: cls.decode(wire))  # noqa: B023
        calls += python_calls(m, value.encode)
        assert calls == [], (cls, calls)
    # A rule that does not hold gives up, which the check above would see.
    control = b"\x00\x08\x00\x00"  # a Close frame without fin
    assert python_calls(m, lambda: outcome(lambda: m.Sized.decode(control))) != []


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from dataclasses import make_dataclass

    from protoframe.runtime.codec import _framecodec, vocabulary

    cls = make_dataclass("Odd", [("key", object), ("data", object)], slots=True)

    def codec(*rows: tuple[Any, ...]) -> object:
        return _framecodec.FrameCodec(cls, rows, True, lambda value: b"",
                                      lambda cls, data: None, lambda cls, buf, pos, end: None)

    ops, x = vocabulary.OPS, vocabulary.EXPR
    key = (ops["int"], "key", 4, 2, -1, 0, None, None, None, None)
    codec(key, (ops["masked_bytes"], "data", 4, 2, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="key is an earlier"):  # the key after the bytes
        codec((ops["masked_bytes"], "data", 4, 2, -1, 1, None, None, None, None), key)
    with pytest.raises(ValueError, match="key is an earlier"):  # an integer key read as bytes
        codec(key, (ops["masked_bytes"], "data", 0, 0, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="sized by an earlier"):  # sized by its key
        codec(key, (ops["masked_bytes"], "data", 4, 2, 0, 0, None, None, None, None))
    with pytest.raises(ValueError, match="need a slot"):
        codec(key, (ops["masked_bytes"], None, 4, 2, -1, 0, None, None, None, None))
    rule = ((x["field"], 0), (x["const"], 3), (x["lt"], 0))
    codec(key, (ops["requires"], None, 0, 0, -1, 0, rule, None, None, None))
    with pytest.raises(ValueError, match="after every field"):
        codec((ops["requires"], None, 0, 0, -1, 0, rule, None, None, None), key)
    with pytest.raises(ValueError, match="balance"):
        codec(key, (ops["requires"], None, 0, 0, -1, 0, rule[:2], None, None, None))
    with pytest.raises(ValueError, match="unknown step"):
        codec(key, (ops["requires"], None, 0, 0, -1, 0, ((x["param"], 0),), None, None, None))
