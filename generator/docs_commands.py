"""The protocol page's commands and interactions: how the frame names its command, the
table of commands (value, body, where it is carried, roles, machines) and of requests.
"""

from __future__ import annotations

from protoframe.generator.docs_text import (
    ProtoNames,
    Table,
    case_value,
    cell,
    code,
    expr_text,
    join,
    link,
)
from protoframe.generator.frame_ir import IntField, ProtoField, SwitchField
from protoframe.generator.ir import MessageType
from protoframe.generator.spec_ir import CommandInfo, FrameSpec, Request


def commands_intro(spec: FrameSpec) -> str:
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
            text += " (a sender sets " + join(f"`{a.path.text}` = `{a.value}`"
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
        for response in r.responses:
            add(r.request, "request for", response)
            add(response, "answers", r.request)
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
                parts.append(f"request, answered by {join(named)}")
            elif named:
                parts.append(f"{kind} {join(named)}")
            elif others:
                parts.append(kind)
        out[name] = "; ".join(parts)
    return out


def commands_table(spec: FrameSpec, names: ProtoNames, anchors: dict[str, str]) -> Table:
    roles = _roles(spec)
    used_by: dict[str, list[str]] = {name: [] for name in spec.commands}
    for m in spec.machines:
        for t in m.transitions:
            for cmd in (t.send, t.receive):
                if cmd in used_by and m.name not in used_by[cmd]:
                    used_by[cmd].append(m.name)
    envelope = {c.name: f for f in spec.frame.fields if isinstance(f, ProtoField)
                for c in f.commands}
    switch_of = {name: f for f in spec.frame.fields if isinstance(f, SwitchField)
                 for c in f.cases for name, _ in c.commands}
    rows = []
    for name, info in spec.commands.items():
        body, carried = _body(spec, info, names, anchors, envelope.get(name),
                              switch_of.get(name))
        rows.append([
            code(name),
            case_value(info.value, _key_width(spec), info.case.literal) if info.case is not None
            else "first message" if info.first is not None
            else "—" if info.routed is not None and info.routed.value is None
            else str(info.value),
            body,
            carried,
            cell(roles[name]) or "—",
            join(code(m) for m in used_by[name]) or "—",
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


def _body(spec: FrameSpec, info: CommandInfo, names: ProtoNames, anchors: dict[str, str],
          envelope: ProtoField | None, switch: SwitchField | None) -> tuple[str, str]:
    if info.routed is not None and info.route is not None:
        route = info.route
        msg_or_none = info.body_message
        body = code(names(msg_or_none.full_name)) if msg_or_none is not None else \
            link(info.body_type, anchors)
        where = f"`{route.part.text}.{route.payload.text}` (serialized)" \
            if route.payload is not None else f"`{route.part.text}`"
        if info.routed.sets:
            where += "; sent with " + join(f"`{a.path.text}` = `{a.value}`"
                                           for a in info.routed.sets)
        return body, where
    if info.proto is not None:
        msg: MessageType = info.proto.message
        fld = info.proto.field
        holder = envelope.message.proto_name if envelope and envelope.message else "?"
        attr = f" (Python `{fld.py_name}`)" if fld.py_name != fld.proto_name else ""
        return code(names(msg.full_name)), f"`{holder}.{fld.proto_name}`{attr}"
    if info.first is not None:
        return link(info.body_type, anchors), f"the first message {info.first.replace('_', ' ')}"
    assert info.case is not None
    to_server, to_client = info.layout(True), info.layout(False)
    if to_server is to_client and to_server is not None:
        body = link(to_server.name, anchors)
    else:
        parts = []
        if to_server is not None:
            parts.append(f"{link(to_server.name, anchors)} to server")
        if to_client is not None:
            parts.append(f"{link(to_client.name, anchors)} to client")
        body = ", ".join(parts)
    where = f"`{spec.frame.name}.{switch.name}`" if switch is not None else "—"
    return body, where


def _first_ids(spec: FrameSpec) -> str:
    first = max(spec.allocate_start, 1 if spec.allocate_skip_zero else 0)
    return ", ".join(str(first + i) for i in range(3))


def interactions_intro(spec: FrameSpec) -> list[str]:
    out = []
    if spec.allocate is not None:
        users = [r.request for r in spec.requests if r.allocate
                 and (spec.allocate in spec.commands[r.request].body_fields
                      or spec.allocate in r.frame_correlate)]
        out.append(f"`{spec.allocate}` is allocated by the client: each typed request method "
                   f"in `client.py` numbers its request itself ({_first_ids(spec)}, …)"
                   + (f"; it applies to {join(code(u) for u in users)}." if users else "."))
    if spec.requests:
        out.append("An answer is matched to the oldest pending request of its kind whose "
                   "correlation fields have the same values; a request without correlation "
                   "fields is answered by the next answer of its kind. Error responses make "
                   "the request method raise `RequestFailed`.")
    return out


def requests_table(spec: FrameSpec) -> Table:
    def corr(r: Request) -> str:
        return join(f"`{c}` (frame)" if c in r.frame_correlate else code(c)
                    for c in r.correlate) or "—"

    def answer(r: Request) -> str:
        if not r.choices:
            return code(r.response) if r.when is None else \
                f"{code(r.response)} when `{expr_text(r.when)}`"
        return join(f"{code(c)} when `{expr_text(w)}`" for c, w in r.choices)

    rows = [[code(r.request), answer(r), join(code(e) for e in r.errors) or "—",
             corr(r), f"`{r.method}()`"]
            for r in spec.requests]
    return Table(["request", "response", "error responses", "correlated by", "client method"],
                 rows)

