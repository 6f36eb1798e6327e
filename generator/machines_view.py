"""The Python view of a spec's interactions and state machines (``machines.py``).

Machines are data (state enums and rule tables) run by ``runtime.engine.machine``; what is generated
is everything protocol-specific: how to name a frame's command, where its body is, where an
entity's key lives in each command, the guards, and the typed hooks ``Protocol`` (one optional
``on_<command>`` method per command) that an object given to the generated protocol implements.
The command list itself and the interactions are read from the generated ``commands.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.codewriter import Imports, docstring, q
from protoframe.generator.commands_view import hook_name, protocol_title
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.expr import Expr
from protoframe.generator.first_machines import first_lines, first_naming, received_type
from protoframe.generator.frame_ir import ProtoField, SwitchField
from protoframe.generator.linefit import INDENT, fit_marked
from protoframe.generator.machines_routes import proto_ref, route_function, routed_builders
from protoframe.generator.runtime_modules import ERRORS, MACHINE
from protoframe.generator.spec_ir import CommandInfo, FrameSpec, Machine


@dataclass
class HookView:
    name: str  # method name
    command: str
    body_type: str
    doc: str
    def_lines: list[str]  # its ``def`` line, fitted two levels in


@dataclass
class MachineView:
    name: str
    const: str  # module constant holding its MachineDef
    enum: str
    doc: str
    states: list[tuple[str, str]]  # (member, value)
    initial_member: str
    rule_lines: list[str]  # the Rule(...) items of its rules list, fitted there
    key_of: str | None  # name of the key function or None


@dataclass
class MachinesModuleView:
    source: str
    module_doc: str
    class_name: str
    class_doc: str
    import_lines: list[str]
    machines: list[MachineView]
    functions: list[str]  # source lines of helper functions, fitted
    name_table: list[str]  # fitted
    hooks: list[HookView]
    body_lines: list[str]  # how command_of gets (name, body) from a frame, fitted
    machines_line: list[str]  # the MACHINES list
    # The template's lines naming the frame class or the hooks, each fitted at its depth there.
    lines: dict[str, list[str]]
    hooks_class: str
    hooks_doc: str
    exports: list[str]
    keyed: bool = False  # whether any machine has a key function
    command_of_doc: str = '"""The command name of a frame (as the spec names it) and its body."""'
    # What the state machines are given for a command: its body, or (when answers are
    # correlated by fields of the frame) a Command holding the body and the frame.
    machine_arg: str = "body"
    # Whether naming a command decodes its body (routes with a payload): then the protocol
    # keeps the commands receive_data decoded, and ``command(frame)`` hands them out.
    caches_commands: bool = False
    # Whether naming a command can fail (routes): the violation policy then decides.
    names_unknown: bool = False
    receive_data_doc: str = ""
    command_doc: str = ""


def build_machines_module(spec: FrameSpec) -> MachinesModuleView:
    imports = Imports(one_per_line=(MACHINE,))
    # What the template's skeleton (hooks Protocol, protocol class) names.
    imports.use("typing", "TYPE_CHECKING")
    imports.use("typing", "Any")
    imports.use("typing", "Protocol")
    imports.use("collections.abc", "Hashable")
    for name in ("MachineDef", "MachineSet", "ProtocolViolation", "ViolationPolicy",
                 "hook_table", "refuse"):
        imports.use(MACHINE, name)
    imports.use(ERRORS, "DecodeError")
    imports.use(".", "frames")
    imports.use(".commands", "HOOKS")
    imports.use(".commands", "INTERACTIONS")

    def body_type(info: CommandInfo) -> str:
        msg = info.body_message
        if msg is not None:
            return proto_ref(spec, imports, msg)
        if len(info.layouts) > 1:
            # Which layout arrives depends on the side: a server gets requests, a client replies.
            return " | ".join(f"frames.{s.name}" for s in info.layouts)
        return f"frames.{info.body_type}"

    functions: list[str] = []
    if spec.frame_context:
        functions += _command_class(spec, imports)
    machines = [_machine_view(spec, imports, m, functions) for m in spec.machines]
    hooks = []
    for name, info in spec.commands.items():
        body = body_type(info)
        hooks.append(HookView(
            name=hook_name(name),
            command=name,
            body_type=body,
            doc=docstring(f"A {name} command arrived and passed the state machines.",
                          "            "),
            def_lines=fitted([f"def {hook_name(name)}(self, body: {body}, frame: "
                              f"frames.{info.body_type if info.first else spec.frame.name})"
                              " -> None:"], 2),
        ))
    name_table, body_expr = _naming(spec, imports)
    title = protocol_title(spec)
    attrs = _field_attrs(spec)
    if spec.frame_context:
        on_frame = sorted({c for r in spec.requests for c in r.frame_correlate})
        functions += [
            "",
            "",
            "def field_of(command: Command, name: str) -> Any:",
            '    """A correlation or key field by its spec name: of the frame itself or of the '
            'body."""',
            "    if name in _FRAME_FIELDS:",
            "        return getattr(command.frame, name)",
            "    return getattr(command.body, _ATTRS.get(name, name))",
            "",
            "",
            f"_FRAME_FIELDS = frozenset({{{', '.join(q(n) for n in on_frame)}}})",
        ]
    else:
        functions += [
            "",
            "",
            "def field_of(body: Any, name: str) -> Any:",
            '    """A correlation or key field of a command body, by its spec name."""',
            "    return getattr(body, _ATTRS.get(name, name))",
        ]
    functions += [
        "",
        "",
        f"_ATTRS: dict[str, str] = {{{', '.join(f'{q(k)}: {q(v)}' for k, v in attrs)}}}",
    ]
    builders = routed_builders(spec, imports, body_type) if spec.routes else []
    functions += [line for b in builders for line in b.lines]
    if builders:
        imports.use("collections.abc", "Callable")
        functions += [
            "",
            "",
            f"def frame_of(command: str, body: Any, **fields: Any) -> frames.{spec.frame.name}:",
            '    """A frame carrying ``command`` with ``body``.',
            "",
            "    ``fields`` are the frame's own data fields each ``frame_of_<command>`` takes.",
            '    """',
            "    return _BUILDERS[command](body, **fields)",
            "",
            "",
            f"_BUILDERS: dict[str, Callable[..., frames.{spec.frame.name}]] = {{",
            *[f"    {q(b.command)}: {b.name}," for b in builders],
            "}",
        ]
    caches = any(route.payload is not None for route in spec.routes)
    frame = received_type(spec)
    decoder_args = ", to_server=server" if spec.first or any(
        c.to_server is not c.to_client for f in spec.frame.fields
        if isinstance(f, SwitchField) for c in f.cases) else ""
    lines = {
        "command_of_def": fitted([f"def command_of(frame: {frame}) -> tuple[str, Any]:"]),
        "params": fitted([f"hooks: {title}Hooks | None = None,",
                          f"on_violation: ViolationPolicy[{frame}] = refuse,"], 2),
        "decoder": fitted([f"self.decoder = frames.StreamDecoder(max_frame_size{decoder_args})"],
                          2),
        "cache": fitted([f"self._commands: dict[int, tuple[{frame}, str, Any]] = {{}}"], 2),
        "send_def": fitted([f"def send(self, frame: {frame}) -> bytes:"], 1),
        "receive_def": fitted([f"def receive_data(self, data: bytes) -> list[{frame}]:"], 1),
        # A continuation line of the list comprehension above it, aligned with its start.
        "keep": fit_marked(" " * 33 + f"if isinstance(frame, {frame})"),
        "handle_def": fitted([f"def _handle(self, frame: {frame}) -> bool:"], 1),
        "command_def": fitted([f"def command(self, frame: {frame}) -> tuple[str, Any]:"], 1),
        **first_lines(spec, imports, fitted),
    }
    extra_exports = (["Command"] if spec.frame_context else []) + \
        (["frame_of", *[b.name for b in builders]] if builders else [])
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
            "each against the state machines and calls the matching method of ``hooks`` (a "
            f"``{title}Hooks``), if it has one; ``send`` checks an outgoing frame the same way "
            "and returns its bytes. A received frame the machines refuse (or that names no "
            "command of the spec) goes to ``on_violation``, which keeps it, drops it or raises; "
            "the default, ``refuse``, raises the ``ProtocolViolation`` (or "
            "``UnknownCommandError``).", "    "),
        import_lines=imports.block(),
        machines=machines,
        functions=fitted(functions),
        name_table=fitted(name_table),
        hooks=hooks,
        body_lines=fitted([*first_naming(spec), *body_expr.split("\n")], 1),
        machines_line=fitted(
            [f"MACHINES: list[MachineDef] = [{', '.join(mv.const for mv in machines)}]"]),
        hooks_class=f"{title}Hooks",
        hooks_doc=docstring(
            f"What an object given to ``{title}Protocol(hooks=...)`` may implement: one method "
            "per command, called after a received command passes the state machines.\n\n"
            "Every method is optional: subclass this class and define the ones you need. They "
            "are declared here for type checkers only, so that mypy checks each one you define "
            "against its command's body type; at run time the protocol calls just the methods "
            "your object has.", "    "),
        keyed=any(mv.key_of for mv in machines),
        lines=lines,
        exports=sorted([f"{title}Protocol", f"{title}Hooks", "MACHINES", "INTERACTIONS",
                        "command_of", "field_of"]
                       + [m.enum for m in machines] + extra_exports),
        command_of_doc=docstring(
            "The command name of a frame (as the spec names it) and its body.\n\nRaises "
            "``UnknownCommandError`` when no route of the spec names a command, and the body's "
            "``DecodeError`` when its serialized body does not decode.", "    ")
        if spec.routes else MachinesModuleView.command_of_doc,
        machine_arg="Command(body, frame)" if spec.frame_context else "body",
        caches_commands=caches,
        names_unknown=bool(spec.routes),
        receive_data_doc=_receive_data_doc(caches),
        command_doc=_command_doc(f"{title}Requests" if spec.requests else None, caches),
    )


def fitted(lines: list[str], depth: int = 0) -> list[str]:
    """``lines`` printed ``depth`` levels in: each statement fitted there, docstrings as built.

    A docstring is one item of ``lines`` (``docstring`` returns it whole, quotes included).
    """
    lead = INDENT * depth
    return [out for line in lines
            for out in ([lead + line] if '"""' in line
                        else [o for part in line.split("\n") for o in fit_marked(lead + part)])]


def _receive_data_doc(caches: bool) -> str:
    text = "Decode received bytes; check and dispatch each whole frame; return them in order.\n\n"
    if caches:
        text += ("Each frame's command is decoded here, once: until the next call, "
                 "``command(frame)`` gives it back for every frame this call handled.\n\n")
    text += ("A frame the machines refuse goes to ``on_violation``; only the frames it keeps are "
             "returned. A ``DecodeError`` is raised after the frames decoded before it were "
             "handled; those kept are in its ``frames_before``.")
    return docstring(text, "        ")


def _command_doc(requests: str | None, caches: bool) -> str:
    """``command``'s docstring; ``requests`` is the client class, if the spec has requests."""
    use = f" (``{requests}.handle_frame(frame, command)``)" if requests else ""
    if caches:
        text = ("The command name of ``frame`` and its body, as ``command_of(frame)`` gives "
                "them, without decoding the body again when it can.\n\n"
                "For a frame the latest ``receive_data`` call handled, this is the command it "
                "decoded: the very body the machines checked and the hook was given. Pass it "
                f"on{use} so that the frame's body is decoded once; any other frame is "
                "decoded now.")
    else:
        text = ("The command name of ``frame`` and its body: ``command_of(frame)``.\n\n"
                "Here a body is part of the decoded frame, so naming a command decodes "
                "nothing; ``command`` is there so that a connection can pass the command "
                f"on{use} the same way for every protocol.")
    return docstring(text, "        ")


def _command_class(spec: FrameSpec, imports: Imports) -> list[str]:
    imports.use("dataclasses", "dataclass")
    fields = sorted({c for r in spec.requests for c in r.frame_correlate})
    return [
        "",
        "",
        "@dataclass(frozen=True, slots=True)",
        "class Command:",
        '    """A command as the state machines see it: its body and the frame that carried it.\n'
        "\n"
        f"    Answers are correlated with requests by fields of the frame itself "
        f"({', '.join(fields)}),\n"
        "    so the machines need both.\n"
        '    """',
        "",
        "    body: Any",
        f"    frame: {received_type(spec)}",
    ]


def _field_attrs(spec: FrameSpec) -> list[tuple[str, str]]:
    names: dict[str, str] = {}
    for info in spec.commands.values():
        for proto_name, py_name in info.body_fields.items():
            if proto_name != py_name:
                names[proto_name] = py_name
    return sorted(names.items())


def _naming(spec: FrameSpec, imports: Imports) -> tuple[list[str], str]:
    """How ``command_of`` names a frame's command: the functions and tables it uses, and its
    body."""
    frame = spec.frame
    if spec.routes:
        lines: list[str] = []
        names = []
        for route in spec.routes:
            fn, name = route_function(spec, imports, route)
            lines += fn
            names.append(name)
        # Raised here and caught by the protocol's _handle, which the template writes for
        # specs with routes.
        imports.use(ERRORS, "UnknownCommandError")
        lines += ["", "", f"_ROUTES = ({', '.join(names)}{',' if len(names) == 1 else ''})"]
        expr = ("for route in _ROUTES:\n"
                "    found = route(frame)\n"
                "    if found is not None:\n"
                "        return found\n"
                f'raise UnknownCommandError("{frame.name}: no route of the spec names a command")')
        return lines[1:], expr
    for f in frame.fields:
        if isinstance(f, ProtoField) and f.dispatch_on is not None:
            expr = (f"name, attr = BY_TYPE[frame.{f.name}.{f.dispatch_on.py_name}]\n"
                    f"return name, getattr(frame.{f.name}, attr)")
            imports.use(".commands", "BY_TYPE")
            return [], expr
        if isinstance(f, SwitchField):
            expr = (f"body = frame.{f.name}\n"
                    "return BY_BODY[type(body)], body")
            imports.use(".commands", "BY_BODY")
            return [], expr
    raise GeneratorBug("no field names commands (frame_checks lets no such spec through)",
                       str(frame.location))


def _machine_view(spec: FrameSpec, imports: Imports, m: Machine,
                  functions: list[str]) -> MachineView:
    imports.use("enum")  # the template's enum.StrEnum of its states
    imports.use(MACHINE, "Rule")
    enum = "".join(p.capitalize() for p in m.name.split("_")) + "State"
    const = m.name.upper() + "_MACHINE"
    rules: list[str] = []
    guards: set[str] = set()
    for i, t in enumerate(m.transitions):
        guard = "None"
        if t.when is not None:
            # Named for what it decides: this machine taking this command to this state.
            guard = f"_guard_{m.name}_{(t.receive or t.send or t.event or '').lower()}_to_" \
                    f"{t.target}"
            if guard in guards:
                guard += f"_{i}"
            guards.add(guard)
            functions += _guard_function(spec, imports, guard, t.receive or t.send or "",
                                         t.when)
        if t.event is not None:
            head = f"None, None, event={q(t.event)}"
        elif t.send is not None:
            imports.use(MACHINE, "Direction")
            head = f"Direction.SEND, {q(t.send)}"
        else:
            imports.use(MACHINE, "Direction")
            head = f"Direction.RECEIVE, {q(t.receive or '')}"
        for source in t.sources:
            g = "" if guard == "None" else f", guard={guard}"
            rules.append(f"Rule({enum}.{source.upper()}, {enum}.{t.target.upper()}, {head}{g})")
    key_fn = None
    if m.key is not None:
        key_fn = f"_key_{m.name}"
        imports.use("typing", "cast")
        imports.use(MACHINE, "NO_KEY")
        vocabulary = {t.send or t.receive for t in m.transitions}
        with_key = sorted(n for n, info in spec.commands.items()
                          if m.key in info.body_fields and n in vocabulary)
        attr = next((info.body_fields[m.key] for info in spec.commands.values()
                     if m.key in info.body_fields), m.key)
        arg, ann, body = ("seen", "Command", "seen.body") if spec.frame_context else \
            ("body", "Any", "body")
        functions += [
            "",
            "",
            f"def {key_fn}(command: str, {arg}: {ann}) -> Hashable:",
            f'    """The {m.name} an entity command concerns: its {m.key} field."""',
            f"    if command in _{m.name.upper()}_KEYED:",
            f"        return cast(Hashable, {body}.{attr})",
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
        rule_lines=fitted([f"{rule}," for rule in rules], 2),
        key_of=key_fn,
    )


def _guard_function(spec: FrameSpec, imports: Imports, name: str, command: str,
                    when: Expr) -> list[str]:
    info = spec.commands.get(command)
    msg = info.body_message if info is not None else None
    if msg is None:

        def resolve(n: str) -> str:
            return f"body.{n}"

        body_ann = "Any"
    else:
        body_ann = proto_ref(spec, imports, msg)
        fields = {f.proto_name: f for f in msg.fields}

        def resolve(n: str) -> str:
            if n in fields:
                return f"body.{fields[n].py_name}"
            for f in msg.fields:
                enum = f.type.enum
                if enum is not None:
                    for v in enum.values:
                        if v.proto_name == n:
                            return f"{proto_ref(spec, imports, enum)}.{v.py_name}"
            raise GeneratorBug(f"guard names {n!r}, not a field of {command} nor a value of "
                               "its enums (frame_checks lets no such guard through)", spec.path)

    if spec.frame_context:
        return [
            "",
            "",
            f"def {name}(seen: Command) -> bool:",
            f'    """Guard: {when.text}."""',
            f"    body: {body_ann} = seen.body",
            f"    return bool({when.render(resolve, parens=False)})",
        ]
    return [
        "",
        "",
        f"def {name}(body: {body_ann}) -> bool:",
        f'    """Guard: {when.text}."""',
        f"    return bool({when.render(resolve, parens=False)})",
    ]
