"""``const:``, ``when_peek: {equals:}`` and an integer ``default:`` written as character
literals, against frames packed by hand; and a constant on a field that cannot hold one, which
once crashed the generator with an AssertionError and is now a positioned error."""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from types import ModuleType

import pytest

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.generator.output import write_files

SPEC = """\
protocol: ct
doc: Constants written as character literals.
byte_order: big
structs:
  Body:
    doc: A body whose constants are letters.
    fields:
      - {name: magic, type: u8, const: "'Z'"}
      - {name: urgent, type: u8, const: "'!'", when_peek: {type: u8, equals: "'!'"}}
      - {name: level, type: u8, when_remaining: true, default: "'a'"}
frame:
  name: Packet
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: body, type: struct, struct: Body}
"""


def _generate(tmp: Path, text: str) -> dict[str, str]:
    (tmp / "specs" / "ct").mkdir(parents=True)
    (tmp / "specs" / "ct" / "ct.yaml").write_text(text)
    return generate(tmp / "specs", "specs", ["ct"]).files


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("const_literals")
    (tmp / "specs" / "ct").mkdir(parents=True)
    (tmp / "specs" / "ct" / "ct.yaml").write_text(SPEC)
    out = generate(tmp / "specs", "specs", ["ct"])
    write_files(tmp / "ct_pkg", out.files, out.protocols)
    sys.path.insert(0, str(tmp))
    try:
        from ct_pkg.ct import frames as module  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp))
    return module  # type: ignore[no-any-return]


def packet(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def test_literal_constants_are_their_bytes_on_encode(frames: ModuleType) -> None:
    assert frames.Packet(body=frames.Body(urgent=True, level=0x62)).encode() == \
        packet(struct.pack(">BBB", ord("Z"), ord("!"), 0x62))
    assert frames.Packet(body=frames.Body(level=0x62)).encode() == \
        packet(struct.pack(">BB", ord("Z"), 0x62))


def test_literal_constants_are_checked_and_defaults_read_on_decode(frames: ModuleType) -> None:
    body = frames.Packet.decode(packet(b"Z!")).body
    assert (body.urgent, body.level) == (True, ord("a"))  # level absent: its literal default
    body = frames.Packet.decode(packet(b"Zq")).body
    assert (body.urgent, body.level) == (False, ord("q"))
    with pytest.raises(frames.BadMagicError):
        frames.Packet.decode(packet(b"Y!"))


@pytest.mark.parametrize(("old", "new", "message"), [
    ("type: u8, const: \"'Z'\"", "type: uuid, const: 5",
     "const: needs an integer, varint or bool field (or, for const:, a bytes or string"),
    # A string's constant is its text: "'Z'" is three characters.
    ("type: u8, const: \"'Z'\"", "type: string, length: 1, const: \"'Z'\"",
     "const: the constant is 3 bytes, but length: is 1"),
    ("type: u8, const: \"'Z'\"", "type: bytes, const: \"0x5\"",
     "const: '0x5' is not bytes in hex"),
    ("type: u8, const: \"'Z'\"", "type: string, const: \"\"",
     "const: an empty constant without a prefix or terminator takes no bytes"),
    ("const: \"'Z'\"", "const: \"'ZZ'\"", "const: character literal 'ZZ' holds 2 characters"),
    ("equals: \"'!'\"", "equals: \"'\\\\q'\"", "equals: character literal '\\q' has an unknown"),
    ("default: \"'a'\"", "default: \"'ab'\"", "default: character literal 'ab' holds 2"),
])
def test_bad_constants_are_positioned_errors(tmp_path: Path, old: str, new: str,
                                             message: str) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        _generate(tmp_path, text)
    (error,) = info.value.errors
    assert message in str(error)
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if new in line)
    assert str(error).startswith(f"specs/ct/ct.yaml:{line_no}:")
