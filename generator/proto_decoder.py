"""The protobuf decoder emitter: the body of each message's ``decode_from``.

Decoding dispatches on the whole tag (field number and wire type) through a balanced tree of
comparisons, so a message with seventy fields costs seven comparisons per field rather than
seventy. Fields are read into ``f_<field>`` locals and stored into the new instance's slots
at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.codewriter import bytes_literal, q
from protoframe.generator.ir import (
    PACKABLE,
    Field,
    FieldType,
    Label,
    MessageType,
    Presence,
    PresentNames,
)
from protoframe.generator.proto_emit import (
    FIXED_DECODERS,
    INLINE_VARINTS,
    LINEAR_CASES,
    PY_SCALAR,
    VARINT_ALWAYS,
    VARINT_SLOW,
    ZERO,
    ModuleContext,
    varint_literal,
    wire_type,
)
from protoframe.generator.runtime_modules import ERRORS, PROTOWIRE


@dataclass
class Case:
    tag: int
    lines: list[str]


def read_len(py: ModuleContext, end_var: str, where: str, limit: str = "end") -> list[str]:
    """Statements reading a length prefix and checking it stays inside ``limit``."""
    return [
        "n = buf[pos]",
        "if n < 0x80:",
        "    pos += 1",
        "else:",
        f"    n, pos = {read_varint(py)}(buf, pos)",
        f"{end_var} = pos + n",
        f"if {end_var} > {limit}:",
        f"    raise {truncated(py)}({q(where)})",
    ]


def truncated(py: ModuleContext) -> str:
    return py.runtime(PROTOWIRE, "truncated")


def read_varint(py: ModuleContext) -> str:
    return py.runtime(PROTOWIRE, "read_varint")


def add_unknown(py: ModuleContext) -> str:
    return py.runtime(PROTOWIRE, "add_unknown")


def skip_field(py: ModuleContext) -> str:
    return py.runtime(PROTOWIRE, "skip_field")


def decode_value(
    py: ModuleContext, t: FieldType, target: str, where: str, limit: str = "end"
) -> list[str]:
    """Statements reading one value of type ``t`` at ``pos`` into ``target``.

    For a closed enum an unknown number leaves ``target`` as None (the raw number stays in
    ``raw``); the caller keeps those bytes as an unknown field, as the official runtimes do.
    """
    kind = t.kind
    if kind in FIXED_DECODERS:
        fn, size = FIXED_DECODERS[kind]
        return [f"{target} = {py.runtime(PROTOWIRE, fn)}(buf, pos)[0]", f"pos += {size}"]
    if kind == "string":
        # A UnicodeDecodeError becomes InvalidUtf8Error naming the field, in decode_from.
        return [*read_len(py, "vend", where, limit), f"{target} = buf[pos:vend].decode()",
                "pos = vend"]
    if kind == "bytes":
        return [*read_len(py, "vend", where, limit), f"{target} = buf[pos:vend]",
                "pos = vend"]
    if kind == "message":
        assert t.message is not None
        ref = py.ref(t.message.full_name, t.message.py_path)
        return [*read_len(py, "vend", where, limit),
                f"{target} = {ref}.decode_from(buf, pos, vend)", "pos = vend"]
    lines = ["raw = buf[pos]", "if raw < 0x80:", "    pos += 1"]
    if kind in INLINE_VARINTS:
        # Integer fields often hold values of two to four bytes (ids, sizes): read those here
        # rather than through a call. They are below 2**28, so need no sign conversion.
        # ``second`` .. ``fourth`` are the varint's bytes after the first.
        lines += ["elif (second := buf[pos + 1]) < 0x80:",
                  "    raw = raw & 0x7F | second << 7",
                  "    pos += 2",
                  "elif (third := buf[pos + 2]) < 0x80:",
                  "    raw = raw & 0x7F | (second & 0x7F) << 7 | third << 14",
                  "    pos += 3",
                  "elif (fourth := buf[pos + 3]) < 0x80:",
                  "    raw = raw & 0x7F | (second & 0x7F) << 7 | (third & 0x7F) << 14",
                  "    raw |= fourth << 21",
                  "    pos += 4"]
    lines += ["else:", f"    raw, pos = {read_varint(py)}(buf, pos)"]
    if kind in VARINT_SLOW:
        lines.append("    raw = " + _convert(py, VARINT_SLOW[kind]))
    if kind == "enum":
        assert t.enum is not None
        enum_map = py.enum_map(t.enum)
        default = "" if t.enum.closed else ", raw"
        lines.append(f"{target} = {enum_map}.get(raw{default})")
    elif kind in VARINT_ALWAYS:
        lines.append(f"{target} = " + _convert(py, VARINT_ALWAYS[kind]))
    else:
        lines.append(f"{target} = raw")
    return lines


def _convert(py: ModuleContext, conversion: tuple[str, str]) -> str:
    """A VARINT_SLOW or VARINT_ALWAYS conversion of ``raw``, its helper declared."""
    expr, helper = conversion
    if helper:
        py.runtime(PROTOWIRE, helper)
    return expr.format("raw")


def closed_enum(t: FieldType) -> bool:
    return t.kind == "enum" and t.enum is not None and t.enum.closed


def map_case(py: ModuleContext, f: Field, where: str) -> Case:
    assert f.map_key is not None and f.map_value is not None
    name = f.py_name
    local, k, val, raw_val = f"f_{name}", f"k_{name}", f"val_{name}", f"x_{name}"
    ktag = varint_literal(1 << 3 | wire_type(f.map_key))[0]
    vtag = varint_literal(2 << 3 | wire_type(f.map_value))[0]
    # An open enum's value may be a number it does not name: the local's type says so (mypy
    # took the default's, the enum, and refused the int the lookup may give).
    val_ann = (f": {py.value_ann(f.map_value)}" if f.map_value.kind == "enum"
               and not closed_enum(f.map_value) else "")
    body = [*read_len(py, "eend", where), f"{k} = {zero_of(py, f.map_key)}",
            f"{val}{val_ann} = {zero_of(py, f.map_value)}", "while pos < eend:",
            "    etag = buf[pos]",
            "    pos += 1", f"    if etag == {ktag}:"]
    body += ["        " + s for s in decode_value(py, f.map_key, k, where, "eend")]
    body += [f"    elif etag == {vtag}:"]
    if closed_enum(f.map_value):
        body += ["        " + s for s in decode_value(py, f.map_value, raw_val, where, "eend")]
        body += [f"        if {raw_val} is not None:", f"            {val} = {raw_val}"]
    else:
        body += ["        " + s for s in decode_value(py, f.map_value, val, where, "eend")]
    body += ["    else:", "        if etag >= 0x80:",
             f"            etag, pos = {read_varint(py)}(buf, pos - 1)",
             f"        pos = {skip_field(py)}(buf, pos, eend, etag)",
             "if pos != eend:", f"    raise {truncated(py)}({q(where)})", f"{local}[{k}] = {val}"]
    return Case(f.number << 3 | 2, body)


def decode_lines(py: ModuleContext, m: MessageType, present: PresentNames | None) -> list[str]:
    """Body of ``decode_from(cls, buf, pos, end)``.

    Fields are read into locals and stored into the new instance's slots at the end. Unknown
    fields are kept in a buffer created only when the first one shows up.
    """
    init: list[str] = []
    cases: list[Case] = []
    strings: dict[int, str] = {}  # tag -> field, for the UTF-8 error
    sparse = {f.number for f in m.sparse_fields()}
    if sparse:
        py.imports.use("typing", "Any")
        init.append("present: dict[str, Any] = {}")
    for f in m.fields:
        local, tmp = f"f_{f.py_name}", f"x_{f.py_name}"
        where = f"{m.py_path}.{f.proto_name}"
        if f.number in sparse:
            # A repeated occurrence replaces the earlier value, as for a slot.
            read = decode_value(py, f.type, local, where)
            cases.append(Case(f.number << 3 | 2, [*read, f"present[{q(f.py_name)}] = {local}"]))
            continue
        if f.is_map:
            assert f.map_key is not None and f.map_value is not None
            init.append(f"{local}: dict[{py.value_ann(f.map_key)}, "
                        f"{py.value_ann(f.map_value)}] = {{}}")
            cases.append(map_case(py, f, where))
            if "string" in (f.map_key.kind, f.map_value.kind):
                strings[f.number << 3 | 2] = where
            continue
        if f.type.kind == "string":
            strings[f.number << 3 | 2] = where
        value_ann = py.value_ann(f.type)
        closed = closed_enum(f.type)
        read = decode_value(py, f.type, tmp, where)
        if f.label is Label.REPEATED:
            init.append(f"{local}: list[{value_ann}] = []")
            if closed:
                keep = [f"if {tmp} is None:",
                        f"    unknown = {add_unknown(py)}(unknown, buf[start:pos])",
                        "else:", f"    {local}.append({tmp})"]
            else:
                keep = [f"{local}.append({tmp})"]
            cases.append(Case(f.number << 3 | wire_type(f.type), [*read, *keep]))
            if f.type.kind in PACKABLE:
                # Decoders accept both the packed and the unpacked form of a repeated scalar.
                if closed:
                    unk_tag = bytes_literal(varint_literal(f.number << 3))
                    keep = [f"if {tmp} is None:",
                            f"    unknown = {add_unknown(py)}(unknown, {unk_tag} + "
                            f"{py.runtime(PROTOWIRE, 'int32_bytes')}(raw))",
                            "else:", f"    {local}.append({tmp})"]
                packed = [*read_len(py, "pend", where), "while pos < pend:"]
                packed += ["    " + s for s in decode_value(py, f.type, tmp, where, "pend")]
                packed += ["    " + s for s in keep]
                packed += ["if pos != pend:", f"    raise {truncated(py)}({q(where)})"]
                cases.append(Case(f.number << 3 | 2, packed))
            continue
        if f.presence is Presence.IMPLICIT:
            init.append(f"{local}: {value_ann} = {py.default_expr(f)}")
        else:
            init.append(f"{local}: {value_ann} | None = None")
        if closed:
            one = [*read, f"if {tmp} is None:",
                   f"    unknown = {add_unknown(py)}(unknown, buf[start:pos])", "else:",
                   f"    {local} = {tmp}"]
        else:
            one = [*decode_value(py, f.type, local, where)]
        if f.oneof is not None:
            one += [f"f_{g.py_name} = None" for g in m.fields
                    if g.oneof == f.oneof and g is not f]
        cases.append(Case(f.number << 3 | wire_type(f.type), one))
    cases.sort(key=lambda c: c.tag)
    lines = [*init, "unknown: bytearray | None = None", "try:", "    while pos < end:",
             "        start = pos", "        tag = buf[pos]", "        if tag < 0x80:",
             "            pos += 1"]
    if any(f.number >= 16 for f in m.fields):
        # Fields 16 to 2047 have two-byte tags.
        lines += ["        elif (second := buf[pos + 1]) < 0x80:",
                  "            tag = tag & 0x7F | second << 7",
                  "            pos += 2"]
    lines += ["        else:", f"            tag, pos = {read_varint(py)}(buf, pos)"]
    fallback = [f"pos = {skip_field(py)}(buf, pos, end, tag)",
                f"unknown = {add_unknown(py)}(unknown, buf[start:pos])"]
    lines += ["        " + s for s in dispatch(cases, fallback)]
    name = q(m.py_path)
    py.imports.use("struct", "error as struct_error")
    lines += ["except (IndexError, struct_error):", f"    raise {truncated(py)}({name}) from None"]
    if len(strings) == 1:
        invalid = py.runtime(PROTOWIRE, "invalid_utf8")
        lines += ["except UnicodeDecodeError as exc:",
                  f"    raise {invalid}({q(next(iter(strings.values())))}, exc) from None"]
    elif strings:
        lines += ["except UnicodeDecodeError as exc:", "    where = {"]
        lines += [f"        {tag}: {q(where)}," for tag, where in sorted(strings.items())]
        invalid = py.runtime(PROTOWIRE, "invalid_utf8")
        lines += ["    }[tag]", f"    raise {invalid}(where, exc) from None"]
    lines += ["if pos != end:", f"    raise {truncated(py)}({name})"]
    for f in m.fields:
        if f.presence is Presence.REQUIRED:
            missing = py.runtime(ERRORS, "MissingRequiredFieldError")
            lines += [f"if f_{f.py_name} is None:",
                      f"    raise {missing}({q(m.py_path)}, {q(f.proto_name)})"]
    lines.append(f"msg = {py.runtime(PROTOWIRE, 'new_instance')}(cls)")
    lines += [f"msg.{f.storage} = f_{f.py_name}" for f in m.fields if f.number not in sparse]
    if present is not None:
        lines.append(f"msg.{present.slot} = present")
    lines += ['msg._unknown = b"" if unknown is None else bytes(unknown)', "return msg"]
    return lines


def zero_of(py: ModuleContext, t: FieldType) -> str:
    if t.kind == "enum":
        assert t.enum is not None
        return f"{py.ref(t.enum.full_name, t.enum.py_path)}.{t.enum.default.py_name}"
    if t.kind == "message":
        assert t.message is not None
        return f"{py.ref(t.message.full_name, t.message.py_path)}.decode_from(b'', 0, 0)"
    return ZERO[PY_SCALAR.get(t.kind, "int")]


def dispatch(cases: list[Case], fallback: list[str]) -> list[str]:
    """An if/elif chain for few tags, a balanced comparison tree for many."""
    if not cases:
        return fallback
    if len(cases) <= LINEAR_CASES:
        out: list[str] = []
        for i, case in enumerate(cases):
            out.append(f"{'if' if i == 0 else 'elif'} tag == {case.tag}:")
            out += ["    " + s for s in case.lines]
        out.append("else:")
        out += ["    " + s for s in fallback]
        return out
    mid = len(cases) // 2
    pivot = cases[mid].tag
    return [
        f"if tag < {pivot}:",
        *["    " + s for s in dispatch(cases[:mid], fallback)],
        "else:",
        *["    " + s for s in dispatch(cases[mid:], fallback)],
    ]
