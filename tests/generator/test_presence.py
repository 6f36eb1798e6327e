"""Presence in expressions: ``has(x)`` and ``x is None`` / ``x is not None`` over optional and
nullable fields, so that a flags byte saying which optional fields follow is filled on encode
from the fields themselves; against frames packed by hand, in round trips and ``mypy --strict``,
and the expressions and specs that are refused."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.generator.expr import ExprError, parse
from protoframe.runtime.errors import EncodeError
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

SPEC = """\
protocol: pr
doc: A flags byte says which optional fields follow.
byte_order: big
structs:
  Publish:
    doc: MQTT-like, with flags derived from the optional fields.
    fields:
      - {name: flags, type: u8,
         value: "(1 if has(packet_id) else 0) | (0 if expiry is None else 2)"}
      - {name: packet_id, type: u16, when: "flags & 1"}
      - {name: expiry, type: u32, when: "flags & 2"}
      - {name: topic, type: string, prefix: u16}
frame:
  name: Packet
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: publish, type: struct, struct: Publish}
"""


@pytest.mark.parametrize(("text", "rendered", "tested"), [
    ("has(x)", "v_x is not None", ["x"]),
    ("x is None", "v_x is None", ["x"]),
    ("1 if has(a) and b is not None else 0", "1 if v_a is not None and v_b is not None else 0",
     ["a", "b"]),
])
def test_presence_tests_render_as_none_checks(text: str, rendered: str,
                                              tested: list[str]) -> None:
    expr = parse(text)
    assert expr.render(lambda name: f"v_{name}", parens=False) == rendered
    assert sorted(expr.presence_names) == tested


@pytest.mark.parametrize(("text", "reason"), [
    ("x is 3", "'is' only tests a field for None"),
    ("None is x", "'is' only tests a field for None"),
    ("x is None is None", "'is' only tests a field for None"),
    ("x + None", "None is only allowed in 'x is None'"),
    ("None", "None is only allowed in 'x is None'"),
    ("has(x, y)", "has() takes one field name"),
    ("has(1)", "has() takes one field name"),
])
def test_other_uses_of_none_and_has_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ExprError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("presence")
    generate_text(tmp, "pr", SPEC, "pr_pkg")
    return tmp


@pytest.fixture(scope="module")
def frames(package: Path) -> ModuleType:
    return import_generated(package, "pr.frames", "pr_pkg")


def packed(packet_id: int | None, expiry: int | None, topic: str) -> bytes:
    flags = (1 if packet_id is not None else 0) | (2 if expiry is not None else 0)
    body = struct.pack(">B", flags)
    body += b"" if packet_id is None else struct.pack(">H", packet_id)
    body += b"" if expiry is None else struct.pack(">I", expiry)
    body += struct.pack(">H", len(topic.encode())) + topic.encode()
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(("packet_id", "expiry"), [(None, None), (7, None), (None, 9), (1, 2)])
def test_the_flags_follow_the_fields(frames: ModuleType, packet_id: int | None,
                                     expiry: int | None) -> None:
    wire = packed(packet_id, expiry, "t/1")
    message = frames.Publish(packet_id=packet_id, expiry=expiry, topic="t/1")
    assert frames.Packet(publish=message).encode() == wire
    decoded = frames.Packet.decode(wire).publish
    assert (decoded.packet_id, decoded.expiry, decoded.topic) == (packet_id, expiry, "t/1")


@settings(max_examples=200, deadline=None)
@given(packet_id=st.none() | st.integers(0, 2**16 - 1),
       expiry=st.none() | st.integers(0, 2**32 - 1), topic=st.text(max_size=20))
def test_round_trips(frames: ModuleType, packet_id: int | None, expiry: int | None,
                     topic: str) -> None:
    wire = frames.Packet(publish=frames.Publish(packet_id=packet_id, expiry=expiry,
                                                topic=topic)).encode()
    assert wire == packed(packet_id, expiry, topic)
    decoded = frames.Packet.decode(wire).publish
    assert (decoded.packet_id, decoded.expiry, decoded.topic) == (packet_id, expiry, topic)


def test_a_value_out_of_range_is_still_refused(frames: ModuleType) -> None:
    with pytest.raises(EncodeError):
        frames.Packet(publish=frames.Publish(packet_id=2**16, topic="t")).encode()


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "pr_pkg")


@pytest.mark.parametrize(("old", "new", "message"), [
    ("has(packet_id)", "has(topic)", "value: 'topic' is never None"),
    ("expiry is None", "flags is None", "value: 'flags' is never None"),
    ("has(packet_id)", "has(packet_id, expiry)", "has() takes one field name"),
])
def test_presence_of_a_field_that_is_never_none_is_refused(tmp_path: Path, old: str, new: str,
                                                           message: str) -> None:
    text = SPEC.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "pr", text), "specs", ["pr"])
    error = info.value.errors[0]
    assert message in str(error)
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if new in line)
    column = text.splitlines()[line_no - 1].index('value: "') + len("value: ") + 1
    assert str(error).startswith(f"specs/pr/pr.yaml:{line_no}:{column}:")
