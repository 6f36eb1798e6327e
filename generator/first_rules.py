"""How a message is bounded besides its fields: ``first:``, the first message each way with a
layout of its own (PostgreSQL's StartupMessage, AMQP's protocol header, MySQL's greeting), so a
stream decoder starts in a handshake state; and ``delimiter:``, a struct ended by a byte string
(STOMP's NUL, an HTTP head's CRLF CRLF).

Checked while the spec is built: each direction names a struct of the spec (not the frame, no
params) whose length a reader can tell from its first bytes, as the frame's (a ``size_of``
field after fixed-size fields, or blocks), or that has a fixed size.
"""

from __future__ import annotations

import re
from typing import Protocol

from protoframe.generator.build_context import PathT
from protoframe.generator.frame_checks import frame_length_field
from protoframe.generator.frame_ir import ProtoField, StructDef
from protoframe.generator.spec_ir import CommandInfo, Request
from protoframe.generator.spec_yaml import LocDict

DIRECTIONS = ("to_server", "to_client")


class _Builder(Protocol):
    unresolved: set[str]  # commands that did not resolve: naming them is no second error

    def error(self, message: str, path: PathT, key: bool = False) -> None: ...

    def lookup_struct(self, name: str | None, path: PathT) -> StructDef | None: ...


def fixed_length(s: StructDef) -> int | None:
    """The size of a struct all of whose fields have a fixed size, else None."""
    sizes = [f.fixed_size for f in s.fields]
    if not sizes or any(size is None for size in sizes):
        return None
    return sum(size or 0 for size in sizes)


def read_first(builder: _Builder, raw: LocDict | None, frame: StructDef) \
        -> dict[str, StructDef]:
    """The first message's struct per direction (``first: {to_server: A, to_client: B}``)."""
    if raw is None:
        return {}
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


def first_command_name(struct: StructDef) -> str:
    """The command a first message is to the machines and interactions: its struct's name in
    UPPER_SNAKE (``StartupMessage`` -> ``STARTUP_MESSAGE``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", struct.name).upper()


def add_first_commands(builder: _Builder, first: dict[str, StructDef], frame: StructDef,
                       commands: dict[str, CommandInfo], routed: bool) -> None:
    """Each first message as a command of its own, for a spec with machines or interactions
    (``commands`` gets them after the frame's own): what they name in transitions and
    requests. Its frame must name its commands with a switch (or have none), not a protobuf
    envelope or ``commands:`` routes, whose tables have no row for a struct of its own."""
    if not first:
        return
    if routed or any(isinstance(f, ProtoField) and f.dispatch_on is not None
                     for f in frame.fields):
        builder.error("first: with machines or interactions needs a frame whose commands a "
                      "switch names (a protobuf envelope's or commands: routes' tables have no "
                      "row for a first message)", ["first"], key=True)
        builder.unresolved.update(first_command_name(s) for s in first.values())
        return
    for direction, struct in first.items():
        name = first_command_name(struct)
        if name in commands:
            builder.error(f"first: {struct.name} is the command {name}, which the frame's "
                          "switch names too; rename the struct or the case", ["first", direction])
            continue
        commands[name] = CommandInfo(
            name=name, value=-1, body_type=struct.name,
            body_fields={f.name: f.name for f in struct.data_fields}, first=direction)


def check_first_requests(builder: _Builder, requests: list[Request],
                         commands: dict[str, CommandInfo]) -> None:
    """A first message has no frame around it: a request that is one cannot be correlated by
    the frame's fields, nor set them (``frame_fields:``). A server's first message that answers
    no request is awaited by a client method of its name, which no request may take."""
    answers = {n for r in requests for n in (*r.responses, *r.errors, *r.until)}
    awaited = [n.lower() for n, info in commands.items()
               if info.first == "to_client" and n not in answers]
    for i, r in enumerate(requests):
        if r.method in awaited:
            builder.error(f"the method {r.method!r} awaits the server's first message, which "
                          "answers no request; set method: to another name",
                          ["interactions", "requests", i])
        info = commands.get(r.request)
        if info is None or info.first is None:
            continue
        for key, names, of in (("correlate", r.frame_correlate, r.correlate),
                               ("frame_fields", r.frame_fields, r.frame_fields)):
            if names:
                builder.error(f"{key}: {names[0]!r} is a field of the frame, which the first "
                              f"message {r.request} is sent without",
                              ["interactions", "requests", i, key, of.index(names[0])])


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
