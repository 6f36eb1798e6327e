"""Whole frames straight into Arrow columns: the columnar path of the capture pipeline.

``decode_frames(module, frames, to_server)`` decodes an Arrow binary array of captured frames
of a generated protocol (its ``spark`` module: ``FRAME``, ``decode_frame``, ``command_name``)
into the struct column ``FRAME.to_arrow`` builds from the decoded frames, with each frame's
command name and error, as the row path (``row_frames``: ``decode_frame`` then
``command_name`` and ``FRAME.to_arrow``) gives them, without a Python object per frame.

The C extension ``runtime.codec._columnar`` (``FramePlan``) walks each frame struct by its
layout table (``compiled_frames.frame_layout``): sizes, constants, checksums, bytes, fixed-width
integers (with a default when their bytes are missing), bools, uuids (as their text),
length-prefixed bytes and text (UTF-8, modified UTF-8; with a default or None when no bytes
remain), skipped trailing bytes, nested structs (always there, there when bytes remain, there
when a peeked value matches, runs of them to the end of the region), switches on an integer
key (the case's struct column set, the others' null), and sized protobuf messages, which it
decodes with the protobuf columnar decoder (``runtime/spark/columnar.py``). The command is
named by the frame's command envelope (its type, as ``command_name`` does for such frames),
by the case of the frame's own switch (what ``command_name`` says of a frame of that case), or
else by ``command_name`` itself, asked once per kind of row of a stand-in that reads the
columns (``_Probe``). TubeMQ's frame adds blocks (a struct whose bytes come in sized blocks),
varint-prefixed protobuf messages and rows there when a field of an earlier message compares
to a constant. A switch whose cases depend on the direction is not planned.

What it leaves to the row path:

* a protocol whose frame struct (or a struct or message inside it) has no layout table, a row
  this path does not know, or a message the protobuf columnar path leaves to the row path:
  every batch takes the row path (``frame_plan`` is None);
* within a columnar frame, a frame the C decoder is not sure to decode exactly as the
  generated decoder does: whatever the generated decoder raises on (a size past its region, a
  wrong constant, bytes left over, a command without its body, a switch key no case has, text
  that is not UTF-8, any protobuf value the protobuf columnar path would leave to the row
  path), modified UTF-8 that is not plain UTF-8 (C0 80 for a NUL, surrogate pairs), a switch
  case whose struct has no plan (a row this path does not know) and a checksum that does not
  match (the row path returns that frame with its ``ChecksumFailure``). That frame alone is decoded
  by the row path, whose frame, name and error replace the row: errors are the row path's.

Without the extension (not built, or ``PROTOFRAME_PURE_PYTHON`` set) everything takes the
row path.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, cast

import pyarrow as pa
import pyarrow.compute as pc

from protoframe.runtime.codec import compiled, compiled_frames, vocabulary
from protoframe.runtime.spark import columnar
from protoframe.runtime.spark.rows import RowCodec


class SparkModule(Protocol):
    """What decoding frames uses of a generated ``spark`` module."""

    FRAME: RowCodec[Any]

    def decode_frame(self, data: bytes, to_server: bool = False) -> tuple[Any, str | None]: ...

    def command_name(self, frame: Any) -> str: ...


class Decoded(NamedTuple):
    """A run of frames decoded: the frame struct column, command names and errors."""

    frames: Any
    names: Any
    errors: Any


class FramePlan:
    """The columnar decoder of a protocol's frame, and where its command's name comes from."""

    def __init__(self, plan: columnar.Plan, command: tuple[int, int],
                 case_names: Sequence[str | None] = (), module: Any = None,
                 cls: Any = None) -> None:
        self.plan = plan
        # (the frame's envelope field, the envelope's type field), or (-2, the frame's switch
        # field), whose cases are named by case_names (the command of each case's field), or
        # (-3, -3): command_name of module asked of the columns of frame struct cls
        self.command = command
        self.case_names = tuple(case_names)
        self.module = module
        self.cls = cls

    def decode(self, frames: Any) -> tuple[Decoded, list[int]]:
        """The columns of a binary array of whole frames, and the rows left to the row path
        (null in the columns)."""
        column, bad = self.plan.decode(frames)
        envelope, type_field = self.command
        if envelope >= 0:
            names = column.field(envelope).field(type_field)
        elif envelope == -2:
            names = self._case_names(column.field(type_field))
        else:
            names = _Probe(self.module, self.cls, column).names()
            if names is None:  # command_name looked at what the columns cannot answer
                return Decoded(column, pa.nulls(len(column), pa.string()),
                               pa.nulls(len(column), pa.string())), list(range(len(column)))
        return Decoded(column, names, pa.nulls(len(column), pa.string())), bad

    def _case_names(self, switch: Any) -> Any:
        """The command name of each row of a switch column: its case's (null where none)."""
        names = pa.nulls(len(switch), pa.string())
        for k, name in enumerate(self.case_names):
            case = switch.field(k)
            if name is not None and case.null_count < len(case):
                names = pc.if_else(case.is_valid(), name, names)
        return names


_PLANS: dict[Any, FramePlan | None] = {}


def frame_plan(module: SparkModule) -> FramePlan | None:
    """The columnar plan of ``module``'s frame, or None when its frames take the row path."""
    if not columnar.available():
        return None
    codec = module.FRAME
    key = (codec.python_type, codec.arrow_type)
    if key not in _PLANS:
        _PLANS[key] = _make_plan(module)
    return _PLANS[key]


def _make_plan(module: SparkModule) -> FramePlan | None:
    codec = module.FRAME
    spark = sys.modules.get(getattr(codec.arrow_of, "__module__", ""))
    enum_names: dict[tuple[int, ...], Any] = {}
    tables = columnar._Tables(vars(spark) if spark is not None else {}, enum_names)
    commands: list[tuple[int, int]] = []
    spec = _frame_spec(codec.python_type, codec.arrow_type, (), tables, commands)
    if spec is None or len(commands) > 1 or (-1, -1) in commands:
        return None
    case_names: list[str | None] = []
    if not commands:  # command_name asked of the columns (see _Probe)
        commands.append((-3, -3))
    elif commands[0][0] == -2:
        names = _case_names(module, codec.python_type, codec.arrow_type[commands[0][1]])
        if names is None:
            return None
        case_names = names
    assert columnar._columnar is not None
    c_plan = columnar._columnar.FramePlan(spec)
    return FramePlan(columnar.Plan(c_plan, codec.arrow_type, enum_names), commands[0],
                     case_names, module, codec.python_type)


class _Unanswered(Exception):
    """command_name asked for something the columns do not hold as the frame object would."""


class _Probe:
    """``command_name`` of each row of a frame struct column, asked once per kind of row.

    It runs on a stand-in of one row's frame (``_Stand``) that answers attribute reads from
    the columns and notes each (a nested struct: whether it is null; an integer or bool: its
    value). The name depends on nothing else, so every row that reads the same there gets the
    same name: one call, then a few Arrow comparisons, name all those rows; the next call is
    for the first row left. Strings, enums, uuids, lists and nulls where the object holds a
    default are not answered (``names`` gives None: the batch takes the row path).
    """

    def __init__(self, module: Any, cls: type, column: Any) -> None:
        self.module = module
        self.cls = cls
        self.column = column
        self._columns: dict[tuple[int, ...], Any] = {(): column}

    def at(self, path: tuple[int, ...]) -> Any:
        """The child column at ``path`` (field indices) below the frame column."""
        if path not in self._columns:
            self._columns[path] = self.at(path[:-1]).field(path[-1])
        return self._columns[path]

    def names(self) -> Any:
        names = pa.nulls(len(self.column), pa.string())
        todo = self.column.is_valid()
        while True:
            first = pc.index(todo, True).as_py()
            if first < 0:
                return names
            reads: list[tuple[tuple[int, ...], Any]] = []
            try:
                name = self.module.command_name(_Stand(self, self.cls, (), first, reads))
            except Exception:  # noqa: BLE001 - _Unanswered, or what the stand-in lacks
                return None
            same = todo
            for path, value in reads:
                column = self.at(path)
                if value is None:
                    match = column.is_null()
                elif value is True and pa.types.is_struct(column.type):
                    match = column.is_valid()
                else:
                    match = pc.fill_null(pc.equal(column, pa.scalar(value, column.type)), False)
                same = pc.and_(same, match)
            names = pc.if_else(same, pa.scalar(str(name)), names)
            todo = pc.and_not(todo, same)


_LEAVES = (pa.types.is_integer, pa.types.is_boolean)


class _Stand:
    """One row's frame struct, or protobuf message, as ``command_name`` reads it."""

    __slots__ = ("_probe", "_cls", "_path", "_row", "_reads")

    def __init__(self, probe: _Probe, cls: type, path: tuple[int, ...], row: int,
                 reads: list[tuple[tuple[int, ...], Any]]) -> None:
        self._probe = probe
        self._cls = cls
        self._path = path
        self._row = row
        self._reads = reads

    def __getattr__(self, attr: str) -> Any:
        cls = self._cls
        column = self._probe.at(self._path)
        layout = compiled_frames.frame_layout(cls)
        child_cls: Any = None
        nullable = True  # a null nested struct is None to the object
        if layout is not None:  # a frame struct: its fields are its rows
            frame_row = next((r for r in layout[1] if r[1] == attr), None)
            if frame_row is None:
                raise _Unanswered(attr)
            name = attr
            if frame_row[0] in ("struct", "struct_when", "blocks", "proto", "proto_prefixed",
                          "proto_prefixed_when", vocabulary.ENVELOPE):
                child_cls = frame_row[3]
            elif frame_row[0] not in ("int", "default", "bool"):
                raise _Unanswered(attr)
        else:  # a protobuf message
            names = {a: (storage, proto) for a, storage, proto in getattr(cls, "FIELD_NAMES", ())}
            storage, name = names.get(attr, (None, ""))
            row = next((r for r in compiled.layout(cls) or () if r[3] == storage), None)
            if row is None or row[2] in ("repeated", "packed", "map"):
                raise _Unanswered(attr)
            if row[1] == "message":
                child_cls = row[4]
                nullable = False  # absent, the message's own rules say what it reads as
            elif row[1] in ("enum", "open_enum", "string", "bytes", "float", "double"):
                raise _Unanswered(attr)
        index = column.type.get_field_index(name)
        if index < 0:
            raise _Unanswered(attr)
        path = (*self._path, index)
        child = self._probe.at(path)
        valid = child[self._row].is_valid
        if child_cls is not None:
            if not pa.types.is_struct(child.type) or not (valid or nullable):
                raise _Unanswered(attr)
            if column.type[index].nullable or not valid:  # else valid wherever its parent is
                self._reads.append((path, True if valid else None))
            return _Stand(self._probe, child_cls, path, self._row, self._reads) if valid \
                else None
        if not valid or not any(test(child.type) for test in _LEAVES):
            raise _Unanswered(attr)  # a default the object holds, or a value it holds
        value = child[self._row].as_py()
        self._reads.append((path, value))
        return value


def _case_names(module: SparkModule, cls: type, field: Any) -> list[str | None] | None:
    """What ``command_name`` says of a frame of each case of its switch (``field``, a struct
    of one field per case, named after the case's struct), or None when it does not say it
    by the case alone."""
    layout = compiled_frames.frame_layout(cls)
    assert layout is not None
    switch = next(row for row in layout[1] if row[0] == "switch")
    by_name = {c.__name__: c for c in switch[4][2]}
    names: list[str | None] = []
    for case in field.type:
        case_cls = by_name.get(case.name)
        if case_cls is None:
            names.append(None)
            continue
        frame: Any = object.__new__(cls)
        try:
            setattr(frame, str(switch[1]), object.__new__(case_cls))
            names.append(module.command_name(frame))
        except Exception:  # noqa: BLE001 - it looks at more than the case
            return None
    return names


def _frame_spec(cls: type, arrow_type: Any, path: tuple[int, ...], tables: Any,
                commands: list[tuple[int, int]]) -> tuple[Any, ...] | None:
    """The C plan of frame struct ``cls`` with the fields of ``arrow_type``, or None.

    ``commands`` collects the (field, type field) of each command envelope, and (-2, field)
    for a switch of the frame itself; one inside a nested struct counts as (-1, -1), so that
    its frame (which ``command_name`` names by other means) takes the row path.
    """
    assert columnar._columnar is not None
    steps_of = columnar._columnar.FRAME_STEPS
    presence = columnar._columnar.FRAME_PRESENCE
    layout = compiled_frames.frame_layout(cls)
    if layout is None or not pa.types.is_struct(arrow_type):
        return None
    check_end, rows = layout
    fields = {field.name: i for i, field in enumerate(arrow_type)}
    index = {row[1]: i for i, row in enumerate(rows)}
    filled: set[str] = set()
    steps: list[tuple[Any, ...]] = []
    for op, name, int_type, ref, extra in rows:
        if op == "adjusted_size_rest":
            return None  # this path's size_rest step has no adjustment
        op = vocabulary.FRAME_ALIASES.get(op, op)
        width = signed = big = 0
        if int_type == "varint":
            if op not in ("proto_prefixed", "proto_prefixed_when"):
                return None  # width 0: a varint
        elif int_type is not None:
            width, signed, big = _int_type(int_type)
        at, number, child = 0, 0, -1
        c_extra: Any = None
        field: Any = None
        if op in _STORED:
            if name is None or name not in fields or name in filled:
                return None
            filled.add(name)
            child = fields[name]
            field = arrow_type[child]
        if op in _PLAIN:
            spec = _plain_step(op, int_type, ref, extra, field)
            if spec is None:
                return None
            width, signed, big, at, number, c_extra = spec
        elif op == "switch":
            if _takes_direction(cls) or index.get(extra[1]) is None:
                return None  # its cases depend on the direction; or it is not sized
            c_extra = _switch(ref, extra, field, (*path, child), tables, commands)
            if c_extra is None:
                return None
            at = 1
        elif op == "struct_run":
            item = field.type.value_field if pa.types.is_list(field.type) else None
            if item is None or field.nullable or item.nullable:
                return None
            c_extra = _frame_spec(ref, item.type, (*path, child), tables, commands)
            if c_extra is None:
                return None
        elif op in ("proto_prefixed", "proto_prefixed_when"):
            message = columnar._message_rows(ref, field.type, (*path, child), tables, set())
            when = None
            if op == "proto_prefixed_when":
                when = _condition(extra, rows, index, steps, arrow_type, tables, path)
                if when is None or not field.nullable:
                    return None
            elif field.nullable:
                return None
            if message is None:
                return None
            c_extra = (message, when)
        elif op == "struct_when":
            when = _condition(extra, rows, index, steps, arrow_type, tables, path)
            spec = _frame_spec(ref, field.type, (*path, child), tables, commands)
            if when is None or spec is None or not field.nullable:
                return None
            c_extra = (spec, when)
        elif op == "blocks":
            block_type, most_bytes, most_blocks = extra
            spec = _frame_spec(ref, field.type, (*path, child), tables, commands)
            if spec is None or block_type == "varint" or field.nullable:
                return None
            c_extra = (spec, *_int_type(block_type), most_bytes, most_blocks or 0)
        elif op == "count_of":
            at = index[ref]
        elif op == "struct_array":
            item = field.type.value_field if pa.types.is_list(field.type) else None
            if (not isinstance(extra, str)  # counted by a program, which this path lacks
                    or item is None or field.nullable or item.nullable
                    or rows[index[extra]][3] != name):
                return None
            c_extra = _frame_spec(ref, item.type, (*path, child), tables, commands)
            if c_extra is None:
                return None
        elif op == "int_when":
            spec = _plain_step("int", int_type, None, None, field.with_nullable(False))
            when = _length_condition(extra, rows, index, len(steps))
            if spec is None or when is None or not field.nullable:
                return None
            c_extra = (spec[5], when)
        elif op == "default_bool":
            if field.type != pa.bool_() or field.nullable or not isinstance(ref, bool):
                return None
            width, number = 1, int(ref)
        elif op in ("skip_trailing", "switch_key", "len_value"):
            pass
        elif op == "size":
            at = index[ref]
        elif op == "const":
            number = ref & ((1 << 8 * width) - 1)  # as read: a negative one's two's complement
        elif op == "checksum":
            c_extra = compiled_frames._CHECKSUMS.get(ref)
            if c_extra is None:
                return None
        elif op in ("proto", vocabulary.ENVELOPE):
            message = columnar._message_rows(ref, field.type, (*path, child), tables, set())
            if message is None:
                return None
            type_field, body = -1, cast(tuple[int, ...], ())
            if op == vocabulary.ENVELOPE:
                envelope = _envelope(ref, field.type, extra[1], extra[2], tables)
                if envelope is None:
                    return None
                type_field, body = envelope
                commands.append((child, type_field) if not path else (-1, -1))
            op = "proto"
            c_extra = (message, type_field, body)
        elif op == "bytes":
            if field.type != pa.binary():
                return None
            at = -1 if ref is None else 0
        elif op == "struct":
            c_extra = _frame_spec(ref, field.type, (*path, child), tables, commands)
            if c_extra is None:
                return None
            if isinstance(extra, tuple):
                at, number = presence["peek"], extra[1]
                width, signed, big = _int_type(extra[0])
                number &= (1 << 8 * width) - 1
            elif extra in (None, "remaining"):
                at = presence["always" if extra is None else "remaining"]
            else:
                return None
        elif op != "size_rest":
            return None  # a row this path does not know
        steps.append((steps_of[_C_STEP.get(op, op)], width, signed, big, at, number, child,
                      c_extra))
    if filled != set(fields):
        return None
    return (check_end, tuple(field.nullable for field in arrow_type), tuple(steps))


_STORED = {"proto", vocabulary.ENVELOPE, "bytes", "struct", "int", "bool", "uuid", "prefixed",
           "prefixed_default", "prefixed_optional", "default", "struct_run", "switch",
           "proto_prefixed", "proto_prefixed_when", "struct_when", "blocks", "struct_array",
           "int_when", "default_bool"}
# what a condition's integer field reads as, in the column C keeps: (bits kept, signed)
_CONDITION_KINDS = {"int32": (32, True), "sint32": (32, True), "sfixed32": (32, True),
                    "int64": (64, True), "sint64": (64, True), "sfixed64": (64, True),
                    "uint32": (32, False), "fixed32": (32, False)}
# rows of one plain value, the same step at any depth
_PLAIN = {"int", "bool", "uuid", "prefixed", "prefixed_default", "prefixed_optional", "default"}
_INT_WIDTHS = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 4, pa.int64(): 8}
_C_STEP = {"prefixed_default": "prefixed", "prefixed_optional": "prefixed",
           "proto_prefixed_when": "proto_prefixed"}
_PRESENT = {"prefixed": "prefixed_always", "prefixed_default": "prefixed_default",
            "prefixed_optional": "prefixed_optional"}
_TEXT = {"bytes": ("text_bytes", pa.binary()), "utf8": ("text_utf8", pa.string()),
         "mutf8": ("text_mutf8", pa.string())}


def _plain_step(op: str, int_type: str | None, ref: Any, extra: Any,
                field: Any) -> tuple[int, int, int, int, int, Any] | None:
    """(width, signed, big, at, number, extra) of the step of a plain value row whose column
    is ``field``, or None when this path does not take it."""
    assert columnar._columnar is not None
    consts = columnar._columnar.FRAME_PRESENCE
    if op == "uuid":
        return (0, 0, 0, 0, 0, None) if field.type == pa.string() else None
    if op == "bool":
        return (1, 0, 0, 0, 0, None) if field.type == pa.bool_() else None
    if int_type is None or int_type == "varint":
        return None
    width, signed, big = _int_type(int_type)
    if op in ("int", "default"):
        arrow_width = _INT_WIDTHS.get(field.type)
        if arrow_width is None or width + (not signed) > arrow_width or field.nullable:
            return None  # a value the column does not hold as the row path does
        number = 0 if op == "int" else ref & ((1 << 64) - 1)
        return width, signed, big, 0, number, arrow_width
    text = _TEXT.get(ref)
    if text is None or field.type != text[1]:
        return None
    at = consts[_PRESENT[op]]
    default: Any = None
    if op == "prefixed_default":
        default = extra.encode() if isinstance(extra, str) else extra
        if not isinstance(default, bytes) or (ref == "bytes") != isinstance(extra, bytes):
            return None
    if field.nullable != (op == "prefixed_optional"):
        return None
    return width, signed, big, at, consts[text[0]], default


def _condition(program: Any, rows: Any, index: dict[Any, int], steps: list[Any],
               arrow_type: Any, tables: Any, path: tuple[int, ...]) -> tuple[Any, ...] | None:
    """The C form (step, field, bits, when_eq/when_ne) of a condition program of the one form
    this path takes: a required integer (or enum) field of the message of an earlier
    ``proto_prefixed`` row compared to a constant, as ``(("attr", "row.field"), ("const", c),
    ("eq" or "ne", None))``; else None."""
    assert columnar._columnar is not None
    consts = columnar._columnar.FRAME_PRESENCE
    match program:
        case (("attr", str(where)), ("const", int(value)), (("eq" | "ne") as op, None)):
            pass
        case _:
            return None
    row_name, _, attr = where.partition(".")
    k = index.get(row_name)
    if k is None or k >= len(steps) or rows[k][0] != "proto_prefixed" or "." in attr:
        return None
    cls = rows[k][3]
    message_type = arrow_type[arrow_type.get_field_index(row_name)].type
    names = {a: (storage, proto) for a, storage, proto in getattr(cls, "FIELD_NAMES", ())}
    row = next((r for r in compiled.layout(cls) or () if r[3] == names.get(attr, ("",))[0]),
               None)
    field = message_type.get_field_index(names[attr][1]) if attr in names else -1
    if row is None or field < 0 or row[2] != "required":
        return None
    if row[1] in ("enum", "open_enum"):
        message = columnar._message_rows(cls, message_type, (*path, k), tables, set())
        numbers = message[field][4] if message is not None else ()
        if value not in numbers:
            return None
        bits = numbers.index(value)  # the column holds the index of the enum's name
    elif row[1] in _CONDITION_KINDS:
        width, signed = _CONDITION_KINDS[row[1]]
        low = -(1 << (width - 1)) if signed else 0
        if not low <= value < low + (1 << width):
            return None  # no value of the field equals it: left to the row path
        bits = value & ((1 << width) - 1)
    else:
        return None
    return (k, field, bits, consts["when_" + op])


def _length_condition(program: Any, rows: Any, index: dict[Any, int],
                      done: int) -> tuple[int, int, int] | None:
    """The C form (step, when_*, value) of an int_when program of the one form this path
    takes: the length of an earlier bytes row (always there) compared to a constant, as
    ``(("len", "row"), ("const", c), (op, None))``; else None."""
    assert columnar._columnar is not None
    consts = columnar._columnar.FRAME_PRESENCE
    match program:
        case (("len", str(row_name)), ("const", int(value)),
              (("eq" | "ne" | "gt" | "ge" | "lt" | "le") as op, None)):
            pass
        case _:
            return None
    k = index.get(row_name)
    if k is None or k >= done or not -(1 << 63) <= value < 1 << 63:
        return None
    op_k = vocabulary.FRAME_ALIASES.get(rows[k][0], rows[k][0])
    if not (op_k == "bytes" or (op_k == "prefixed" and rows[k][3] == "bytes")):
        return None  # text's len counts characters, not the bytes C counts
    return k, consts["when_" + op], value


def _takes_direction(cls: type) -> bool:
    """Whether frame struct ``cls`` decodes with the direction (a switch choosing its cases
    by it): its Python ``decode_from``, which a compiled codec keeps as ``__wrapped__``."""
    python = getattr(cls.__dict__.get("decode_from"), "__wrapped__", None)
    return python is None or compiled_frames._decode_takes_more(python)


def _switch(table: Any, extra: Any, field: Any, path: tuple[int, ...],
            tables: Any, commands: list[tuple[int, int]]) -> tuple[Any, ...] | None:
    """The C form of a switch row (its column ``field``, a struct of one field per case struct,
    named after it): (the cases' nullable flags, ((key, field, spec or None), ...) by key); a
    case this path cannot decode is None, its frames left to the row path."""
    # the cases by their class (table's decoders may be compiled codecs by now)
    by_key = {code: cls for cls, code in extra[2].items()}
    if (not pa.types.is_struct(field.type) or not isinstance(table, dict)
            or set(by_key) != set(table) or len(by_key) != len(extra[2])):
        return None
    fields = {f.name: i for i, f in enumerate(field.type)}
    cases = []
    for key, cls in sorted(by_key.items()):
        if not isinstance(cls, type) or cls.__name__ not in fields:
            return None
        k = fields[cls.__name__]
        spec = _frame_spec(cls, field.type[k].type, (*path, k), tables, commands)
        cases.append((key, k, spec))
    # a switch of the frame itself names the command by its case (see _make_plan)
    commands.append((-2, path[0]) if len(path) == 1 else (-1, -1))
    return tuple(f.nullable for f in field.type), tuple(cases)


def _envelope(cls: type, arrow_type: Any, type_attr: str, bodies: dict[Any, str],
              tables: Any) -> tuple[int, tuple[int, ...]] | None:
    """A command envelope's type field (its index in ``arrow_type``) and, for each index of
    the type's enum column, the field of the body that type must carry (-1: none, which the
    row path raises on)."""
    proto_of = {attr: proto for attr, _, proto in getattr(cls, "FIELD_NAMES", ())}
    storage_of = {attr: storage for attr, storage, _ in getattr(cls, "FIELD_NAMES", ())}
    fields = {field.name: i for i, field in enumerate(arrow_type)}
    row = next((r for r in compiled.layout(cls) or () if r[3] == storage_of.get(type_attr)),
               None)
    if row is None or row[2] != "required" or not isinstance(row[4], dict):
        return None
    names = tables.names(row[4])
    type_field = fields.get(proto_of.get(type_attr, ""))
    if names is None or type_field is None:
        return None
    body_of = []
    for number in sorted(names):  # the order of a required enum column's indices
        attr = bodies.get(row[4][number])
        body = fields.get(proto_of.get(attr, "")) if attr is not None else None
        body_of.append(-1 if body is None else body)
    return type_field, tuple(body_of)


def _int_type(name: str) -> tuple[int, int, int]:
    width, flags = compiled_frames._int_type(name)
    return width, flags & 1, flags >> 1 & 1


def decode_frames(module: SparkModule, frames: Any, to_server: Sequence[bool]) -> Decoded:
    """The frames of binary array ``frames`` decoded, ``to_server[i]`` saying which way frame
    ``i`` went: equal to ``row_frames`` of the same frames."""
    if isinstance(frames, pa.ChunkedArray):
        frames = frames.combine_chunks()
    plan = frame_plan(module)
    if plan is None or frames.null_count:
        return row_frames(module, frames.to_pylist(), to_server)
    out, bad = plan.decode(frames)
    if not bad:
        return out
    fixed = row_frames(module, [frames[i].as_py() for i in bad], [to_server[i] for i in bad])
    indices = list(range(len(frames)))
    for k, i in enumerate(bad):
        indices[i] = len(frames) + k
    take = pa.array(indices, pa.int32())
    return Decoded(*(pa.concat_arrays([a, b]).take(take) for a, b in zip(out, fixed,
                                                                         strict=True)))


def row_frames(module: SparkModule, frames: Sequence[bytes], to_server: Sequence[bool]) -> Decoded:
    """The row path: each frame decoded by ``decode_frame``, named by ``command_name``, then
    ``FRAME.to_arrow``; the garbage collector is paused meanwhile.

    The objects decoded are freed by reference counting; collections triggered by their sheer
    number would otherwise cost more than the decoding.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        decode = module.decode_frame
        command_name = module.command_name
        decoded: list[Any] = []
        errors: list[str | None] = []
        names: list[str | None] = []
        for data, outbound in zip(frames, to_server, strict=True):
            frame, error = decode(data, outbound)
            decoded.append(frame)
            errors.append(error)
            names.append(None if frame is None else command_name(frame))
        return Decoded(module.FRAME.to_arrow(decoded), pa.array(names, pa.string()),
                       pa.array(errors, pa.string()))
    finally:
        if enabled:
            gc.enable()
