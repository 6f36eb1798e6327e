"""Integers with a range (``min:``, ``max:``, ``nonzero:``), MySQL length-encoded integers
(``encoding: lenenc``: stored, nullable, or a constant) and constant strings after a
length-encoded prefix in the compiled frame codec (issue #21: WebSocket's CloseBody, MariaDB's
ColumnDefinition and OkPacket), against the Python methods.

Each is checked as ``test_compiled_frame_ops.py`` checks its rows: the same bytes, values and
errors with both codecs on random values, odd values (out of range, every form of a
length-encoded integer, NULL where it may not be), every truncation and random damage;
well-formed input never reaches the Python methods.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec import compiled
from tests.support.codec_agreement import (
    bare_codec,
    check_emptied_slots,
    check_random_damage,
    check_stays_in_c,
    check_truncations,
    outcome,
    python_calls,
    same,
    same_decodes,
)
from tests.support.compiled_ops import mariadb, needs_framecodec, websocket
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: rops
doc: Ranged and length-encoded integers in the compiled frame codec.
byte_order: little
structs:
  Ranged:
    doc: Integers with bounds, signed and not, fixed width and varint.
    fields:
      - {name: code, type: u16, min: 1000, max: 4999, order: big}
      - {name: delta, type: i32, min: -5, max: 70000}
      - {name: low, type: i8, max: 3}
      - {name: some, type: u64, nonzero: true}
      - {name: v, type: varint, min: 2}
      - {name: w, type: varint, max: 300, nonzero: true}
  Lenenc:
    doc: >-
      Length-encoded integers, stored, nullable and constant, a constant string, and text and
      bytes after a length-encoded integer when bytes remain.
    fields:
      - {name: catalog, type: string, prefix: lenenc, const: def}
      - {name: rows, type: varint, encoding: lenenc}
      - {name: maybe, type: varint, encoding: lenenc, nullable: true}
      - {name: fixed, type: varint, encoding: lenenc, const: 0x0c}
      - {name: big, type: varint, encoding: lenenc, const: 0x123456}
      - {name: tail, type: u8}
      - {name: info, type: string, prefix: lenenc, when_remaining: true}
      - {name: blob, type: bytes, prefix: lenenc, when_remaining: true}
frame:
  name: Frame
  doc: One frame.
  fields:
    - {name: kind, type: u8}
    - {name: length, type: u24, size_of: body}
    - name: body
      type: switch
      on: kind
      cases:
        1: Ranged
        2: Lenenc
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("rops"), "rops", SPEC, "rops_pkg")


def test_ranged_and_lenenc_integers_are_compiled(m: ModuleType) -> None:
    for name in ("Frame", "Ranged", "Lenenc"):
        assert compiled.is_compiled(getattr(m, name)), name
    for cls in (websocket.CloseBody, mariadb.ColumnDefinition, mariadb.OkPacket):
        assert compiled.is_compiled(cls), cls


# --- random values ------------------------------------------------------------------------------

_u64 = st.integers(0, 2**64 - 1)
# Each length-encoded form's edges, and the values beyond them.
_lenenc = st.sampled_from([0, 0xFA, 0xFB, 0xFC, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000,
                           2**64 - 1]) | _u64


@st.composite
def _bodies(draw: st.DrawFn, m: ModuleType) -> Any:
    if draw(st.booleans()):
        return m.Ranged(code=draw(st.integers(990, 5010)), delta=draw(st.integers(-8, 70003)),
                        low=draw(st.integers(-128, 5)), some=draw(st.integers(0, 3) | _u64),
                        v=draw(st.integers(0, 4) | _u64), w=draw(st.integers(0, 302)))
    info = draw(st.none() | st.text(max_size=300))
    return m.Lenenc(rows=draw(_lenenc), maybe=draw(st.none() | _lenenc),
                    tail=draw(st.integers(0, 255)), info=info,
                    blob=None if info is None else draw(st.none() | st.binary(max_size=20)))


@settings(max_examples=scaled(300), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_values_round_trip_the_same_with_both_codecs(m: ModuleType,
                                                            data: st.DataObject) -> None:
    body = data.draw(_bodies(m))
    kind, _ = same(body.encode)
    same(m.Frame(body=body).encode)
    if kind == "value":
        wire = body.encode()
        assert same_decodes(type(body), wire) == "value"
        assert type(body).decode(wire) == body
        assert same_decodes(m.Frame, m.Frame(body=body).encode()) == "value"


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    bodies = [m.Ranged(code=1000, delta=-5, low=3, some=1, v=2, w=300),
              m.Ranged(code=4999, delta=70000, low=-128, some=2**64 - 1, v=2**64 - 1, w=1),
              m.Lenenc(rows=0xFFFF, maybe=None, tail=1), m.Lenenc(rows=0, maybe=2**63, tail=0),
              m.Lenenc(rows=1, maybe=1, tail=2, info="é" * 200, blob=b"b"),
              m.Lenenc(rows=1, maybe=1, tail=2, info="", blob=None)]
    out = [(m.Frame, m.Frame(body=b).encode()) for b in bodies]
    out += [(type(b), b.encode()) for b in bodies]
    column = mariadb.ColumnDefinition(schema="s", table="t", org_table="t", name="id",
                                      org_name="id", character_set=63, column_length=11,
                                      column_type=3, flags=0, decimals=0)
    out += [(websocket.CloseBody, websocket.CloseBody(code=1000, reason="bye").encode()),
            (mariadb.ColumnDefinition, column.encode()),
            (mariadb.OkPacket, mariadb.OkPacket(affected_rows=3, last_insert_id=70000,
                                                status_flags=2, warnings=0,
                                                info="Records: 3  Duplicates: 0").encode()),
            (mariadb.OkPacket, mariadb.OkPacket(affected_rows=0, last_insert_id=0,
                                                status_flags=2, warnings=1).encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=1146, rounds=scaled(150))


@pytest.mark.parametrize("rows", [b"\x05", b"\xfb", b"\xff", b"\xfc\x05\x00", b"\xfc\x05",
                                  b"\xfd\x05\x00\x00", b"\xfe" + bytes(8), b"\xfe" + bytes(7)])
@pytest.mark.parametrize("fixed", [b"\x0c", b"\xfc\x0c\x00", b"\x0d", b"\xfb"])
def test_every_lenenc_form_matches(m: ModuleType, rows: bytes, fixed: bytes) -> None:
    for maybe in (b"\xfb", b"\xfc\x01\x00", b"\xff"):
        for big in (b"\xfd\x56\x34\x12", b"\xfe\x56\x34\x12\x00\x00\x00\x00\x00", b"\xfd\x56"):
            same_decodes(m.Lenenc, b"\x03def" + rows + maybe + fixed + big + b"\x07")
    same_decodes(m.Lenenc, b"\xfc\x03\x00def\x00\xfb" + fixed + b"\xfd\x56\x34\x12\x07")
    same_decodes(m.Lenenc, b"\x03deg\x00\xfb" + fixed + b"\xfd\x56\x34\x12\x07")
    for tail in (rows, rows + b"ab", rows + b"\xc3", b"\x00" + rows + b"ab", b"\x01x\xfb"):
        same_decodes(m.Lenenc, b"\x03def\x00\xfb\x0c\xfd\x56\x34\x12\x07" + tail)
        same_decodes(mariadb.OkPacket, b"\x00\x01\x02\x02\x00\x00\x00" + tail)


def test_values_out_of_range_on_decode_match(m: ModuleType) -> None:
    good = m.Ranged(code=1000, delta=0, low=0, some=1, v=2, w=1).encode()
    for at, byte in ((0, 0x00), (1, 0xE7), (0, 0x13), (0, 0x14), (5, 0x04), (6, 0x80),
                     (6, 0x7F), (7, 0x00), (15, 0x01), (15, 0x00), (16, 0x00), (16, 0xAD)):
        bad = bytearray(good)
        bad[at] = byte
        same_decodes(m.Ranged, bytes(bad))
    same_decodes(websocket.CloseBody, b"\x03\xe7bye")
    same_decodes(websocket.CloseBody, b"\x13\x88")


# --- odd values on encode -----------------------------------------------------------------------


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    good: dict[str, Any] = {"code": 1000, "delta": 0, "low": 0, "some": 1, "v": 2, "w": 1}
    odd: list[dict[str, Any]] = [
        {"code": 999}, {"code": 5000}, {"code": 2**16}, {"code": -1}, {"code": True},
        {"code": 1000.0}, {"code": None}, {"delta": -6}, {"delta": 70001}, {"delta": 2**31},
        {"low": 4}, {"low": -129}, {"some": 0}, {"some": False}, {"some": 2**64},
        {"v": 1}, {"v": -1}, {"v": 2**64}, {"w": 0}, {"w": 301}, {"w": "1"}]
    for change in odd:
        value = m.Ranged(**{**good, **change})
        same(value.encode)
        same(m.Frame(body=value).encode)
    for rows, maybe in ((-1, 0), (2**64, 0), (None, 0), (True, None), (1.0, 1), (0, -1),
                        (0, 2**64), (0, "x")):
        same(m.Lenenc(rows=rows, maybe=maybe, tail=0).encode)
    odd_tail: list[tuple[Any, Any]] = [(None, b"b"), ("i", "b"), (b"i", None), ("\ud800", None),
                                       ("x" * 0x10000, b""), ("i", bytearray(b"b"))]
    for info, blob in odd_tail:
        same(m.Lenenc(rows=0, maybe=0, tail=0, info=info, blob=blob).encode)
    for info in (None, "", "\udc80", b"x"):
        same(mariadb.OkPacket(affected_rows=1, last_insert_id=2, status_flags=0, warnings=0,
                              info=info).encode)
    for code in (999, 5000, 1000, None):
        same(websocket.CloseBody(code=code, reason="").encode)


def test_a_slot_left_empty_gives_the_python_codecs_error(m: ModuleType) -> None:
    check_emptied_slots(_samples(m))


# --- C stays in C -------------------------------------------------------------------------------


def test_well_formed_input_stays_in_c(m: ModuleType) -> None:
    check_stays_in_c(_samples(m))
    assert python_calls(websocket, lambda: outcome(
        lambda: websocket.CloseBody.decode(b"\x00\x01"))) != []


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from protoframe.runtime.codec import vocabulary

    codec = bare_codec
    ops = vocabulary.OPS
    codec((ops["int_range"], "key", 2, 2, -1, 0, (1, 5), None, None, None))
    with pytest.raises(ValueError, match="width"):
        codec((ops["int_range"], "key", 5, 2, -1, 0, (1, 5), None, None, None))
    with pytest.raises(ValueError, match="its bounds"):
        codec((ops["int_range"], "key", 2, 2, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="need a slot"):  # a constant is not stored
        codec((ops["lenenc_int"], "key", 0, 256, -1, 12, None, None, None, None))
    codec((ops["lenenc_int"], None, 0, 256, -1, 12, None, None, None, None))
