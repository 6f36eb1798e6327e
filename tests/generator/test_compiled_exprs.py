"""The conditions the compiled frame codec evaluates (generator/compiled_exprs.py)."""

from __future__ import annotations

import pytest

from protoframe.generator.compiled_exprs import depth, program
from protoframe.generator.expr import parse


def test_a_condition_becomes_a_postfix_program() -> None:
    assert program(parse("kind == 0xfc")) == (("field", "kind"), ("const", 252), ("eq", None))
    assert program(parse("not flags & 2")) == (
        ("field", "flags"), ("const", 2), ("bitand", None), ("not", None))
    assert program(parse("x in (1, 2)")) == (
        ("field", "x"), ("const", 1), ("eq", None), ("field", "x"), ("const", 2), ("eq", None),
        ("or", None))
    assert program(parse("0 < x < 16")) == (
        ("const", 0), ("field", "x"), ("lt", None), ("field", "x"), ("const", 16), ("lt", None),
        ("and", None))
    assert program(parse("a and b or not c")) == (
        ("field", "a"), ("field", "b"), ("and", None), ("field", "c"), ("not", None),
        ("or", None))


@pytest.mark.parametrize("text", [
    "len(xs) > 0", "_index == 0", "a if b else c", "x * 2 > 1", "x is None",
    "has(x)", "x == 0x10000000000000000", "x in ()", "~x == 0"])
def test_anything_else_has_no_program(text: str) -> None:
    assert program(parse(text)) is None


def test_a_program_too_deep_for_the_c_stack_has_none() -> None:
    deep = "a" + "".join(f" + (b{i}" for i in range(20)) + ")" * 20 + " > 0"
    assert program(parse(deep)) is None
    assert depth(program(parse("a + b > c")) or ()) == 2
