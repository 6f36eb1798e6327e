"""The Python view of a spec's interactions and state machines (``machines.py``).

Machines are data (state enums and rule tables) run by ``runtime.machine``; what is generated
is everything protocol-specific: how to name a frame's command, where its body is, where an
entity's key lives in each command, the guards, and one typed ``on_<command>`` hook per command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from generator.errors import SpecError
from generator.expr import Expr
from generator.frame_ir import CommandInfo, FrameSpec, Machine, Request
from generator.pyview import docstring, q


@dataclass
class HookView:
    name: str  # method name
    command: str
    body_type: str
    doc: str


@dataclass
class MachineView:
    name: str
    const: str  # module constant holding its MachineDef
    enum: str
    doc: str
    states: list[tuple[str, str]]  # (member, value)
    initial_member: str
    rules: list[str]  # Rule(...) expressions
    key_of: str | None  # name of the key function or None


@dataclass
class MachinesModuleView:
    source: str
    module_doc: str
    class_name: str
    class_doc: str
    frame_name: str
    local_imports: list[str]
    machines: list[MachineView]
    interactions: list[str]
    functions: list[str]  # source lines of helper functions
    name_table: list[str]
    hooks: list[HookView]
    body_expr: str  # how to get (name, body) from a frame, see template
    exports: list[str]
    decoder_args: str = ""  # a server decodes what clients send, where layouts differ
    keyed: bool = False  # whether any machine has a key function


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return s.lower()


def build_machines_module(spec: FrameSpec) -> MachinesModuleView:
    proto_mods: set[str] = set()

    def body_type(info: CommandInfo) -> str:
        if info.proto is not None:
            module = spec.proto_modules[info.proto.message.full_name]
            proto_mods.add(module)
            return f"{module}.{info.proto.message.py_path}"
        if info.case is not None and len(info.case.structs) > 1:
            # Which layout arrives depends on the side: a server gets requests, a client replies.
            return " | ".join(f"frames.{s.name}" for s in info.case.structs)
        return f"frames.{info.body_type}"

    functions: list[str] = []
    machines = [_machine_view(spec, m, functions, body_type) for m in spec.machines]
    interactions = [
        f"Interaction({q(r.request)}, frozenset({{{', '.join(q(n) for n in _answers(r))}}}), "
        f"({''.join(q(c) + ', ' for c in r.correlate)}))"
        for r in spec.requests
    ]
    hooks = [
        HookView(
            name="on_" + snake(name).lower(),
            command=name,
            body_type=body_type(info),
            doc=docstring(f"Called after a {name} command arrives and passes the state "
                          "machines; override to act on it.", "        "),
        )
        for name, info in spec.commands.items()
    ]
    name_table, body_expr = _naming(spec, body_type)
    title = "".join(p.capitalize() for p in re.split(r"[_\W]+", spec.protocol) if p)
    attrs = _field_attrs(spec)
    functions += [
        "",
        "",
        "def field_of(body: Any, name: str) -> Any:",
        '    """A correlation or key field of a command body, by its spec name."""',
        "    return getattr(body, _ATTRS.get(name, name))",
        "",
        "",
        f"_ATTRS: dict[str, str] = {{{', '.join(f'{q(k)}: {q(v)}' for k, v in attrs)}}}",
    ]
    return MachinesModuleView(
        source=spec.path,
        module_doc=docstring(
            f"Sans-IO state machines of the {spec.protocol} protocol, generated from "
            f"{spec.path}.\n\n{title}Protocol takes received bytes and returns frames, and "
            "takes frames to send and returns bytes; it never touches a socket, so the client "
            "and an embedded peer share it.", ""),
        class_name=f"{title}Protocol",
        class_doc=docstring(
            f"One {spec.protocol} connection, as seen by a client (or, with ``server=True``, by "
            "the peer that answers it).\n\n``receive_data`` decodes bytes into frames, checks "
            "each against the state machines (raising ``ProtocolViolation`` when the spec "
            "forbids it) and calls the matching ``on_<command>`` hook; ``send`` checks an "
            "outgoing frame the same way and returns its bytes.", "    "),
        frame_name=spec.frame.name,
        local_imports=["from . import " + ", ".join(["frames", *sorted(proto_mods)])],
        machines=machines,
        interactions=interactions,
        functions=functions,
        name_table=name_table,
        hooks=hooks,
        body_expr=body_expr,
        keyed=any(mv.key_of for mv in machines),
        decoder_args=", to_server=server" if any(
            c.to_server is not c.to_client for f in spec.frame.fields for c in f.cases) else "",
        exports=sorted([f"{title}Protocol", "MACHINES", "INTERACTIONS", "command_of", "field_of"]
                       + [m.enum for m in machines]),
    )


def _answers(r: Request) -> list[str]:
    return [r.response, *r.errors]


def _field_attrs(spec: FrameSpec) -> list[tuple[str, str]]:
    names: dict[str, str] = {}
    for info in spec.commands.values():
        for proto_name, py_name in info.body_fields.items():
            if proto_name != py_name:
                names[proto_name] = py_name
    return sorted(names.items())


def _naming(spec: FrameSpec, body_type: object) -> tuple[list[str], str]:
    """A table from the frame's selector to command names, and how ``command_of`` uses it."""
    frame = spec.frame
    for f in frame.fields:
        if f.dispatch_on is not None:
            lines = ["_COMMANDS: dict[int, tuple[str, str]] = {"]
            lines += [f"    {c.value}: ({q(c.name)}, {q(c.field.py_name)}),"
                      for c in f.commands]
            lines.append("}")
            expr = (f"name, attr = _COMMANDS[frame.{f.name}.{f.dispatch_on.py_name}]\n"
                    f"return name, getattr(frame.{f.name}, attr)")
            return lines, expr
        if f.kind == "switch":
            lines = ["_COMMANDS: dict[type, str] = {"]
            for c in f.cases:
                for s in c.structs:
                    lines.append(f"    frames.{s.name}: {q(c.name)},")
            lines.append("}")
            expr = (f"body = frame.{f.name}\n"
                    "return _COMMANDS[type(body)], body")
            return lines, expr
    loc = frame.location
    raise SpecError("machines need a frame with a dispatch or switch field to name commands",
                    loc.path, loc.line, loc.column)


def _machine_view(spec: FrameSpec, m: Machine, functions: list[str],
                  body_type: object) -> MachineView:
    enum = "".join(p.capitalize() for p in m.name.split("_")) + "State"
    const = m.name.upper() + "_MACHINE"
    rules: list[str] = []
    for i, t in enumerate(m.transitions):
        guard = "None"
        if t.when is not None:
            guard = f"_guard_{m.name}_{i}"
            functions += _guard_function(spec, guard, t.receive or t.send or "", t.when)
        if t.event is not None:
            head = f"None, None, event={q(t.event)}"
        elif t.send is not None:
            head = f"Direction.SEND, {q(t.send)}"
        else:
            head = f"Direction.RECEIVE, {q(t.receive or '')}"
        for source in t.sources:
            g = "" if guard == "None" else f", guard={guard}"
            rules.append(f"Rule({q(source)}, {q(t.target)}, {head}{g})")
    key_fn = None
    if m.key is not None:
        key_fn = f"_key_{m.name}"
        vocabulary = {t.send or t.receive for t in m.transitions}
        with_key = sorted(n for n, info in spec.commands.items()
                          if m.key in info.body_fields and n in vocabulary)
        attr = next((info.body_fields[m.key] for info in spec.commands.values()
                     if m.key in info.body_fields), m.key)
        functions += [
            "",
            "",
            f"def {key_fn}(command: str, body: Any) -> Hashable:",
            f'    """The {m.name} an entity command concerns: its {m.key} field."""',
            f"    if command in _{m.name.upper()}_KEYED:",
            f"        return cast(Hashable, body.{attr})",
            "    return NO_KEY",
            "",
            "",
            f"_{m.name.upper()}_KEYED = frozenset({{",
            *[f"    {q(n)}," for n in with_key],
            "})",
        ]
    return MachineView(
        name=m.name,
        const=const,
        enum=enum,
        doc=docstring(m.doc or f"States of the {m.name} machine.", "    "),
        states=[(s.upper(), s) for s in m.states],
        initial_member=m.initial.upper(),
        rules=rules,
        key_of=key_fn,
    )


def _guard_function(spec: FrameSpec, name: str, command: str, when: Expr) -> list[str]:
    info = spec.commands.get(command)
    if info is None or info.proto is None:

        def resolve(n: str) -> str:
            return f"body.{n}"

        body_ann = "Any"
    else:
        msg = info.proto.message
        module = spec.proto_modules[msg.full_name]
        body_ann = f"{module}.{msg.py_path}"
        fields = {f.proto_name: f for f in msg.fields}

        def resolve(n: str) -> str:
            if n in fields:
                return f"body.{fields[n].py_name}"
            for f in msg.fields:
                enum = f.type.enum
                if enum is not None:
                    for v in enum.values:
                        if v.proto_name == n:
                            mod = spec.proto_modules[enum.full_name]
                            return f"{mod}.{enum.py_path}.{v.py_name}"
            raise SpecError(f"guard names {n!r}, which is neither a field of {command} nor a "
                            "value of one of its enums", spec.path)

    return [
        "",
        "",
        f"def {name}(body: {body_ann}) -> bool:",
        f'    """Guard: {when.text}."""',
        f"    return bool({when.render(resolve, parens=False)})",
    ]
