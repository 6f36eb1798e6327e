"""``require:`` on a struct or the frame: rules every value obeys, each an expression over the
struct's data fields and params (RFC 6455 5.5: a control frame is never fragmented and its
payload is at most 125 bytes). Decoding checks them once every field is read
(``RequirementError``), encoding before anything is written (``RequirementUnmetError``).

The names are checked here, where their positions are known; ``frame_checks`` calls
``check_requires`` once the fields are resolved.
"""

from __future__ import annotations

import ast
from typing import Any, Protocol

from protoframe.generator.build_context import PathT
from protoframe.generator.errors import SpecError
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import Requirement, StructDef
from protoframe.generator.ir import SourceLocation
from protoframe.generator.spec_yaml import LocDict, LocList


class _Builder(Protocol):
    def expr(self, text: Any, path: PathT) -> Expr | None: ...

    def loc(self, path: PathT, key: bool = False) -> SourceLocation: ...


def read_requires(builder: _Builder, body: LocDict, path: PathT) -> list[Requirement]:
    """The struct's ``require:`` list, parsed (a bad expression is reported and left out)."""
    raw = body.get("require")
    if not isinstance(raw, LocList):
        return []
    rules: list[Requirement] = []
    for i, text in enumerate(raw):
        expr = builder.expr(text, [*path, "require", i])
        if expr is not None:
            rules.append(Requirement(expr, builder.loc([*path, "require", i])))
    return rules


def check_requires(s: StructDef) -> list[SpecError]:
    """Each rule names only the struct's data fields and params, without attributes."""
    stored = {f.name for f in s.data_fields} | {p.name for p in s.params}
    errors: list[SpecError] = []
    for rule in s.requires:
        loc = rule.location
        unknown = [n for n in rule.expr.names if n not in stored and n != "len"]
        if unknown:
            what = ("is computed, not stored" if s.field(unknown[0]) is not None
                    else "is not a field of the struct")
            errors.append(SpecError(f"require: {unknown[0]!r} {what}; a rule names the "
                                    f"data fields and params of {s.name}", loc.path,
                                    loc.line, loc.column))
        elif any(isinstance(node, ast.Attribute) for node in ast.walk(rule.expr.tree)):
            errors.append(SpecError("require: a rule names fields, not their attributes",
                                    loc.path, loc.line, loc.column))
    return errors
