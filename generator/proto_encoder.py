"""The protobuf encoder emitter: the body of each message's ``_encode``.

Each set field appends its tag and value to ``parts``; small varints come from a table instead
of a call, and packed repeated fields are built in a scratch list first.
"""

from __future__ import annotations

from protoframe.generator.codewriter import bytes_literal, q
from protoframe.generator.ir import (
    Field,
    FieldType,
    Label,
    MessageType,
    Presence,
    PresentNames,
)
from protoframe.generator.proto_emit import (
    ENCODERS,
    VARINT_HELPERS,
    ModuleContext,
    tag_bytes,
    varint_literal,
    wire_type,
)
from protoframe.generator.runtime_modules import ERRORS, PROTOWIRE


def value_bytes(py: ModuleContext, t: FieldType, var: str, out: str = "parts") -> list[str]:
    """Statements appending the encoded value ``var`` (without its tag) to the list ``out``.

    Small varints and length prefixes come straight from ``SMALL_VARINTS``; the helpers
    (which also range-check) handle the rest.
    """
    kind = t.kind
    if kind in VARINT_HELPERS:
        small = py.runtime(PROTOWIRE, "SMALL_VARINTS")
        helper = py.runtime(PROTOWIRE, VARINT_HELPERS[kind])
        return [f"{out}.append({small}[{var}] if 0 <= {var} < 0x4000 else {helper}({var}))"]
    if kind == "string":
        return [f"data = {var}.encode()", *len_prefixed(py, "data", out)]
    if kind == "bytes":
        return len_prefixed(py, var, out)
    if kind == "message":
        return ["sub = []", f"{var}._encode(sub)", "data = b\"\".join(sub)",
                *len_prefixed(py, "data", out)]
    return [f"{out}.append({py.runtime(PROTOWIRE, ENCODERS[kind][1])}({var}))"]


def len_prefixed(py: ModuleContext, data: str, out: str) -> list[str]:
    small = py.runtime(PROTOWIRE, "SMALL_VARINTS")
    varint = py.runtime(PROTOWIRE, "varint_bytes")
    return [f"size = len({data})",
            f"{out}.append({small}[size] if size < 0x4000 else {varint}(size))",
            f"{out}.append({data})"]


def field_bytes(py: ModuleContext, t: FieldType, number: int, var: str,
                out: str = "parts") -> list[str]:
    """Statements appending tag and value of field ``number`` holding ``var`` to ``out``."""
    if t.kind == "bool":
        # Tag and value in one constant.
        true, false = (bytes_literal(varint_literal(number << 3) + bytes([b])) for b in (1, 0))
        return [f"{out}.append({true} if {var} else {false})"]
    return [f"{out}.append({tag_bytes(number, wire_type(t))})",
            *value_bytes(py, t, var, out)]


def nonzero(py: ModuleContext, t: FieldType, var: str) -> str:
    """Condition under which an implicit-presence value is written: not the zero value.

    A negative zero float is not the zero value on the wire, so it is written.
    """
    if t.kind in ("float", "double"):
        py.imports.use("math", "copysign")
        return f"{var} or copysign(1.0, {var}) < 0"
    return var


def encode_lines(py: ModuleContext, m: MessageType, present: PresentNames | None) -> list[str]:
    """Body of ``_encode(self, parts)``: fields in number order, then unknown fields."""
    lines: list[str] = []
    sparse = {f.number for f in m.sparse_fields()}
    ordered = sorted(m.fields, key=lambda f: f.number)
    # Runs of sparse fields with no other field numbered between them: each run is written
    # where its numbers fall, by one loop over the present ones.
    runs: list[list[Field]] = []
    for i, f in enumerate(ordered):
        if f.number in sparse:
            if i == 0 or ordered[i - 1].number not in sparse:
                runs.append([])
            runs[-1].append(f)
    for f in ordered:
        if f.number not in sparse:
            lines += encode_field(py, m, f)
            continue
        assert present is not None
        run = next(r for r in runs if f in r)
        if f is not run[0]:
            continue
        if run is runs[0]:
            lines += present_prefix(present, len(runs) > 1)
        lines += present_run(py, present, run if len(runs) > 1 else None)
    return declare_lists([*lines, "if self._unknown:", "    parts.append(self._unknown)"])


def present_prefix(present: PresentNames, multi: bool) -> list[str]:
    """Statements putting the present sparse fields in number order, in ``present``."""
    lines = [f"present = self.{present.slot}", f"tags = self.{present.tags}"]
    if multi:
        lines.append(f"rank = self.{present.rank}")
    lines.append("if len(present) > 1:")
    if not multi:
        lines.append(f"    rank = self.{present.rank}")
    # Mostly one field is set: only two or more need sorting.
    return [*lines, "    present = {n: present[n] for n in sorted(present, key=rank.__getitem__)}"]


def present_run(py: ModuleContext, present: PresentNames, run: list[Field] | None) -> list[str]:
    """A loop writing the present sparse fields (of ``run`` only, when there are several)."""
    body = ["parts.append(tags[name])", "sub = []", "value._encode(sub)",
            "data = b\"\".join(sub)", *len_prefixed(py, "data", "parts")]
    lines = ["for name, value in present.items():"]
    if run is None:
        return lines + ["    " + s for s in body]
    lo, hi = run[0].number, run[-1].number
    return lines + [f"    if {lo} <= rank[name] <= {hi}:", *["        " + s for s in body]]


def declare_lists(lines: list[str]) -> list[str]:
    """Annotate, once and up front, the scratch lists the statements fill."""
    kinds = {"sub": "bytes", "entry": "bytes", "packed": "bytes", "numbers": "int"}
    used = [name for name in kinds if any(s.strip() == f"{name} = []" for s in lines)]
    return [f"{name}: list[{kinds[name]}]" for name in used] + lines


def encode_field(py: ModuleContext, m: MessageType, f: Field) -> list[str]:
    """Statements appending one field to ``parts`` (nothing when it is unset or empty)."""
    v = f"v_{f.py_name}"
    if f.is_map:
        assert f.map_key is not None and f.map_value is not None
        k, val = f"k_{f.py_name}", f"val_{f.py_name}"
        lines = [f"for {k}, {val} in self.{f.py_name}.items():", "    entry = []"]
        lines += ["    " + s for s in field_bytes(py, f.map_key, 1, k, "entry")]
        lines += ["    " + s for s in field_bytes(py, f.map_value, 2, val, "entry")]
        lines += [f"    parts.append({tag_bytes(f.number, 2)})", "    data = b\"\".join(entry)"]
        return lines + ["    " + s for s in len_prefixed(py, "data", "parts")]
    if f.label is Label.REPEATED:
        item = f"item_{f.py_name}"
        if f.packed:
            lines = [f"{v} = self.{f.py_name}", f"if {v}:", "    packed = []",
                     f"    for {item} in {v}:"]
            lines += ["        " + s for s in value_bytes(py, f.type, item, "packed")]
            lines += [f"    parts.append({tag_bytes(f.number, 2)})",
                      "    data = b\"\".join(packed)"]
            return lines + ["    " + s for s in len_prefixed(py, "data", "parts")]
        lines = [f"for {item} in self.{f.py_name}:"]
        return lines + ["    " + s for s in field_bytes(py, f.type, f.number, item)]
    body = field_bytes(py, f.type, f.number, v)
    if f.presence is Presence.REQUIRED:
        unset = py.runtime(ERRORS, "RequiredFieldUnsetError")
        return [f"{v} = self.{f.storage}",
                f"if {v} is None:",
                f"    raise {unset}({q(m.py_path)}, {q(f.proto_name)})",
                *body]
    cond = f"{v} is not None" if f.presence is Presence.EXPLICIT else nonzero(py, f.type, v)
    return [f"{v} = self.{f.storage}", f"if {cond}:", *["    " + s for s in body]]
