"""The lowering of structs to layout plans, and the one decision it makes for the C codec.

Specs are small snippets beside the mini .proto of the validation tests; each is loaded and
validated as ``protoframe generate`` does before it is lowered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.generator.build import load_frame_specs
from protoframe.generator.frame_layouts import layout_lines
from protoframe.generator.layout_ops import (
    Always,
    Array,
    BytesSized,
    BytesToEnd,
    Checksum,
    Condition,
    Const,
    Envelope,
    IfPeek,
    IfRemaining,
    IntType,
    Nested,
    Params,
    ReadInt,
    SizeOf,
    SizeRest,
    SkipTrailing,
    String,
    c_words,
)
from protoframe.generator.layout_plan import SpecPlans, plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec import vocabulary
from tests.generator.spec_cases import GOOD_SPEC, MINI_PROTO

FRAME = """\
frame:
  name: Frame
  fields:
    - {name: total_size, type: u32, size_of: rest}
    - {name: command_size, type: u32, size_of: command}
    - name: command
      type: proto
      message: Envelope
      size: command_size
      dispatch: {on: type, by: field_number}
"""


def plans(tmp_path: Path, text: str) -> SpecPlans:
    """The plans of one spec beside the mini .proto, loaded and validated first."""
    protocol_dir = tmp_path / "mini"
    protocol_dir.mkdir()
    (protocol_dir / "mini.proto").write_text(MINI_PROTO)
    (protocol_dir / "mini.yaml").write_text(text)
    protocol = load_protocol(tmp_path, "mini", "specs")
    [spec] = load_frame_specs(tmp_path, "specs", protocol)
    return plan_spec(spec)


def with_structs(structs: str, frame: str = FRAME) -> str:
    return f"protocol: mini\nproto: [mini.proto]\nstructs:\n{structs}{frame}"


def test_the_good_spec_lowers_to_the_operations_of_its_c_table(tmp_path: Path) -> None:
    p = plans(tmp_path, GOOD_SPEC)
    assert [plan.name for plan in p] == ["Payload", "Frame"]
    u16, u32 = IntType(2, False, "big"), IntType(4, False, "big")
    payload = p["Payload"]
    assert payload.ops == (Const(payload.struct.fields[0], u16, 0x0E01),
                           BytesToEnd(payload.struct.fields[1]))
    frame = p["Frame"]
    size_rest, command_size, command, payload_op = frame.ops
    assert size_rest == SizeRest(frame.struct.fields[0], u32)
    assert command_size == SizeOf(frame.struct.fields[1], u32, "command", True)
    assert isinstance(command, Envelope)
    assert (command.size, command.dispatch) == ("command_size", "type_")  # its py name
    assert isinstance(payload_op, Nested)
    assert payload_op.plan is payload and payload_op.when == IfRemaining()
    assert [op.word for op in frame.ops] == ["size_rest", "size", "envelope", "struct"]
    assert payload.compiled and frame.compiled
    assert frame.check_end and payload.check_end


def test_order_presence_and_early_checksums(tmp_path: Path) -> None:
    p = plans(tmp_path, with_structs("""\
  Inner:
    fields:
      - {name: a, type: u8}
  Checked:
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32c, from: n}}
      - {name: n, type: i16, order: little}
      - {name: len, type: u8, size_of: data}
      - {name: data, type: bytes, size: len}
      - {name: tail, type: struct, struct: Inner, when_remaining: true}
  Peeked:
    fields:
      - {name: always, type: struct, struct: Inner}
      - {name: maybe, type: struct, struct: Inner, when_peek: {type: u8, equals: 7}}
"""))
    assert [plan.name for plan in p] == ["Inner", "Checked", "Peeked", "Frame"]
    checked = p["Checked"]
    assert [type(op) for op in checked.ops] == [Checksum, ReadInt, SizeOf, BytesSized, Nested]
    assert checked.ops[1] == ReadInt(checked.struct.fields[1], IntType(2, True, "little"))
    assert checked.early_checksums == {"crc"} and checked.compiled
    peeked = p["Peeked"]
    assert [op.when for op in peeked.ops if isinstance(op, Nested)] == [
        Always(), IfPeek(IntType(1, False, "big"), 7)]
    assert peeked.compiled and not peeked.check_end


def test_a_checksum_not_covering_the_rest_is_verified_late_and_not_compiled(
        tmp_path: Path) -> None:
    p = plans(tmp_path, with_structs("""\
  Late:
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32, from: b}}
      - {name: a, type: u8}
      - {name: b, type: u8}
"""))
    late = p["Late"]
    assert late.early_checksums == frozenset()
    assert [op.word for op in late.unknown_to_c] == ["late_checksum"]
    assert not late.compiled


@pytest.mark.parametrize(("fields", "word"), [
    ("- {name: xs, type: array, of: u8, until_end: true}", "array"),
    ("- {name: xs, type: array, of: u8, terminator: 0}", "array_limited"),
    ("- {name: n, type: varint, encoding: lenenc, size_of: b}\n      - {name: b, type: bytes}",
     "lenenc_int_other"),
    ("- {name: a, type: u8}\n      - {name: b, type: bytes, length: 3, when: a == 1}",
     "condition_other"),
    # (a marker, once here, is a compiled row since TANK's consume response)
    ("- {name: v, type: varint, max_bytes: 3}", "varint_other"),
])
def test_a_struct_with_an_op_the_c_codec_lacks_is_not_compiled(tmp_path: Path, fields: str,
                                                                word: str) -> None:
    p = plans(tmp_path, with_structs(f"""\
  Inner:
    fields:
      - {{name: a, type: u8}}
  Odd:
    fields:
      {fields}
  Holder:
    fields:
      - {{name: odd, type: struct, struct: Odd}}
"""))
    odd = p["Odd"]
    assert word in [op.word for op in odd.unknown_to_c]
    assert not odd.compiled
    # The holder's own operations are all known; it is kept off the C codec by what it nests.
    assert not p["Holder"].unknown_to_c and not p["Holder"].compiled
    assert p["Inner"].compiled
    tables = "\n".join(layout_lines(list(p), lambda m: m.py_path))
    assert "(Inner, " in tables and "(Odd, " not in tables and "(Holder, " not in tables


def test_int_params_and_skipped_trailing_bytes_are_ops_the_c_codec_has(
        tmp_path: Path) -> None:
    p = plans(tmp_path, with_structs("""\
  Taking:
    params: {k: u8}
    fields:
      - {name: a, type: u8}
  Lenient:
    trailing: ignore
    fields:
      - {name: a, type: u8}
  Holder:
    fields:
      - {name: t, type: struct, struct: Taking, args: {k: 1}}
      - {name: xs, type: array, of: u8, until_end: true}
"""))
    taking, lenient = p["Taking"], p["Lenient"]
    assert taking.ops[0] == Params(("k",)) and taking.compiled
    assert isinstance(lenient.ops[-1], SkipTrailing) and lenient.compiled
    assert "(\"skip_trailing\", None, None, None, None)," in "\n".join(
        layout_lines(list(p), lambda m: m.py_path))
    # The struct taking params is passed them by a row of its own; a list of u8 is not C's.
    assert [op.word for op in p["Holder"].ops] == ["struct_args", "array"]
    assert isinstance(p["Holder"].ops[1], Array)


def test_changing_the_vocabulary_changes_the_decision(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = plans(tmp_path, GOOD_SPEC)
    assert p["Payload"].compiled and p["Frame"].compiled
    monkeypatch.setattr(vocabulary, "FRAME_OPS",
                        tuple(w for w in vocabulary.FRAME_OPS if w != "const"))
    assert "const" not in c_words()
    # Payload's constant is now unknown, and Frame holds Payload.
    assert not p["Payload"].compiled and not p["Frame"].compiled
    assert layout_lines(list(p), lambda m: m.py_path) == []
    monkeypatch.setattr(vocabulary, "FRAME_OPS", (*vocabulary.FRAME_OPS, "const", "string"))
    assert p["Payload"].compiled


def test_a_struct_longer_than_the_row_limit_keeps_the_python_codec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = vocabulary.FRAME_MAX_ROWS

    def u8_fields(count: int) -> str:
        return "".join(f"      - {{name: f_{i}, type: u8}}\n" for i in range(count))

    p = plans(tmp_path, with_structs(f"  Wide:\n    fields:\n{u8_fields(limit)}"
                                     f"  Wider:\n    fields:\n{u8_fields(limit + 1)}"))
    assert len(p["Wide"].field_ops) == limit and p["Wide"].compiled
    assert len(p["Wider"].field_ops) == limit + 1 and not p["Wider"].compiled
    # The limit is read from the vocabulary, not copied.
    monkeypatch.setattr(vocabulary, "FRAME_MAX_ROWS", limit - 1)
    assert not p["Wide"].compiled


def test_a_word_in_the_vocabulary_without_a_row_is_a_generator_bug(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = plans(tmp_path, with_structs("""\
  Texty:
    fields:
      - {name: s, type: string, size: rest, encoding: mutf8}
"""))
    assert isinstance(p["Texty"].ops[0], String) and not p["Texty"].compiled
    monkeypatch.setattr(vocabulary, "FRAME_OPS", (*vocabulary.FRAME_OPS, "string"))
    assert p["Texty"].compiled
    from protoframe.generator.errors import GeneratorBug
    with pytest.raises(GeneratorBug, match="no row"):
        layout_lines([p["Texty"]], lambda m: m.py_path)


def test_a_condition_is_lowered_before_the_kind(tmp_path: Path) -> None:
    p = plans(tmp_path, with_structs("""\
  Cond:
    fields:
      - {name: a, type: u8}
      - {name: b, type: u32, when: a != 0}
"""))
    op = p["Cond"].ops[1]
    assert isinstance(op, Condition) and op.expr.text == "a != 0"


def test_where_decoding_ends_is_the_plans_to_say(tmp_path: Path) -> None:
    """The decoder rejects bytes after the last field only where the plan says decoding runs
    to the region's end; a size range's own end does not count, a size of the rest does."""
    p = plans(tmp_path, with_structs("""\
  Empty:
    fields: []
  Fixed:
    fields:
      - {name: a, type: u8}
  Sized:
    fields:
      - {name: len, type: u8, size_of: data}
      - {name: data, type: bytes, size: len}
  Remaining:
    fields:
      - {name: a, type: u8, when_remaining: true}
  Ranged:
    fields:
      - {name: n, type: u8, size_of: {from: data, to: data}}
      - {name: data, type: bytes, size: rest}
  RangedRest:
    fields:
      - {name: n, type: u8, size_of: {from: m, to: data}}
      - {name: m, type: u8, size_of: rest}
      - {name: data, type: bytes, size: rest}
  Lenient:
    trailing: ignore
    fields:
      - {name: data, type: bytes, size: rest}
"""))
    ends = {plan.name: (plan.reads_to_end, plan.check_end) for plan in p}
    assert ends["Empty"] == (False, False) and not p["Empty"].skips_trailing
    assert p["Empty"].compiled  # a table of no rows
    assert ends["Fixed"] == (False, False)
    assert ends["Sized"] == (False, False)
    assert ends["Remaining"] == (True, True)
    assert ends["Ranged"] == (False, False)
    assert ends["RangedRest"] == (True, True)
    assert ends["Lenient"] == (True, False)
    assert ends["Frame"] == (True, True)
