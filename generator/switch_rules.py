"""The rules of switches beyond a plain integer key: a key of bits whose cases must fit it, and
``args:`` passed into the case structs (``case_args`` writes the code for them)."""

from __future__ import annotations

from protoframe.generator.build_context import BuildContext, PathT
from protoframe.generator.frame_ir import SwitchField
from protoframe.generator.literals import integer
from protoframe.generator.spec_yaml import LocDict


def key_fits(ctx: BuildContext, f: SwitchField, width: int, raw_cases: LocDict,
             fpath: PathT) -> None:
    """Every case value of a switch on a ``width``-bit sub-field fits it (at the case's key)."""
    for case in f.cases:
        if not 0 <= case.value < 1 << width:
            key = next(k for k in raw_cases if integer(k) == case.value)
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
