"""``require:``: rules every value of a struct obeys, over its data fields and params. RFC
6455 5.5's rules of control frames (never fragmented, at most 125 bytes) against bytes packed
by hand, a rule over a param, each kind of bad input and bad spec, and ``mypy --strict``."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.codec import compiled
from protoframe.runtime.errors import RequirementError, RequirementUnmetError
from tests.support.generate import assert_type_checks, generate_text, write_spec

SPEC = """\
protocol: rq
structs:
  Control:
    doc: A WebSocket-like control frame after a one-byte header.
    require:
      - "opcode < 8 or fin"
      - "opcode < 8 or len(payload) <= 125"
    fields:
      - {name: fin, type: bool}
      - {name: opcode, type: u8}
      - {name: payload, type: bytes, prefix: u16}
  Sized:
    params: {most: u8}
    require: ["len(data) <= most"]
    fields:
      - {name: data, type: bytes, size: rest}
frame:
  name: Frame
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: limit, type: u8}
    - {name: control, type: struct, struct: Control}
    - {name: sized, type: struct, struct: Sized, args: {most: limit}}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rq")


@pytest.fixture(scope="module")
def rq(package: Path) -> ModuleType:
    return generate_text(package, "rq", SPEC, "rq_pkg")


def control(fin: bool, opcode: int, payload: bytes) -> bytes:
    return struct.pack(">?BH", fin, opcode, len(payload)) + payload


def test_values_that_obey_the_rules(rq: ModuleType) -> None:
    value = rq.Control(fin=False, opcode=1, payload=bytes(300))  # data may be fragmented
    assert value.encode() == control(False, 1, bytes(300))
    assert rq.Control.decode(value.encode()) == value
    ping = rq.Control(fin=True, opcode=9, payload=bytes(125))
    assert rq.Control.decode(control(True, 9, bytes(125))) == ping
    frame = rq.Frame(limit=3, control=ping, sized=rq.Sized(data=b"abc"))
    assert rq.Frame.decode(frame.encode()) == frame
    # Rules over fields are the compiled codec's (requires rows); one over a param is not.
    assert compiled.is_compiled(rq.Control) and not compiled.is_compiled(rq.Sized)


@pytest.mark.parametrize(("fin", "opcode", "size", "rule"), [
    (False, 9, 0, "opcode < 8 or fin"),
    (True, 8, 126, "opcode < 8 or len(payload) <= 125"),
])
def test_breaking_a_rule(rq: ModuleType, fin: bool, opcode: int, size: int, rule: str) -> None:
    with pytest.raises(RequirementError, match=re.escape(f"Control: require: {rule}")) as info:
        rq.Control.decode(control(fin, opcode, bytes(size)))
    assert info.value.rule == rule
    with pytest.raises(RequirementUnmetError) as unmet:
        rq.Control(fin=fin, opcode=opcode, payload=bytes(size)).encode()
    assert unmet.value.rule == rule


def test_a_rule_over_a_param(rq: ModuleType) -> None:
    wire = rq.Frame(limit=2, control=rq.Control(fin=True, opcode=1, payload=b""),
                    sized=rq.Sized(data=b"ab")).encode()
    bad = wire[:4] + b"\x01" + wire[5:]  # the limit lowered to 1
    with pytest.raises(RequirementError, match="Sized: require: len\\(data\\) <= most"):
        rq.Frame.decode(bad)
    with pytest.raises(RequirementUnmetError):
        rq.Sized(data=b"abc").encode(most=2)


@settings(max_examples=100, deadline=None)
@given(fin=st.booleans(), opcode=st.integers(0, 15), size=st.integers(0, 200))
def test_decode_and_encode_agree(rq: ModuleType, fin: bool, opcode: int, size: int) -> None:
    wire = control(fin, opcode, bytes(size))
    allowed = opcode < 8 or (fin and size <= 125)
    if allowed:
        value = rq.Control.decode(wire)
        assert value.encode() == wire
    else:
        with pytest.raises(RequirementError):
            rq.Control.decode(wire)
        with pytest.raises(RequirementUnmetError):
            rq.Control(fin=fin, opcode=opcode, payload=bytes(size)).encode()


@pytest.mark.parametrize(("rule", "message"), [
    ('"missing > 0"', "require: 'missing' is not a field of the struct"),
    ('"payload.x"', "require: a rule names fields, not their attributes"),
])
def test_bad_rules_are_positioned_errors(tmp_path: Path, rule: str, message: str) -> None:
    text = SPEC.replace('"opcode < 8 or fin"', rule)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "rq", text), "specs", ["rq"])
    error = str(info.value.errors[0])
    line = next(i for i, x in enumerate(text.splitlines()) if rule in x) + 1
    column = text.splitlines()[line - 1].index(rule) + 1
    assert error.startswith(f"specs/rq/rq.yaml:{line}:{column}:"), error
    assert message in error


@pytest.mark.slow
def test_the_generated_package_type_checks(rq: ModuleType, package: Path) -> None:
    assert_type_checks(package, "rq_pkg")


def test_the_reference_page_lists_the_rules(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "rq", SPEC), "specs", ["rq"]).docs["rq.md"]
    assert "- Every value obeys (`require:`; `RequirementError` on decode, " \
        "`RequirementUnmetError` on encode): `opcode < 8 or fin`, " \
        "`opcode < 8 or len(payload) <= 125`" in page
