"""What the codec emitters write for bit fields (``bits:``): the reserved-bits check and the
sub-fields taken out of their integer on decode, the width checks on encode."""

from __future__ import annotations

from protoframe.generator.frame_bits import FrameEnum
from protoframe.generator.frame_emit import EmitContext, indent, raise_lines
from protoframe.generator.layout_ops import SubField
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.runtime_modules import ERRORS


def enum_text(ctx: EmitContext, enum: FrameEnum) -> str:
    """The ``IntEnum`` class of one of the spec's enums."""
    ctx.imports.use("enum", "IntEnum")
    lines = [f"class {enum.name}(IntEnum):",
             f'    """The values of {enum.name} (the spec\'s enums:)."""', ""]
    lines += [f"    {member} = {value}" for member, value in enum.members]
    return "\n".join(lines)


def reserved_check(ctx: EmitContext, where: str, target: str, reserved: int) -> list[str]:
    """Bits the spec reserves must be zero (none reserved: no check); ``where`` names the
    integer (``Struct.field``) in the message."""
    if not reserved:
        return []
    ctx.imports.use(ERRORS, "ReservedBitsError")
    return [f"if {target} & {reserved:#x}:", *indent(raise_lines(
        "ReservedBitsError", f"{where}: reserved bits {reserved:#x} are set in "
        f"{{{target}:#x}}"))]


def unpack(op: SubField, local: str, bits: int) -> str:
    """The expression taking sub-field ``op`` out of its ``bits``-wide integer in ``local``."""
    if op.as_bool:
        return f"bool({local} & {1 << op.shift:#04x})"
    low = (1 << op.width) - 1
    if op.shift == 0:
        return f"{local} & {low:#x}"
    if op.shift + op.width == bits:
        return f"{local} >> {op.shift}"
    return f"({local} >> {op.shift}) & {low:#x}"


def as_enum(ctx: EmitContext, op: SubField, where: str, target: str, value: str) -> list[str]:
    """Set ``target`` to a sub-field's ``value``, as its enum when it has one (a number the
    enum does not define raises ``UnknownEnumValueError``)."""
    if op.enum is None:
        return [f"{target} = {value}"]
    ctx.imports.use(ERRORS, "UnknownEnumValueError")
    return ["try:", f"    {target} = {op.enum}({value})", "except ValueError:", *indent(
        raise_lines("UnknownEnumValueError", f"{where}: {{{value}}} is not a value of "
                    f"{op.enum}", extra=f", {value}", suffix=" from None"))]


def value_check(ctx: EmitContext, plan: LayoutPlan, name: str) -> list[str]:
    """A sub-field computed by ``value:`` (``v_<name>``) fits its bits ([] for any other
    field, and for a bool, which always fits)."""
    op = plan.op(name)
    if not isinstance(op, SubField) or op.as_bool:
        return []
    ctx.imports.use(ERRORS, "ValueOutOfRangeError")
    top = (1 << op.width) - 1
    return [f"if not 0 <= v_{name} <= {top:#x}:", *indent(raise_lines(
        "ValueOutOfRangeError", f"{plan.name}.{name} = {{v_{name}!r}} does not fit its "
        f"{op.width} bits"))]


def width_checks(ctx: EmitContext, plan: LayoutPlan) -> list[str]:
    """Each stored int sub-field fits its bits, checked before anything is packed (a bool
    always fits, a switch key is a case's code, which validation made fit)."""
    lines: list[str] = []
    for op in plan.field_ops:
        if not isinstance(op, SubField) or op.as_bool or op.field.computed:
            continue
        ctx.imports.use(ERRORS, "ValueOutOfRangeError")
        top = (1 << op.width) - 1
        lines += [f"if not 0 <= self.{op.name} <= {top:#x}:", *indent(raise_lines(
            "ValueOutOfRangeError", f"{plan.name}.{op.name} = {{self.{op.name}!r}} does not "
            f"fit its {op.width} bits"))]
    return lines
