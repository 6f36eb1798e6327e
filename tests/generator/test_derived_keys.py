"""Switches on keys with no bytes of their own: a ``derive:`` field worked out from several
fields (AMQP 0-9-1's class id and method id, section 4.2.6 of its specification) and a bit
sub-field (MQTT's packet type, in ``test_bit_fields``). Against frames packed by hand with
``struct``, in round trips, and the specs that are refused, at their positions."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.errors import EncodeError, UnknownCommandTypeError
from tests.support.generate import generate_text, write_spec

SPEC = """\
protocol: am
doc: AMQP 0-9-1 method frames, the method chosen by its class id and method id together.
byte_order: big
structs:
  ConnectionStart:
    doc: connection.start, class 10 method 10 (the table kept as its raw bytes).
    fields:
      - {name: version_major, type: u8}
      - {name: version_minor, type: u8}
      - {name: server_properties, type: bytes, prefix: u32}
      - {name: mechanisms, type: bytes, prefix: u32}
      - {name: locales, type: bytes, prefix: u32}
  BasicPublish:
    doc: basic.publish, class 60 method 40.
    fields:
      - {name: ticket, type: u16}
      - {name: exchange, type: string, prefix: u8}
      - {name: routing_key, type: string, prefix: u8}
      - name: flags
        type: u8
        bits:
          - {width: 6, reserved: true}
          - {name: immediate, type: bool}
          - {name: mandatory, type: bool}
  MethodPayload:
    doc: A method frame's payload.
    fields:
      - {name: class_id, type: u16, value: "method >> 16"}
      - {name: method_id, type: u16, value: "method & 0xffff"}
      - {name: method, type: u32, derive: "(class_id << 16) | method_id"}
      - name: body
        type: switch
        on: method
        cases: {0x000A000A: ConnectionStart, 0x003C0028: BasicPublish}
  MethodFrame:
    doc: A method frame, as AMQP puts it on the wire.
    fields:
      - {name: frame_type, type: u8, const: 1}
      - {name: channel, type: u16}
      - {name: size, type: u32, size_of: payload}
      - {name: payload, type: struct, struct: MethodPayload}
      - {name: frame_end, type: u8, const: 0xCE}
# The frame's own length comes first here: a length that leaves the frame-end octet out is
# another part of issue #16 (adjusted lengths).
frame:
  name: Frame
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: method, type: struct, struct: MethodFrame}
"""


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("am"), "am", SPEC, "am_pkg")


def method_frame(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    # AMQP 0-9-1, 4.2.3 and 4.2.6: type 1, channel, payload size, class id, method id, the
    # arguments, and the frame-end octet 0xCE.
    payload = struct.pack(">HH", class_id, method_id) + arguments
    amqp = struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce"
    return struct.pack(">I", len(amqp)) + amqp


def long_str(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def short_str(text: str) -> bytes:
    return struct.pack(">B", len(text.encode())) + text.encode()


def test_connection_start_against_a_frame_packed_by_hand(am: ModuleType) -> None:
    start = am.ConnectionStart(version_major=0, version_minor=9, server_properties=b"",
                               mechanisms=b"PLAIN AMQPLAIN", locales=b"en_US")
    wire = method_frame(0, 10, 10, struct.pack(">BB", 0, 9) + long_str(b"")
                        + long_str(b"PLAIN AMQPLAIN") + long_str(b"en_US"))
    frame = am.Frame(method=am.MethodFrame(channel=0, payload=am.MethodPayload(body=start)))
    assert frame.encode() == wire
    assert am.Frame.decode(wire) == frame
    # The key and the two ids are computed, not stored.
    assert list(am.MethodPayload.__dataclass_fields__) == ["body"]


def test_basic_publish_against_a_frame_packed_by_hand(am: ModuleType) -> None:
    publish = am.BasicPublish(ticket=0, exchange="", routing_key="jobs", immediate=False,
                              mandatory=True)
    wire = method_frame(1, 60, 40, struct.pack(">H", 0) + short_str("") + short_str("jobs")
                        + b"\x01")
    frame = am.Frame(method=am.MethodFrame(channel=1, payload=am.MethodPayload(
        body=publish)))
    assert frame.encode() == wire
    assert am.Frame.decode(wire) == frame


@pytest.mark.parametrize(("class_id", "method_id"), [(10, 11), (60, 10), (0x3C0, 0x28)])
def test_an_unknown_class_and_method_is_refused_with_the_key(am: ModuleType, class_id: int,
                                                             method_id: int) -> None:
    wire = method_frame(0, class_id, method_id, b"")
    with pytest.raises(UnknownCommandTypeError, match="MethodPayload.method: no layout") as info:
        am.Frame.decode(wire)
    assert info.value.command_type == class_id << 16 | method_id


@settings(max_examples=200, deadline=None)
@given(channel=st.integers(0, 2**16 - 1), ticket=st.integers(0, 2**16 - 1),
       exchange=st.text(max_size=8), routing_key=st.text(max_size=8), immediate=st.booleans(),
       mandatory=st.booleans(), mechanisms=st.binary(max_size=20))
def test_round_trips(am: ModuleType, channel: int, ticket: int, exchange: str,
                     routing_key: str, immediate: bool, mandatory: bool,
                     mechanisms: bytes) -> None:
    publish = am.BasicPublish(ticket=ticket, exchange=exchange, routing_key=routing_key,
                              immediate=immediate, mandatory=mandatory)
    start = am.ConnectionStart(version_major=0, version_minor=9, server_properties=b"",
                               mechanisms=mechanisms, locales=b"en_US")
    for body in (publish, start):
        frame = am.Frame(method=am.MethodFrame(channel=channel, payload=am.MethodPayload(
            body=body)))
        wire = frame.encode()
        assert am.Frame.decode(wire) == frame
    assert wire[11:15] == bytes.fromhex("000a000a")


def test_value_expressions_that_lose_the_key_are_refused_on_encode(tmp_path: Path) -> None:
    # class_id written as a byte too few: deriving the key back does not give the code.
    text = SPEC.replace('value: "method >> 16"', 'value: "(method >> 16) & 0xf"')
    am = generate_text(tmp_path, "am", text, "am_bad_pkg")
    publish = am.BasicPublish(ticket=0, exchange="", routing_key="", immediate=False,
                              mandatory=False)
    frame = am.Frame(method=am.MethodFrame(channel=0, payload=am.MethodPayload(body=publish)))
    with pytest.raises(EncodeError, match="MethodPayload.method = 3932200 does not fit"):
        frame.encode()


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "am", text), "specs", ["am"])
    return str(info.value.errors[0])


def _column(text: str, line_has: str, token: str) -> str:
    lines = text.splitlines()
    line_no = next(i for i, line in enumerate(lines, 1) if line_has in line)
    return f"specs/am/am.yaml:{line_no}:{lines[line_no - 1].index(token) + 1}:"


def test_an_expression_as_the_key_is_refused_with_the_way_to_write_it(tmp_path: Path) -> None:
    text = SPEC.replace("        on: method\n", '        on: "(class_id << 16) | method_id"\n')
    error = _error(tmp_path, text)
    assert "switch on: '(class_id << 16) | method_id' is not a field name; to switch on an " \
        "expression, declare it as a derive: field" in error
    assert error.startswith(_column(text, "on: \"(class_id", '"(class_id')), error


def test_a_derived_key_that_nothing_writes_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace('{name: class_id, type: u16, value: "method >> 16"}',
                        "{name: class_id, type: u16}").replace(
        '{name: method_id, type: u16, value: "method & 0xffff"}',
        "{name: method_id, type: u16}")
    error = _error(tmp_path, text)
    assert "'method' is derived on decode but no value: expression puts it on the wire" in error
    assert error.startswith(_column(text, "{name: method, type: u32", '"(class_id')), error


def test_a_key_after_the_switch_is_still_refused(tmp_path: Path) -> None:
    text = SPEC.replace("        on: method\n", "        on: later\n")
    error = _error(tmp_path, text)
    assert "switch on: 'later' is not an integer field before 'body'" in error
