"""Every operation of a layout plan has its code in both Python codec emitters.

The emitters match on the op unions of ``layout_ops`` and end in ``assert_never``, so mypy fails
when a union member has no case; these tests fail when an operation class is left out of the
unions, or a union member has no ``case`` in the emitters' dispatch methods.
"""

from __future__ import annotations

import ast
import inspect
from types import UnionType
from typing import get_args

import pytest

from protoframe.generator import frame_decoder, frame_encoder, layout_ops
from protoframe.generator.layout_ops import AnyFieldOp, FieldOp, KindOp, Op, PlanOp, Wrap, WrapOp

_BASES = {Op, FieldOp, Wrap}


def _op_classes() -> set[type[Op]]:
    found: set[type[Op]] = set()
    todo: list[type[Op]] = [Op]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__ == layout_ops.__name__ and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found - _BASES


def _members(union: UnionType) -> set[type]:
    return set(get_args(union))


def _cased(cls: type, method: str) -> set[str]:
    """The class names in the ``case`` patterns of ``cls.method``."""
    tree = ast.parse(inspect.getsource(getattr(cls, method)).strip())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass) and isinstance(node.cls, ast.Name):
            names.add(node.cls.id)
    return names


def test_every_operation_class_is_in_the_unions_the_emitters_match_on() -> None:
    classes = _op_classes()
    assert classes, "no operation classes found"
    assert _members(PlanOp) == classes
    assert _members(AnyFieldOp) == {c for c in classes if issubclass(c, FieldOp)}
    assert _members(WrapOp) == {c for c in classes if issubclass(c, Wrap)}
    assert not _members(KindOp) & _members(WrapOp)


@pytest.mark.parametrize(("emitter", "method", "union"), [
    (frame_decoder.Decoder, "value", KindOp),
    (frame_decoder.Decoder, "read", WrapOp),
    (frame_encoder.Encoder, "write", KindOp),
])
def test_every_operation_has_a_case_in_each_emitter(emitter: type, method: str,
                                                     union: UnionType) -> None:
    missing = {c.__name__ for c in _members(union)} - _cased(emitter, method)
    assert not missing, f"{emitter.__name__}.{method} has no case for {sorted(missing)}"


def test_an_operation_left_out_is_found() -> None:
    """The check above sees a missing case (here: one removed from the names it finds)."""
    cased = _cased(frame_decoder.Decoder, "value") - {"Blocks"}
    assert {c.__name__ for c in _members(KindOp)} - cased == {"Blocks"}
