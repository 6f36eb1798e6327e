"""The frame-spec side of a protocol, flattened for comparison.

Each field of a struct becomes a name and its wire-relevant attributes, grouped by the rule a
difference in them is reported under (``GROUPS``), so comparing two fields is comparing two
dictionaries. Documentation, YAML spelling and declaration order of structs are left out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
)
from protoframe.generator.spec_ir import FrameSpec
from protoframe.generator.spec_yaml import LocDict, load_spec, locate

# Attribute -> the rule a difference in it is reported under.
GROUPS = {
    "kind": "FRAME_FIELD_TYPE_CHANGED", "signed": "FRAME_FIELD_TYPE_CHANGED",
    "holds": "FRAME_FIELD_TYPE_CHANGED", "encoding": "FRAME_FIELD_TYPE_CHANGED",
    "switch_on": "FRAME_FIELD_TYPE_CHANGED", "blocks": "FRAME_SIZE_CHANGED",
    "width": "FRAME_FIELD_WIDTH_CHANGED", "order": "FRAME_FIELD_BYTE_ORDER_CHANGED",
    "const": "FRAME_CONST_CHANGED",
    "size_of": "FRAME_SIZE_CHANGED", "size_range": "FRAME_SIZE_CHANGED",
    "size": "FRAME_SIZE_CHANGED", "prefix": "FRAME_SIZE_CHANGED",
    "length": "FRAME_SIZE_CHANGED",
    "count_of": "FRAME_COUNT_CHANGED", "count": "FRAME_COUNT_CHANGED",
    "until_end": "FRAME_COUNT_CHANGED",
    "checksum": "FRAME_CHECKSUM_CHANGED",
    "when": "FRAME_CONDITION_CHANGED", "when_peek": "FRAME_CONDITION_CHANGED",
    "when_remaining": "FRAME_CONDITION_CHANGED",
    "value": "FRAME_VALUE_CHANGED", "derive": "FRAME_VALUE_CHANGED",
    "default": "FRAME_DEFAULT_CHANGED",
    "compression": "FRAME_COMPRESSION_CHANGED",
    "args": "FRAME_ARGS_CHANGED",
    "terminator": "FRAME_SIZE_CHANGED", "list_terminator": "FRAME_COUNT_CHANGED",
    "allowed": "FRAME_ALLOWED_VALUES_CHANGED", "items": "FRAME_ALLOWED_VALUES_CHANGED",
    # Must-be-zero bits of an integer's bits: are a constant; a sub-field's enum, its type.
    "reserved": "FRAME_CONST_CHANGED", "enum": "FRAME_FIELD_TYPE_CHANGED",
}


@dataclass(frozen=True)
class FrameFieldSnap:
    name: str
    attrs: dict[str, str]
    data: bool  # an attribute of the generated class (not computed)
    wire: bool  # has bytes of its own
    optional: bool
    location: str


@dataclass
class StructSnap:
    name: str
    location: str
    fields: list[FrameFieldSnap]
    trailing: str
    params: list[str]
    is_frame: bool

    def fingerprint(self) -> str:
        """A digest of the wire layout: field attributes in order, names left out."""
        layout = [[sorted(f.attrs.items()), f.wire] for f in self.fields]
        text = json.dumps([layout, self.trailing, self.params], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CommandSnap:
    name: str
    value: int
    layout: str  # what the code selects (struct names by direction, or the routed message)
    location: str


@dataclass(frozen=True)
class RequestSnap:
    request: str
    response: str
    errors: tuple[str, ...]
    correlate: tuple[str, ...]
    method: str
    frame_fields: tuple[str, ...]
    location: str
    answered: str = ""  # its when: (the peer answers only then); "": always
    choices: tuple[str, ...] = ()  # "COMMAND when EXPR" for answers its fields choose
    until: tuple[str, ...] = ()  # the commands ending a streamed answer
    allocate: bool = True  # False: the caller gives the allocated id (allocate: false)


@dataclass
class MachineSnap:
    name: str
    location: str
    initial: str
    key: str | None
    states: dict[str, str]  # name -> location
    transitions: dict[str, str]  # "from -> to on what [if ...]" -> location


@dataclass
class FrameSnapshot:
    file: str
    location: str
    max_frame_size: int
    structs: dict[str, StructSnap] = field(default_factory=dict)
    commands: dict[str, CommandSnap] = field(default_factory=dict)  # not protobuf-dispatched
    requests: dict[str, RequestSnap] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)  # command -> one_way/server_push
    # The field requests number themselves, the first id and whether 0 is skipped.
    allocator: tuple[str | None, int, bool] = (None, 0, False)
    machines: dict[str, MachineSnap] = field(default_factory=dict)


def _attrs(f: FrameField) -> dict[str, str]:
    a: dict[str, str] = {"kind": f.kind}
    if isinstance(f, IntField):
        a["width"] = str(f.width)
        a["signed"] = str(f.signed)
        a["order"] = f.order
    if isinstance(f, StructField | BlocksField) and f.struct is not None:
        a["holds"] = f.struct.name
    if isinstance(f, BlocksField):
        a["blocks"] = f"{f.block_count}/{f.block_length}/{f.block_size}/{f.max_blocks}"
    if isinstance(f, ProtoField) and f.message is not None:
        a["holds"] = f.message.full_name
    if isinstance(f, StringField):
        a["encoding"] = f.encoding
    if isinstance(f, SwitchField):
        a["switch_on"] = str(f.switch_on)
    if isinstance(f, ArrayField):
        if f.element is not None:
            # The element's layout is the array's: its width, order, held struct...
            element = _attrs(f.element)
            a.update(element)
            a["kind"] = f"array of {element['kind']}"
        if f.count is not None:
            a["count"] = f.count.text
        if f.until_end:
            a["until_end"] = "True"
    optional = {
        "const": None if f.const is None else hex(f.const),
        "value": f.value.text if f.value else None,
        "derive": f.derive.text if f.derive else None,
        "size_of": f.size_of,
        "size_range": "..".join(f.size_range) if f.size_range else None,
        "count_of": f.count_of,
        "checksum": f"{f.checksum.algorithm} from {f.checksum.start}" if f.checksum else None,
        "when": f.when.text if f.when else None,
        "when_peek": f"{f.when_peek[0]} == {f.when_peek[1]:#x}" if f.when_peek else None,
        "when_remaining": "True" if f.when_remaining else None,
        "default": None if f.default is None else repr(f.default),
        "length": None if f.length is None else str(f.length),
        "size": f.size,
        "prefix": f.prefix,
        "compression": (f"{f.compression.codec}/{f.compression.uncompressed_size}"
                        if f.compression else None),
        "args": ", ".join(f"{k}={v.text}" for k, v in sorted(f.args.items())) or None,
        "reserved": hex(f.reserved_mask) if isinstance(f, IntField) and f.reserved_mask
        else None,
        "enum": (f"{f.bit_of.enum.name}: " + ", ".join(
            f"{m}={v}" for m, v in f.bit_of.enum.members)
                 if f.bit_of is not None and f.bit_of.enum is not None else None),
    }
    a.update({k: v for k, v in optional.items() if v is not None})
    a.update(_value_attrs(f))
    return a


def _value_attrs(f: FrameField) -> dict[str, str]:
    """A field's terminator, constant bytes, allowed values and element counts."""
    a: dict[str, str] = {}
    if f.terminator is not None:
        a["list_terminator" if isinstance(f, ArrayField) else "terminator"] = \
            f"0x{f.terminator.hex()}"
    if f.const_data is not None:
        a["const"] = f"0x{f.const_data.hex()}"
    if f.min_value is not None or f.max_value is not None or f.nonzero:
        a["allowed"] = (f"{'-' if f.min_value is None else f.min_value}.."
                        f"{'-' if f.max_value is None else f.max_value}"
                        + (", nonzero" if f.nonzero else ""))
    if isinstance(f, ArrayField) and (f.min_items is not None or f.max_items is not None):
        a["items"] = f"{f.min_items or 0}..{'-' if f.max_items is None else f.max_items}"
    return a


def _struct(s: StructDef) -> StructSnap:
    return StructSnap(
        name=s.name, location=str(s.location), trailing=s.trailing,
        params=[f"{p.name}: {p.kind}" for p in s.params], is_frame=s.is_frame,
        fields=[FrameFieldSnap(f.name, _attrs(f), not f.computed, f.wire, f.optional,
                               str(f.location)) for f in s.fields])


def _where(root: LocDict, display: str, path: list[str | int], key: bool = False) -> str:
    mark = locate(root, path, key)
    return f"{display}:{mark.line}:{mark.column}"


def frame_snapshot(spec: FrameSpec, spec_file: Path) -> FrameSnapshot:
    """``spec``, as loaded from ``spec_file`` (read again for the positions the IR lacks)."""
    root = load_spec(spec_file, spec.path)
    snap = FrameSnapshot(file=spec.path, location=_where(root, spec.path, []),
                         max_frame_size=spec.max_frame_size)
    for s in [*spec.structs, spec.frame]:
        snap.structs[s.name] = _struct(s)
    for name, info in spec.commands.items():
        if info.proto is not None:
            continue  # protobuf-dispatched: the envelope's enum values are compared instead
        if info.case is not None:
            to_s, to_c = info.layout(True), info.layout(False)
            layout = f"{to_s.name if to_s else '-'}/{to_c.name if to_c else '-'}"
            held = to_s or to_c
            where = str(held.location) if held is not None else snap.location
        elif info.routed is not None:
            msg = info.routed.message
            layout = msg.full_name if msg is not None else info.body_type
            where = str(info.routed.location)
        else:
            layout, where = info.body_type, snap.location
        snap.commands[name] = CommandSnap(name, info.value, layout, where)
    raw_requests = root.get("interactions", {}).get("requests", [])
    for i, r in enumerate(spec.requests):
        path: list[str | int] = ["interactions", "requests", i]
        if i < len(raw_requests) and raw_requests[i].get("request") != r.request:
            path = ["interactions", "requests"]
        snap.requests[r.request] = RequestSnap(
            r.request, r.response, tuple(sorted(r.errors)), tuple(r.correlate), r.method,
            tuple(r.frame_fields), _where(root, spec.path, path),
            answered=r.when.text if r.when is not None else "",
            choices=tuple(f"{c} when {w.text}" for c, w in r.choices), until=tuple(r.until),
            allocate=r.allocate)
    snap.allocator = (spec.allocate, spec.allocate_start, spec.allocate_skip_zero)
    for kind, names in (("one_way", spec.one_way), ("server_push", spec.server_push)):
        for name in names:
            snap.directions[name] = ",".join(
                x for x in (snap.directions.get(name), kind) if x)
    for m in spec.machines:
        raw = root.get("machines", {}).get(m.name, {})
        states = {s: _where(root, spec.path, ["machines", m.name, "states", i])
                  for i, s in enumerate(raw.get("states", m.states))}
        transitions: dict[str, str] = {}
        for t in m.transitions:
            on = (f"send {t.send}" if t.send else f"receive {t.receive}" if t.receive
                  else f"event {t.event}")
            guard = f" if {t.when.text}" if t.when else ""
            for source in t.sources:
                transitions[f"{source} -> {t.target} on {on}{guard}"] = str(t.location)
        snap.machines[m.name] = MachineSnap(
            m.name, _where(root, spec.path, ["machines", m.name], key=True), m.initial, m.key,
            states, transitions)
    return snap
