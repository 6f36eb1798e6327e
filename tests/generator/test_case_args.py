"""Params passed into switch cases (``args:`` on a switch): MQTT 3.1.1's PUBLISH carries a
packet identifier only when the QoS in the fixed header is above 0 (section 3.3.2.2), which the
body learns from the header through a param. Against packets packed by hand with ``struct``, in
round trips, the client and machines generated over it through ``mypy --strict``, and the
specs that are refused, at their positions."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.errors import EncodeError, SizeMismatchError, UnknownCommandTypeError
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

# The frame's length is a u32 here: MQTT's remaining length (a varint) is another part of
# issue #16.
SPEC = """\
protocol: mp
doc: MQTT's fixed header; PUBLISH's packet id is there only when the header's qos > 0.
byte_order: big
structs:
  Publish:
    doc: PUBLISH (type 3).
    params: {qos: u8}
    fields:
      - {name: topic, type: string, prefix: u16}
      - {name: packet_id, type: u16, when: "qos > 0"}
      - {name: payload, type: bytes, size: rest}
  PubAck:
    doc: PUBACK (type 4).
    fields:
      - {name: packet_id, type: u16}
  PingReq:
    doc: PINGREQ (type 12).
    fields: []
  Sized:
    doc: A case whose field width depends on a param.
    params: {wide: bool}
    fields:
      - {name: small, type: u8, when: "not wide"}
      - {name: big, type: u32, when: wide}
  SizedToo:
    doc: Case 3's layout, the same fields as Sized (each case needs a struct of its own).
    params: {wide: bool}
    fields:
      - {name: small, type: u8, when: "not wide"}
      - {name: big, type: u32, when: wide}
  Inner:
    doc: A nested switch with a length prefix, passing a flag of its own.
    fields:
      - {name: wide, type: bool}
      - {name: code, type: u8}
      - name: item
        type: switch
        on: code
        prefix: u8
        args: {wide: wide}
        cases: {1: Sized, 2: PingReq, 3: SizedToo}
        names: {3: SIZED_TOO}
  Counted:
    doc: Another case taking the flag, and a count.
    params: {wide: bool, many: u8}
    fields:
      - {name: items, type: array, of: u8, count: "many * 2 if wide else many"}
  AllTake:
    doc: A switch every case of which takes params (and one whose only case does).
    fields:
      - {name: wide, type: bool}
      - {name: n, type: u8}
      - {name: code, type: u8}
      - name: item
        type: switch
        on: code
        args: {wide: wide, many: n}
        cases: {1: Sized, 2: Counted}
      - {name: code2, type: u8}
      - name: only
        type: switch
        on: code2
        size: rest
        args: {wide: "not wide"}
        cases: {7: Sized}
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
      args: {qos: qos}
      cases: {3: Publish, 4: PubAck, 12: PingReq, 14: Inner, 15: AllTake}
interactions:
  requests:
    - {request: PUBLISH, response: PUB_ACK, frame_fields: [dup, qos, retain]}
    - {request: PING_REQ, response: PUB_ACK, frame_fields: [dup, qos, retain]}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("case_args")
    generate_text(tmp, "mp", SPEC, "mp_pkg")
    return tmp


@pytest.fixture(scope="module")
def mp(package: Path) -> ModuleType:
    return import_generated(package, "mp.frames", "mp_pkg")


def packet(first: int, body: bytes) -> bytes:
    return struct.pack(">BI", first, len(body)) + body


def publish_packed(dup: bool, qos: int, retain: bool, topic: str, packet_id: int | None,
                   payload: bytes) -> bytes:
    # MQTT 3.1.1, 2.2 and 3.3: type 3 in the high nibble, DUP, QoS, RETAIN; the topic as a
    # UTF-8 string with a 2-byte length; the packet identifier only for QoS 1 and 2.
    body = struct.pack(">H", len(topic.encode())) + topic.encode()
    if qos:
        assert packet_id is not None
        body += struct.pack(">H", packet_id)
    return packet(3 << 4 | int(dup) << 3 | qos << 1 | int(retain), body + payload)


@pytest.mark.parametrize(("qos", "packet_id"), [(0, None), (1, 10), (2, 0xBEEF)])
def test_publish_against_packets_packed_by_hand(mp: ModuleType, qos: int,
                                                packet_id: int | None) -> None:
    value = mp.Packet(dup=False, qos=qos, retain=qos == 2,
                      body=mp.Publish(topic="a/b", packet_id=packet_id, payload=b"hi"))
    wire = publish_packed(False, qos, qos == 2, "a/b", packet_id, b"hi")
    assert value.encode() == wire
    assert mp.Packet.decode(wire) == value


def test_the_bodies_that_take_no_params(mp: ModuleType) -> None:
    ack = mp.Packet(dup=False, qos=0, retain=False, body=mp.PubAck(packet_id=7))
    assert ack.encode() == packet(0x40, b"\x00\x07")  # MQTT 3.4: PUBACK, the packet id
    assert mp.Packet.decode(packet(0xC0, b"")).body == mp.PingReq()  # 3.12: C0 00


def test_the_header_decides_what_the_body_holds(mp: ModuleType) -> None:
    # With qos 0 the two bytes after the topic are payload; with qos 1 they are the packet id.
    body = struct.pack(">H", 1) + b"t" + b"\x12\x34"
    assert mp.Packet.decode(packet(0x30, body)).body == mp.Publish(topic="t", packet_id=None,
                                                                    payload=b"\x12\x34")
    assert mp.Packet.decode(packet(0x32, body)).body == mp.Publish(topic="t", packet_id=0x1234,
                                                                    payload=b"")
    with pytest.raises(EncodeError, match="Publish.packet_id must be set when qos > 0"):
        mp.Packet(dup=False, qos=1, retain=False,
                  body=mp.Publish(topic="t", payload=b"")).encode()


def test_a_nested_switch_with_a_prefix_passes_its_flag(mp: ModuleType) -> None:
    for code, wide, item, tail in ((1, False, mp.Sized(small=5), b"\x05"),
                                   (3, True, mp.SizedToo(big=5), b"\x00\x00\x00\x05"),
                                   (2, True, mp.PingReq(), b"")):
        inner = mp.Inner(wide=wide, item=item)
        wire = packet(0xE0, struct.pack(">BBB", int(wide), code, len(tail)) + tail)
        assert mp.Packet(dup=False, qos=0, retain=False, body=inner).encode() == wire
        assert mp.Packet.decode(wire).body == inner
    # Case 3 takes the flag too, into a struct of its own.
    wire = packet(0xE0, struct.pack(">BBB", 0, 3, 1) + b"\x09")
    assert mp.Packet.decode(wire).body == mp.Inner(wide=False, item=mp.SizedToo(small=9))
    with pytest.raises(SizeMismatchError):
        mp.Packet.decode(packet(0xE0, struct.pack(">BBB", 1, 1, 1) + b"\x09"))
    with pytest.raises(UnknownCommandTypeError, match="Inner.code: no layout for 9"):
        mp.Packet.decode(packet(0xE0, struct.pack(">BBB", 1, 9, 0)))


def test_switches_every_case_of_which_takes_params(mp: ModuleType) -> None:
    value = mp.AllTake(wide=True, n=1, item=mp.Counted(items=[1, 2]), only=mp.Sized(small=3))
    wire = packet(0xF0, bytes([1, 1, 2, 1, 2, 7, 3]))
    assert mp.Packet(dup=False, qos=0, retain=False, body=value).encode() == wire
    assert mp.Packet.decode(wire).body == value
    value = mp.AllTake(wide=False, n=0, item=mp.Sized(small=4), only=mp.Sized(big=5))
    wire = packet(0xF0, bytes([0, 0, 1, 4, 7, 0, 0, 0, 5]))
    assert mp.Packet(dup=False, qos=0, retain=False, body=value).encode() == wire
    assert mp.Packet.decode(wire).body == value


@settings(max_examples=200, deadline=None)
@given(dup=st.booleans(), qos=st.integers(0, 3), retain=st.booleans(),
       topic=st.text(max_size=10), packet_id=st.integers(0, 2**16 - 1),
       payload=st.binary(max_size=10))
def test_round_trips(mp: ModuleType, dup: bool, qos: int, retain: bool, topic: str,
                     packet_id: int, payload: bytes) -> None:
    pid = packet_id if qos else None
    value = mp.Packet(dup=dup, qos=qos, retain=retain,
                      body=mp.Publish(topic=topic, packet_id=pid, payload=payload))
    wire = value.encode()
    assert wire == publish_packed(dup, qos, retain, topic, pid, payload)
    assert mp.Packet.decode(wire) == value


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "mp_pkg")


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "mp", text), "specs", ["mp"])
    return str(info.value.errors[0])


def _at(text: str, line_has: str, token: str) -> str:
    lines = text.splitlines()
    line_no = next(i for i, line in enumerate(lines, 1) if line_has in line)
    return f"specs/mp/mp.yaml:{line_no}:{lines[line_no - 1].index(token) + 1}:"


def test_a_case_param_without_an_arg_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("      args: {qos: qos}\n", "")
    error = _error(tmp_path, text)
    assert "switch case Publish needs args for qos" in error
    assert error.startswith(_at(text, "- name: body", "name")), error


def test_an_arg_no_case_takes_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("args: {qos: qos}", "args: {qos: qos, level: dup}")
    error = _error(tmp_path, text)
    assert "no case of 'body' has a param 'level'" in error
    assert error.startswith(_at(text, "args: {qos: qos, level", "level")), error


def test_an_arg_over_a_later_field_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("args: {qos: qos}", "args: {qos: nothing}")
    error = _error(tmp_path, text)
    assert "args: 'nothing' does not name a field before 'body' or a param" in error


def test_a_case_with_params_and_a_layout_per_direction_is_refused(tmp_path: Path) -> None:
    text = SPEC.replace("3: Publish, 4: PubAck,", "3: {to_server: Publish, to_client: PubAck},")
    error = _error(tmp_path, text)
    assert "switch case Publish takes params, so its case cannot have a layout per " \
        "direction" in error


def test_the_machines_name_commands_of_a_switch_on_bits(package: Path) -> None:
    machines = import_generated(package, "mp.machines", "mp_pkg")
    frames = machines.frames
    publish = frames.Publish(topic="t", packet_id=5, payload=b"")
    frame = frames.Packet.decode(frames.Packet(dup=False, qos=1, retain=False,
                                               body=publish).encode())
    assert machines.command_of(frame) == ("PUBLISH", publish)
    ack = machines.frames.Packet(dup=False, qos=0, retain=False, body=frames.PubAck(packet_id=5))
    assert machines.command_of(ack)[0] == "PUB_ACK"


def test_no_case_table_when_every_case_takes_params(tmp_path: Path) -> None:
    text = """\
protocol: al
doc: Every case takes the flag.
byte_order: big
structs:
  A:
    doc: One.
    params: {wide: bool}
    fields:
      - {name: x, type: u8, when: "not wide"}
  B:
    doc: Two.
    params: {wide: bool}
    fields:
      - {name: y, type: u16, when: wide}
frame:
  name: Frame
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: wide, type: bool}
    - {name: op, type: u8}
    - {name: body, type: switch, on: op, args: {wide: wide}, cases: {1: A, 2: B}}
"""
    source = generate(write_spec(tmp_path, "al", text), "specs", ["al"]).files["al/frames.py"]
    assert "_DECODERS" not in source and "Callable" not in source
