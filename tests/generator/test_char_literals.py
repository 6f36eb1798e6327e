"""Character literals (``'D'``) where the spec language expects an integer.

The literal itself (``generator/literals.py``): one byte, printable ASCII or escaped, and a
reason for everything else; in expressions, where it is the byte's number. Then
``tests/data/letters``, generated with the ``protoframe`` command, whose route values, ``set:``
values, ``value:``/``derive:``/``when:`` expressions and machine guards are written with
literals, against frames packed by hand with ``struct``. Switch case keys written as literals
are ``tests/data/directions`` (``test_direction_names.py``); the bad specs are in
``tests/data/bad_specs`` and ``test_spec_errors.py``.
"""

from __future__ import annotations

import importlib
import shutil
import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.docs_text import case_value
from protoframe.generator.expr import ExprError, parse
from protoframe.generator.literals import LiteralError, char_code, integer
from tests.generator.test_spec_errors import ROUTED_SPEC, run_routed
from tests.support.examples import scaled
from tests.support.generate import import_generated
from tests.support.generator_cli import run_cli
from tests.support.paths import DATA

PACKAGE = "letters_pkg"


@pytest.mark.parametrize(("text", "code"), [
    ("'D'", 0x44), ("' '", 0x20), ("'~'", 0x7E), ('\'"\'', 0x22), ("'\\n'", 0x0A),
    ("'\\r'", 0x0D), ("'\\t'", 0x09), ("'\\0'", 0x00), ("'\\''", 0x27), ("'\\\\'", 0x5C),
    ("'\\x1b'", 0x1B), ("'\\xFF'", 0xFF), ("'\\a'", 0x07), ("'\\v'", 0x0B),
])
def test_a_literal_is_its_byte(text: str, code: int) -> None:
    assert char_code(text) == code
    assert integer(text) == code


@pytest.mark.parametrize(("text", "reason"), [
    ("''", "empty character literal ''"),
    ("'DD'", "holds 2 characters; it stands for one byte"),
    ("'é'", "is not ASCII: write its byte escaped"),
    ("'\x7f'", "is not ASCII"),
    ("'\t'", "holds a control character: write it escaped ('\\x09')"),
    ("'''", "must escape its quote"),
    ("'\\q'", "has an unknown escape"),
    ("'\\x4'", "has an unknown escape"),
    ("'\\x4g'", "has an unknown escape"),
    ("'\\x414'", "holds more than one byte"),
    ("'\\nn'", "holds more than one byte"),
    ("'\\u0041'", "has an unknown escape"),
])
def test_anything_else_says_why(text: str, reason: str) -> None:
    with pytest.raises(LiteralError, match="character literal") as info:
        char_code(text)
    assert reason in str(info.value)


def test_integers_are_numbers_number_strings_or_literals() -> None:
    assert [integer(v) for v in (7, "7", "0x44", "-1", "'D'", " 'D' ")] == [7, 7, 68, -1, 68, 68]
    for bad in ("D", "", "0x", True, "'D"):
        with pytest.raises(LiteralError, match="is not an integer"):
            integer(bad)


@pytest.mark.parametrize(("text", "python"), [
    ("kind == 'D'", "(f_kind == 68)"),
    ("kind in ('J', 'P')", "(f_kind in (74, 80))"),
    ("'!' if urgent else '.'", "(33 if f_urgent else 46)"),
    ("kind - '0'", "(f_kind - 48)"),
    ("kind == '\\x00'", "(f_kind == 0)"),
])
def test_in_expressions_a_literal_is_a_number(text: str, python: str) -> None:
    assert parse(text).render(lambda name: f"f_{name}") == python


@pytest.mark.parametrize(("text", "reason"), [
    ('kind == "D"', "strings are not allowed"),
    ("kind == 'DD'", "character literal 'DD' holds 2 characters"),
    ("kind == 'é'", "is not ASCII"),
    ("kind == b'D'", "only integer and boolean constants"),
    ("kind == '\\u0044'", "has an unknown escape"),
])
def test_in_expressions_other_strings_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ExprError) as info:
        parse(text)
    assert reason in str(info.value)


def test_set_takes_a_literal_for_a_protobuf_integer(tmp_path: Path) -> None:
    text = ROUTED_SPEC.replace("set: {content.header.flag: 2}",
                               "set: {content.header.flag: \"'\\\\x02'\"}")
    run = run_routed(tmp_path, text)
    assert run.returncode == 0, run.stderr
    machines = (run.out / "rpcmini" / "machines.py").read_text()
    assert "header=rpcmini.Header(flag=2)" in machines


# --- a protocol written with literals ---------------------------------------------------------


class Letters:
    def __init__(self, root: Path) -> None:
        self.machines: ModuleType = import_generated(root, "letters.machines", PACKAGE)
        self.frames = importlib.import_module(f"{PACKAGE}.letters.frames")
        self.commands = importlib.import_module(f"{PACKAGE}.letters.commands")


@pytest.fixture(scope="module")
def letters(tmp_path_factory: pytest.TempPathFactory) -> Letters:
    root: Path = tmp_path_factory.mktemp("letters")
    shutil.copytree(DATA / "letters", root / "specs" / "letters")
    result = run_cli("generate", "--out", PACKAGE, "--outputs", "bindings,frames", cwd=root)
    assert result.returncode == 0, result.stderr
    return Letters(root)


def packet(origin: bytes, verb: bytes, urgent: bool, channel: bytes | None,
           text: bytes) -> bytes:
    rest = origin + verb + (b"!" if urgent else b".") + (channel or b"") + text
    return struct.pack(">I", len(rest)) + rest


def test_route_values_and_set_values_are_bytes(letters: Letters) -> None:
    f, m = letters.frames, letters.machines
    assert {c.name: c.value for c in letters.commands.COMMANDS} == {
        "JOIN": ord("J"), "PART": ord("P"), "PING": ord("\n"), "QUIT": ord("Q")}
    join = f.Line(verb=ord("J"), urgent=True, channel=ord("#"), text=b"hi")
    wire = m.frame_of_join(join).encode()
    assert wire == packet(b"c", b"J", True, b"#", b"hi")
    ping = m.frame_of_ping(f.Line(verb=ord("\n"), urgent=False, text=b""))
    assert ping.encode() == packet(b"\x00", b"\n", False, None, b"")
    assert m.command_of(f.Packet.decode(wire)) == ("JOIN", join)
    assert m.command_of(f.Packet.decode(packet(b"x", b"Q", False, None, b"bye")))[0] == "QUIT"


def test_value_derive_and_when_read_literals(letters: Letters) -> None:
    f = letters.frames
    calm = f.Packet.decode(packet(b"c", b"P", False, b"&", b"x"))
    assert calm.line == f.Line(verb=ord("P"), urgent=False, channel=ord("&"), text=b"x")
    # Any byte but '!' reads as not urgent, and encodes back as '.'.
    other = f.Packet.decode(packet(b"c", b"Q", False, None, b"").replace(b".", b"?"))
    assert other.line.urgent is False and other.line.channel is None


def test_guards_compare_with_literals(letters: Letters) -> None:
    f, m = letters.frames, letters.machines
    proto = m.LettersProtocol()
    proto.send(m.frame_of_join(f.Line(verb=ord("J"), urgent=False, channel=ord("#"), text=b"")))
    assert proto.state("session") == "in"
    proto.send(m.frame_of_part(f.Line(verb=ord("P"), urgent=False, channel=ord("&"), text=b"")))
    assert proto.state("session") == "in"
    proto.send(m.frame_of_part(f.Line(verb=ord("P"), urgent=False, channel=ord("#"), text=b"")))
    assert proto.state("session") == "out"


VERBS = {"JOIN": b"J", "PART": b"P", "PING": b"\n", "QUIT": b"Q"}


@given(command=st.sampled_from(sorted(VERBS)), urgent=st.booleans(),
       channel=st.integers(0, 255), text=st.binary(max_size=40), origin=st.integers(0, 255))
@settings(max_examples=scaled(200), deadline=None)
def test_round_trip_against_bytes_packed_by_hand(letters: Letters, command: str, urgent: bool,
                                                 channel: int, text: bytes,
                                                 origin: int) -> None:
    f, m = letters.frames, letters.machines
    verb = VERBS[command]
    has_channel = verb in (b"J", b"P")
    line = f.Line(verb=verb[0], urgent=urgent, channel=channel if has_channel else None,
                  text=text)
    frame = m.frame_of(command, line, **({"origin": origin} if command == "QUIT" else {}))
    sender = {"JOIN": b"c", "PART": b"c", "PING": b"\x00", "QUIT": bytes([origin])}[command]
    wire = frame.encode()
    assert wire == packet(sender, verb, urgent, bytes([channel]) if has_channel else None, text)
    assert f.Packet.decode(wire) == frame
    assert m.command_of(frame) == (command, line)


def test_the_reference_page_shows_a_case_value_as_the_spec_wrote_it() -> None:
    assert case_value(0x44, 1, "'D'") == "`'D'` (`0x44`)"
    assert case_value(0x60, 1, "'`'") == "`` '`' `` (`0x60`)"
    assert case_value(0x44, 1) == "68 (`0x44`)"  # written as a number: as before
