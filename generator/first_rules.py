"""How a message is bounded besides its fields: ``first:``, the first message each way with a
layout of its own (PostgreSQL's StartupMessage, AMQP's protocol header, MySQL's greeting), so a
stream decoder starts in a handshake state; and ``delimiter:``, a struct ended by a byte string
(STOMP's NUL, an HTTP head's CRLF CRLF).

Checked while the spec is built: each direction names a struct of the spec (not the frame, no
params) whose length a reader can tell from its first bytes, as the frame's (a ``size_of``
field after fixed-size fields, or blocks), or that has a fixed size.
"""

from __future__ import annotations

from typing import Protocol

from protoframe.generator.build_context import PathT
from protoframe.generator.frame_checks import frame_length_field
from protoframe.generator.frame_ir import StructDef
from protoframe.generator.spec_yaml import LocDict

DIRECTIONS = ("to_server", "to_client")


class _Builder(Protocol):
    def error(self, message: str, path: PathT, key: bool = False) -> None: ...

    def lookup_struct(self, name: str | None, path: PathT) -> StructDef | None: ...


def fixed_length(s: StructDef) -> int | None:
    """The size of a struct all of whose fields have a fixed size, else None."""
    sizes = [f.fixed_size for f in s.fields]
    if not sizes or any(size is None for size in sizes):
        return None
    return sum(size or 0 for size in sizes)


def read_first(builder: _Builder, raw: LocDict | None, frame: StructDef,
               interactive: bool) -> dict[str, StructDef]:
    """The first message's struct per direction (``first: {to_server: A, to_client: B}``);
    ``interactive``: the spec has machines or requests, which do not take one yet."""
    if raw is None:
        return {}
    if interactive:
        builder.error("first: cannot be combined with machines or interactions yet (the "
                      "machines have no command for a first message)", ["first"], key=True)
    out: dict[str, StructDef] = {}
    for direction in DIRECTIONS:
        if direction not in raw:
            continue
        path: PathT = ["first", direction]
        struct = builder.lookup_struct(raw[direction], path)
        if struct is None:
            continue
        if struct is frame:
            builder.error(f"first: {struct.name} is the frame; a first message has a layout "
                          "of its own", path)
        elif struct.params:
            builder.error(f"first: {struct.name} takes params, which nothing passes to a "
                          "first message", path)
        elif frame_length_field(struct) is None and fixed_length(struct) is None and \
                struct.delimiter is None:
            builder.error(f"first: cannot tell the length of {struct.name} from its first "
                          "bytes: it needs a fixed size, a delimiter, or a size_of: rest field "
                          "(or one measuring its last field) after fixed-size fields", path)
        else:
            out[direction] = struct
    return out


def read_delimiter(builder: _Builder, body: LocDict, path: PathT) -> bytes | None:
    """``delimiter:`` of a struct: its text, each character one byte."""
    text = body.get("delimiter")
    if text is None:
        return None
    try:
        return str(text).encode("latin-1")
    except UnicodeEncodeError:
        builder.error("delimiter: each character is one byte (0 to 255); write \"\\xNN\" "
                      "for a byte", [*path, "delimiter"])
        return None
