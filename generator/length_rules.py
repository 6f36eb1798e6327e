"""The builder's rules for variable-length integers: ``max_bytes:`` on a varint, and a varint
that is the size of the rest of its struct.

A varint ``size_of: rest`` is written after what follows it is encoded, by inserting its bytes
in front of them (its width is not known ahead, so no placeholder can be patched): nothing that
is filled in after the fields it covers may cover the varint itself.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.build_context import PathT
from protoframe.generator.frame_ir import FrameField, StructDef, VarintField
from protoframe.generator.spec_yaml import LocDict

Report = Callable[[str, PathT], None]

# Base-128 varints of up to 10 bytes hold 64 bits.
MAX_VARINT_BYTES = 10


def read_max_bytes(f: FrameField, item: LocDict, path: PathT, report: Report) -> None:
    """``max_bytes: N`` on a varint: at most N bytes (MQTT's remaining length: 4)."""
    if "max_bytes" not in item:
        return
    if not isinstance(f, VarintField):
        report("max_bytes: needs a varint field", [*path, "max_bytes"])
        return
    f.max_bytes = item["max_bytes"]
    if f.const is not None and f.const >> (7 * f.max_bytes):
        report(f"const: {f.const} needs more than the {f.max_bytes} bytes of max_bytes",
               [*path, "const"])


def check_varint_rest(struct: StructDef, index: int, f: FrameField, path: PathT,
                      report: Report) -> None:
    """A varint ``size_of: rest`` at ``struct.fields[index]``: what may not cover it."""
    names = [g.name for g in struct.fields]
    for j, g in enumerate(struct.fields):
        if g is f:
            continue
        if g.size_of == "rest" and j < index:
            report(f"{f.name!r} (a varint size of the rest) is inside the rest {g.name!r} "
                   "measures: only one of them can be the size of the rest", [*path, "size_of"])
        if g.checksum is not None and g.checksum.start in names and \
                names.index(g.checksum.start) <= index:
            report(f"checksum {g.name!r} covers {f.name!r}, a varint size of the rest, which "
                   "is written after the fields it measures; start the checksum after it",
                   [*path, "size_of"])
        if g.size_range is not None and g.size_range[0] in names and \
                g.size_range[1] in names and \
                names.index(g.size_range[0]) <= index <= names.index(g.size_range[1]):
            report(f"size_of range {g.name!r} covers {f.name!r}, a varint size of the rest, "
                   "which is written after the fields it measures", [*path, "size_of"])
