"""The Python view of a spec's command table (``commands.py``).

Every command is listed once, with its hook and what names it on the wire, and every request
with the commands answering it; ``frames``, ``machines`` and ``client`` read their lookups from
this module instead of each carrying its own copy of the list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from protoframe.generator.codewriter import Imports, docstring, q
from protoframe.generator.frame_ir import ProtoField, SwitchField
from protoframe.generator.linefit import INDENT, fit_marked
from protoframe.generator.runtime_modules import MACHINE
from protoframe.generator.spec_ir import FrameSpec, Request


@dataclass
class CommandsModuleView:
    """What ``commands.py.j2`` prints; each ``*_lines`` list is fitted at its depth there."""

    source: str
    module_doc: str
    # CommandDef's fields: name, hook (naming the hooks Protocol of machines.py), the rest.
    field_lines: list[str]
    row_lines: list[str]  # the CommandDef(...) rows of COMMANDS
    # Lookups built from the rows at import, as (name, comment, lines).
    lookups: list[tuple[str, str, list[str]]]
    interaction_lines: list[str]
    import_lines: list[str] = field(default_factory=list)
    prelude: list[str] = field(default_factory=list)  # aliases the rows use


def snake(name: str) -> str:
    if name == name.upper():  # already UPPER_SNAKE: a digit before a capital is no boundary
        return name.lower()
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return s.lower()


def hook_name(command: str) -> str:
    """The hooks method a received ``command`` is dispatched to."""
    return "on_" + snake(command)


def protocol_title(spec: FrameSpec) -> str:
    return "".join(p.capitalize() for p in re.split(r"[_\W]+", spec.protocol) if p)


def has_commands_module(spec: FrameSpec) -> bool:
    """Whether the spec has commands to list (frames of an envelope read its body fields), or
    a protocol version to export."""
    return bool(spec.machines or spec.requests or spec.routes or spec.commands
                or spec.protocol_version is not None
                or any(isinstance(f, ProtoField) and f.dispatch_on is not None
                       for f in spec.frame.fields))


def build_commands_module(spec: FrameSpec) -> CommandsModuleView:
    title = protocol_title(spec)
    columns: list[tuple[str, str, str]] = []
    rows: list[str] = []
    lookups: list[tuple[str, str, str, str]] = []
    imports = Imports()
    # What the template's CommandDef and INTERACTIONS name.
    imports.use("typing", "NamedTuple")
    imports.use(MACHINE, "Interaction")
    if any(r.when is not None or r.choices for r in spec.requests):
        # The functions reading a request's fields (its when:, its chosen answers).
        imports.use("collections.abc", "Callable")
        imports.use("typing", "Any")
    prelude: list[str] = []
    envelope = next((f for f in spec.frame.fields
                     if isinstance(f, ProtoField) and f.dispatch_on is not None), None)
    switch = next((f for f in spec.frame.fields if isinstance(f, SwitchField)), None)
    if envelope is not None and envelope.dispatch_on is not None and envelope.message is not None \
            and not spec.routes:
        enum = envelope.dispatch_on.type.enum
        assert enum is not None
        module = spec.proto_modules[enum.full_name]
        enum_ref = f"{module}.{enum.py_path}"
        imports.use(".", module)
        prelude.append(f"_Type = {enum_ref}")
        selector = envelope.dispatch_on.py_name
        envelope_name = envelope.message.proto_name
        columns = [
            (selector, enum_ref,
             f"the {envelope_name}.{envelope.dispatch_on.proto_name} value naming it"),
            ("body", "str", f"the {envelope_name} field holding its body"),
        ]
        rows = [f"CommandDef({q(c.name)}, {q(hook_name(c.name))}, _Type.{c.enum_member}, "
                f"{q(c.field.py_name)})" for c in envelope.commands]
        lookups = [
            ("BY_TYPE", f"dict[{enum_ref}, tuple[str, str]]",
             f"{{c.{selector}: (c.name, c.body) for c in COMMANDS}}",
             "Name and body field by type: how machines.command_of names a frame's command."),
            ("BODY_FIELDS", f"dict[{enum_ref}, str]",
             f"{{c.{selector}: c.body for c in COMMANDS}}",
             "Body field by type: how frames checks (and the compiled codec finds) a body."),
        ]
    elif switch is not None and not spec.routes:
        imports.use(".", "frames")
        columns = [("bodies", "tuple[type, ...]", "the frame body classes carrying it")]
        for c in switch.cases:
            for name, direction in c.commands:
                structs = c.layouts(direction)
                bodies = ", ".join(f"frames.{s.name}" for s in structs)
                if len(structs) == 1:
                    bodies += ","
                rows.append(f"CommandDef({q(name)}, {q(hook_name(name))}, ({bodies}))")
        # A first message (first:) is a command whose body is the message itself.
        rows += [f"CommandDef({q(c.name)}, {q(hook_name(c.name))}, (frames.{c.body_type},))"
                 for c in spec.commands.values() if c.first is not None]
        lookups = [("BY_BODY", "dict[type, str]",
                    "{body: c.name for c in COMMANDS for body in c.bodies}",
                    "Command by body class: how machines.command_of names a frame's command.")]
    elif spec.routes:
        columns, rows, lookups = _routed(spec, imports)
    else:
        rows = [f"CommandDef({q(name)}, {q(hook_name(name))})" for name in spec.commands]
    lookups.append(("HOOKS", "dict[str, str]", "{c.name: c.hook for c in COMMANDS}",
                    f"Hook by command: what a {title}Protocol dispatches a received one to."))
    version = spec.protocol_version
    if version is not None:
        # A plain int, not the enum member: it goes into int32 fields of the handshake.
        lookups.append(("PROTOCOL_VERSION", "int", str(max(v.number for v in version.values)),
                        f"The newest {version.proto_name} of the spec: the protocol version a "
                        "peer generated from it speaks."))
    hooks_class = f"{title}Hooks"
    return CommandsModuleView(
        source=spec.path,
        module_doc=docstring(
            f"The commands of the {spec.protocol} protocol, generated from {spec.path}.\n\n"
            "Each command is listed once (``COMMANDS``), with the hook a received one is "
            "dispatched to and what names it on the wire, and each request once "
            "(``INTERACTIONS``), with the commands answering it; frames, machines and client "
            "read their lookups from here.", ""),
        field_lines=_in_class([
            "name: str  # as the spec names it",
            f"hook: str  # the {hooks_class} method a received one is dispatched to",
            *[f"{attr}: {ann}  # {comment}" for attr, ann, comment in columns]]),
        row_lines=_in_class(f"{row}," for row in rows),
        lookups=[(name, comment, [line for text in f"{name}: {ann} = {expr}".split("\n")
                                  for line in fit_marked(text)])
                 for name, ann, expr, comment in lookups],
        interaction_lines=_in_class(f"{_interaction(r)}," for r in spec.requests),
        import_lines=imports.block(),
        prelude=["\n".join(fit_marked(text)) for text in prelude]
        + [_fitted_function(_answered_function(r)) for r in spec.requests if r.when is not None]
        + [_fitted_function(_choose_function(r)) for r in spec.requests if r.choices],
    )


def _fitted_function(text: str) -> str:
    """A module-level function's lines, each fitted at its own depth."""
    return "\n".join(out for line in text.split("\n") for out in fit_marked(line))


def _in_class(lines: Iterable[str]) -> list[str]:
    """``lines`` one level in (a class body, a display's items), each fitted there."""
    return [out for line in lines for out in fit_marked(INDENT + line)]


def route_table(index: int) -> str:
    """The lookup of ``commands.py`` from the value naming a command on route ``index``."""
    return f"ROUTE_{index}"


def _routed(spec: FrameSpec, imports: Imports) -> tuple[
        list[tuple[str, str, str]], list[str], list[tuple[str, str, str, str]]]:
    """Columns, rows and lookups of commands named by routes (``commands:``)."""
    imports.use("collections.abc", "Callable")
    imports.use("typing", "Any")
    columns = [
        ("route", "int", "the spec's route naming it (machines._route_<n>)"),
        ("value", "int | None", "the value naming it there; None: the route's only one"),
        ("decode", "Callable[[bytes], Any] | None", "its serialized body's decoder, if any"),
    ]
    rows: list[str] = []
    lookups: list[tuple[str, str, str, str]] = []
    for route in spec.routes:
        for cmd in route.commands:
            decode = "None"
            if route.payload is not None and cmd.message is not None:
                module = spec.proto_modules[cmd.message.full_name]
                imports.use(".", module)
                decode = f"{module}.{cmd.message.py_path}.decode"
            rows.append(f"CommandDef({q(cmd.name)}, {q(hook_name(cmd.name))}, {route.index}, "
                        f"{cmd.value}, {decode})")
        if route.on is None:
            continue
        where = f"{route.part.text}.{route.on.text}"
        if route.payload is not None:
            lookups.append((
                route_table(route.index), "dict[int, tuple[str, Callable[[bytes], Any]]]",
                f"{{\n    c.value: (c.name, c.decode)\n    for c in COMMANDS\n    if c.route == "
                f"{route.index} and c.value is not None and c.decode is not None\n}}",
                f"Name and body decoder by {where}: how machines names such a frame's command."))
        else:
            lookups.append((
                route_table(route.index), "dict[int, str]",
                f"{{\n    c.value: c.name for c in COMMANDS if c.route == {route.index} and "
                "c.value is not None\n}",
                f"Name by {where}: how machines names such a frame's command."))
    return columns, rows, lookups


def _interaction(r: Request) -> str:
    answers = ", ".join(q(n) for n in dict.fromkeys([*r.responses, *r.errors, *r.until]))
    correlate = "".join(q(c) + ", " for c in r.correlate)
    answered = "" if r.when is None else f", answered={answered_name(r)}"
    if r.choices:
        answered += f", choose=_answers_{r.method}"
    if r.until:
        answered += f", until=frozenset({{{', '.join(q(n) for n in r.until)}}})"
    return f"Interaction({q(r.request)}, frozenset({{{answers}}}), ({correlate}){answered})"


def _choose_function(r: Request) -> str:
    """The answers a request's fields choose, with its errors; none when no choice holds."""
    tests = [f"({q(c)}, {w.render(lambda n: f'field({q(n)})', parens=False)})"
             for c, w in r.choices]
    errors = "".join(f", {q(e)}" for e in r.errors)
    answers = f"[*chosen{errors}]" if errors else "chosen"
    return "\n".join([
        "",
        f"def _answers_{r.method}(field: Callable[[str], Any]) -> frozenset[str]:",
        f'    """The answers {r.request} expects: '
        + "; ".join(f"{c} when {w.text}" for c, w in r.choices) + '."""',
        "    chosen = [name for name, holds in (",
        *[f"        {t}," for t in tests],
        "    ) if holds]",
        f"    return frozenset({answers}) if chosen else frozenset()",
    ])


def answered_name(r: Request) -> str:
    return f"_answered_{r.method}"


def _answered_function(r: Request) -> str:
    """Whether the peer answers a request, read from its fields by name (``Interaction``
    passes a reader over whatever the machines or the client hold: a body, or a Command)."""
    assert r.when is not None
    test = r.when.render(lambda name: f"field({q(name)})", parens=False)
    return "\n".join([
        "",  # with the blank line the prelude puts before each entry: two, as for any def
        f"def {answered_name(r)}(field: Callable[[str], Any]) -> bool:",
        f'    """Whether {r.request} is answered: {r.when.text}."""',
        f"    return bool({test})",
    ])
