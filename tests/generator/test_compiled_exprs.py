"""The conditions the compiled frame codec evaluates (generator/compiled_exprs.py)."""

from __future__ import annotations

from collections.abc import Callable

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
    "len(xs) > 0", "_index == 0", "a if b else c", "x * 2 > 1", "x == 0x10000000000000000",
    "x in ()", "~x == 0"])
def test_anything_else_has_no_program(text: str) -> None:
    assert program(parse(text)) is None


def test_presence_is_a_has_step_outside_the_extended_programs() -> None:
    assert program(parse("has(x)")) == (("has", "x"),)
    assert program(parse("x is None")) == (("has", "x"), ("not", None))
    assert program(parse("has(x)"), extended=True) is None


def test_a_program_too_deep_for_the_c_stack_has_none() -> None:
    deep = "a" + "".join(f" + (b{i}" for i in range(20)) + ")" * 20 + " > 0"
    assert program(parse(deep)) is None
    assert depth(program(parse("a + b > c")) or ()) == 2


def _truth_and(a: int, b: int) -> int:
    return int(bool(a and b))


def _truth_or(a: int, b: int) -> int:
    return int(bool(a or b))


def _and_value(a: int, b: int) -> int:
    return b if a else a


def _or_value(a: int, b: int) -> int:
    return a if a else b


def _run(steps: tuple[tuple[str, str | int | None], ...], names: dict[str, int]) -> int:
    """A reference evaluator of an extended program, as the C code runs it on integers."""
    binary: dict[str, Callable[[int, int], int]] = {
              "bitand": int.__and__, "bitor": int.__or__, "bitxor": int.__xor__,
              "rshift": int.__rshift__, "lshift": int.__lshift__, "add": int.__add__,
              "sub": int.__sub__, "eq": int.__eq__, "ne": int.__ne__, "lt": int.__lt__,
              "le": int.__le__, "gt": int.__gt__, "ge": int.__ge__,
              "and": _truth_and, "or": _truth_or, "andv": _and_value, "orv": _or_value}
    stack: list[int] = []
    for word, arg in steps:
        if word == "field":
            stack.append(names[str(arg)])
        elif word == "index":
            stack.append(names["_index"])
        elif word == "const":
            stack.append(int(arg or 0))
        elif word == "not":
            stack.append(int(not stack.pop()))
        elif word == "neg":
            stack.append(-stack.pop())
        elif word == "select":
            orelse, test, then = stack.pop(), stack.pop(), stack.pop()
            stack.append(then if test else orelse)
        else:
            b, a = stack.pop(), stack.pop()
            stack.append(int(binary[word](a, b)))
    [value] = stack
    return value


@pytest.mark.parametrize("text", [
    "codec | (n << 2 if 0 < n < 16 else 0) | (0x40 if s else 0)", "flags >> 2 & 0xf or n",
    "s and not f and not _index & 4", "n and s", "_index == n - 1", "a if b else c + 1"])
def test_an_extended_program_gives_the_value_python_gives(text: str) -> None:
    """Values, not only truths: or/and give one of their values, if/else selects, and
    ``_index`` is the item's index."""
    steps = program(parse(text), extended=True)
    assert steps is not None
    names = ("codec", "n", "s", "flags", "f", "_index", "a", "b", "c")
    for values in ((0,) * 9, (1, 15, 1, 0x3c, 0, 3, 5, 0, 7), (2, 16, 0, 0x41, 1, 0, 0, 1, 0),
                   (3, 300, 1, 0xff, 1, 299, -4, 2, -9)):
        env = dict(zip(names, values, strict=True))
        assert _run(steps, env) == int(eval(text, {}, env))  # noqa: S307 - the reference


def test_if_else_and_the_index_have_programs_only_when_extended() -> None:
    for text in ("a if b else c", "_index == 0"):
        assert program(parse(text)) is None and program(parse(text), extended=True)
