"""Terminated bytes and text (``terminator:``) and structs ended by a delimiter
(``delimiter:``) in the compiled frame codec (issue #21: WebSocket's opening handshake,
MariaDB's C strings), against the Python methods.

Each is checked as ``test_compiled_frame_ops.py`` checks its rows: the same bytes, values and
errors with both codecs on random values, odd values (a value holding its terminator, or ending
with the start of a longer one; content holding the delimiter; text that is not UTF-8), every
truncation and random damage; well-formed input never reaches the Python methods.
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
protocol: tops
doc: Terminated fields and delimited structs in the compiled frame codec.
byte_order: little
structs:
  Line:
    doc: A request line and its headers, up to an empty line.
    delimiter: "\\r\\n\\r\\n"
    fields:
      - {name: method, type: string, terminator: "' '"}
      - {name: target, type: string, terminator: "' '"}
      - {name: version, type: string, const: "HTTP/1.1\\r\\n"}
      - {name: headers, type: string, size: rest}
  Strings:
    doc: C strings, bytes ended by two bytes, and modified UTF-8 ended by a newline.
    fields:
      - {name: a, type: string, terminator: 0}
      - {name: b, type: bytes, terminator: '"\\r\\n"'}
      - {name: c, type: string, terminator: '"\\n"', encoding: mutf8}
      - {name: n, type: u16}
  Fielded:
    doc: A delimited struct whose fields end before the delimiter by themselves.
    delimiter: "||"
    fields:
      - {name: key, type: string, terminator: "'='"}
      - {name: value, type: u32}
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
        1: Line
        2: Strings
        3: Fielded
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("tops"), "tops", SPEC, "tops_pkg")


def test_terminated_and_delimited_structs_are_compiled(m: ModuleType) -> None:
    for name in ("Frame", "Line", "Strings", "Fielded"):
        assert compiled.is_compiled(getattr(m, name)), name
    for cls in (websocket.Upgrade, websocket.Accepted, mariadb.AuthSwitchRequest):
        assert compiled.is_compiled(cls), cls


# --- random values ------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12) | st.text(
    st.sampled_from(" \r\n=|a\x00é"), max_size=12)
_bytes = st.binary(max_size=12) | st.lists(st.sampled_from([b"\r", b"\n", b"x", b"\r\n"]),
                                           max_size=6).map(b"".join)


@st.composite
def _bodies(draw: st.DrawFn, m: ModuleType) -> Any:
    kind = draw(st.sampled_from(["line", "strings", "fielded"]))
    if kind == "line":
        return m.Line(method=draw(_text), target=draw(_text), headers=draw(_text))
    if kind == "strings":
        return m.Strings(a=draw(_text), b=draw(_bytes), c=draw(_text), n=draw(st.integers(0, 9)))
    return m.Fielded(key=draw(_text), value=draw(st.integers(0, 2**32 - 1)))


@settings(max_examples=scaled(300), deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_values_round_trip_the_same_with_both_codecs(m: ModuleType,
                                                            data: st.DataObject) -> None:
    body = data.draw(_bodies(m))
    kind, _ = same(body.encode)
    same(m.Frame(body=body).encode)
    if kind == "value":
        # Not every value encoded reads back (an empty Line's version line meets the
        # delimiter): both codecs must agree on which.
        wire = body.encode()
        if same_decodes(type(body), wire) == "value":
            assert type(body).decode(wire) == body
        same_decodes(m.Frame, m.Frame(body=body).encode())


# --- damaged input ------------------------------------------------------------------------------


def _samples(m: ModuleType) -> list[tuple[Any, bytes]]:
    bodies = [m.Line(method="GET", target="/chat", headers="Host: x\r\nUpgrade: websocket"),
              m.Line(method="", target="", headers="H"),
              m.Strings(a="héllo", b=b"\rx\n", c="java", n=7), m.Strings(a="", b=b"", c="", n=0),
              m.Fielded(key="k", value=0x01020304)]
    out = [(m.Frame, m.Frame(body=b).encode()) for b in bodies]
    out += [(type(b), b.encode()) for b in bodies]
    out += [(websocket.Upgrade, websocket.Upgrade(target="/chat", headers="Host: a").encode()),
            (websocket.Accepted, websocket.Accepted(status="101", reason="Switching Protocols",
                                                    headers="Upgrade: websocket").encode()),
            (mariadb.AuthSwitchRequest, mariadb.AuthSwitchRequest(
                plugin_name="mysql_native_password", plugin_data=b"12345678901234567890\x00")
             .encode())]
    return out


def test_every_truncation_gives_the_same_outcome(m: ModuleType) -> None:
    check_truncations(_samples(m), trailers=(b"\x00", b"\r\n\r\n", b"||"))


def test_random_damage_gives_the_same_outcome(m: ModuleType) -> None:
    check_random_damage(_samples(m), seed=6455, rounds=scaled(150))


@pytest.mark.parametrize("wire", [
    b"GET / HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n\r\n", b"GET /HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nA\r\n\r\nB\r\n\r\n", b"\xff / HTTP/1.1\r\n\r\n",
    b"GET \xc3 HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n", b"GET  HTTP/1.1\r\n\r\n",
])
def test_lines_and_delimiters_on_decode_match(m: ModuleType, wire: bytes) -> None:
    same_decodes(m.Line, wire)
    same_decodes(websocket.Upgrade, wire)
    for fielded in (b"k=\x01\x02\x03\x04||", b"k=\x01\x02\x03||", b"k=\x01\x02\x03\x04x||",
                    b"=\x01\x02\x03\x04||x", b"k\x01\x02\x03\x04||", b"k=||\x01\x02||"):
        same_decodes(m.Fielded, fielded)
    for strings in (b"a\x00\r\n\n\x01\x00", b"a\x00\r\r\n\xc3\xa9\n\x01\x00",
                    b"\xff\x00\r\n\n\x01\x00",
                    b"a\x00x\r\n\xc0\x80\n\x01\x00", b"a\x00\n\n\x01\x00"):
        same_decodes(m.Strings, strings)


# --- odd values on encode -----------------------------------------------------------------------


def test_odd_values_encode_as_the_python_codec_does(m: ModuleType) -> None:
    line: dict[str, Any] = {"method": "GET", "target": "/", "headers": "H: v"}
    for change in ({"method": "G T"}, {"target": " "}, {"headers": "a\r\n\r\nb"},
                   {"headers": "a\r\n"}, {"headers": "a\r"}, {"headers": "\r\n\r"},
                   {"target": "\r\n\r\n"}, {"method": b"GET"}, {"method": None},
                   {"target": "\ud800"}, {"headers": 5}, {"method": "é\x00"}):
        value = m.Line(**{**line, **change})
        same(value.encode)
        same(m.Frame(body=value).encode)
    strings: dict[str, Any] = {"a": "a", "b": b"b", "c": "c", "n": 1}
    changes: list[dict[str, Any]] = [
        {"a": "x\x00"}, {"b": b"x\r\n"}, {"b": b"x\r"}, {"b": b"\r"}, {"b": b"\n"},
        {"b": b"\r\r\n"}, {"c": "line\n"}, {"c": "\x00"}, {"c": "é"}, {"c": b"c"},
        {"b": bytearray(b"b")}, {"b": "b"}, {"a": None}, {"n": -1}]
    for change in changes:
        same(m.Strings(**{**strings, **change}).encode)
    for key, value in (("k=", 1), ("|", 1), ("k|", 1), ("k", 0x7C7C7C7C), ("k", 0x7C), ("", 2**32)):
        same(m.Fielded(key=key, value=value).encode)
    for target in ("/a b", "/\r\n\r\n", "\udc80"):
        same(websocket.Upgrade(target=target, headers="").encode)


def test_a_slot_left_empty_gives_the_python_codecs_error(m: ModuleType) -> None:
    check_emptied_slots(_samples(m))


# --- C stays in C -------------------------------------------------------------------------------


def test_well_formed_input_stays_in_c(m: ModuleType) -> None:
    check_stays_in_c(_samples(m))
    assert python_calls(m, lambda: outcome(lambda: m.Line.decode(b"GET /"))) != []


def test_rows_the_codec_cannot_follow_are_refused() -> None:
    from protoframe.runtime.codec import vocabulary

    codec = bare_codec
    ops = vocabulary.OPS
    text = (ops["terminated"], "key", 0, 0, -1, 1, b"\x00", None, None, None)
    delimited = (ops["delimited"], None, 0, 0, -1, 0, b"\r\n", None, None, None)
    codec(delimited, text)
    with pytest.raises(ValueError, match="first row"):
        codec(text, delimited)
    with pytest.raises(ValueError, match="first row"):
        codec((ops["delimited"], None, 0, 0, -1, 0, b"", None, None, None), text)
    with pytest.raises(ValueError, match="terminator and text kind"):
        codec((ops["terminated"], "key", 0, 0, -1, 1, b"", None, None, None))
    with pytest.raises(ValueError, match="terminator and text kind"):
        codec((ops["terminated"], "key", 0, 0, -1, 3, b"\x00", None, None, None))
    with pytest.raises(ValueError, match="need a slot"):
        codec((ops["terminated"], None, 0, 0, -1, 1, b"\x00", None, None, None))
