"""Generated protocol reference pages (``docs/protocols/<protocol>.md``).

Everything the page shows is computed here from the validated spec IR, so the template
(``templates/markdown/protocol.md.j2``) only lays out tables, lists and Mermaid blocks.
Nothing depends on dict or set iteration order, so the page is byte-for-byte reproducible.

Sequence diagrams are derived from each machine: the path from its initial state to its
"main" state (the reachable non-final state with the most self-transitions), the commands that
state allows (request/response pairs grouped), and the cheapest path on to a final state,
preferring request/response pairs over single commands and single commands over events.
"""

from __future__ import annotations

import ast
import heapq
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import jinja2

from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    CommandInfo,
    FrameField,
    FrameSpec,
    IntField,
    Machine,
    ProtoField,
    Request,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    Transition,
    UuidField,
    VarintField,
)
from protoframe.generator.ir import MessageType, Protocol
from protoframe.generator.render import render

TEMPLATE = "markdown/protocol.md.j2"

# Words Mermaid's state diagram lexer reads as keywords (case-insensitively) before it reads
# a state id; a state with one of these names is drawn through an alias.
_MERMAID_STATE_KEYWORDS = frozenset(
    {"click", "href", "default", "state", "note", "scale", "class", "classdef", "style",
     "direction", "end"})


# ---------------------------------------------------------------------------------------------
# the view


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class LayoutView:
    anchor: str
    name: str
    doc: str
    facts: list[str]  # Markdown list items: params, trailing bytes
    table: Table
    switches: list[tuple[str, Table]]  # (caption, cases table)


@dataclass
class MachineView:
    anchor: str
    name: str
    doc: str
    facts: list[str]  # Markdown list items
    diagram: list[str]  # Mermaid lines after the header line
    transitions: Table


@dataclass
class SequenceView:
    anchor: str
    title: str
    summary: str
    diagram: list[str]


@dataclass
class ChangesSection:
    """What ``protoframe diff`` found since a revision (built by
    ``protoframe.generator.diff.docs_changes``); on a page only when asked for."""

    title: str
    intro: str
    groups: list[tuple[str, str, list[str]]]  # (severity, what it means, Markdown items)


@dataclass
class ProtocolPage:
    header: str
    title: str
    doc: str
    source: str
    facts: list[str]  # Markdown list items
    contents: list[tuple[str, str]]  # (title, anchor)
    frame: LayoutView
    structs: list[LayoutView]
    commands_intro: str
    commands: Table | None  # None when the frame names no commands
    interactions_intro: list[str]
    requests: Table | None
    one_way: list[str]
    server_push: list[str]
    machines: list[MachineView]
    sequences_intro: str
    sequences: list[SequenceView]
    changes: ChangesSection | None = None


def build_protocol_doc(env: jinja2.Environment, spec: FrameSpec, protocol: Protocol,
                       changes: ChangesSection | None = None) -> str:
    """The Markdown reference page of one protocol, from its spec (and, when given, what
    changed since an earlier revision)."""
    text = render(env, TEMPLATE, p=build_page(spec, protocol, changes))
    while "\n\n\n" in text:  # the template's blocks leave runs of blank lines
        text = text.replace("\n\n\n", "\n\n")
    return text


def build_page(spec: FrameSpec, protocol: Protocol,
               changes: ChangesSection | None = None) -> ProtocolPage:
    """The view of one protocol's reference page."""
    names = _ProtoNames(protocol)
    anchors = _Anchors()
    layout_anchor = {s.name: anchors.make(f"layout-{s.name}")
                     for s in [spec.frame, *spec.structs]}
    frame = _layout(spec, spec.frame, names, layout_anchor)
    structs = [_layout(spec, s, names, layout_anchor) for s in spec.structs]
    machine_views = [_machine_view(spec, m, anchors.make(f"machine-{m.name}"))
                     for m in spec.machines]
    sequences = [_sequence_view(spec, m, anchors.make(f"sequence-{m.name}"))
                 for m in spec.machines]
    contents = [("Frame layout", "frame-layout")]
    if structs:
        contents.append(("Structs", "structs"))
    contents.append(("Commands", "commands"))
    if spec.requests or spec.one_way or spec.server_push:
        contents.append(("Interactions", "interactions"))
    if machine_views:
        contents.append(("State machines", "state-machines"))
        contents.append(("Sequences", "sequences"))
    if changes is not None:
        contents.append((changes.title, "changes"))
    facts = [
        f"Protobuf files: {', '.join(f'`{f.path}`' for f in protocol.files) or 'none'}",
        f"Byte order: {_byte_order(spec)}",
        f"Max frame size: {_size_text(spec.max_frame_size)}; `DEFAULT_MAX_FRAME_SIZE` in "
        "`frames.py`, and a frame whose header announces more is refused before its body is "
        "read",
        f"Frame: [`{spec.frame.name}`](#{layout_anchor[spec.frame.name]}), "
        f"{len(spec.commands)} commands",
    ]
    return ProtocolPage(
        header=f"<!-- Generated by protoframe from {spec.path}. DO NOT EDIT. -->",
        title=f"{spec.protocol} protocol reference",
        doc=spec.doc.strip(),
        source=spec.path,
        facts=facts,
        contents=contents,
        frame=frame,
        structs=structs,
        commands_intro=_commands_intro(spec),
        commands=_commands_table(spec, names, layout_anchor) if spec.commands else None,
        interactions_intro=_interactions_intro(spec),
        requests=_requests_table(spec) if spec.requests else None,
        one_way=[f"`{c}`" for c in spec.one_way],
        server_push=[f"`{c}`" for c in spec.server_push],
        machines=machine_views,
        sequences_intro=(
            "Derived from each machine: from its initial state through the request that "
            "creates the entity to its main state, the commands allowed there, and on to a "
            "final state. Client is the side that sends `send` commands. Arrows are labelled "
            "with the command and, in parentheses, its correlation fields and the machine's "
            "key; a dashed arrow answers the request before it; `break` marks an answer after "
            "which the entity is gone, `alt` the answers a request may get."),
        sequences=sequences,
        changes=changes,
    )


class _Anchors:
    """Explicit, unique, lower-case HTML anchors (headings may repeat names)."""

    def __init__(self) -> None:
        self.taken = {"frame-layout", "structs", "commands", "interactions", "state-machines",
                      "sequences", "changes"}

    def make(self, base: str) -> str:
        slug = "".join(c if c.isalnum() else "-" for c in base.lower())
        out = slug
        for n in itertools.count(2):
            if out not in self.taken:
                break
            out = f"{slug}-{n}"
        self.taken.add(out)
        return out


class _ProtoNames:
    """Message names as the .proto declares them (without the package)."""

    def __init__(self, protocol: Protocol) -> None:
        self.names: dict[str, str] = {}
        for proto in protocol.files:
            prefix = proto.package + "." if proto.package else ""
            for msg in proto.all_messages():
                self.names[msg.full_name] = msg.full_name.removeprefix(prefix)
            for enum in proto.all_enums():
                self.names[enum.full_name] = enum.full_name.removeprefix(prefix)

    def __call__(self, full_name: str) -> str:
        return self.names.get(full_name, full_name)


# ---------------------------------------------------------------------------------------------
# text helpers


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    return f"`{text}`"


def expr_text(e: Expr) -> str:
    """An expression as the spec writes it, on one line (canonical form if it has a comment)."""
    if "#" in e.text:
        return ast.unparse(e.tree)
    return " ".join(e.text.split())


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n} bytes ({n // size} {unit})"
    return f"{n} bytes"


def _byte_order(spec: FrameSpec) -> str:
    text = "big-endian (network order)" if spec.byte_order == "big" else "little-endian"
    overrides = [f"`{s.name}.{f.name}`" for s in [spec.frame, *spec.structs] for f in s.fields
                 if isinstance(f, IntField) and f.order != spec.byte_order]
    if overrides:
        text += "; fields with their own `order`: " + ", ".join(overrides)
    return text


def _join(items: Iterable[str]) -> str:
    return ", ".join(items)


# ---------------------------------------------------------------------------------------------
# layouts


def _layout(spec: FrameSpec, s: StructDef, names: _ProtoNames,
            anchors: dict[str, str]) -> LayoutView:
    rows: list[list[str]] = []
    offset: int | None = 0
    switches: list[tuple[str, Table]] = []
    for i, f in enumerate(s.fields, start=1):
        size = f.fixed_size
        rows.append([
            str(i),
            code(f.name),
            cell(_type_text(spec, f, names, anchors)),
            "—" if offset is None or not f.wire else str(offset),
            cell(_size_col(spec, s, f)),
            cell(_notes(spec, s, f, names)),
        ])
        offset = None if offset is None or size is None else offset + size
        if isinstance(f, SwitchField):
            key = s.field(f.switch_on or "")
            width = key.width if isinstance(key, IntField) else 0
            switches.append((f"Cases of `{f.name}`, selected by `{f.switch_on}`",
                             _cases_table(f, anchors, width)))
    table = Table(["#", "field", "type", "offset", "size (bytes)", "notes"], rows)
    facts = [] if rows else ["No fields: the layout is empty."]
    if s.params:
        facts.append("Params (passed by the field that holds it with `args:`, not stored): "
                     + _join(f"`{p.name}` ({p.kind})" for p in s.params))
    if s.trailing == "ignore":
        facts.append("Trailing bytes after the last field are skipped (`trailing: ignore`).")
    return LayoutView(
        anchor=anchors[s.name],
        name=s.name,
        doc=s.doc.strip(),
        facts=facts,
        table=table,
        switches=switches,
    )


def _link(name: str, anchors: dict[str, str]) -> str:
    return f"[`{name}`](#{anchors[name]})"


def _type_text(spec: FrameSpec, f: FrameField, names: _ProtoNames,
               anchors: dict[str, str]) -> str:
    match f:
        case IntField():
            t = f"{'i' if f.signed else 'u'}{f.width * 8}"
            if f.width > 1 and f.order != spec.byte_order:
                t += f" ({f.order}-endian)"
            return t
        case StringField():
            return f"string ({f.encoding})"
        case ProtoField(message=message) if message is not None:
            return f"proto `{names(message.full_name)}`"
        case StructField(struct=held) if held is not None:
            return f"struct {_link(held.name, anchors)}"
        case BlocksField(struct=held) if held is not None:
            return f"blocks of {_link(held.name, anchors)}"
        case ArrayField(element=StructField(struct=held)) if held is not None:
            return f"array of {_link(held.name, anchors)}"
        case ArrayField(element=element) if element is not None:
            return f"array of {_type_text(spec, element, names, anchors)}"
        case SwitchField():
            return f"switch on `{f.switch_on}`"
    return f.kind  # varint, bool, uuid, bytes


def _size_col(spec: FrameSpec, s: StructDef, f: FrameField) -> str:
    if not f.wire:
        return "0 (derived)"
    fixed = f.fixed_size
    if fixed is not None:
        return str(fixed)
    if isinstance(f, IntField | BoolField | UuidField) and f.optional:
        return f"{f.width_when_present}, or 0 when absent"
    if isinstance(f, VarintField):
        return "1–10 (varint)"
    if f.length is not None:
        return f"{f.length}, or 0 when absent"
    if f.size == "rest":
        return "the rest"
    if f.size is not None:
        return f"`{f.size}`"
    if f.prefix is not None:
        return f"{f.prefix} length prefix + length"
    if isinstance(f, BytesField | StringField | ProtoField):
        return "the rest"
    if isinstance(f, ArrayField) and f.element is not None:
        each = f.element.fixed_size
        per = f" × {each}" if each is not None else " items"
        if f.until_end:
            return "items to the end" if each is None else f"the rest (items of {each})"
        assert f.count is not None
        return f"`{expr_text(f.count)}`{per}"
    if isinstance(f, BlocksField):
        return (f"{f.block_count} count, then per block {f.block_length} length + up to "
                f"{f.block_size}")
    return "variable"


def _notes(spec: FrameSpec, s: StructDef, f: FrameField, names: _ProtoNames) -> str:
    notes: list[str] = []
    width = f.width if isinstance(f, IntField) else 0
    if f.marker and f.const is not None:
        notes.append(f"marker {_hex(f.const, width)}: present when the next {width} "
                     "bytes hold it; stored as a bool")
    elif f.const is not None:
        notes.append(f"constant {_hex(f.const, width)}, checked on decode")
    if f.derive is not None:
        notes.append(f"no bytes of its own: decode computes `{expr_text(f.derive)}`")
    if f.value is not None:
        notes.append(f"computed: `{expr_text(f.value)}`")
    if f.size_of == "rest":
        notes.append(f"size of everything after it in the {'frame' if s.is_frame else 'struct'}")
    elif f.size_of is not None:
        notes.append(f"size of `{f.size_of}`")
    if f.size_range is not None and f.size_range[0] == f.size_range[1]:
        notes.append(f"size of `{f.size_range[0]}`")
    elif f.size_range is not None:
        notes.append(f"size of the fields `{f.size_range[0]}` through `{f.size_range[1]}`")
    if f.count_of is not None:
        notes.append(f"number of items in `{f.count_of}`")
    if f.checksum is not None:
        notes.append(f"{f.checksum.algorithm} of the bytes from `{f.checksum.start}` to the "
                     f"end of `{s.name}`, checked on decode")
    if f.is_switch_key:
        sw = next((g for g in s.fields if isinstance(g, SwitchField)
                   and g.switch_on == f.name), None)
        if sw is not None:
            notes.append(f"selects the case of `{sw.name}`; set from its type on encode")
    if f.when is not None:
        notes.append(f"present when `{expr_text(f.when)}`")
    if f.when_peek is not None and not f.marker:
        kind, equals = f.when_peek
        notes.append(f"present when the next {kind} (peeked, not consumed) is "
                     f"{_hex(equals, int(kind[1:]) // 8)}")
    if f.when_remaining:
        notes.append("present when bytes remain")
    if f.default is not None:
        notes.append(f"default `{_default(f.default)}` when absent")
    if isinstance(f, ProtoField) and f.dispatch_on is not None:
        enum = f.dispatch_on.type.enum
        enum_name = names(enum.full_name) if enum is not None else "?"
        notes.append(f"dispatch: `{f.dispatch_on.proto_name}` ({enum_name}) names the command; "
                     "its body is the field whose number equals that value (see Commands)")
    if f.compression is not None:
        text = f"compressed with the codec in `{f.compression.codec}`"
        if f.compression.uncompressed_size is not None:
            text += f", uncompressed size in `{f.compression.uncompressed_size}`"
        notes.append(text + f"; `decompressed_{f.name}()` undoes it")
    if isinstance(f, SwitchField) and s.is_frame and f.cases:
        notes.append("the command (see Commands)")
    if f.args:
        notes.append("args: " + _join(f"`{k}` = `{expr_text(v)}`" for k, v in f.args.items()))
    if isinstance(f, BlocksField) and f.max_blocks is not None:
        notes.append(f"at most {f.max_blocks} blocks")
    if f.doc:
        notes.append(f.doc.strip())
    return "; ".join(notes)


def _hex(value: int, width: int) -> str:
    """Markdown for a constant: `` `0x0e01` ``; a negative one also as its two's complement in
    ``width`` bytes: `` `-1` (`0xffffffff`) ``."""
    digits = max(2 * width, 2)
    if value >= 0:
        return f"`0x{value:0{digits}x}`"
    if width == 0:
        return f"`{value}`"
    return f"`{value}` (`0x{value & ((1 << 8 * width) - 1):0{digits}x}`)"


def _default(value: int | str | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cases_table(f: SwitchField, anchors: dict[str, str], width: int) -> Table:
    rows = []
    for c in f.cases:
        if c.to_server is c.to_client:
            assert c.to_server is not None
            to_server = to_client = _link(c.to_server.name, anchors)
        else:
            to_server = _link(c.to_server.name, anchors) if c.to_server else "—"
            to_client = _link(c.to_client.name, anchors) if c.to_client else "—"
        rows.append([_case_value(c.value, width), code(c.name), to_server, to_client])
    return Table(["value", "name", "to server", "to client"], rows)


def _case_value(value: int, width: int) -> str:
    """A case value in decimal and hex (negative ones as ``width``-byte two's complement)."""
    if value >= 0:
        return f"{value} (`{value:#04x}`)"
    if width == 0:
        return str(value)
    return f"{value} (`0x{value & ((1 << 8 * width) - 1):0{2 * width}x}`)"


# ---------------------------------------------------------------------------------------------
# commands and interactions


def _commands_intro(spec: FrameSpec) -> str:
    parts = []
    for f in spec.frame.fields:
        if isinstance(f, ProtoField) and f.dispatch_on is not None and f.message is not None:
            parts.append(f"`{f.name}.{f.dispatch_on.proto_name}` names the command and the "
                         f"field of `{f.message.proto_name}` with the same number holds its "
                         "body")
        elif isinstance(f, SwitchField):
            parts.append(f"`{f.switch_on}` selects the layout of `{f.name}`")
    if spec.routes:
        return _routes_intro(spec)
    if not parts or not spec.commands:
        return (f"`{spec.frame.name}` has no `dispatch` or `switch` field of its own, so the "
                "spec names no commands (a switch inside a nested struct is only a layout).")
    return (f"In each `{spec.frame.name}`, {'; '.join(parts)}. The names below are the ones "
            "interactions and machines use, and each has an `on_<name>` hook in `machines.py`.")


def _routes_intro(spec: FrameSpec) -> str:
    parts = []
    for route in spec.routes:
        if route.on is None:
            text = (f"a frame that has `{route.part.text}` is `{route.commands[0].name}`, with "
                    "that part as its body")
        else:
            body = f"the message serialized in `{route.part.text}.{route.payload.text}`" \
                if route.payload is not None else f"`{route.part.text}` itself"
            text = (f"in a frame that has `{route.part.text}`, "
                    f"`{route.part.text}.{route.on.text}` names the command and its body is "
                    f"{body}")
        if route.sets:
            text += " (a sender sets " + _join(f"`{a.path.text}` = `{a.value}`"
                                               for a in route.sets) + ")"
        parts.append(text)
    return (f"`{spec.frame.name}` has no command field of its own: the spec's `commands:` "
            f"routes name the command, tried in this order: {'; '.join(parts)}. "
            "`frame_of_<command>` in `machines.py` builds a frame for each command. The names "
            "below are the ones interactions and machines use, and each has an `on_<name>` "
            "hook in `machines.py`.")


def _roles(spec: FrameSpec) -> dict[str, str]:
    """What the interactions say of each command, e.g. "answers `A`, `B`; server push"."""
    kinds = ("request for", "answers", "error for", "one-way", "server push")
    found: dict[str, dict[str, list[str]]] = {n: {k: [] for k in kinds} for n in spec.commands}

    def add(name: str, kind: str, other: str = "") -> None:
        if name in found and other not in found[name][kind]:
            found[name][kind].append(other)

    for r in spec.requests:
        add(r.request, "request for", r.response)
        add(r.response, "answers", r.request)
        for e in r.errors:
            add(e, "error for", r.request)
    for c in spec.one_way:
        add(c, "one-way")
    for c in spec.server_push:
        add(c, "server push")
    out: dict[str, str] = {}
    for name, by_kind in found.items():
        parts = []
        for kind, others in by_kind.items():
            named = [code(o) for o in others if o]
            if kind == "request for" and named:
                parts.append(f"request, answered by {_join(named)}")
            elif named:
                parts.append(f"{kind} {_join(named)}")
            elif others:
                parts.append(kind)
        out[name] = "; ".join(parts)
    return out


def _commands_table(spec: FrameSpec, names: _ProtoNames, anchors: dict[str, str]) -> Table:
    roles = _roles(spec)
    used_by: dict[str, list[str]] = {name: [] for name in spec.commands}
    for m in spec.machines:
        for t in m.transitions:
            for cmd in (t.send, t.receive):
                if cmd in used_by and m.name not in used_by[cmd]:
                    used_by[cmd].append(m.name)
    envelope = {c.name: f for f in spec.frame.fields if isinstance(f, ProtoField)
                for c in f.commands}
    switch_of = {c.name: f for f in spec.frame.fields if isinstance(f, SwitchField)
                 for c in f.cases}
    rows = []
    for name, info in spec.commands.items():
        body, carried = _body(spec, info, names, anchors, envelope.get(name),
                              switch_of.get(name))
        rows.append([
            code(name),
            _case_value(info.value, _key_width(spec)) if info.case is not None
            else "—" if info.routed is not None and info.routed.value is None
            else str(info.value),
            body,
            carried,
            cell(roles[name]) or "—",
            _join(code(m) for m in used_by[name]) or "—",
        ])
    return Table(["command", "value", "body", "carried in", "interactions", "machines"], rows)


def _key_width(spec: FrameSpec) -> int:
    """Width of the frame's switch key, for showing negative case values in hex."""
    for f in spec.frame.fields:
        if isinstance(f, SwitchField) and f.switch_on is not None:
            key = spec.frame.field(f.switch_on)
            if isinstance(key, IntField):
                return key.width
    return 0


def _body(spec: FrameSpec, info: CommandInfo, names: _ProtoNames, anchors: dict[str, str],
          envelope: ProtoField | None, switch: SwitchField | None) -> tuple[str, str]:
    if info.routed is not None and info.route is not None:
        route = info.route
        msg_or_none = info.body_message
        body = code(names(msg_or_none.full_name)) if msg_or_none is not None else \
            _link(info.body_type, anchors)
        where = f"`{route.part.text}.{route.payload.text}` (serialized)" \
            if route.payload is not None else f"`{route.part.text}`"
        if info.routed.sets:
            where += "; sent with " + _join(f"`{a.path.text}` = `{a.value}`"
                                            for a in info.routed.sets)
        return body, where
    if info.proto is not None:
        msg: MessageType = info.proto.message
        fld = info.proto.field
        holder = envelope.message.proto_name if envelope and envelope.message else "?"
        attr = f" (Python `{fld.py_name}`)" if fld.py_name != fld.proto_name else ""
        return code(names(msg.full_name)), f"`{holder}.{fld.proto_name}`{attr}"
    assert info.case is not None
    c = info.case
    if c.to_server is c.to_client and c.to_server is not None:
        body = _link(c.to_server.name, anchors)
    else:
        parts = []
        if c.to_server is not None:
            parts.append(f"{_link(c.to_server.name, anchors)} to server")
        if c.to_client is not None:
            parts.append(f"{_link(c.to_client.name, anchors)} to client")
        body = ", ".join(parts)
    where = f"`{spec.frame.name}.{switch.name}`" if switch is not None else "—"
    return body, where


def _interactions_intro(spec: FrameSpec) -> list[str]:
    out = []
    if spec.allocate is not None:
        users = [r.request for r in spec.requests
                 if spec.allocate in spec.commands[r.request].body_fields
                 or spec.allocate in r.frame_correlate]
        out.append(f"`{spec.allocate}` is allocated by the client: each typed request method "
                   "in `client.py` numbers its request itself (0, 1, 2, …)"
                   + (f"; it applies to {_join(code(u) for u in users)}." if users else "."))
    if spec.requests:
        out.append("An answer is matched to the oldest pending request of its kind whose "
                   "correlation fields have the same values; a request without correlation "
                   "fields is answered by the next answer of its kind. Error responses make "
                   "the request method raise `RequestFailed`.")
    return out


def _requests_table(spec: FrameSpec) -> Table:
    def corr(r: Request) -> str:
        return _join(f"`{c}` (frame)" if c in r.frame_correlate else code(c)
                     for c in r.correlate) or "—"

    rows = [[code(r.request), code(r.response), _join(code(e) for e in r.errors) or "—",
             corr(r), f"`{r.method}()`"]
            for r in spec.requests]
    return Table(["request", "response", "error responses", "correlated by", "client method"],
                 rows)


# ---------------------------------------------------------------------------------------------
# state machines


def _terminal(m: Machine) -> set[str]:
    """Final states: reached but never left (the runtime forgets entities there)."""
    sources = {s for t in m.transitions for s in t.sources}
    return {t.target for t in m.transitions} - sources


def _trigger(t: Transition) -> str:
    if t.send is not None:
        text = f"send {t.send}"
    elif t.receive is not None:
        text = f"receive {t.receive}"
    else:
        text = f"event {t.event}"
    if t.when is not None:
        text += f" [{expr_text(t.when)}]"
    return text


def _state_ids(m: Machine) -> dict[str, str]:
    ids: dict[str, str] = {}
    taken = set(m.states)
    for s in m.states:
        if s.lower() in _MERMAID_STATE_KEYWORDS:
            alias = f"st_{s}"
            while alias in taken:
                alias += "_"
            taken.add(alias)
            ids[s] = alias
        else:
            ids[s] = s
    return ids


def mermaid_text(text: str) -> str:
    """Label text Mermaid accepts: its lexers stop at ``;`` and read ``#`` as a comment."""
    return text.replace(";", ",").replace("#", " ")


def _machine_view(spec: FrameSpec, m: Machine, anchor: str) -> MachineView:
    ids = _state_ids(m)
    terminal = _terminal(m)
    diagram: list[str] = []
    for s in m.states:
        if ids[s] != s:
            diagram.append(f'state "{s}" as {ids[s]}')
        else:
            diagram.append(s)
    diagram.append(f"[*] --> {ids[m.initial]}")
    for t in m.transitions:
        for source in t.sources:
            diagram.append(f"{ids[source]} --> {ids[t.target]}: {mermaid_text(_trigger(t))}")
    for s in m.states:
        if s in terminal:
            diagram.append(f"{ids[s]} --> [*]")
    rows = [[_join(code(s) for s in t.sources), cell(_trigger(t)), code(t.target)]
            for t in m.transitions]
    facts = [f"States: {_join(code(s) for s in m.states)}; initial `{m.initial}`; final "
             f"(never left; the entity is forgotten there): "
             f"{_join(code(s) for s in m.states if s in terminal) or 'none'}."]
    facts += _key_facts(spec, m)
    requests = {r.request: r for r in spec.requests}
    flagged: set[tuple[str, str]] = set()
    for t in m.transitions:
        r = requests.get(t.send or "")
        if r is None or (t.target, r.request) in flagged:
            continue
        flagged.add((t.target, r.request))
        answers = [r.response, *r.errors]
        accepted = {u.receive for u in m.transitions if t.target in u.sources}
        if not accepted & set(answers):
            facts.append(f"No transition from `{t.target}` accepts an answer to `{r.request}` "
                         f"({_join(code(a) for a in answers)}), so an answer routed back to this "
                         "machine is refused with `ProtocolViolation`.")
    return MachineView(
        anchor=anchor,
        name=m.name,
        doc=m.doc.strip(),
        facts=facts,
        diagram=diagram,
        transitions=Table(["from", "on", "to"], rows),
    )


def _vocabulary(m: Machine) -> list[str]:
    out: list[str] = []
    for t in m.transitions:
        for cmd in (t.send, t.receive):
            if cmd is not None and cmd not in out:
                out.append(cmd)
    return out


def _key_facts(spec: FrameSpec, m: Machine) -> list[str]:
    if m.key is None:
        return ["Key: none; one instance per connection."]
    key = m.key
    vocab = _vocabulary(m)
    keyed = sorted(n for n in vocab if n in spec.commands and key in spec.commands[n].body_fields)
    # An answer without the key reaches the instance that sent the request it answers, which
    # works when that request carries the key (the runtime records its owner when it is sent).
    routed = sorted(n for n in vocab if n not in keyed and any(
        n in (r.response, *r.errors) and r.request in keyed for r in spec.requests))
    ignored = sorted(n for n in vocab if n not in keyed and n not in routed)
    out = [f"Key: `{key}`; one instance per value. Commands carrying it: "
           f"{_join(code(n) for n in keyed) or 'none'}."]
    if routed:
        out.append(f"Answers without `{key}` ({_join(code(n) for n in routed)}) reach the "
                   "instance whose request they answer, matched on the request's correlation "
                   "fields.")
    if ignored:
        out.append(f"Never reach this machine (no `{key}`, and not an answer to a request "
                   f"that has it): {_join(code(n) for n in ignored)}.")
    return out


# ---------------------------------------------------------------------------------------------
# sequence diagrams


@dataclass(frozen=True)
class _Edge:
    """One transition from one source state."""

    order: int
    source: str
    t: Transition

    @property
    def target(self) -> str:
        return self.t.target

    @property
    def direction(self) -> str:
        return "send" if self.t.send is not None else \
            "receive" if self.t.receive is not None else "event"

    @property
    def command(self) -> str:
        return self.t.send or self.t.receive or self.t.event or ""


@dataclass(frozen=True)
class _Move:
    """One step of a path: a single transition, or a request and the answer to it."""

    first: _Edge
    answer: _Edge | None = None
    request: Request | None = None

    @property
    def target(self) -> str:
        return (self.answer or self.first).target


@dataclass
class _Seq:
    spec: FrameSpec
    m: Machine
    edges: list[_Edge]
    terminal: set[str]
    requests: dict[str, Request]
    lines: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # in the order they are drawn
    depth: int = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def out(self, e: _Edge) -> list[_Edge]:
        return [x for x in self.edges if x.source == e.source]

    def from_state(self, state: str) -> list[_Edge]:
        return [x for x in self.edges if x.source == state]

    # -- moves ------------------------------------------------------------------------------
    def answers(self, req: _Edge, r: Request) -> list[_Edge]:
        """Edges leaving the request's target that answer it, in the opposite direction."""
        want = "receive" if req.direction == "send" else "send"
        names = [r.response, *r.errors]
        return [x for x in self.from_state(req.target)
                if x.direction == want and x.command in names and x is not req]

    def moves(self, state: str) -> list[tuple[int, _Move]]:
        """(cost, move) pairs leaving ``state``, in spec order."""
        out: list[tuple[int, _Move]] = []
        for e in self.from_state(state):
            r = self.requests.get(e.command) if e.direction != "event" else None
            if r is not None:
                for a in self.answers(e, r):
                    if a.target != state:
                        out.append((1, _Move(e, a, r)))
            if e.target != state:
                out.append((2 if e.direction == "send" else 3, _Move(e)))
        return out

    def cheapest(self, start: str, goals: set[str]) -> list[_Move] | None:
        if start in goals:
            return []
        counter = itertools.count()
        heap: list[tuple[int, int, str, list[_Move]]] = [(0, next(counter), start, [])]
        done: set[str] = set()
        while heap:
            cost, _, state, path = heapq.heappop(heap)
            if state in goals:
                return path
            if state in done:
                continue
            done.add(state)
            for c, mv in self.moves(state):
                if mv.target not in done:
                    heapq.heappush(heap, (cost + c, next(counter), mv.target, [*path, mv]))
        return None

    def walk(self, start: str) -> list[_Move]:
        """Cheapest moves onwards, each to a state not yet seen, until one returns to a
        state seen before (or none is left): a machine without final states cycles."""
        seen = {start}
        out: list[_Move] = []
        state = start
        while True:
            moves = sorted(self.moves(state), key=lambda cm: cm[0])
            if not moves:
                return out
            fresh = [mv for _, mv in moves if mv.target not in seen]
            mv = fresh[0] if fresh else moves[0][1]
            out.append(mv)
            if mv.target in seen:
                return out
            seen.add(mv.target)
            state = mv.target

    def main_state(self) -> str | None:
        """The reachable non-final state with the most self-transitions (closest on ties)."""
        order = [self.m.initial]
        for state in order:
            for e in self.from_state(state):
                if e.target not in order:
                    order.append(e.target)
        best, best_count = None, 0
        for state in order:
            if state in self.terminal:
                continue
            count = sum(1 for e in self.from_state(state) if e.target == state)
            if count > best_count:
                best, best_count = state, count
        return best

    # -- labels -----------------------------------------------------------------------------
    def label(self, e: _Edge, r: Request | None, guard: bool = True) -> str:
        if r is None and e.direction == "send":
            r = self.requests.get(e.command)  # a request drawn without its answer
        fields = list(r.correlate) if r is not None else []
        info = self.spec.commands.get(e.command)
        if self.m.key is not None and info is not None and self.m.key in info.body_fields \
                and self.m.key not in fields:
            fields.append(self.m.key)
        text = e.command + (f" ({', '.join(fields)})" if fields else "")
        if guard and e.t.when is not None:
            text += f" [{expr_text(e.t.when)}]"
        return mermaid_text(text)

    def alt_label(self, e: _Edge) -> str:
        text = e.command
        if e.t.when is not None:
            text += f" if {expr_text(e.t.when)}"
        return mermaid_text(text)

    # -- drawing ----------------------------------------------------------------------------
    def arrow(self, e: _Edge, r: Request | None, answer: bool, guard: bool = True) -> None:
        if e.direction == "event":
            self.emit(f"Note over Client: event {mermaid_text(e.command)}")
            return
        line = "-->>" if answer else "->>"
        a, b = ("Client", "Server") if e.direction == "send" else ("Server", "Client")
        self.emit(f"{a}{line}{b}: {self.label(e, r, guard)}")
        if e.command not in self.commands:
            self.commands.append(e.command)

    def state_note(self, state: str) -> None:
        final = " (final)" if state in self.terminal else ""
        self.emit(f"Note over Client: {self.m.name} {state}{final}")

    def step(self, e: _Edge, r: Request | None, answer: bool, current: str,
             guard: bool = True) -> None:
        self.arrow(e, r, answer, guard)
        if e.target != current:
            self.state_note(e.target)

    def choice(self, chosen: _Edge, others: list[_Edge], r: Request | None, answer: bool,
               current: str) -> None:
        """Draw ``chosen``; alternatives after which the entity is gone as ``break``, the
        others next to it as ``alt``."""
        stops = [o for o in others if o.target in self.terminal
                 and chosen.target not in self.terminal]
        alts = [o for o in others if o not in stops]
        for o in stops:
            self.emit(f"break {self.alt_label(o)}")
            self.depth += 1
            self.step(o, r, answer, current, guard=False)
            self.depth -= 1
            self.emit("end")
        if not alts:
            self.step(chosen, r, answer, current)
            return
        for i, e in enumerate([chosen, *alts]):
            self.emit(f"{'alt' if i == 0 else 'else'} {self.alt_label(e)}")
            self.depth += 1
            self.step(e, r, answer, current, guard=False)
            self.depth -= 1
        self.emit("end")

    def move(self, mv: _Move) -> None:
        current = mv.first.source
        if mv.answer is None:
            others = [x for x in self.out(mv.first) if x is not mv.first
                      and x.direction == mv.first.direction and x.command == mv.first.command]
            self.choice(mv.first, others, None, False, current)
            return
        assert mv.request is not None
        self.step(mv.first, mv.request, False, current)
        others = [x for x in self.answers(mv.first, mv.request) if x is not mv.answer]
        self.choice(mv.answer, others, mv.request, True, mv.first.target)

    def loop(self, state: str) -> None:
        """The commands ``state`` allows without leaving it, requests next to their answers."""
        loops = [e for e in self.from_state(state) if e.target == state]
        if not loops:
            return
        self.emit(f"loop while {state}")
        self.depth += 1

        def request_of(e: _Edge) -> Request | None:
            return self.requests.get(e.command) if e.direction != "event" else None

        # Answers to the client's requests are drawn with each request they answer, never
        # on their own (several requests may share one answer).
        answering = {a.order for e in loops if e.direction == "send"
                     for r in [request_of(e)] if r is not None for a in self.answers(e, r)}
        used: set[int] = set()
        for e in loops:
            if e.order in used or (e.direction == "receive" and e.order in answering):
                continue
            used.add(e.order)
            r = request_of(e)
            answers = self.answers(e, r) if r is not None else []
            if e.direction == "receive":  # the server asks, the client answers
                answers = [a for a in answers if a.order not in used]
            if r is None or not answers:
                self.arrow(e, None, False)
                continue
            self.arrow(e, r, False)
            used.update(a.order for a in answers)
            if len(answers) == 1:
                self.arrow(answers[0], r, True)
                continue
            for i, a in enumerate(answers):
                self.emit(f"{'alt' if i == 0 else 'else'} {self.alt_label(a)}")
                self.depth += 1
                self.arrow(a, r, True, guard=False)
                self.depth -= 1
            self.emit("end")
        self.depth -= 1
        self.emit("end")


def _sequence_view(spec: FrameSpec, m: Machine, anchor: str) -> SequenceView:
    edges = [_Edge(i, source, t) for i, (t, source) in
             enumerate((t, s) for t in m.transitions for s in t.sources)]
    requests = {r.request: r for r in spec.requests}
    seq = _Seq(spec, m, edges, _terminal(m), requests)
    seq.depth = 1
    seq.emit("participant Client")
    seq.emit("participant Server")
    if m.key is not None:
        seq.emit(f"Note over Client,Server: one {m.name} per {m.key}")
    seq.state_note(m.initial)
    main = seq.main_state()
    path: list[_Move] = []
    if main is not None:
        path = seq.cheapest(m.initial, {main}) or []
    states = [m.initial]

    def follow(moves: list[_Move]) -> None:
        for mv in moves:
            seq.move(mv)
            for e in (mv.first, mv.answer):
                if e is not None and e.target != states[-1]:
                    states.append(e.target)

    follow(path)
    here = states[-1]
    if main is not None and here == main:
        seq.loop(main)
    rest = seq.cheapest(here, seq.terminal)
    if rest is None:
        follow(seq.walk(here))
        seq.emit(f"Note over Client: no final state is reachable from {here}")
    else:
        follow(rest)
    title = f"{m.name}: {' → '.join(states)}"
    summary = (f"Commands drawn: {_join(code(c) for c in seq.commands) or 'none'}"
               + (f"; main state `{main}`" if main is not None else "") + ".")
    return SequenceView(anchor=anchor, title=title, summary=summary, diagram=seq.lines)
