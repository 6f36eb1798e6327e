"""The row codec emitter: a type's Spark and Arrow schema constants and the bodies of its
three functions (value -> row, row -> value, values -> Arrow struct column).

Each function is straight-line code over the type's ``Column``s: every attribute is read
once, and a column's ``Kind`` says how its values convert. Each runtime name is declared on
the context's imports where the line calling it is written.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

from protoframe.generator.codewriter import Imports, bytes_literal, docstring, q
from protoframe.generator.linefit import INDENT, fit_marked
from protoframe.generator.proto_emit import varint_literal
from protoframe.generator.runtime_modules import SPARK_ROWS
from protoframe.generator.spark_emit import LIMIT, SPARK_TYPES, SparkContext, comment, fit_in_body
from protoframe.generator.spark_kinds import Kind


@dataclass
class Column:
    name: str  # column name: the field's name in the spec
    attr: str  # constructor keyword
    storage: str  # attribute to read
    shape: str  # "one", "list" or "map"
    kind: Kind
    nullable: bool
    where: str  # quoted "Message.field" for errors
    number: int = 0
    key_kind: Kind | None = None

    def types(self, imports: Imports) -> tuple[str, str]:
        """The Spark and Arrow types of the column, their names declared on ``imports``."""
        k = self.kind
        spark, arrow = k.use("spark", imports), k.use("arrow", imports)
        if self.shape == "map":
            assert self.key_kind is not None
            imports.use(SPARK_TYPES, "MapType")
            key_spark = self.key_kind.use("spark", imports)
            key_arrow = self.key_kind.use("arrow", imports)
            return (f"MapType({key_spark}, {spark}, False)",
                    f"pa.map_(pa.field(\"key\", {key_arrow}, nullable=False), "
                    f"pa.field(\"value\", {arrow}, nullable=False))")
        if self.shape == "list":
            imports.use(SPARK_TYPES, "ArrayType")
            return (f"ArrayType({spark}, False)",
                    f"pa.list_(pa.field(\"element\", {arrow}, nullable=False))")
        return spark, arrow


@dataclass
class CodecView:
    """One generated type: its schema constants and the bodies of its three functions."""

    key: str  # public name of its RowCodec
    name: str  # protobuf full name or frame struct name
    py_type: str
    comment: list[str]
    schema_lines: list[str]
    row_doc: str
    row_lines: list[str]
    value_doc: str
    value_lines: list[str]
    arrow_doc: str
    arrow_lines: list[str]
    public: bool = True
    # What the template prints, each line fitted at its depth there (``fit``).
    fitted: dict[str, list[str]] = field(default_factory=dict)

    def fit(self) -> None:
        """Fill ``fitted``: the schema, the three functions and the RowCodec constant."""
        key, py = self.key, self.py_type
        self.fitted = {
            "schema": at(0, self.schema_lines),
            "row_def": at(0, [f"def _row_{key}(m: {py}) -> dict[str, Any]:"]),
            "row": at(1, self.row_lines),
            "value_def": at(0, [f"def _value_{key}(row: RowLike) -> {py}:"]),
            "value": at(1, self.value_lines),
            "arrow_def": at(0, [f"def _arrow_{key}(values: Sequence[{py} | None]) -> Any:"]),
            "arrow": at(1, self.arrow_lines),
            "row_codec": at(0, [f"{key} = RowCodec(", *[f"{INDENT}{x}," for x in (
                q(self.name), py, f"_SPARK_{key}", f"_ARROW_{key}", f"_row_{key}",
                f"_value_{key}", f"_arrow_{key}")], ")"]),
        }


def at(depth: int, lines: Iterable[str]) -> list[str]:
    """``lines`` (no docstrings among them) printed ``depth`` levels in, each fitted there."""
    return [out for line in lines for part in line.split("\n")
            for out in fit_marked(INDENT * depth + part)]


def codec(ctx: SparkContext, key: str, name: str, py_type: str, title: str,
          columns: list[Column]) -> CodecView:
    spark_fields: list[str] = []
    arrow_fields: list[str] = []
    ctx.use(SPARK_TYPES, "StructType")
    for c in columns:
        ctx.use(SPARK_TYPES, "StructField")
        spark_type, arrow_type = c.types(ctx.imports)
        spark_fields += fit_in_body("    ", "", f"StructField({q(c.name)}, {spark_type}, "
                                                f"{c.nullable})", ",")
        nullable = "" if c.nullable else ", nullable=False"
        arrow_fields += fit_in_body(
            "    ", "", f"pa.field({q(c.name)}, {arrow_type}{nullable})", ",")
    if columns:
        schema = [f"_SPARK_{key} = StructType([", *spark_fields, "])",
                  f"_FIELDS_{key} = [", *arrow_fields, "]"]
    else:
        schema = [f"_SPARK_{key} = StructType([])", f"_FIELDS_{key}: list[Any] = []"]
    schema.append(f"_ARROW_{key} = pa.struct(_FIELDS_{key})")
    short = py_type.split(".", 1)[-1]
    return CodecView(
        key=key, name=name, py_type=py_type, comment=comment(f"The {title}."),
        schema_lines=schema,
        row_doc=docstring(f"The row of a {short}: field name -> row value.", "    "),
        row_lines=row_lines(ctx, columns),
        value_doc=docstring(f"The {short} a row holds (a dict or a pyspark Row).", "    "),
        value_lines=value_lines(ctx, py_type, columns),
        arrow_doc=docstring(f"An Arrow struct column of {short} values (None: null).",
                            "    "),
        arrow_lines=arrow_lines(ctx, key, columns),
    )

def row_lines(ctx: SparkContext, columns: list[Column]) -> list[str]:
    """Body of ``_row_<key>(m)``: one dict display, reading each attribute once."""
    imports = ctx.imports
    pre: list[str] = []
    items: list[str] = []
    for c in columns:
        k = c.kind
        src = f"m.{c.storage}"
        if c.shape == "map":
            assert c.key_kind is not None
            if c.key_kind.row == "{}" and k.row == "{}":
                expr = f"dict({src})"
            else:
                pre.append(f"x_{c.attr} = {src}")
                expr = (f"{{{c.key_kind.use('row', imports).format('k')}: "
                        f"{k.use('row', imports).format('y')} for k, y in x_{c.attr}.items()}}")
        elif c.shape == "list":
            if k.row == "{}" and not c.nullable:
                expr = f"list({src})"
            else:
                pre.append(f"x_{c.attr} = {src}")
                expr = f"list(x_{c.attr})" if k.row == "{}" else \
                    f"[{k.use('row', imports).format('y')} for y in x_{c.attr}]"
            if k.enum is not None:
                ctx.use(SPARK_ROWS, "unknown_enums")
                expr += f" + unknown_enums(m._unknown, {c.number})"
            if c.nullable:  # a conditional frame array
                expr = f"None if x_{c.attr} is None else {expr}"
        elif k.enum is not None and c.nullable:
            pre.append(f"x_{c.attr} = {src}")
            ctx.use(SPARK_ROWS, "unknown_enum")
            expr = (f"{k.use('row', imports).format(f'x_{c.attr}')} if x_{c.attr} is not None "
                    f"else unknown_enum(m._unknown, {c.number})")
        elif k.row == "{}":
            expr = src
        elif c.nullable:
            pre.append(f"x_{c.attr} = {src}")
            expr = f"None if x_{c.attr} is None else {k.use('row', imports).format(f'x_{c.attr}')}"
        else:
            expr = k.use("row", imports).format(src)
        items += fit_in_body("    ", f"{q(c.name)}: ", expr, ",")
    if not items:
        return ["return {}"]
    return [*pre, "return {", *items, "}"]

def value_lines(ctx: SparkContext, py_type: str, columns: list[Column]) -> list[str]:
    """Body of ``_value_<key>(row)``: read each column, build the value by keyword."""
    imports = ctx.imports
    if columns:
        ctx.use(SPARK_ROWS, "as_mapping")
    lines = ["r = as_mapping(row)"] if columns else []
    args: list[str] = []
    unknown = False
    for c in columns:
        k = c.kind
        lines.append(f"v_{c.attr} = r[{q(c.name)}]")
        var = f"v_{c.attr}"
        if c.shape == "map":
            assert c.key_kind is not None
            kexpr = c.key_kind.use("value", imports).format("k", where=c.where)
            vexpr = k.use("value", imports).format("y", where=c.where)
            ctx.use(SPARK_ROWS, "map_items")
            expr = f"{{{kexpr}: {vexpr} for k, y in map_items({var})}}"
        elif k.enum is not None:
            unknown = True
            key = ctx.enum_key(k.enum)
            ref = ctx.ref(k.enum.full_name, k.enum.py_path)
            tag = bytes_literal(varint_literal(c.number << 3))
            call = "closed_enums" if c.shape == "list" else "closed_enum"
            ctx.use(SPARK_ROWS, call)
            lines += fit_in_body(
                "", f"e_{c.attr} = ",
                f"{call}({var}, _NUMBERS_{key}, {ref}, {tag}, unknown, {c.where})", "")
            expr = f"e_{c.attr}"
            if c.shape == "one" and not c.nullable:
                ctx.use(SPARK_ROWS, "required_enum")
                expr = f"required_enum(e_{c.attr}, {c.where})"
        elif c.shape == "list" and c.nullable:  # a conditional frame array
            expr = f"None if {var} is None else " + (
                f"list({var})" if k.value == "{}" else
                f"[{k.use('value', imports).format('y', where=c.where)} for y in {var}]")
        elif c.shape == "list":
            expr = f"list({var} or ())" if k.value == "{}" else \
                f"[{k.use('value', imports).format('y', where=c.where)} for y in {var} or ()]"
        elif c.nullable:
            expr = var if k.value == "{}" else \
                f"None if {var} is None else {k.use('value', imports).format(var, where=c.where)}"
        elif k.value == "{}":
            ctx.use(SPARK_ROWS, "required")
            expr = f"required({var}, {c.where})"
        elif "uint64_value" in k.value:  # rejects null itself
            expr = k.use("value", imports).format(var, where=c.where)
        else:
            ctx.use(SPARK_ROWS, "required")
            expr = k.use("value", imports).format(f"required({var}, {c.where})", where=c.where)
        args += fit_in_body("    ", f"{c.attr}=", expr, ",")
    if unknown:
        lines.insert(1, "unknown = bytearray()")
    if args:
        lines += [f"value = {py_type}(", *args, ")"]
    else:
        lines.append(f"value = {py_type}()")
    if unknown:
        lines += ["if unknown:", "    value._unknown = bytes(unknown)"]
    lines.append("return value")
    return lines

def arrow_lines(ctx: SparkContext, key: str, columns: list[Column]) -> list[str]:
    """Body of ``_arrow_<key>(values)``: one list and one Arrow array per column."""
    imports = ctx.imports
    ctx.use(SPARK_ROWS, "present", "null_column", "struct_array")
    lines = ["rows, take = present(values)", "if not rows:",
             f"    return null_column(len(values), _ARROW_{key})"]
    if columns:
        lines.append(f"fields = _FIELDS_{key}")
    if any(c.kind.enum is not None and (c.nullable or c.shape == "list") for c in columns):
        lines.append("unknown = [m._unknown for m in rows]")
    arrays: list[str] = []
    for i, c in enumerate(columns):
        k = c.kind
        ftype = f"fields[{i}].type"
        lines.append(f"v_{c.attr} = [m.{c.storage} for m in rows]")
        if c.shape == "map":
            assert c.key_kind is not None
            keys = c.key_kind.use("column", imports).format("keys", type=f"{ftype}.key_type")
            vals = k.use("column", imports).format("items", type=f"{ftype}.item_type")
            ctx.use(SPARK_ROWS, "map_entries", "list_offsets")
            lines += [f"keys, items = map_entries(v_{c.attr})"]
            expr = f"pa.MapArray.from_arrays(list_offsets(v_{c.attr}), {keys}, {vals}, " \
                   f"type={ftype})"
        elif c.shape == "list":
            expr = k.use("lists", imports).format(f"v_{c.attr}", type=ftype)
            if k.enum is not None:
                expr = expr[:-1] + f", unknown, {c.number})"
        else:
            expr = k.use("column", imports).format(f"v_{c.attr}", type=ftype)
            if k.enum is not None and c.nullable:
                expr = expr[:-1] + f", unknown, {c.number})"
        lines += fit_in_body("", f"c_{c.attr} = ", expr, "")
        arrays.append(f"c_{c.attr}")
    if not columns:
        lines.append(f"return struct_array([], _FIELDS_{key}, len(rows), take)")
        return lines
    one = f"arrays = [{', '.join(arrays)}]"
    if len(one) <= LIMIT:
        lines.append(one)
    else:
        packed = textwrap.wrap(", ".join(arrays) + ",", width=LIMIT - 4)
        lines += ["arrays = [", *["    " + p for p in packed], "]"]
    lines.append("return struct_array(arrays, fields, len(rows), take)")
    return lines


