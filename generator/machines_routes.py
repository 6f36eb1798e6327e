"""The routed commands' part of ``machines.py``: a builder per routed command (the frame that
carries it, from its body and the route's fields) and the route functions that name a received
frame's command by walking to the route's field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protoframe.generator import route_values
from protoframe.generator.codewriter import Imports, docstring, q
from protoframe.generator.commands_view import route_table
from protoframe.generator.frame_ir import FrameField
from protoframe.generator.ir import EnumType, MessageType
from protoframe.generator.runtime_modules import ERRORS
from protoframe.generator.spec_ir import (
    BuildLeaf,
    BuildNode,
    CommandInfo,
    FrameSpec,
    PathStep,
    Route,
    RoutedCommand,
)


def proto_ref(spec: FrameSpec, imports: Imports, t: MessageType | EnumType) -> str:
    """``module.Class`` of a protobuf message or enum, its module imported."""
    module = spec.proto_modules[t.full_name]
    imports.use(".", module)
    return f"{module}.{t.py_path}"


@dataclass
class _Builder:
    command: str
    name: str  # function name
    lines: list[str]


def builder_name(command: str) -> str:
    """The function of ``machines.py`` that builds a frame carrying a routed command."""
    return "frame_of_" + command.lower()


def builder_params(cmd: RoutedCommand) -> list[tuple[str, FrameField]]:
    """(parameter name, frame field) of each frame field a builder takes as a keyword."""
    return [(f.name + "_" if f.name in ("body", "command", "fields") else f.name, f)
            for f in cmd.params]


def routed_builders(spec: FrameSpec, imports: Imports,
              body_type: Callable[[CommandInfo], str]) -> list[_Builder]:
    out = []
    for route in spec.routes:
        for cmd in route.commands:
            if cmd.build is None:
                continue
            info = spec.commands[cmd.name]
            name = builder_name(cmd.name)
            params = builder_params(cmd)
            names = {id(f): p for p, f in params}
            kw = "".join(f", {p}: {frame_field_ann(f, imports)}" for p, f in params)
            head = f"def {name}(body: {body_type(info)}, *{kw}) -> frames.{spec.frame.name}:" \
                if params else \
                f"def {name}(body: {body_type(info)}) -> frames.{spec.frame.name}:"
            where = f"{route.part.text}.{route.payload.text}" if route.payload is not None \
                else route.part.text
            what = "serialized into" if route.payload is not None else "as"
            doc = f"A frame carrying {cmd.name}, with ``body`` {what} {where}."
            lines = ["", "", head, f"    {docstring(doc, '    ')}"]
            if route.payload is None and route.on is not None and cmd.value is not None:
                # The body is the part that holds the value naming the command.
                lines.append(f"    body.{'.'.join(s.attr for s in route.on.steps)} = "
                             f"{_on_literal(spec, imports, route, cmd)}")
            lines.append(
                f"    return {_construct(spec, imports, route, cmd, cmd.build, names)}")
            out.append(_Builder(cmd.name, name, lines))
    return out


def frame_field_ann(f: FrameField, imports: Imports) -> str:
    """The annotation of a frame data field a builder takes (scalars only reach builders)."""
    if f.bit_of is not None and f.bit_of.enum is not None:
        return f"frames.{f.bit_of.enum.name}"
    ann = {"int": "int", "varint": "int", "bool": "bool", "bytes": "bytes", "string": "str",
           "uuid": "UUID"}.get(f.kind, "Any")
    if ann == "UUID":
        imports.use("uuid", "UUID")
    return ann


def _on_literal(spec: FrameSpec, imports: Imports, route: Route, cmd: RoutedCommand) -> str:
    assert route.on is not None and cmd.value is not None
    pf = route.on.last.proto_field
    if pf is not None and pf.type.enum is not None:
        enum = pf.type.enum
        member = next((v for v in enum.values if v.number == cmd.value), None)
        ref = proto_ref(spec, imports, enum)
        return f"{ref}.{member.py_name}" if member is not None else f"{ref}({cmd.value})"
    return str(cmd.value)


def _construct(spec: FrameSpec, imports: Imports, route: Route, cmd: RoutedCommand,
               node: BuildNode, params: dict[int, str]) -> str:
    if node.struct is not None:
        cls = f"frames.{node.struct.name}"
    else:
        assert node.message is not None
        cls = proto_ref(spec, imports, node.message)
    args = []
    for attr, value in node.values:
        if isinstance(value, BuildNode):
            text = _construct(spec, imports, route, cmd, value, params)
        else:
            text = _leaf(spec, imports, route, cmd, value, params)
        args.append(f"{attr}={text}")
    return f"{cls}({', '.join(args)})"


def _leaf(spec: FrameSpec, imports: Imports, route: Route, cmd: RoutedCommand,
          leaf: BuildLeaf, params: dict[int, str]) -> str:
    if leaf.kind == "const":
        a = leaf.assignment
        assert a is not None
        if a.expr is not None:
            return route_values.render(a, route, cmd, lambda f: params[id(f)])
        if a.enum is not None:
            enum, member = a.enum
            return f"{proto_ref(spec, imports, enum)}.{member.py_name}"
        return q(a.value) if isinstance(a.value, str) else repr(a.value)
    if leaf.kind == "on":
        return _on_literal(spec, imports, route, cmd)
    if leaf.kind == "payload":
        return "body.encode()"
    if leaf.kind == "body":
        return "body"
    assert leaf.param is not None
    return params[id(leaf.param)]


def route_function(spec: FrameSpec, imports: Imports, route: Route) -> tuple[list[str], str]:
    """A function naming the command of a frame the route applies to (else None)."""
    name = f"_route_{route.index}"
    table = route_table(route.index)
    frame = spec.frame.name
    lines = ["", "", f"def {name}(frame: frames.{frame}) -> tuple[str, Any] | None:"]
    if route.on is not None:
        doc = (f"The command of a frame that has {route.part.text}, named by "
               f"{route.part.text}.{route.on.text}; None for other frames.")
    else:
        doc = (f"{route.commands[0].name} for a frame that has {route.part.text}; None for "
               "other frames.")
    lines.append(f"    {docstring(doc, '    ')}")
    part = _walk(lines, "frame", route.part.steps)
    if route.on is None:
        lines.append(f"    return {q(route.commands[0].name)}, {part}")
        return lines, name
    on = f"{part}.{'.'.join(s.attr for s in route.on.steps)}"
    imports.use(".commands", table)
    imports.use(ERRORS, "UnknownCommandTypeError")
    lines += [
        f"    value = {on}",
        f"    found = {table}.get(value)",
        "    if found is None:",
        "        raise UnknownCommandTypeError(",
        f'            f"{route.part.text}.{route.on.text}: no command has the value {{value}}",',
        "            value,",
        "        )",
    ]
    if route.payload is None:
        lines.append(f"    return found, {part}")
        return lines, name
    payload = f"{part}.{'.'.join(s.attr for s in route.payload.steps)}"
    lines += ["    command, decode = found", f"    return command, decode({payload})"]
    return lines, name


def _walk(lines: list[str], base: str, steps: list[PathStep]) -> str:
    """Emit the checks along a path; return the expression for its end."""
    expr = base
    path: list[str] = []
    for step in steps:
        expr = f"{expr}.{step.attr}"
        path.append(step.attr)
        if step.optional:
            link = "_".join(path)  # named after its path, which fixes its type
            lines += [f"    {link} = {expr}", f"    if {link} is None:", "        return None"]
            expr = link
    return expr
