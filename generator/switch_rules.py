"""The rules of switches beyond a plain integer key: a key of bits whose cases must fit it (and
may be named by its enum's members), and ``args:`` passed into the case structs (``case_args``
writes the code for them)."""

from __future__ import annotations

from typing import Any

from protoframe.generator.build_context import BuildContext, PathT
from protoframe.generator.frame_bits import FrameEnum
from protoframe.generator.frame_ir import SwitchField
from protoframe.generator.literals import LiteralError, integer
from protoframe.generator.spec_yaml import LocDict


def key_enum(ctx: BuildContext, switch_path: PathT) -> FrameEnum | None:
    """The spec enum of the bit sub-field the switch at ``switch_path`` is on, if it has one,
    read from the spec's text (the struct's fields are being built when its cases are read)."""
    fields: Any = ctx.root
    for step in switch_path[:-1]:
        fields = fields[step]
    on = fields[switch_path[-1]].get("on")
    for item in fields:
        for part in item.get("bits", []):
            if isinstance(part, dict) and part.get("name") == on and "enum" in part:
                return ctx.frame_enums.get(part["enum"])
    return None


def case_value(ctx: BuildContext, key: Any, switch_path: PathT) -> int:
    """A case key (of ``cases:`` or ``names:``): an integer literal, or a member of the enum of
    the key's sub-field; raises ``LiteralError`` for anything else."""
    try:
        return integer(key)
    except LiteralError:
        enum = key_enum(ctx, switch_path) if str(key).isidentifier() else None
        members = dict(enum.members) if enum is not None else {}
        if key not in members:
            raise
        return members[key]


def key_fits(ctx: BuildContext, f: SwitchField, width: int, raw_cases: LocDict,
             fpath: PathT) -> None:
    """Every case value of a switch on a ``width``-bit sub-field fits it (at the case's key)."""
    for case in f.cases:
        if not 0 <= case.value < 1 << width:
            key = next(k for k in raw_cases if case_value(ctx, k, fpath) == case.value)
            ctx.error(f"switch case {case.value} does not fit {f.switch_on!r}, {width} bits "
                      "wide", [*fpath, "cases", key], key=True)


def check_case_args(ctx: BuildContext, f: SwitchField, fpath: PathT) -> None:
    """A switch's args: each case struct's params get one, each is some case's param, and a
    case taking params has one layout both ways."""
    wanted: set[str] = set()
    reported: set[str] = set()
    for case in f.cases:
        for target in case.structs:
            wanted |= {p.name for p in target.params}
            missing = sorted({p.name for p in target.params} - set(f.args))
            if target.params and case.directional:
                ctx.error(f"switch case {target.name} takes params, so its case cannot have a "
                          "layout per direction", [*fpath, "cases"])
            elif missing and target.name not in reported:
                reported.add(target.name)
                ctx.error(f"switch case {target.name} needs args for {', '.join(missing)}",
                          fpath)
    for name in f.args:
        if name not in wanted:
            ctx.error(f"no case of {f.name!r} has a param {name!r}", [*fpath, "args", name],
                      key=True)
