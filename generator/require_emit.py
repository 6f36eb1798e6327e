"""Both codecs' checks of a struct's ``require:`` rules (``Requires``): decoding tests them
once every field is read, before the value is built (``RequirementError``); encoding before
anything is written (``RequirementUnmetError``)."""

from __future__ import annotations

from protoframe.generator.codewriter import q
from protoframe.generator.frame_decoder import Decoder
from protoframe.generator.frame_emit import EmitContext, indent, raise_lines, render_expr
from protoframe.generator.frame_encoder import Encoder
from protoframe.generator.layout_ops import Requires
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.runtime_modules import ERRORS

BUILD = "obj = cls.__new__(cls)"  # where the decoder starts building the value


def _rules(plan: LayoutPlan) -> Requires | None:
    return next((op for op in plan.ops if isinstance(op, Requires)), None)


def _checks(plan: LayoutPlan, exc: str, resolve: Decoder | Encoder) -> list[str]:
    rules = _rules(plan)
    assert rules is not None
    s = plan.struct
    lines: list[str] = []
    for expr in rules.exprs:
        cond = render_expr(expr, s, resolve.name, s.fields[0])
        lines += [f"if not {cond}:", *indent(raise_lines(
            exc, f"{s.name}: require: {expr.text} does not hold", fmt=False,
            extra=f", {q(expr.text)}"))]
    return lines


def required_decode(ctx: EmitContext, plan: LayoutPlan, lines: list[str]) -> list[str]:
    """``decode_from``'s body ``lines`` with the rules tested before the value is built."""
    if _rules(plan) is None:
        return lines
    ctx.imports.use(ERRORS, "RequirementError")
    at = lines.index(BUILD)
    return [*lines[:at], *_checks(plan, "RequirementError", Decoder(ctx, plan)), *lines[at:]]


def required_encode(ctx: EmitContext, plan: LayoutPlan, lines: list[str]) -> list[str]:
    """``encode_to``'s body ``lines`` after the rules' tests."""
    if _rules(plan) is None:
        return lines
    ctx.imports.use(ERRORS, "RequirementUnmetError")
    return [*_checks(plan, "RequirementUnmetError", Encoder(ctx, plan)), *lines]
