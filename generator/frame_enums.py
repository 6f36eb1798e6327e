"""The spec's own enums (``enums:``): named integer values, generated in the frames module as
``IntEnum`` classes and given to bit sub-fields with ``enum:`` (``bit_fields``).

Everything is checked at its position: an enum's name is not taken by a struct or a name the
frames module defines, its member names are not Python keywords or names ``IntEnum`` already
has, and its values are distinct (an ``IntEnum`` would quietly make a repeated one an alias).
"""

from __future__ import annotations

import keyword

from protoframe.generator.build_context import BuildContext
from protoframe.generator.frame_bits import FrameEnum
from protoframe.generator.literals import LiteralError, integer
from protoframe.generator.naming import ENUM_HELPERS
from protoframe.generator.spec_yaml import LocDict

# Names the frames module defines besides the spec's structs.
_MODULE_NAMES = frozenset({"StreamDecoder", "frame_length", "DEFAULT_MAX_FRAME_SIZE",
                           "IntEnum", "Struct", "Self", "Callable", "UUID"})


def spec_enums(ctx: BuildContext, raw: LocDict) -> dict[str, FrameEnum]:
    """The enums ``raw`` (the spec's ``enums:``) declares, by name."""
    out: dict[str, FrameEnum] = {}
    structs = _struct_names(ctx)
    for name, members in raw.items():
        path = ["enums", name]
        if name in structs or name in _MODULE_NAMES:
            # Still read, so that the parts naming it are not reported too.
            ctx.error(f"enum name {name!r} is taken by a struct or a name the frames module "
                      "defines", path, key=True)
        values: list[tuple[str, int]] = []
        seen: dict[int, str] = {}
        for member, text in members.items():
            mpath = [*path, member]
            if keyword.iskeyword(member) or member.startswith("_") or member in ENUM_HELPERS:
                ctx.error(f"enum member {member!r}: a Python keyword, a private name or a name "
                          "IntEnum already has", mpath, key=True)
                continue
            try:
                value = integer(text)
            except LiteralError as exc:
                ctx.error(f"enum member {member}: {exc}", mpath)
                continue
            if value in seen:
                ctx.error(f"enum member {member} has the value of {seen[value]} ({value})",
                          mpath)
                continue
            seen[value] = member
            values.append((member, value))
        out[name] = FrameEnum(name, "", values, ctx.loc(path, key=True))
    return out


def _struct_names(ctx: BuildContext) -> set[str]:
    structs = ctx.root.get("structs", LocDict())
    frame = ctx.root.get("frame", LocDict())
    names = set(structs) if isinstance(structs, dict) else set()
    if isinstance(frame, dict) and isinstance(frame.get("name"), str):
        names.add(frame["name"])
    return names
