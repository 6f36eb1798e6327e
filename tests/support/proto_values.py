"""Random message values for conformance tests, driven by the official descriptors.

A value tree is a dict from proto field name to a Python value (nested dicts for messages,
numbers for enums). The same tree builds an official message and one of ours, so the two
implementations can be compared on equal input.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

FD = FieldDescriptor
MAX_DEPTH = 3

_INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    # Mix in the edges, where varint and sign handling go wrong.
    edges = [v for v in (lo, hi, 0, 1, -1, 127, 128, 16383, 16384, 2**31 - 1, 2**32 - 1)
             if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def scalar_strategy(f: FieldDescriptor) -> st.SearchStrategy[Any]:
    if f.type in _INT_RANGES:
        return _ints(*_INT_RANGES[f.type])
    if f.type == FD.TYPE_BOOL:
        return st.booleans()
    if f.type == FD.TYPE_FLOAT:
        return st.floats(width=32, allow_nan=False)
    if f.type == FD.TYPE_DOUBLE:
        return st.floats(allow_nan=False)
    if f.type == FD.TYPE_STRING:
        return st.text(max_size=12)
    if f.type == FD.TYPE_BYTES:
        return st.binary(max_size=12)
    if f.type == FD.TYPE_ENUM:
        return st.sampled_from([v.number for v in f.enum_type.values])
    raise AssertionError(f"unexpected field type {f.type}")


def message_values(desc: Descriptor, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """A strategy of value trees for ``desc``; beyond MAX_DEPTH only required fields appear."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in desc.fields:
        if f.type == FD.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                continue
            if depth >= MAX_DEPTH and not f.is_required:
                continue
            value: st.SearchStrategy[Any] = _nested(f.message_type, depth + 1)
        else:
            value = scalar_strategy(f)
        if f.is_required:
            required[f.name] = value
        elif f.is_repeated:
            optional[f.name] = st.lists(value, max_size=3)
        elif depth < MAX_DEPTH:
            optional[f.name] = value
    oneofs = {f.name: f.containing_oneof.name for f in desc.fields if f.containing_oneof}
    return st.fixed_dictionaries(required, optional=optional).map(
        lambda tree: _one_per_oneof(tree, oneofs)
    )


def _nested(desc: Descriptor, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    # Deferred so recursive message types (MessageIdData.first_chunk_message_id) terminate.
    return st.deferred(lambda: message_values(desc, depth))


def _one_per_oneof(tree: dict[str, Any], oneofs: dict[str, str]) -> dict[str, Any]:
    seen: set[str] = set()
    for name in list(tree):
        group = oneofs.get(name)
        if group is None:
            continue
        if group in seen:
            del tree[name]
        seen.add(group)
    return tree


def build_official(cls: Any, tree: dict[str, Any]) -> Any:
    msg = cls()
    fill_official(msg, tree)
    return msg


def fill_official(msg: Any, tree: dict[str, Any]) -> None:
    fields = msg.DESCRIPTOR.fields_by_name
    for name, value in tree.items():
        f = fields[name]
        if f.type == FD.TYPE_MESSAGE:
            if f.is_repeated:
                for item in value:
                    fill_official(getattr(msg, name).add(), item)
            else:
                sub = getattr(msg, name)
                sub.SetInParent()
                fill_official(sub, value)
        elif f.is_repeated:
            getattr(msg, name).extend(value)
        else:
            setattr(msg, name, value)


def class_index(module: ModuleType) -> dict[str, type]:
    """Generated classes of ``module`` (nested ones too) by protobuf full name."""
    index: dict[str, type] = {}

    def walk(cls: type) -> None:
        full = getattr(cls, "FULL_NAME", None)
        if isinstance(full, str):
            index[full] = cls
        for attr in vars(cls).values():
            if isinstance(attr, type) and attr.__module__ == module.__name__:
                walk(attr)

    for attr in vars(module).values():
        if isinstance(attr, type) and attr.__module__ == module.__name__:
            walk(attr)
    return index


def build_ours(index: dict[str, type], desc: Descriptor, tree: dict[str, Any]) -> Any:
    cls: Any = index[desc.full_name]
    py_names = {proto: py for py, _, proto in cls.FIELD_NAMES}
    kwargs: dict[str, Any] = {}
    for name, value in tree.items():
        f = desc.fields_by_name[name]
        if f.type == FD.TYPE_MESSAGE:
            if f.is_repeated:
                value = [build_ours(index, f.message_type, v) for v in value]
            else:
                value = build_ours(index, f.message_type, value)
        kwargs[py_names[name]] = value
    return cls(**kwargs)


def floats_equal(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
