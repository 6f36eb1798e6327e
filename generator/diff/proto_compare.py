"""Compares the protobuf side of two versions of a protocol (see ``rules`` for the ids)."""

from __future__ import annotations

from protoframe.generator.diff.lock import Lock
from protoframe.generator.diff.proto_snapshot import (
    EnumSnap,
    FieldSnap,
    MessageSnap,
    ProtoSnapshot,
    ValueSnap,
)
from protoframe.generator.diff.rules import BREAKING, COMPATIBLE, Change, change

# Protobuf's own wire-compatible type groups (the language guide, "Updating a message type"):
# a value written as one type of a group is read as any other, truncated or reinterpreted
# where the ranges differ.
_WIRE_GROUPS = (
    frozenset({"int32", "uint32", "int64", "uint64", "bool", "enum"}),
    frozenset({"sint32", "sint64"}),
    frozenset({"fixed32", "sfixed32"}),
    frozenset({"fixed64", "sfixed64"}),
    frozenset({"string", "bytes"}),
)
# The Python type generated code exposes for each kind (enums and messages: their class).
_PY_TYPES = {"int32": "int", "uint32": "int", "int64": "int", "uint64": "int", "sint32": "int",
             "sint64": "int", "fixed32": "int", "sfixed32": "int", "fixed64": "int",
             "sfixed64": "int", "bool": "bool", "double": "float", "float": "float",
             "string": "str", "bytes": "bytes"}


def _py_type(t: str) -> str:
    return _PY_TYPES.get(t, t)


def _wire_compatible_types(old: str, new: str) -> bool:
    a, b = old.split(" ", 1)[0], new.split(" ", 1)[0]
    if a == b == "message":
        return False  # another message: its fields are read by number as the other's
    return any(a in g and b in g for g in _WIRE_GROUPS)


class ProtoComparer:
    def __init__(self, protocol: str, lock: Lock | None) -> None:
        self.protocol = protocol
        self.lock = lock
        self.changes: list[Change] = []

    def add(self, rule: str, element: str, message: str, old: str | None = None,
            new: str | None = None, *, wire: str | None = None, source: str | None = None,
            notes: tuple[str, ...] = ()) -> None:
        self.changes.append(change(rule, self.protocol, element, message, old=old, new=new,
                                   wire=wire, source=source, notes=notes))

    def compare(self, old: ProtoSnapshot, new: ProtoSnapshot) -> list[Change]:
        for name, m in old.messages.items():
            if name not in new.messages:
                self.add("MESSAGE_NO_DELETE", name, f"message {name} removed", old=m.location)
        for name, m in new.messages.items():
            o = old.messages.get(name)
            if o is None:
                self.add("MESSAGE_ADDED", name, f"message {name} added", new=m.location)
                continue
            if o.file != m.file:
                self.add("MESSAGE_MOVED_FILE", name,
                         f"message {name} moved from {o.file} to {m.file}",
                         old=o.location, new=m.location)
            self._fields(o, m)
        for name, e in old.enums.items():
            if name not in new.enums:
                self.add("ENUM_NO_DELETE", name, f"enum {name} removed", old=e.location)
        for name, e in new.enums.items():
            oe = old.enums.get(name)
            if oe is None:
                self.add("ENUM_ADDED", name, f"enum {name} added", new=e.location)
            else:
                self._values(oe, e)
        return self.changes

    # -- fields ----------------------------------------------------------------------------
    def _fields(self, old: MessageSnap, new: MessageSnap) -> None:
        msg = new.full_name
        old_by_name = {f.name: f for f in old.fields}
        new_by_name = {f.name: f for f in new.fields}
        pairs: list[tuple[FieldSnap, FieldSnap]] = []
        for name, n in new_by_name.items():
            if name in old_by_name:
                pairs.append((old_by_name[name], n))
        paired_old = {o.name for o, _ in pairs}
        paired_new = {n.name for _, n in pairs}
        rest_new = {f.number: f for f in new.fields if f.name not in paired_new}
        for o in old.fields:
            if o.name in paired_old:
                continue
            if o.number not in rest_new:
                rule = "FIELD_REQUIRED_NO_DELETE" if o.label == "required" else "FIELD_NO_DELETE"
                self.add(rule, f"{msg}.{o.name}",
                         f"field {msg}.{o.name} ({o.number}) removed", old=o.location)
                continue
            n = rest_new.pop(o.number)
            self.add("FIELD_RENAMED", f"{msg}.{n.name}",
                     f"field {msg} {o.number} renamed from {o.name} to {n.name}",
                     old=o.location, new=n.location)
            pairs.append((o, n))
        for left in rest_new.values():
            self._added_field(old, new, left)
        for o, n in pairs:
            self._field_changes(old, msg, o, n)
        for number in sorted(_released(old.reserved.ranges, new.reserved.ranges)):
            self.add("RESERVED_NO_DELETE", f"{msg}.{number}",
                     f"message {msg}: reserved number {number} released",
                     old=old.location, new=new.location)
        for name in sorted(old.reserved.names - new.reserved.names):
            self.add("RESERVED_NO_DELETE", f"{msg}.{name}",
                     f"message {msg}: reserved name {name} released",
                     old=old.location, new=new.location)

    def _added_field(self, old: MessageSnap, new: MessageSnap, n: FieldSnap) -> None:
        msg, element = new.full_name, f"{new.full_name}.{n.name}"
        where = (old.location, n.location)
        if old.reserved.has_number(n.number) or n.name in old.reserved.names:
            what = n.number if old.reserved.has_number(n.number) else repr(n.name)
            self.add("FIELD_RESERVED_REUSED", element,
                     f"field {element} ({n.number}) takes {what}, reserved in {msg}", *where)
            return
        previous = self.lock.field_uses(msg, n.number) if self.lock else []
        other = [u for u in previous if (u.name, u.type, u.label) != (n.name, n.type, n.label)]
        if other and not any(u.name == n.name and u.type == n.type for u in previous):
            was = "; ".join(f"{u.name}: {u.label} {u.type}" for u in other)
            self.add("FIELD_NUMBER_REUSED", element,
                     f"field {element} takes number {n.number}, which the lock file records "
                     f"as {was}", *where)
            return
        rule = "FIELD_REQUIRED_ADDED" if n.label == "required" else "FIELD_ADDED"
        self.add(rule, element, f"field {element} ({n.number}, {n.label} {n.type}) added",
                 new=n.location)

    def _field_changes(self, old_msg: MessageSnap, msg: str, o: FieldSnap, n: FieldSnap) -> None:
        element = f"{msg}.{n.name}"
        where = (o.location, n.location)
        if o.number != n.number:
            self.add("FIELD_NUMBER_CHANGED", element,
                     f"field {element} renumbered from {o.number} to {n.number}", *where)
        if o.type != n.type:
            wire = COMPATIBLE if _wire_compatible_types(o.type, n.type) else BREAKING
            source = COMPATIBLE if _py_type(o.type) == _py_type(n.type) else BREAKING
            notes = ("values outside the narrower type are truncated or reinterpreted",) \
                if wire == COMPATIBLE else ()
            self.add("FIELD_TYPE_CHANGED", element,
                     f"field {element} changed type from {o.type} to {n.type}", *where,
                     wire=wire, source=source, notes=notes)
        if o.label != n.label:
            # A singular string/bytes/message field reads a repeated one's last element, and a
            # repeated one reads a singular one as one element: protobuf calls that compatible.
            lenient = {o.label, n.label} == {"optional", "repeated"} and \
                n.kind in ("string", "bytes", "message")
            self.add("FIELD_LABEL_CHANGED", element,
                     f"field {element} changed from {o.label} to {n.label}", *where,
                     wire=COMPATIBLE if lenient else BREAKING)
        elif o.label == "repeated" and o.packed != n.packed:
            self.add("FIELD_PACKED_CHANGED", element,
                     f"field {element} is {'now' if n.packed else 'no longer'} packed", *where)
        if o.default != n.default and o.type == n.type and o.label == n.label:
            self.add("FIELD_DEFAULT_CHANGED", element,
                     f"field {element} default changed from {o.default!r} to {n.default!r}",
                     *where)
        elif o.explicit_default != n.explicit_default and o.default == n.default:
            # The explicit default is gone (or written out) but reads the same: the same bytes.
            self.add("FIELD_DEFAULT_CHANGED", element,
                     f"field {element}: explicit default {o.default!r} "
                     f"{'removed' if o.explicit_default else 'added'} (the same value)", *where,
                     wire=COMPATIBLE)
        if o.oneof != n.oneof:
            into_new = o.oneof is None and n.oneof is not None and \
                not any(f.oneof == n.oneof for f in old_msg.fields)
            self.add("FIELD_ONEOF_CHANGED", element,
                     f"field {element} moved from {_oneof(o.oneof)} to {_oneof(n.oneof)}", *where,
                     wire=COMPATIBLE if into_new else BREAKING)

    # -- enum values -----------------------------------------------------------------------
    def _values(self, old: EnumSnap, new: EnumSnap) -> None:
        enum = new.full_name
        old_by_name = {v.name: v for v in old.values}
        new_names = {v.name for v in new.values}
        rest_new: dict[int, ValueSnap] = {}
        for v in new.values:
            o = old_by_name.get(v.name)
            if o is not None:
                if o.number != v.number:
                    self.add("ENUM_VALUE_NUMBER_CHANGED", f"{enum}.{v.name}",
                             f"enum value {enum}.{v.name} renumbered from {o.number} to "
                             f"{v.number}", old=o.location, new=v.location)
            else:
                rest_new.setdefault(v.number, v)
        for o in old.values:
            if o.name in new_names:
                continue
            if o.number in rest_new:
                v = rest_new.pop(o.number)
                self.add("ENUM_VALUE_RENAMED", f"{enum}.{v.name}",
                         f"enum value {enum} {o.number} renamed from {o.name} to {v.name}",
                         old=o.location, new=v.location)
            else:
                self.add("ENUM_VALUE_NO_DELETE", f"{enum}.{o.name}",
                         f"enum value {enum}.{o.name} ({o.number}) removed", old=o.location,
                         wire=BREAKING if old.closed else COMPATIBLE)
        for v in rest_new.values():
            element = f"{enum}.{v.name}"
            if old.reserved.has_number(v.number) or v.name in old.reserved.names:
                self.add("ENUM_VALUE_RESERVED_REUSED", element,
                         f"enum value {element} ({v.number}) takes a number or name reserved "
                         f"in {enum}", old=old.location, new=v.location)
                continue
            previous = self.lock.value_names(enum, v.number) if self.lock else []
            if previous and v.name not in previous:
                self.add("ENUM_VALUE_NUMBER_REUSED", element,
                         f"enum value {element} takes number {v.number}, which the lock file "
                         f"records as {', '.join(previous)}", old=old.location, new=v.location)
                continue
            self.add("ENUM_VALUE_ADDED", element, f"enum value {element} ({v.number}) added",
                     new=v.location)


def _oneof(name: str | None) -> str:
    return f"oneof {name}" if name else "no oneof"


def _released(old: tuple[tuple[int, int], ...], new: tuple[tuple[int, int], ...]) -> set[int]:
    out: set[int] = set()
    for lo, hi in old:
        if hi - lo > 1000:
            continue  # "reserved 1000 to max": reported by number would be noise
        for number in range(lo, hi + 1):
            if not any(a <= number <= b for a, b in new):
                out.add(number)
    return out
