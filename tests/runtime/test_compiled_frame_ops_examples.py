"""The operations the example protocols' frames brought to the compiled frame codec (issue #21's
MariaDB, AMQP and WebSocket rows), against the Python methods.

Three-byte integers (``u24``/``i24``: MariaDB's packet length), bytes or text after a MySQL
length-encoded integer (``prefix: lenenc``, nullable or not: a row's values), constant bytes and
strings, bytes and text of a fixed length, and text to the end of the region (MariaDB's
ErrPacket and COM_QUERY, AMQP's protocol header). Each is checked
as ``test_compiled_frame_ops.py`` checks its rows: the same bytes, the same values and the
same errors with both codecs, on random values, odd values, every truncation, random damage
and hand-made edge cases; well-formed frames never reach the Python methods. A one-file spec
holds one of each, and the MariaDB example's own package uses them.
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import frames_examples
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
from tests.support.compiled_ops import amqp, mariadb, needs_framecodec
from tests.support.examples import scaled
from tests.support.generate import generate_text

pytestmark = needs_framecodec

SPEC = """\
protocol: xops
doc: The operations the example protocols brought to the compiled frame codec.
byte_order: little
structs:
  Ints:
    doc: Three-byte integers, unsigned and signed.
    fields:
      - {name: a, type: u24}
      - {name: b, type: i24}
      - {name: c, type: u8}
      - {name: d, type: i24, order: big}
      - {name: name, type: string, prefix: u24}
  Strings:
    doc: Length-encoded bytes and text, nullable and not.
    fields:
      - {name: blob, type: bytes, prefix: lenenc}
      - {name: text, type: string, prefix: lenenc}
      - {name: maybe, type: bytes, prefix: lenenc, nullable: true}
      - {name: maybe_text, type: string, prefix: lenenc, nullable: true}
  Row:
    doc: Nullable values up to the end, as a result-set row.
    fields:
      - {name: values, type: array, of: Cell, until_end: true}
  Cell:
    doc: One nullable value.
    fields:
      - {name: value, type: bytes, prefix: lenenc, nullable: true}
  Result:
    doc: A row, unless a peeked end or error comes first (has() in a condition).
    fields:
      - {name: end, type: struct, struct: Ints, when_peek: {type: u8, equals: 0xfe}}
      - {name: error, type: struct, struct: Fixed, when_peek: {type: u8, equals: 0x23}}
      - {name: flag, type: u8, when: "has(end) or not has(error)"}
      - name: values
        type: array
        of: Cell
        until_end: true
        when: "not has(end) and not has(error)"
  Fixed:
    doc: Constant strings and bytes, text and bytes of a fixed length, text to the end.
    fields:
      - {name: marker, type: string, const: "#"}
      - {name: magic, type: bytes, const: "0x0009"}
      - {name: state, type: string, length: 5}
      - {name: code, type: bytes, length: 3}
      - {name: message, type: string, size: rest}
frame:
  name: Packet
  doc: A kind, a sequence number, a u24 size and the body the kind chooses.
  fields:
    - {name: kind, type: u8}
    - {name: seq, type: u8}
    - {name: length, type: u24, size_of: body}
    - name: body
      type: switch
      on: kind
      cases:
        1: Ints
        2: Strings
        3: Row
        4: Fixed
        5: Result
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("xops"), "xops", SPEC, "xops_pkg")


def test_the_new_operations_are_compiled(m: ModuleType) -> None:
    for name in ("Packet", "Ints", "Strings", "Row", "Cell", "Fixed", "Result"):
        assert compiled.is_compiled(getattr(m, name)), name
    for cls in (mariadb.Packet, mariadb.Value, mariadb.ErrPacket, mariadb.ComQuery,
                mariadb.RowPacket, mariadb.HandshakeResponse, mariadb.QueryResponse,
                amqp.ProtocolHeader):
        assert compiled.is_compiled(cls), cls


# --- random values ------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20) | st.text(
    st.characters(max_codepoint=0x7F), max_size=300)
# Lengths on both sides of each lenenc form's edge: one byte below 0xfb, 0xfc and a u16 up to
# 0xffff, 0xfd and a u24 above.
_blob = st.binary(max_size=20) | st.sampled_from([250, 251, 252, 0xFFFF, 0x10000]).map(
    lambda n: b"\x07" * n)


def _result(m: ModuleType, which: str, flag: int, values: list[bytes | None]) -> Any:
    """A Result that is an end, an error or a row, each field set as its condition says."""
    end = m.Ints(a=0xFE, b=1, c=2, d=3, name="") if which == "end" else None
    error = m.Fixed(state="HY000", code=b"abc", message="e") if which == "error" else None
    return m.Result(end=end, error=error, flag=None if which == "error" else flag,
                    values=[m.Cell(value=v) for v in values] if which == "row" else None)


@st.composite
def _bodies(draw: st.DrawFn, m: ModuleType) -> Any:
    kind = draw(st.sampled_from(["ints", "strings", "row", "fixed", "result"]))
    if kind == "result":
        # A row's flag byte is what the decoder peeks: 0xfe would read as an end, 0x23 as an
        # error, so a row never starts with them (nor does MariaDB's).
        return _result(m, draw(st.sampled_from(["end", "error", "row"])),
                       draw(st.integers(0, 255).filter(lambda flag: flag not in (0xFE, 0x23))),
                       draw(st.lists(st.none() | st.binary(max_size=9), max_size=4)))
    if kind == "fixed":
        return m.Fixed(state=draw(st.text(st.characters(max_codepoint=0x7F), min_size=5,
                                          max_size=5) | st.sampled_from(["é" * 2 + "x", "ab"])),
                       code=draw(st.binary(min_size=2, max_size=4)), message=draw(_text))
    if kind == "ints":
        return m.Ints(a=draw(st.integers(0, 2**24 - 1)), b=draw(st.integers(-2**23, 2**23 - 1)),
                      c=draw(st.integers(0, 255)), d=draw(st.integers(-2**23, 2**23 - 1)),
                      name=draw(_text))
    if kind == "strings":
        return m.Strings(blob=draw(_blob), text=draw(_text), maybe=draw(st.none() | _blob),
                         maybe_text=draw(st.none() | _text))
    return m.Row(values=draw(st.lists(st.builds(lambda v: m.Cell(value=v),
                                                st.none() | st.binary(max_size=300)),
                                      max_size=6)))


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_frames_round_trip_the_same_with_both_codecs(m: ModuleType,
                                                            data: st.DataObject) -> None:
    frame = m.Packet(seq=data.draw(st.integers(0, 255)), body=data.draw(_bodies(m)))
    kind, _ = same(frame.encode)
    if kind == "value":
        wire = frame.encode()
        assert same_decodes(m.Packet, wire) == "value"
        assert m.Packet.decode(wire) == frame


@settings(max_examples=scaled(100), deadline=None)
@given(seq=st.integers(0, 255), values=st.lists(st.none() | st.binary(max_size=300), max_size=8))
def test_mariadb_row_packets_round_trip(seq: int, values: list[bytes | None]) -> None:
    row = mariadb.RowPacket(values=[mariadb.Value(value=v) for v in values])
    assert same(row.encode)[0] == "value"
    packet = mariadb.Packet(sequence_id=seq, payload=row.encode())
    assert same(packet.encode)[0] == "value"
    wire = packet.encode()
    assert same_decodes(mariadb.Packet, wire) == "value"
    for value in row.values or []:
        assert same_decodes(mariadb.Value, value.encode()) == "value"


# Capabilities with CONNECT_WITH_DB (0x8) and CLIENT_PLUGIN_AUTH (0x80000) on and off.
_capabilities = st.integers(0, 2**32 - 1) | st.sampled_from([0, 0x8, 0x80000, 0x80008])


def _handshake(capabilities: int, database: object, plugin: object) -> Any:
    """A HandshakeResponse whose guarded C strings are set as its capabilities say."""
    return mariadb.HandshakeResponse(
        capabilities=capabilities, max_packet_size=0x1000000, character_set=33,
        mariadb_capabilities=0, username="root", auth_response=b"\x14" * 20,
        database=database if capabilities & 0x8 else None,
        auth_plugin_name=plugin if capabilities & 0x80000 else None)


def _query_response(which: str, column_count: int) -> Any:
    """A QueryResponse that is an OK, an error or a result set's column count."""
    return mariadb.QueryResponse(
        ok=mariadb.OkPacket(affected_rows=1, last_insert_id=2, status_flags=2, warnings=0,
                            info=None) if which == "ok" else None,
        error=mariadb.ErrPacket(error_code=1146, sql_state="42S02", error_message="t")
        if which == "error" else None,
        column_count=column_count if which == "count" else None)


# Column counts on both sides of each lenenc form's edge (0xfb..0xff begin no one-byte form);
# never 0, whose byte reads as an OK packet (as MariaDB's).
_counts = st.integers(1, 2**64 - 1) | st.sampled_from(
    [1, 0xFA, 0xFB, 0xFC, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000])


@settings(max_examples=scaled(100), deadline=None)
@given(capabilities=_capabilities, database=_text.filter(lambda t: "\x00" not in t),
       plugin=_text, which=st.sampled_from(["ok", "error", "count"]), count=_counts)
def test_mariadb_guarded_fields_round_trip(capabilities: int, database: str, plugin: str,
                                           which: str, count: int) -> None:
    """HandshakeResponse's C strings under a capability bit and QueryResponse's column count
    under has(): the same bytes, values and errors (a plugin name holding NUL is one)."""
    for value in (_handshake(capabilities, database, plugin), _query_response(which, count)):
        kind, _ = same(value.encode)
        if kind == "value":
            wire = value.encode()
            assert same_decodes(type(value), wire) == "value"
            assert type(value).decode(wire) == value


def test_mariadb_guarded_fields_out_of_place_encode_as_the_python_codec_does() -> None:
    """A guarded field set where its guard does not hold, left None where it holds, or of
    another type: the Python codec's outcome."""
    for capabilities in (0, 0x8, 0x80000, 0x80008):
        for database in (None, "db", b"db", 1, "a\x00b", "\ud800"):
            for plugin in (None, "mysql_native_password", b"p"):
                value = _handshake(0x80008, database, plugin)
                value.capabilities = capabilities
                same(value.encode)
    ok = _query_response("ok", 0).ok
    error = _query_response("error", 0).error
    for o in (None, ok):
        for e in (None, error):
            for count in (None, 0, 0xFB, 2**64 - 1, 2**64, -1, "1", True, 1.0):
                value = mariadb.QueryResponse(ok=o, error=e, column_count=count)
                kind, _ = same(value.encode)
                if kind == "value":
                    same_decodes(mariadb.QueryResponse, value.encode())


@pytest.mark.parametrize("count", [b"\xfb", b"\xfc\x01\x00", b"\xfc\x01", b"\xfd\x00\x00\x01",
                                   b"\xfe" + b"\xff" * 8, b"\xfe\x01", b"\x03\x00", b""])
def test_mariadb_column_count_forms_match(count: bytes) -> None:
    """NULL where it may not be, forms not the shortest, cut, trailing bytes, nothing."""
    same_decodes(mariadb.QueryResponse, count)


def test_the_bench_frames_agree() -> None:
    wire = frames_examples.mariadb_ours_encode()
    assert same(frames_examples.mariadb_ours_encode)[1] == repr(wire)
    assert same(lambda: frames_examples.mariadb_ours_decode(wire))[0] == "value"
    assert frames_examples.mariadb_ours_decode(wire) == frames_examples.MARIADB_EXPECTED


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    bodies = [m.Ints(a=0xABCDEF, b=-5, c=1, d=-2**23, name="n"),
              m.Strings(blob=b"x" * 300, text="héllo", maybe=None, maybe_text="t"),
              m.Strings(blob=b"", text="", maybe=b"m", maybe_text=None),
              m.Row(values=[m.Cell(value=b"4242"), m.Cell(value=None), m.Cell(value=b"")]),
              m.Fixed(state="HY000", code=b"abc", message="no such table: é"),
              _result(m, "end", 1, []), _result(m, "error", 0, []),
              _result(m, "row", 7, [b"a", None, b""]), _result(m, "row", 0, [])]
    out = [(m.Packet, m.Packet(seq=7, body=b).encode()) for b in bodies]
    out += [(m.Strings, bodies[1].encode()), (m.Cell, m.Cell(value=b"abc").encode())]
    out += [(mariadb.Packet, frames_examples.mariadb_ours_encode()),
            (mariadb.Value, mariadb.Value(value=b"y" * 260).encode()),
            (mariadb.ErrPacket, mariadb.ErrPacket(error_code=1146, sql_state="42S02",
                                                  error_message="Table 't' doesn't exist")
             .encode()),
            (mariadb.ComQuery, mariadb.ComQuery(query="SELECT 1").encode()),
            (amqp.ProtocolHeader, amqp.ProtocolHeader().encode()),
            (mariadb.RowPacket, mariadb.RowPacket(values=[
                mariadb.Value(value=b"1"), mariadb.Value(value=None)]).encode()),
            (mariadb.RowPacket, mariadb.RowPacket(end=mariadb.EofPacket(
                warnings=0, status_flags=2)).encode()),
            (mariadb.RowPacket, mariadb.RowPacket(error=mariadb.ErrPacket(
                error_code=1, sql_state="HY000", error_message="x")).encode())]
    out += [(mariadb.HandshakeResponse, _handshake(c, "test", "mysql_native_password").encode())
            for c in (0x8, 0x80008)]
    out += [(mariadb.QueryResponse, _query_response(which, count).encode())
            for which, count in (("ok", 0), ("error", 0), ("count", 0xFFFF))]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=21, rounds=scaled(150))


@pytest.mark.parametrize("prefix", [
    b"\xfb",  # NULL where none may be
    b"\xff",  # begins no length-encoded integer
    b"\xfc\x02\x00", b"\xfc\x02", b"\xfc",  # a u16 length: the bytes there, cut, missing
    b"\xfd\x02\x00\x00", b"\xfd\x02\x00",  # a u24 length
    b"\xfe\x02\x00\x00\x00\x00\x00\x00\x00", b"\xfe" + b"\xff" * 8,  # a u64 length, a huge one
    b"\xfe\x02\x00\x00",  # a u64 length cut
    b"\x05",  # a length past the end
])
def test_lenenc_forms_and_damage_match(m: ModuleType, prefix: bytes) -> None:
    """Every form of the length, the shortest or not, and the ones the Python reader refuses
    (NULL where it may not be, 0xff, a length running past the end)."""
    rest = b"ab" + b"\x00\x00\xfb"  # the value, empty text, two NULLs
    same_decodes(m.Strings, prefix + rest)
    same_decodes(m.Cell, prefix + b"ab")
    same_decodes(m.Row, prefix + b"ab" + b"\xfb")
    body = b"\x00" + prefix + b"ab\xfb\xfb"  # the blob empty, then the text
    same_decodes(m.Strings, body)
    same_decodes(m.Packet, b"\x02\x01" + struct.pack("<I", len(body))[:3] + body)


@pytest.mark.parametrize("text", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok\x00", b"\xe2\x82\xac"])
def test_bad_and_unusual_text_bytes_match(m: ModuleType, text: bytes) -> None:
    for body in (b"\x00" + bytes([len(text)]) + text + b"\xfb\xfb",
                 b"\x00\x00\xfb" + bytes([len(text)]) + text):
        same_decodes(m.Strings, body)


def test_u24_edges_match(m: ModuleType) -> None:
    for a, b in ((0, 0), (2**24 - 1, 2**23 - 1), (1, -2**23), (0x800000, -1)):
        value = m.Ints(a=a, b=b, c=0, d=b, name="x" * (a & 0x1FF))
        wire = value.encode()
        assert wire[:6] == a.to_bytes(3, "little") + b.to_bytes(3, "little", signed=True)
        assert wire[7:10] == b.to_bytes(3, "big", signed=True)
        assert same_decodes(m.Ints, wire) == "value"
        assert m.Ints.decode(wire) == value
    # A u24 prefix past the end.
    same_decodes(m.Ints, bytes(7) + b"\x05\x00\x00ab")
    # A packet's size past its end, and one short of it.
    for size in (0xFFFFFF, 5, 3):
        same_decodes(m.Packet, b"\x01\x00" + size.to_bytes(3, "little") + bytes(7))


@pytest.mark.parametrize("text", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok\x00", b"\xe2\x82"])
def test_bad_fixed_and_trailing_text_matches(m: ModuleType, text: bytes) -> None:
    head = b"#\x00\x09"
    for body in (head + (text + b"xxxxx")[:5] + b"abc", head + b"HY000abc" + text,
                 b"!" + head[1:] + b"HY000abc", b"#\x00\x08HY000abc", head + b"HY0"):
        same_decodes(m.Fixed, body)
        same_decodes(m.Packet, b"\x04\x00" + struct.pack("<I", len(body))[:3] + body)
    same_decodes(mariadb.ComQuery, b"\x03" + text)
    same_decodes(mariadb.ErrPacket, b"\xff\x01\x00#" + (text + b"xxxxx")[:5] + text)
    same_decodes(amqp.ProtocolHeader, b"AMQP\x00\x00\x09" + text[:1])


# --- odd values on encode -----------------------------------------------------------------------


def test_conditions_with_has_encode_as_the_python_codec_does(m: ModuleType) -> None:
    """Every mix of end, error, flag and values, the ones the conditions allow and the rest."""
    end = m.Ints(a=0xFE, b=1, c=2, d=3, name="")
    error = m.Fixed(state="HY000", code=b"abc", message="e")
    kinds = set()
    for e in (None, end):
        for r in (None, error):
            for flag in (None, 5, "x"):
                for values in (None, [], [m.Cell(value=b"v")], (m.Cell(value=None),)):
                    value = m.Result(end=e, error=r, flag=flag, values=values)
                    kind, _ = same(value.encode)
                    kinds.add(kind)
                    if kind == "value":
                        same_decodes(m.Result, value.encode())
    assert kinds == {"value", "raised"}
    for e, r, values in ((None, None, None), (end, None, []), (None, error, [])):
        same(mariadb.RowPacket(end=e and mariadb.EofPacket(warnings=0, status_flags=0),
                                error=r and mariadb.ErrPacket(error_code=1, sql_state="HY000",
                                                              error_message=""),
                                values=values).encode)


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    for change in ({"a": -1}, {"a": 2**24}, {"a": None}, {"a": True}, {"a": 1.0},
                   {"b": 2**23}, {"b": -2**23 - 1}, {"b": "x"}, {"d": 2**23},
                   {"name": "x" * 2**24}, {"name": None}):
        ints = m.Ints(**{"a": 1, "b": 2, "c": 3, "d": 4, "name": "", **change})
        same(ints.encode)
        same(m.Packet(seq=0, body=ints).encode)
    good: dict[str, Any] = {"blob": b"b", "text": "t", "maybe": None, "maybe_text": None}
    odd: list[dict[str, Any]] = [
        {"blob": None}, {"blob": bytearray(b"ab")}, {"blob": "text"}, {"blob": b"x" * 0x10000},
        {"blob": b"x" * 0x1000000}, {"text": None}, {"text": b"bytes"}, {"text": "\ud800"},
        {"text": "é\x00€😀"}, {"maybe": "x"}, {"maybe": memoryview(b"x")},
        {"maybe_text": b"x"}, {"maybe_text": "\udfff"}, {"maybe_text": ""},
    ]
    for change in odd:
        strings = m.Strings(**{**good, **change})
        same(strings.encode)
        same(m.Packet(seq=0, body=strings).encode)
    fixed: dict[str, Any] = {"state": "HY000", "code": b"abc", "message": "m"}
    odd_fixed: list[dict[str, Any]] = [
        {"state": "HY00"}, {"state": "HY0000"}, {"state": "é" * 3}, {"state": "éé"},
        {"state": b"HY000"}, {"state": None}, {"state": "\ud800" * 5}, {"code": b"ab"},
        {"code": bytearray(b"abc")}, {"code": "abc"}, {"message": None}, {"message": b"m"},
        {"message": "\udc80"}, {"message": "x" * 70000}]
    for change in odd_fixed:
        value = m.Fixed(**{**fixed, **change})
        same(value.encode)
        same(m.Packet(seq=0, body=value).encode)
    for query in ("", "SELECT 'é'", None, b"SELECT", "\ud800"):
        same(mariadb.ComQuery(query=query).encode)
    for values in ([m.Cell(value=b"a"), "x"], (m.Cell(value=None),),
                   [m.Ints(a=0, b=0, c=0, d=0, name="")]):
        same(m.Row(values=values).encode)
    same(m.Packet(seq=2**8, body=m.Cell(value=None)).encode)
    same(m.Packet(seq=1, body=m.Row(values=[m.Cell(value=b"z" * 0x1000000)])).encode)


def test_a_slot_left_empty_gives_the_python_codecs_error(m: ModuleType) -> None:
    check_emptied_slots(_samples(m))


def test_constructors_agree(m: ModuleType) -> None:
    for kwargs in ({}, {"value": None}, {"value": b"v"}):
        made = m.Cell(**kwargs)
        with compiled.pure_python():
            reference = m.Cell(**kwargs)
        assert made == reference and made.value == reference.value


# --- C stays in C -------------------------------------------------------------------------------


def test_well_formed_frames_stay_in_c(m: ModuleType) -> None:
    check_stays_in_c(_samples(m))
    # A give-up does run them: the check above would see it.
    assert python_calls(m, lambda: outcome(lambda: m.Cell.decode(b"\xff"))) != []


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from protoframe.runtime.codec import vocabulary

    codec = bare_codec
    ops = vocabulary.OPS
    with pytest.raises(ValueError, match="text kind"):
        codec((ops["lenenc"], "key", 0, 0, -1, 2, None, None, None, None))
    with pytest.raises(ValueError, match="need a slot"):
        codec((ops["lenenc"], None, 0, 0, -1, 0, None, None, None, None))
    with pytest.raises(ValueError, match="width"):
        codec((ops["int"], "key", 5, 0, -1, 0, None, None, None, None))
    codec((ops["int"], "key", 3, 0, -1, 0, None, None, None, None))  # u24 is taken
    with pytest.raises(ValueError, match="its bytes"):
        codec((ops["const_bytes"], None, 0, 0, -1, 0, "#", None, None, None))
    with pytest.raises(ValueError, match="its length"):
        codec((ops["fixed"], "key", 0, 0, -1, 1, None, None, None, None))
    with pytest.raises(ValueError, match="text kind"):
        codec((ops["text_rest"], "key", 0, 0, -1, 2, None, None, None, None))
    has, no = vocabulary.EXPR["has"], vocabulary.EXPR["not"]
    with pytest.raises(ValueError, match="optional struct rows"):  # has() of an int row
        codec((ops["int"], "key", 1, 0, -1, 0, None, None, None, None),
              (ops["condition"], "key", 1, 0, -1, 0, ((has, 0), (no, 0)), None, None, None))
