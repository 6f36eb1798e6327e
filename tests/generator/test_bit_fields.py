"""Bit fields (``bits:``): named runs of bits inside an unsigned integer, bools of one bit,
must-be-zero reserved bits, sub-fields in conditions and as a switch's key. Against bytes
packed by hand with ``struct`` from the public specifications (MQTT 3.1.1 section 2.2, RFC 6455
section 5.2, AMQP 0-9-1 section 4.2.5.2), in round trips, with each kind of bad input and bad
spec, and through ``mypy --strict``."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate, load_frame_specs
from protoframe.generator.errors import SpecErrors
from protoframe.generator.layout_ops import ReadPacked, SubField, kind_op
from protoframe.generator.layout_plan import plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.generator.spec_ir import FrameSpec
from protoframe.runtime.codec import compiled, compiled_frames
from protoframe.runtime.errors import (
    DecodeError,
    ReservedBitsError,
    UnknownCommandTypeError,
    UnknownEnumValueError,
    ValueOutOfRangeError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

SPEC = """\
protocol: bf
doc: Bit fields as MQTT, WebSocket and AMQP pack them.
byte_order: big
enums:
  Opcode: {CONTINUATION: 0, TEXT: 1, BINARY: 2, CLOSE: 8, PING: 9, PONG: 10}
structs:
  MqttPublish:
    doc: MQTT's fixed header byte with PUBLISH's flags; a packet id only when qos > 0.
    fields:
      - name: header
        type: u8
        bits:
          - {name: kind, width: 4, doc: The control packet type.}
          - {name: dup, type: bool}
          - {name: qos, width: 2}
          - {name: retain, type: bool}
      - {name: topic, type: string, prefix: u16}
      - {name: packet_id, type: u16, when: "qos > 0"}
  WsHead:
    doc: WebSocket's first two bytes, the extended length and the masking key.
    fields:
      - name: b0
        type: u8
        bits:
          - {name: fin, type: bool}
          - {name: rsv, width: 3, reserved: true}
          - {name: opcode, width: 4, enum: Opcode}
      - name: b1
        type: u8
        bits:
          - {name: masked, type: bool}
          - {name: len7, width: 7}
      - {name: len16, type: u16, when: "len7 == 126"}
      - {name: len64, type: u64, when: "len7 == 127"}
      - {name: masking_key, type: u32, when: masked}
      - {name: payload, type: bytes, size: rest}
  BasicPublish:
    doc: AMQP basic.publish's arguments; AMQP packs bits from the low-order bit up.
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
  Little:
    doc: A little-endian u16 of bits.
    fields:
      - name: word
        type: u16
        order: little
        bits:
          - {name: high, width: 5}
          - {name: middle, width: 6}
          - {name: low, width: 5}
frame:
  name: Frame
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: tag, type: u8}
    - name: body
      type: switch
      on: tag
      cases: {1: MqttPublish, 2: WsHead, 3: BasicPublish, 4: Little}
"""

# MQTT's first byte chooses the packet by its high nibble: a switch on a bit sub-field.
MQTT_SPEC = """\
protocol: mq
doc: MQTT's fixed header, the body chosen by the packet type in its high nibble.
byte_order: big
structs:
  Publish:
    doc: PUBLISH (type 3).
    fields:
      - {name: topic, type: string, prefix: u16}
      - {name: payload, type: bytes, size: rest}
  PingReq:
    doc: PINGREQ (type 12).
    fields: []
frame:
  name: Packet
  fields:
    - name: header
      type: u8
      bits:
        - {name: kind, width: 4}
        - {name: dup, type: bool}
        - {name: qos, width: 2}
        - {name: retain, type: bool}
    - {name: length, type: u32, size_of: body}
    - name: body
      type: switch
      on: kind
      cases: {3: Publish, 12: PingReq}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("bits")
    generate_text(tmp, "bf", SPEC, "bf_pkg")
    return tmp


@pytest.fixture(scope="module")
def frames(package: Path) -> ModuleType:
    from tests.support.generate import import_generated
    return import_generated(package, "bf.frames", "bf_pkg")


@pytest.fixture(scope="module")
def mq(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("mq"), "mq", MQTT_SPEC, "mq_pkg")


def framed(tag: int, body: bytes) -> bytes:
    return struct.pack(">IB", len(body) + 1, tag) + body


def mqtt_packed(dup: bool, qos: int, retain: bool, topic: str, packet_id: int | None) -> bytes:
    # MQTT 3.1.1, 2.2: bits 7-4 the packet type (PUBLISH = 3), bit 3 DUP, bits 2-1 QoS,
    # bit 0 RETAIN; 3.3.2.2: the packet identifier is present only when QoS is 1 or 2.
    first = 3 << 4 | int(dup) << 3 | qos << 1 | int(retain)
    body = struct.pack(">BH", first, len(topic.encode())) + topic.encode()
    if qos > 0:
        assert packet_id is not None
        body += struct.pack(">H", packet_id)
    return framed(1, body)


def ws_packed(fin: bool, opcode: int, masked: bool, len7: int, len16: int | None,
              len64: int | None, key: int | None, payload: bytes) -> bytes:
    # RFC 6455, 5.2: FIN, RSV1-3, a 4-bit opcode; MASK and a 7-bit length (126: a 16-bit
    # length follows, 127: a 64-bit one), then the masking key when MASK is set.
    body = struct.pack(">BB", int(fin) << 7 | opcode, int(masked) << 7 | len7)
    body += b"" if len16 is None else struct.pack(">H", len16)
    body += b"" if len64 is None else struct.pack(">Q", len64)
    body += b"" if key is None else struct.pack(">I", key)
    return framed(2, body + payload)


def amqp_packed(ticket: int, exchange: str, routing_key: str, mandatory: bool,
                immediate: bool) -> bytes:
    # AMQP 0-9-1, 4.2.5.2: consecutive bits share an octet, the first in its low-order bit;
    # basic.publish's are mandatory (bit 0) and immediate (bit 1).
    body = struct.pack(">HB", ticket, len(exchange)) + exchange.encode()
    body += struct.pack(">B", len(routing_key)) + routing_key.encode()
    return framed(3, body + struct.pack(">B", int(mandatory) | int(immediate) << 1))


def test_mqtt_publish_flags_against_bytes_packed_by_hand(frames: ModuleType) -> None:
    for dup, qos, retain, packet_id in ((False, 0, False, None), (True, 1, False, 10),
                                        (False, 2, True, 0xFFFF), (True, 3, True, 1)):
        value = frames.MqttPublish(kind=3, dup=dup, qos=qos, retain=retain, topic="a/b",
                                   packet_id=packet_id)
        wire = mqtt_packed(dup, qos, retain, "a/b", packet_id)
        assert frames.Frame(body=value).encode() == wire
        assert frames.Frame.decode(wire).body == value


def test_a_websocket_header_against_bytes_packed_by_hand(frames: ModuleType) -> None:
    cases: list[tuple[Any, ...]] = [
        (True, 0x1, False, 5, None, None, None, b"Hello"),  # RFC 6455 5.7, unmasked "Hello"
        (True, 0x1, True, 5, None, None, 0x37FA213D, b"\x7f\x9f\x4d\x51\x58"),  # masked
        (False, 0x2, False, 126, 256, None, None, b"x" * 256),
        (True, 0x9, False, 127, None, 65536, None, b""),
    ]
    for fin, opcode, masked, len7, len16, len64, key, payload in cases:
        value = frames.WsHead(fin=fin, opcode=opcode, masked=masked, len7=len7, len16=len16,
                              len64=len64, masking_key=key, payload=payload)
        wire = ws_packed(fin, opcode, masked, len7, len16, len64, key, payload)
        assert frames.Frame(body=value).encode() == wire
        assert frames.Frame.decode(wire).body == value
    # The first frame of RFC 6455 5.7, byte for byte.
    assert ws_packed(*cases[0])[5:] == bytes.fromhex("810548656c6c6f")


def test_amqp_packed_bits_against_bytes_packed_by_hand(frames: ModuleType) -> None:
    for mandatory, immediate in ((False, False), (True, False), (False, True), (True, True)):
        value = frames.BasicPublish(ticket=0, exchange="amq.direct", routing_key="q",
                                    immediate=immediate, mandatory=mandatory)
        wire = amqp_packed(0, "amq.direct", "q", mandatory, immediate)
        assert frames.Frame(body=value).encode() == wire
        assert frames.Frame.decode(wire).body == value


def test_a_little_endian_integer_of_bits(frames: ModuleType) -> None:
    value = frames.Little(high=0x11, middle=0x2A, low=0x05)
    word = 0x11 << 11 | 0x2A << 5 | 0x05
    assert frames.Frame(body=value).encode() == framed(4, struct.pack("<H", word))
    assert frames.Frame.decode(framed(4, struct.pack("<H", 0xFFFF))).body == frames.Little(
        high=31, middle=63, low=31)


def test_a_sub_field_with_an_enum(frames: ModuleType) -> None:
    wire = ws_packed(True, 0x9, False, 0, None, None, None, b"")
    decoded = frames.Frame.decode(wire).body
    assert decoded.opcode is frames.Opcode.PING and isinstance(decoded.opcode, frames.Opcode)
    value = frames.WsHead(fin=True, opcode=frames.Opcode.PING, masked=False, len7=0,
                          payload=b"")
    assert frames.Frame(body=value).encode() == wire
    assert frames.WsHead.__annotations__["opcode"] == "Opcode"
    assert [(m.name, int(m)) for m in frames.Opcode] == [
        ("CONTINUATION", 0), ("TEXT", 1), ("BINARY", 2), ("CLOSE", 8), ("PING", 9), ("PONG", 10)]
    # RFC 6455 5.2: opcodes 3-7 and 11-15 are reserved; a peer receiving one fails.
    with pytest.raises(UnknownEnumValueError, match="WsHead.opcode: 3 is not a value of "
                       "Opcode") as info:
        frames.Frame.decode(ws_packed(True, 0x3, False, 0, None, None, None, b""))
    assert info.value.value == 3


def test_sub_fields_are_data_fields_and_the_integer_is_not(frames: ModuleType) -> None:
    assert list(frames.MqttPublish.__dataclass_fields__) == [
        "kind", "dup", "qos", "retain", "topic", "packet_id"]
    assert "b0" not in frames.WsHead.__dataclass_fields__
    assert "rsv" not in frames.WsHead.__dataclass_fields__
    hints = frames.MqttPublish.__annotations__
    assert (hints["kind"], hints["dup"]) == ("int", "bool")


@pytest.mark.parametrize(("body", "reserved"), [
    (bytes([0x81 | 0x40, 0x00]), "0x70"),  # RSV1 set, no extension negotiated
    (bytes([0x81 | 0x10, 0x00]), "0x70"),  # RSV3
])
def test_reserved_websocket_bits_set_are_refused(frames: ModuleType, body: bytes,
                                                 reserved: str) -> None:
    with pytest.raises(ReservedBitsError, match=f"WsHead.b0: reserved bits {reserved} are set"):
        frames.Frame.decode(framed(2, body))


def test_reserved_amqp_bits_set_are_refused(frames: ModuleType) -> None:
    wire = bytearray(amqp_packed(0, "x", "y", True, True))
    wire[-1] |= 0x04
    with pytest.raises(ReservedBitsError, match="BasicPublish.flags: reserved bits 0xfc"):
        frames.Frame.decode(bytes(wire))


@pytest.mark.parametrize(("make", "message"), [
    (lambda f: f.MqttPublish(kind=16, dup=False, qos=0, retain=False, topic=""),
     "MqttPublish.kind = 16 does not fit its 4 bits"),
    (lambda f: f.MqttPublish(kind=3, dup=False, qos=4, retain=False, topic="", packet_id=1),
     "MqttPublish.qos = 4 does not fit its 2 bits"),
    (lambda f: f.MqttPublish(kind=-1, dup=False, qos=0, retain=False, topic=""),
     "MqttPublish.kind = -1 does not fit its 4 bits"),
    (lambda f: f.WsHead(fin=True, opcode=1, masked=False, len7=128, payload=b""),
     "WsHead.len7 = 128 does not fit its 7 bits"),
])
def test_a_value_that_does_not_fit_its_bits_is_refused(frames: ModuleType, make: Any,
                                                       message: str) -> None:
    with pytest.raises(ValueOutOfRangeError, match=message):
        frames.Frame(body=make(frames)).encode()


def test_a_condition_on_a_sub_field_still_holds(frames: ModuleType) -> None:
    from protoframe.runtime.errors import EncodeError
    with pytest.raises(EncodeError, match="packet_id must be set when qos > 0"):
        frames.Frame(body=frames.MqttPublish(kind=3, dup=False, qos=1, retain=False,
                                             topic="")).encode()


@settings(max_examples=200, deadline=None)
@given(dup=st.booleans(), qos=st.integers(0, 3), retain=st.booleans(),
       topic=st.text(max_size=10), packet_id=st.integers(0, 2**16 - 1))
def test_mqtt_round_trips(frames: ModuleType, dup: bool, qos: int, retain: bool, topic: str,
                          packet_id: int) -> None:
    pid = packet_id if qos else None
    value = frames.MqttPublish(kind=3, dup=dup, qos=qos, retain=retain, topic=topic,
                               packet_id=pid)
    wire = frames.Frame(body=value).encode()
    assert wire == mqtt_packed(dup, qos, retain, topic, pid)
    assert frames.Frame.decode(wire).body == value


@settings(max_examples=200, deadline=None)
@given(fin=st.booleans(), opcode=st.sampled_from([0, 1, 2, 8, 9, 10]), masked=st.booleans(),
       len7=st.integers(0, 125), key=st.integers(0, 2**32 - 1), payload=st.binary(max_size=8),
       high=st.integers(0, 31), middle=st.integers(0, 63), low=st.integers(0, 31))
def test_websocket_and_little_round_trips(frames: ModuleType, fin: bool, opcode: int,
                                          masked: bool, len7: int, key: int, payload: bytes,
                                          high: int, middle: int, low: int) -> None:
    k = key if masked else None
    ws = frames.WsHead(fin=fin, opcode=opcode, masked=masked, len7=len7, masking_key=k,
                       payload=payload)
    wire = frames.Frame(body=ws).encode()
    assert wire == ws_packed(fin, opcode, masked, len7, None, None, k, payload)
    assert frames.Frame.decode(wire).body == ws
    little = frames.Little(high=high, middle=middle, low=low)
    assert frames.Frame.decode(frames.Frame(body=little).encode()).body == little


def test_the_plan_and_the_c_codec(tmp_path: Path) -> None:
    spec = load_frame_spec_text(tmp_path, SPEC)
    plans = plan_spec(spec)
    ws = plans["WsHead"]
    # The packed bytes are bits rows the C codec packs from their parts.
    assert [op.word for op in ws.field_ops][:6] == [
        "bits", "bit_field", "bit_field", "bits", "bit_field", "bit_field"]
    b0 = kind_op(ws.op("b0"))
    assert isinstance(b0, ReadPacked) and b0.reserved == 0x70
    opcode = ws.op("opcode")
    assert isinstance(opcode, SubField) and (opcode.shift, opcode.width) == (0, 4)
    # Conditions on a part's value are guards; every struct is compiled.
    assert [op.word for op in ws.field_ops][6:] == ["guard", "guard", "guard", "bytes"]
    assert all(p.compiled for p in plans)


def load_frame_spec_text(tmp_path: Path, text: str) -> FrameSpec:
    """The spec ``text`` (of protocol bf), loaded and validated."""
    (tmp_path / "bf").mkdir()
    (tmp_path / "bf" / "bf.yaml").write_text(text)
    [spec] = load_frame_specs(tmp_path, "specs", load_protocol(tmp_path, "bf", "specs"))
    return spec


def _outcome(fn: Any) -> tuple[str, str]:
    try:
        return "value", repr(fn())
    except DecodeError as exc:
        return "raised", f"{type(exc).__name__}: {exc}"


@pytest.mark.skipif(not compiled_frames.available(),
                    reason="the compiled frame codec is not built; the Python one runs alone")
@settings(max_examples=200, deadline=None)
@given(tag=st.integers(1, 4), body=st.binary(max_size=12))
def test_compiled_and_python_codecs_agree(frames: ModuleType, tag: int, body: bytes) -> None:
    assert all(compiled.is_compiled(c) for c in (frames.WsHead, frames.Little,
                                                 frames.MqttPublish, frames.BasicPublish))
    wire = framed(tag, body)
    fast = _outcome(lambda: frames.Frame.decode(wire))
    with compiled.pure_python():
        slow = _outcome(lambda: frames.Frame.decode(wire))
    assert fast == slow


def test_a_switch_on_a_sub_field(mq: ModuleType) -> None:
    # MQTT 3.1.1 3.3: PUBLISH QoS 1 with RETAIN, topic "a"; 3.12: PINGREQ is C0 00.
    value = mq.Packet(dup=False, qos=1, retain=True, body=mq.Publish(topic="a", payload=b"hi"))
    wire = struct.pack(">BIH", 0x33, 5, 1) + b"a" + b"hi"
    assert value.encode() == wire
    assert mq.Packet.decode(wire) == value
    ping = mq.Packet(dup=False, qos=0, retain=False, body=mq.PingReq())
    assert ping.encode() == struct.pack(">BI", 0xC0, 0)
    assert "kind" not in mq.Packet.__dataclass_fields__  # the key is the body's class
    with pytest.raises(UnknownCommandTypeError, match="no layout for 15") as info:
        mq.Packet.decode(struct.pack(">BI", 0xF0, 0))
    assert info.value.command_type == 15


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "bf_pkg")


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "bf", text), "specs", ["bf"])
    return str(info.value.errors[0])


def _at(text: str, line_has: str, token: str) -> str:
    """The position of ``token`` on the first line holding it from the line with
    ``line_has`` on."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line_has in line)
    line_no = next(i for i in range(start, len(lines)) if token in lines[i])
    return f"specs/bf/bf.yaml:{line_no + 1}:{lines[line_no].index(token) + 1}:"


@pytest.mark.parametrize(("old", "new", "line_has", "token", "message"), [
    ("{name: high, width: 5}", "{name: high, width: 4}", "name: word", "bits",
     "bits: the widths add up to 15, but a u16 has 16 bits"),
    ("{name: dup, type: bool}", "{name: dup, type: bool, width: 2}", "name: dup", "2}",
     "bits: a bool part is one bit wide"),
    ("        type: u16\n        order: little", "        type: i16\n        order: little",
     "order: little", "bits", "bits: needs an unsigned fixed-width integer"),
    ("{name: middle, width: 6}", "{width: 6}", "{width: 6}", "{width",
     "bits: a part needs a name unless it is reserved: true"),
    ("{name: low, width: 5}", "{name: low}", "{name: low}", "{name",
     "bits: a part needs width: <bits> (or type: bool, one bit)"),
    # The second of the two is the duplicate: the string field after the header.
    ("{name: retain, type: bool}", "{name: topic, type: bool}", "{name: topic, type: string",
     "topic", "duplicate field name 'topic'"),
    ("{name: retain, type: bool}", "{name: bytes, type: bool}", "{name: bytes, type: bool",
     "bytes", "field name 'bytes' would hide the type bytes"),
    ("{name: opcode, width: 4, enum: Opcode}", "{name: class, width: 4}", "{name: class",
     "class", "invalid identifier 'class'"),
    # After a reserved part: the position is the part's own.
    ("{name: opcode, width: 4, enum: Opcode}", "{name: bytes, width: 4}", "{name: bytes",
     "bytes", "field name 'bytes' would hide the type bytes"),
    ("enum: Opcode}", "enum: Opcodes}", "enum: Opcodes", "Opcodes",
     "bits: unknown enum 'Opcodes'"),
    ("{name: len7, width: 7}", "{name: len7, width: 7, enum: Opcode}", "{name: len7", "Opcode",
     None),
    ("{name: retain, type: bool}", "{name: retain, type: bool, enum: Opcode}", "{name: retain",
     "Opcode", "bits: a bool part cannot have an enum"),
    ("{name: high, width: 5}", "{name: high, width: 5, enum: Opcode}", "{name: high",
     "Opcode", None),
    ("{name: middle, width: 6}",
     "{name: middle, width: 2, enum: Opcode}\n          - {width: 4, reserved: true}",
     "{name: middle", "Opcode", "bits: Opcode.CLOSE = 8 does not fit the part's 2 bits"),
    ("PING: 9,", "PING: 8,", "  Opcode: {", "8, PONG",
     "enum member PING has the value of CLOSE (8)"),
    ("PING: 9,", "name: 9,", "  Opcode: {", "name:",
     "enum member 'name': a Python keyword, a private name or a name IntEnum already has"),
])
def test_bad_bits_are_positioned_errors(tmp_path: Path, old: str, new: str, line_has: str,
                                        token: str, message: str | None) -> None:
    assert old in SPEC
    if message is None:  # accepted: a part wide enough for every value of its enum
        generate(write_spec(tmp_path, "bf", SPEC.replace(old, new, 1)), "specs", ["bf"])
        return
    text = SPEC.replace(old, new, 1)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "bf", text), "specs", ["bf"])
    assert len(info.value.errors) == 1, info.value.errors  # one mistake, one error
    error = str(info.value.errors[0])
    assert message in error
    assert error.startswith(_at(text, line_has, token)), error


def test_bits_with_a_value_of_its_own_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("      - name: word\n        type: u16\n",
                        "      - name: word\n        type: u16\n        value: \"3\"\n")
    error = _error(tmp_path, text)
    assert "bits: cannot be combined with value: the integer is its parts" in error


def test_a_case_that_does_not_fit_its_sub_field_is_refused(tmp_path: Path) -> None:
    text = MQTT_SPEC.replace("{3: Publish, 12: PingReq}", "{3: Publish, 16: PingReq}")
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "mq", text), "specs", ["mq"])
    error = str(info.value.errors[0])
    assert "switch case 16 does not fit 'kind', 4 bits wide" in error
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if "16: PingReq" in line)
    column = text.splitlines()[line_no - 1].index("16") + 1
    assert error.startswith(f"specs/mq/mq.yaml:{line_no}:{column}:"), error


def test_a_switch_on_the_integer_of_bits_is_refused(tmp_path: Path) -> None:
    text = MQTT_SPEC.replace("on: kind", "on: header")
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "mq", text), "specs", ["mq"])
    error = str(info.value.errors[0])
    assert "switch on: 'header' is made of bits: switch on one of its parts" in error
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if "on: header" in line)
    assert error.startswith(f"specs/mq/mq.yaml:{line_no}:11:"), error


def test_the_diff_sees_reserved_bits_and_enums(tmp_path: Path) -> None:
    from protoframe.generator.diff.compare import compare_protocols
    from protoframe.generator.diff.tree import load_protocol_snapshot

    def snapshot(name: str, text: str) -> Any:
        return load_protocol_snapshot(write_spec(tmp_path / name, "bf", text), "specs", "bf")

    old = snapshot("old", SPEC)
    # RSV1 given to an extension: two bits stay reserved; the opcode gains a value.
    new = snapshot("new", SPEC.replace(
        "{name: rsv, width: 3, reserved: true}",
        "{name: rsv1, type: bool}\n          - {name: rsv, width: 2, reserved: true}").replace(
        "PONG: 10}", "PONG: 10, PRIVATE: 11}"))
    found = {(c.rule, c.element) for c in compare_protocols(old, new)}
    assert ("FRAME_CONST_CHANGED", "WsHead.b0") in found
    assert ("FRAME_FIELD_TYPE_CHANGED", "WsHead.opcode") in found


# WebSocket's header with what follows from the rest computed: the MASK bit from whether there
# is a masking key, the 7-bit length and the extended lengths from the payload (parts and
# fields with value:).
WS_SPEC = """\
protocol: ws
doc: WebSocket's header, its lengths and mask bit computed from the payload and the key.
byte_order: big
enums:
  Opcode: {CONTINUATION: 0, TEXT: 1, BINARY: 2, CLOSE: 8, PING: 9, PONG: 10}
structs:
  WsFrame:
    doc: RFC 6455 5.2.
    fields:
      - name: b0
        type: u8
        bits:
          - {name: fin, type: bool}
          - {width: 3, reserved: true}
          - {name: opcode, width: 4, enum: Opcode}
      - name: b1
        type: u8
        bits:
          - {name: masked, type: bool, value: "has(masking_key)"}
          - {name: len7, width: 7,
             value: "len(payload) if len(payload) < 126 else 126 if len(payload) < 65536 else 127"}
      - {name: len16, type: u16, when: "len7 == 126", value: "len(payload)"}
      - {name: len64, type: u64, when: "len7 == 127", value: "len(payload)"}
      - {name: masking_key, type: u32, when: masked}
      - {name: payload, type: bytes, size: rest}
frame:
  name: Frame
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: ws, type: struct, struct: WsFrame}
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("ws"), "ws", WS_SPEC, "ws_pkg")


@pytest.mark.parametrize(("opcode", "key", "payload", "header"), [
    # RFC 6455 5.7's examples, byte for byte: unmasked and masked "Hello", an unmasked ping,
    # 256 bytes in one unmasked binary frame, and 64 KiB.
    (1, None, b"Hello", "8105"),
    (1, 0x37FA213D, bytes.fromhex("7f9f4d5158"), "818537fa213d"),
    (9, None, b"Hello", "8905"),
    (2, None, bytes(256), "827e0100"),
    (2, None, bytes(65536), "827f0000000000010000"),
])
def test_the_rfc_6455_examples_with_computed_lengths(ws: ModuleType, opcode: int,
                                                     key: int | None, payload: bytes,
                                                     header: str) -> None:
    value = ws.WsFrame(fin=True, opcode=ws.Opcode(opcode), masking_key=key, payload=payload)
    wire = bytes.fromhex(header) + payload
    assert ws.Frame(ws=value).encode() == struct.pack(">I", len(wire)) + wire
    assert ws.Frame.decode(struct.pack(">I", len(wire)) + wire).ws == value
    assert "len7" not in ws.WsFrame.__dataclass_fields__  # computed, not stored


@settings(max_examples=100, deadline=None)
@given(size=st.sampled_from([0, 1, 125, 126, 127, 65535, 65536]) | st.integers(0, 300),
       key=st.none() | st.integers(0, 2**32 - 1))
def test_computed_lengths_round_trip(ws: ModuleType, size: int, key: int | None) -> None:
    value = ws.WsFrame(fin=False, opcode=ws.Opcode.BINARY, masking_key=key,
                       payload=b"\x01" * size)
    wire = ws.Frame(ws=value).encode()
    assert wire[5] == (0x80 if key is not None else 0) | (size if size < 126 else
                                                          126 if size < 65536 else 127)
    assert ws.Frame.decode(wire).ws == value


def test_a_computed_part_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    text = WS_SPEC.replace("else 126 if len(payload) < 65536 else 127", "else 128")
    frames = generate_text(tmp_path, "ws", text, "ws_bad_pkg")
    value = frames.WsFrame(fin=True, opcode=frames.Opcode.TEXT, payload=bytes(200))
    with pytest.raises(ValueOutOfRangeError, match="WsFrame.len7 = 128 does not fit its 7 bits"):
        frames.Frame(ws=value).encode()


def test_a_switch_on_a_computed_part_is_refused(tmp_path: Path) -> None:
    text = MQTT_SPEC.replace("{name: kind, width: 4}", '{name: kind, width: 4, value: "3"}')
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "mq", text), "specs", ["mq"])
    assert "switch on: 'kind' has a value: of its own, but a switch key is the code of the " \
        "body's class" in str(info.value.errors[0])


def test_a_reserved_part_with_a_value_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("{name: rsv, width: 3, reserved: true}",
                        '{name: rsv, width: 3, reserved: true, value: "1"}')
    error = _error(tmp_path, text)
    assert "bits: a reserved part is zero; it cannot have value:" in error
    assert error.startswith(_at(text, "reserved: true, value", '"1"')), error


def test_spark_rows_of_bit_fields(ws: ModuleType) -> None:
    # Rows without a Spark session: the row functions and the Arrow column of spark.py.
    from importlib import import_module
    pytest.importorskip("pyspark", reason="spark.py imports pyspark, which the spark extra "
                        "installs; the other Pythons' environments have only the dev extra")
    pytest.importorskip("pyarrow", reason="spark.py imports pyarrow (the spark extra)")
    spark = import_module("ws_pkg.ws.spark")
    value = ws.Frame(ws=ws.WsFrame(fin=True, opcode=ws.Opcode.PING, masking_key=7,
                                   payload=b"x"))
    row = spark.FRAME.to_row(value)
    assert row["ws"]["opcode"] == 9 and row["ws"]["fin"] is True
    back = spark.FRAME.from_row(row)
    assert back == value and back.ws.opcode is ws.Opcode.PING
    fields = {f.name: f.dataType.simpleString() for f in spark.WsFrame.spark_schema.fields}
    assert fields == {"fin": "boolean", "opcode": "int", "masking_key": "bigint",
                      "payload": "binary"}


def test_the_reference_page_describes_the_bits(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "bf", SPEC), "specs", ["bf"]).docs["bf.md"]
    assert "| 3 | `opcode` | enum Opcode, bits 3..0 of `b0` | — | 0 (derived) |  |" in page
    assert "| 2 | `fin` | bool, bit 7 of `b0` |" in page
    assert "reserved bits `0x70` must be zero (`ReservedBitsError`)" in page
    assert "- Enums (`IntEnum` classes of `frames.py`): `Opcode` (`CONTINUATION` 0, `TEXT` 1," \
        in page


def test_a_sub_field_as_a_size_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("{name: payload, type: bytes, size: rest}",
                        "{name: payload, type: bytes, size: len7}")
    error = _error(tmp_path, text)
    assert "size: 'len7' is a bit sub-field, which encoding cannot fill in as a size" in error
    assert error.startswith(_at(text, "size: len7", "len7}")), error


def test_ids_allocated_into_a_sub_field_wrap_at_its_bits(tmp_path: Path) -> None:
    text = """\
protocol: sq
doc: A header whose low nibble numbers the request.
byte_order: big
structs:
  Ping:
    doc: A request.
    fields: []
  Pong:
    doc: Its answer.
    fields: []
frame:
  name: Packet
  fields:
    - name: header
      type: u8
      bits: [{name: kind, width: 4}, {name: seq, width: 4}]
    - {name: length, type: u32, size_of: body}
    - {name: body, type: switch, on: kind, cases: {1: Ping, 2: Pong}}
interactions:
  allocate: seq
  requests:
    - {request: PING, response: PONG, correlate: [seq]}
"""
    out = generate(write_spec(tmp_path, "sq", text), "specs", ["sq"])
    assert "self.next_id = IdAllocator(1 << 4)" in out.files["sq/client.py"]


def test_an_enum_named_as_a_struct_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("  Opcode: {", "  Little: {").replace("enum: Opcode}", "enum: Little}")
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "bf", text), "specs", ["bf"])
    [error] = [str(e) for e in info.value.errors]
    assert "enum name 'Little' is taken by a struct or a name the frames module defines" in error
    assert error.startswith(_at(text, "  Little: {", "Little")), error


ENUM_CASES = MQTT_SPEC.replace("byte_order: big\n", """\
byte_order: big
enums:
  PacketType: {PUBLISH: 3, PINGREQ: 12, RESERVED: 15}
""").replace("{name: kind, width: 4}", "{name: kind, width: 4, enum: PacketType}").replace(
    "cases: {3: Publish, 12: PingReq}",
    "cases: {PUBLISH: Publish, PINGREQ: PingReq}\n      names: {PINGREQ: PING}")


def test_cases_named_by_the_key_s_enum(tmp_path: Path) -> None:
    mq = generate_text(tmp_path, "mq", ENUM_CASES, "mq_enum_pkg")
    ping = mq.Packet(dup=False, qos=0, retain=False, body=mq.PingReq())
    assert ping.encode() == struct.pack(">BI", 0xC0, 0)
    assert mq.Packet.decode(struct.pack(">BIH", 0x30, 3, 1) + b"a").body == mq.Publish(
        topic="a", payload=b"")
    commands = import_generated(tmp_path, "mq.commands", "mq_enum_pkg")
    # PINGREQ's case named with names: by its member too.
    assert [c.name for c in commands.COMMANDS] == ["PUBLISH", "PING"]


def test_a_case_name_the_enum_lacks_is_refused(tmp_path: Path) -> None:
    text = ENUM_CASES.replace("PINGREQ: PingReq}", "PINGREG: PingReq}")
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "mq", text), "specs", ["mq"])
    error = str(info.value.errors[0])
    assert "switch case 'PINGREG' is not an integer nor a value of PacketType" in error
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if "PINGREG" in line)
    column = text.splitlines()[line_no - 1].index("PINGREG") + 1
    assert error.startswith(f"specs/mq/mq.yaml:{line_no}:{column}:"), error
