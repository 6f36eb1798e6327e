"""Values of a route's ``set:`` worked out by the builder (``{expr: ...}``): expressions over
the command's body and the builder's arguments, for a struct body and a protobuf payload.
Against frames packed by hand with ``struct``, through ``mypy --strict``, and the expressions
that are refused, at their positions."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.generator.output import write_files
from tests.support.generate import assert_type_checks, import_generated

PROTO = """\
syntax = "proto2";
package rv;

message Publish {
  required string topic = 1;
  required uint32 partition = 2;
  optional uint32 hint = 3;
  required bytes data = 4;
}
"""

SPEC = """\
protocol: rv
doc: Routed commands whose header values come from the body and the builder's arguments.
byte_order: big
proto: [rv.proto]
structs:
  Header:
    doc: What every request starts with.
    fields:
      - {name: kind, type: u8}
      - {name: priority, type: u8}
      - {name: urgent, type: bool}
      - {name: tag, type: string, prefix: u8}
  Put:
    doc: Store a value.
    fields:
      - {name: key, type: string, prefix: u16}
      - {name: value, type: bytes, prefix: u32}
      - {name: level, type: u8}
      - {name: note, type: string, prefix: u8, when: "level > 9"}
  Get:
    doc: Read a value.
    fields:
      - {name: key, type: string, prefix: u16}
  Send:
    doc: A protobuf message, serialized.
    fields:
      - {name: method, type: u8}
      - {name: message, type: bytes, prefix: u32}
  Content:
    doc: The header, then one request.
    fields:
      - {name: header, type: struct, struct: Header}
      - {name: put, type: struct, struct: Put, when: "header.kind == 1"}
      - {name: get, type: struct, struct: Get, when: "header.kind == 2"}
      - {name: send, type: struct, struct: Send, when: "header.kind == 3"}
frame:
  name: Frame
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: serial, type: u32}
    - {name: content, type: struct, struct: Content}
commands:
  - in: content.put
    name: PUT
    set:
      content.header.kind: 1
      content.header.priority: {expr: "body.level * 2 + serial % 2"}
      content.header.urgent: {expr: "body.level > 5"}
      content.header.tag: {expr: "body.key"}
  - in: content.get
    name: GET
    set: {content.header.kind: 2, content.header.priority: {expr: "len(body.key)"},
          content.header.urgent: false, content.header.tag: ""}
  - in: content.send
    on: method
    payload: message
    set: {content.header.kind: 3, content.header.urgent: false}
    values:
      7: {name: PUBLISH, message: Publish,
          set: {content.header.priority: {expr: "body.partition"},
                content.header.tag: {expr: "body.topic"}}}
interactions:
  requests:
    - {request: PUT, response: GET}
"""


def _generate(tmp: Path, text: str, package: str) -> Path:
    spec_dir = tmp / "specs"
    (spec_dir / "rv").mkdir(parents=True)
    (spec_dir / "rv" / "rv.proto").write_text(PROTO)
    (spec_dir / "rv" / "rv.yaml").write_text(text)
    out = generate(spec_dir, "specs", ["rv"])
    write_files(tmp / package, out.files, out.protocols)
    return tmp


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generate(tmp_path_factory.mktemp("route_values"), SPEC, "rv_pkg")


@pytest.fixture(scope="module")
def machines(package: Path) -> ModuleType:
    return import_generated(package, "rv.machines", "rv_pkg")


def short(text: str) -> bytes:
    return struct.pack(">B", len(text.encode())) + text.encode()


def framed(serial: int, content: bytes) -> bytes:
    return struct.pack(">II", len(content) + 4, serial) + content


def test_values_from_the_body_and_the_arguments(machines: ModuleType) -> None:
    frames = machines.frames
    put = frames.Put(key="k1", value=b"v", level=7)
    frame = machines.frame_of_put(put, serial=3)
    assert frame.content.header == frames.Header(kind=1, priority=15, urgent=True, tag="k1")
    # The bytes a sender puts on the wire, packed by hand.
    header = struct.pack(">BBB", 1, 7 * 2 + 3 % 2, 1) + short("k1")
    body = struct.pack(">H", 2) + b"k1" + struct.pack(">I", 1) + b"v" + struct.pack(">B", 7)
    assert frame.encode() == framed(3, header + body)
    get = machines.frame_of_get(frames.Get(key="abc"), serial=0)
    assert get.content.header == frames.Header(kind=2, priority=3, urgent=False, tag="")
    assert machines.command_of(frames.Frame.decode(get.encode())) == ("GET", get.content.get)


def test_values_from_a_protobuf_payload(machines: ModuleType) -> None:
    from importlib import import_module
    rv = import_module("rv_pkg.rv.rv")
    body = rv.Publish(topic="t/1", partition=4, data=b"x")
    frame = machines.frame_of_publish(body, serial=9)
    frames = machines.frames
    assert frame.content.header == frames.Header(kind=3, priority=4, urgent=False, tag="t/1")
    assert machines.command_of(frames.Frame.decode(frame.encode()))[0] == "PUBLISH"


@settings(max_examples=100, deadline=None)
@given(level=st.integers(0, 9), serial=st.integers(0, 2**32 - 1), key=st.text(max_size=20))
def test_the_expressions_follow_their_inputs(machines: ModuleType, level: int, serial: int,
                                             key: str) -> None:
    frames = machines.frames
    frame = machines.frame_of_put(frames.Put(key=key, value=b"", level=level), serial=serial)
    assert frame.content.header == frames.Header(kind=1, priority=level * 2 + serial % 2,
                                                 urgent=level > 5, tag=key)
    assert machines.command_of(frames.Frame.decode(frame.encode()))[0] == "PUT"


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "rv_pkg")


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"body.level * 2 + serial % 2"', '"body.level * 2 + count"',
     "'count' is neither body.<field> nor an argument of the builder (serial) (in PUT's "
     "builder)"),
    ('"body.level > 5"', '"body"', "body is the whole body; name one of its fields"),
    ('"body.key"}', '"body.level"}', "set: 'body.level' gives an integer, but "
     "'content.header.tag' holds a string (in PUT's builder)"),
    ('"body.level * 2 + serial % 2"', '"body.key + 1"', "arithmetic on a string"),
    ('"body.level > 5"', '"body.note == 1"', "'note' may be None"),
    ('"body.level > 5"', '"body.levels > 5"', "'levels' is not a data field of Put"),
    ('"body.partition"', '"body.hint"', "Publish.hint may be unset (in PUBLISH's builder)"),
    ('"body.topic"', '"body.partition if serial else body.topic"',
     "its branches give an integer and a string"),
    ('"len(body.key)"', '"len(serial)"', "len() takes a string, bytes or a list"),
])
def test_refused_expressions_are_positioned(tmp_path: Path, old: str, new: str,
                                            message: str) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new, 1)
    with pytest.raises(SpecErrors) as info:
        _generate(tmp_path, text, "bad_pkg")
    error = str(info.value.errors[0])
    assert message in error, error
    lines = text.splitlines()
    line_no = next(i for i, line in enumerate(lines, 1) if new in line)
    column = lines[line_no - 1].index(new) + 1
    assert error.startswith(f"specs/rv/rv.yaml:{line_no}:{column}:"), error


def test_a_struct_target_takes_no_expression(tmp_path: Path) -> None:
    text = SPEC.replace("      content.header.kind: 1\n",
                        '      content.header.kind: 1\n      content.header: {expr: "1"}\n')
    with pytest.raises(SpecErrors) as info:
        _generate(tmp_path, text, "bad_pkg")
    assert "set: 'content.header' takes a constant" in str(info.value.errors[0])
