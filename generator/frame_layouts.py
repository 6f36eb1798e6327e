"""Layout tables for the compiled frame codec (``runtime/codec/compiled_frames.py``).

A struct gets a table when every item of its layout is one the compiled codec knows: stored
fixed-width integers, constants, unsigned sizes of a later protobuf or bytes field or of the
rest of the struct, a checksum from the next field to the end of a struct that fills its
region, protobuf messages sized by such a size (a dispatching envelope included), bytes sized
by one or running to the end, and nested structs (themselves with a table) that are always
there, there when bytes remain, or there when a peeked integer matches. Anything else (params,
switches, arrays, strings, conditions, bit-fields, markers, prefixes, blocks, a direction, a
trailing-bytes policy) keeps the struct, and every struct holding it, on the Python codec.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.codewriter import q
from protoframe.generator.frame_ir import (
    INT_TYPES,
    BytesField,
    FrameField,
    IntField,
    ProtoField,
    StructDef,
    StructField,
)
from protoframe.generator.ir import MessageType
from protoframe.generator.linefit import fit_tuple_row
from protoframe.runtime.codec.vocabulary import ENVELOPE, FRAME_OPS

_WIDTH = 100


def _op(name: str) -> str:
    """A row's operation, quoted; only the words runtime/codec/vocabulary.py defines."""
    if name not in FRAME_OPS and name != ENVELOPE:
        raise ValueError(f"not an operation of the compiled frame codec: {name!r}")
    return q(name)


def _int_type(width: int, signed: bool, order: str) -> str:
    name = f"{'i' if signed else 'u'}{width * 8}"
    return name if width == 1 else name + ("le" if order == "little" else "be")


def _plain(f: FrameField) -> bool:
    """No item the compiled codec leaves to Python (conditions, expressions, prefixes...)."""
    return (f.wire and f.when is None and f.value is None and f.count_of is None
            and f.size_range is None and not f.is_switch_key and not f.args
            and f.prefix is None and f.length is None and f.default is None
            and not f.marker)


def _unsigned_size_for(s: StructDef, f: FrameField) -> bool:
    """``f`` is sized by an unsigned size field of ``s`` that comes before it."""
    if f.size is None or f.size == "rest" or "." in f.size:
        return False
    size = s.field(f.size)
    return (isinstance(size, IntField) and size.size_of == f.name
            and not size.signed and s.fields.index(size) < s.fields.index(f))


def _row(s: StructDef, f: FrameField, tabled: set[str], early: frozenset[str],
         ref: Callable[[MessageType], str], byte_order: str) -> str | None:
    """``f``'s row of the table, or None when the compiled codec cannot take it."""
    if not _plain(f):
        return None
    name = q(f.name)
    if isinstance(f, IntField):
        if f.optional:
            return None
        int_type = q(_int_type(f.width, f.signed, f.order))
        if f.const is not None:
            return f"({_op('const')}, {name}, {int_type}, {f.const:#x}, None)"
        if f.checksum is not None:
            if f.name not in early or f.signed:
                return None
            return f"({_op('checksum')}, {name}, {int_type}, {q(f.checksum.algorithm)}, None)"
        if f.size_of == "rest":
            return None if f.signed else f"({_op('size_rest')}, {name}, {int_type}, None, None)"
        if f.size_of is not None:
            target = s.field(f.size_of)
            if not isinstance(target, ProtoField | BytesField) or f.signed:
                return None
            return f"({_op('size')}, {name}, {int_type}, {q(f.size_of)}, None)"
        if f.computed:
            return None
        return f"({_op('int')}, {name}, {int_type}, None, None)"
    if isinstance(f, ProtoField):
        if f.optional or f.message is None or not _unsigned_size_for(s, f):
            return None
        cls = ref(f.message)
        assert f.size is not None
        if f.dispatch_on is None:
            return f"({_op('proto')}, {name}, None, {cls}, {q(f.size)})"
        # Where the bodies are kept when all are sparse fields: the codec then looks in that
        # dict instead of calling each body's property.
        sparse = {g.number for g in f.message.sparse_fields()}
        slot = f.message.present.slot if f.message.present is not None else None
        present = q(slot) if slot and all(c.field.number in sparse for c in f.commands) \
            else "None"
        envelope = f"({q(f.size)}, {q(f.dispatch_on.py_name)}, _BODY_FIELDS, {present})"
        return f"({_op('envelope')}, {name}, None, {cls}, {envelope})"
    if isinstance(f, BytesField):
        if f.optional or f.compression is not None and f.size != "rest":
            return None
        if f.size == "rest":
            return f"({_op('bytes')}, {name}, None, None, None)"
        if f.size is None or not _unsigned_size_for(s, f):
            return None
        return f"({_op('bytes')}, {name}, None, {q(f.size)}, None)"
    if isinstance(f, StructField):
        if f.struct is None or f.struct.name not in tabled or f.size is not None:
            return None
        if f.when_peek is not None:
            kind, equals = f.when_peek
            width, signed = INT_TYPES[kind]
            presence = f"({q(_int_type(width, signed, byte_order))}, {equals:#x})"
        elif f.when_remaining:
            presence = q("remaining")
        elif f.optional:
            return None
        else:
            presence = "None"
        return f"({_op('struct')}, {name}, None, {f.struct.name}, {presence})"
    return None


def layout_lines(structs: list[StructDef], decoding: dict[str, tuple[bool, frozenset[str]]],
                 ref: Callable[[MessageType], str], byte_order: str) -> list[str]:
    """The ``install_frame_layouts(...)`` call for the structs that can be compiled.

    ``structs`` are in dependency order (nested ones first), directional frames left out;
    ``decoding`` gives for each struct what its generated decoder does: whether it rejects
    bytes after the last field, and which checksums it verifies as soon as they are read (the
    only kind the compiled codec checks); ``ref`` gives the expression naming a protobuf
    message's class in the frames module.
    """
    tabled: set[str] = set()
    entries: list[str] = []
    for s in structs:
        if s.params or s.trailing != "error" or len(s.fields) > 64:
            continue
        check_end, early = decoding[s.name]
        rows = [_row(s, f, tabled, early, ref, byte_order) for f in s.fields]
        if not rows or any(r is None for r in rows):
            continue
        tabled.add(s.name)
        entries.append(f"    ({s.name}, {check_end}, (")
        for r in rows:
            assert r is not None
            entries += fit_tuple_row(r, "        ")
        entries.append("    )),")
    if not entries:
        return []
    return ["install_frame_layouts((", *entries, "))"]
