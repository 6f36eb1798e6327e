"""The Spark emitters of the frame side that are not one struct's codec: the codec of
each switch (one nullable field per alternative struct, exactly one of them set) and the
protocol-level entry points the capture pipeline uses (``FRAME``, ``decode_frame``,
``command_name``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.generator.codewriter import docstring, q
from protoframe.generator.frame_ir import ProtoField, StructDef, SwitchField
from protoframe.generator.naming import union_key
from protoframe.generator.runtime_modules import SPARK_ROWS
from protoframe.generator.spark_codec import CodecView
from protoframe.generator.spark_emit import LIMIT, SPARK_TYPES, SparkContext, comment, fit_in_body
from protoframe.generator.spec_ir import FrameSpec


@dataclass
class FrameView:
    """The protocol-level entry points the capture pipeline uses."""

    key: str
    py_type: str
    decode_expr: str
    name_lines: list[str]
    # Module-level tables ``command_name`` reads (the value -> name of each ``commands:`` route).
    table_lines: list[str] = field(default_factory=list)
    # The template's lines naming the frame's class, each fitted at its depth there.
    fitted: dict[str, list[str]] = field(default_factory=dict)


def alternatives(f: SwitchField) -> list[StructDef]:
    """The distinct structs a switch field can hold, in case order."""
    out: list[StructDef] = []
    for case in f.cases:
        for s in case.structs:
            if all(s is not o for o in out):
                out.append(s)
    return out


def union_codec(ctx: SparkContext, s: StructDef, f: SwitchField) -> CodecView:
    key = union_key(s.name, f.name)
    members = [(m.name, ctx.keys[m.name]) for m in alternatives(f)]
    py_type = f"_{key}_T"
    ctx.use("typing", "TypeAlias")
    ctx.use(SPARK_TYPES, "StructType", "StructField")
    ctx.use(SPARK_ROWS, "as_mapping", "no_alternative", "present", "null_column", "struct_array")
    schema = [f"{py_type}: TypeAlias = ("]
    schema += [f"    {'| ' if i else ''}frames.{name}" for i, (name, _) in enumerate(members)]
    schema += [")", f"_SPARK_{key} = StructType(["]
    schema += [f"    StructField({q(name)}, _SPARK_{k}, True)," for name, k in members]
    schema += ["])", f"_FIELDS_{key} = ["]
    schema += [f"    pa.field({q(name)}, _ARROW_{k})," for name, k in members]
    schema += ["]", f"_ARROW_{key} = pa.struct(_FIELDS_{key})"]
    row = ["return {"]
    for name, k in members:
        row += fit_in_body("    ", f"{q(name)}: ",
                           f"_row_{k}(m) if isinstance(m, frames.{name}) else None", ",")
    row.append("}")
    where = q(f"{s.name}.{f.name}")
    value = ["r = as_mapping(row)"]
    for name, k in members:
        # One name for every alternative: a row's values are all ``Any``.
        value += [f"alternative = r[{q(name)}]", "if alternative is not None:",
                  f"    return _value_{k}(alternative)"]
    value.append(f"no_alternative({where})")
    arrow = ["rows, take = present(values)", "if not rows:",
             f"    return null_column(len(values), _ARROW_{key})", "arrays = ["]
    for name, k in members:
        arrow += fit_in_body("    ", "", f"_arrow_{k}([x if isinstance(x, frames.{name}) else "
                                                 "None for x in rows])", ",")
    arrow += ["]", f"return struct_array(arrays, _FIELDS_{key}, len(rows), take)"]
    name = f"{s.name}.{f.name}"
    return CodecView(
        key=key, name=name, py_type=py_type,
        comment=comment(f"The {name} switch: one field per alternative struct, exactly "
                        "one of them set."),
        schema_lines=schema,
        row_doc=docstring(f"The row of a {name} value: its alternative's row under the "
                          "struct's name.", "    "),
        row_lines=row,
        value_doc=docstring(f"The {name} value a row holds (the one alternative set).",
                            "    "),
        value_lines=value,
        arrow_doc=docstring(f"An Arrow struct column of {name} values (None: null).",
                            "    "),
        arrow_lines=arrow,
        public=False,
    )


def frame_view(ctx: SparkContext, spec: FrameSpec) -> FrameView:
    frame = spec.frame
    key = ctx.keys[frame.name]
    directional = any(c.directional for f in frame.fields if isinstance(f, SwitchField)
                      for c in f.cases)
    decode = f"frames.{frame.name}.decode(data" + (", to_server=to_server)" if directional
                                                   else ")")
    py_type = f"frames.{frame.name}"
    if spec.routes:  # frames that name their command inside (as machines.command_of does)
        names, tables = route_names(spec)
        return FrameView(key, py_type, decode, names, tables)
    for f in frame.fields:
        if isinstance(f, ProtoField) and f.dispatch_on is not None:
            enum = f.dispatch_on.type.enum
            assert enum is not None
            ctx.use(SPARK_ROWS, "enum_name")
            return FrameView(key, py_type, decode, fit_in_body(
                "", "return ",
                f"enum_name(_NAMES_{ctx.enum_key(enum)}, "
                f"frame.{f.name}.{f.dispatch_on.py_name})", ""))
        if isinstance(f, SwitchField):
            lines = [f"body = frame.{f.name}"]
            for case in f.cases:
                for s in case.structs:
                    lines += [f"if isinstance(body, frames.{s.name}):",
                              f"    return {q(case.command_of(s))}"]
            lines.append("return type(body).__name__")
            return FrameView(key, py_type, decode, lines)
    return FrameView(key, py_type, decode, [f"return {q(frame.name)}"])


def route_names(spec: FrameSpec) -> tuple[list[str], list[str]]:
    """``command_name``'s body for a frame whose ``commands:`` routes name its command.

    Each route applies when every optional link of its ``in:`` path is present, as in
    ``machines.command_of``; its ``on:`` value is looked up in a table. Unlike
    ``command_of`` nothing is decoded, and a value no command has is its decimal text (as
    an undeclared enum number is); a frame no route applies to is named by its struct.
    """
    lines: list[str] = []
    tables: list[str] = []
    # A link is named after its path: the same path has the same type in every route.
    for route in spec.routes:
        conditions: list[str] = []
        expr = "frame"
        last = len(route.part.steps) - 1
        path: list[str] = []
        for i, step in enumerate(route.part.steps):
            expr = f"{expr}.{step.attr}"
            path.append(step.attr)
            if step.optional and i == last and route.on is None:  # the part goes unread
                conditions.append(f"{expr} is not None")
            elif step.optional:
                link = "_".join(path)
                conditions.append(f"({link} := {expr}) is not None")
                expr = link
        if route.on is None:
            body = [f"return {q(route.commands[0].name)}"]
        else:
            table = f"_COMMAND_NAMES_{route.index}"
            tables += ["", f"# The commands of {route.part.text}, by {route.on.text}.",
                       f"{table}: dict[int, str] = {{",
                       *[f"    {c.value}: {q(c.name)}," for c in route.commands], "}"]
            on = ".".join([expr, *(s.attr for s in route.on.steps)])
            # Named after its whole path: routes reading other paths may differ in type.
            v = "_".join([*path, *(s.attr for s in route.on.steps)])
            body = [f"{v} = {on}", f"return {table}.get({v}) or str(int({v}))"]
        if not conditions:  # the route always applies: later ones never do
            lines += body
            return lines, [""] + tables if tables else []
        one = f"if {' and '.join(conditions)}:"
        if len(one) <= LIMIT:
            lines.append(one)
        else:
            lines += ["if (", f"    {conditions[0]}",
                      *[f"    and {c}" for c in conditions[1:]], "):"]
        lines += [f"    {line}" for line in body]
    lines.append(f"return {q(spec.frame.name)}")
    return lines, [""] + tables if tables else []

