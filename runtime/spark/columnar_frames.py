"""Whole frames straight into Arrow columns: the columnar path of the capture pipeline.

``decode_frames(module, frames, to_server)`` decodes an Arrow binary array of captured frames
of a generated protocol (its ``spark`` module: ``FRAME``, ``decode_frame``, ``command_name``)
into the struct column ``FRAME.to_arrow`` builds from the decoded frames, with each frame's
command name and error, as the row path (``row_frames``: ``decode_frame`` then
``command_name`` and ``FRAME.to_arrow``) gives them, without a Python object per frame.

The C extension ``runtime.codec._columnar`` (``FramePlan``) walks each frame struct by its
layout table (``compiled_frames.frame_layout``): sizes, constants, checksums, bytes, nested
structs (always there, there when bytes remain, there when a peeked value matches), and sized
protobuf messages, which it decodes with the protobuf columnar decoder
(``runtime/spark/columnar.py``). The frame itself is a struct of these (no switch, so its
layout does not depend on the direction), with a command envelope whose type names the
command (as ``command_name`` does for such frames).

What it leaves to the row path:

* a protocol whose frame struct (or a struct or message inside it) has no layout table, a row
  this path does not know, or a message the protobuf columnar path leaves to the row path:
  every batch takes the row path (``frame_plan`` is None);
* within a columnar frame, a frame the C decoder is not sure to decode exactly as the
  generated decoder does: whatever the generated decoder raises on (a size past its region, a
  wrong constant, bytes left over, a command without its body, any protobuf value the
  protobuf columnar path would leave to the row path) and a checksum that does not match
  (the row path returns that frame with its ``ChecksumFailure``). That frame alone is decoded
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
    """The columnar decoder of a protocol's frame, and where its command's type is."""

    def __init__(self, plan: columnar.Plan, command: tuple[int, int]) -> None:
        self.plan = plan
        self.command = command  # (the frame's envelope field, the envelope's type field)

    def decode(self, frames: Any) -> tuple[Decoded, list[int]]:
        """The columns of a binary array of whole frames, and the rows left to the row path
        (null in the columns)."""
        column, bad = self.plan.decode(frames)
        envelope, type_field = self.command
        names = column.field(envelope).field(type_field)
        return Decoded(column, names, pa.nulls(len(column), pa.string())), bad


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
    if spec is None or len(commands) != 1 or commands[0][0] < 0:
        return None
    assert columnar._columnar is not None
    c_plan = columnar._columnar.FramePlan(spec)
    return FramePlan(columnar.Plan(c_plan, codec.arrow_type, enum_names), commands[0])


def _frame_spec(cls: type, arrow_type: Any, path: tuple[int, ...], tables: Any,
                commands: list[tuple[int, int]]) -> tuple[Any, ...] | None:
    """The C plan of frame struct ``cls`` with the fields of ``arrow_type``, or None.

    ``commands`` collects the (field, type field) of each command envelope; one inside a
    nested struct counts as (-1, -1), so that its frame (which ``command_name`` names by
    other means) takes the row path.
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
    steps = []
    for op, name, int_type, ref, extra in rows:
        op = vocabulary.FRAME_ALIASES.get(op, op)
        width = signed = big = 0
        if int_type is not None:
            if int_type == "varint":
                return None
            width, signed, big = _int_type(int_type)
        at, number, child = 0, 0, -1
        c_extra: Any = None
        field: Any = None
        if op in ("proto", vocabulary.ENVELOPE, "bytes", "struct"):
            if name is None or name not in fields or name in filled:
                return None
            filled.add(name)
            child = fields[name]
            field = arrow_type[child]
        if op == "size":
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
        steps.append((steps_of[op], width, signed, big, at, number, child, c_extra))
    if filled != set(fields):
        return None
    return (check_end, tuple(field.nullable for field in arrow_type), tuple(steps))


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
