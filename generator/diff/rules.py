"""The rules a change is named by, and how each one is classified.

Every rule has a stable id (as buf's rules do) so that a project can ignore it. A rule gives
its default classification; a comparison may refine it for one change (a type change within
one of protobuf's wire-compatible groups is wire-compatible, outside them it is not), so the
classification travels with the ``Change``.

*wire*: a peer built from the old specs misreads, or rejects, what a peer built from the new
ones sends, or the reverse. *source*: code written against the old generated API stops
compiling or type-checking. A change breaking neither is *additive* when it only adds
something, else *compatible*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BREAKING, COMPATIBLE = "breaking", "compatible"
SEVERITIES = ("wire-breaking", "source-breaking", "compatible", "additive")


@dataclass(frozen=True)
class Rule:
    id: str
    wire: str
    source: str
    additive: bool
    summary: str


@dataclass(frozen=True)
class Change:
    """One difference between the old and the new model."""

    rule: str
    element: str  # the protocol element, e.g. "pulsar.proto.CommandNewTxn.txn_ttl_millis"
    message: str
    wire: str
    source: str
    additive: bool
    protocol: str
    old: str | None = None  # file:line:column in the old version (None: not there)
    new: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def severity(self) -> str:
        if self.wire == BREAKING:
            return "wire-breaking"
        if self.source == BREAKING:
            return "source-breaking"
        return "additive" if self.additive else "compatible"

    def as_json(self) -> dict[str, object]:
        return {"rule": self.rule, "protocol": self.protocol, "element": self.element,
                "message": self.message, "severity": self.severity, "wire": self.wire,
                "source": self.source, "old": self.old, "new": self.new,
                "notes": list(self.notes)}


def _rules(*rows: tuple[str, str, str, bool, str]) -> dict[str, Rule]:
    return {r[0]: Rule(*r) for r in rows}


B, C = BREAKING, COMPATIBLE
RULES = _rules(
    ("PROTOCOL_ADDED", C, C, True, "a protocol was added"),
    ("PROTOCOL_NO_DELETE", B, B, False, "a protocol was removed"),
    # -- protobuf ------------------------------------------------------------------------------
    ("MESSAGE_ADDED", C, C, True, "a message was added"),
    ("MESSAGE_NO_DELETE", C, B, False,
     "a message was removed (fields that held it are reported on their own)"),
    ("MESSAGE_MOVED_FILE", C, B, False, "a message moved to another .proto file (module)"),
    ("FIELD_ADDED", C, C, True, "an optional or repeated field was added"),
    ("FIELD_REQUIRED_ADDED", B, B, False,
     "a required field was added: old peers never send it"),
    ("FIELD_NO_DELETE", C, B, False, "a field was removed"),
    ("FIELD_REQUIRED_NO_DELETE", B, B, False,
     "a required field was removed: old peers reject messages without it"),
    ("FIELD_NUMBER_CHANGED", B, C, False, "a field keeps its name under another number"),
    ("FIELD_NUMBER_REUSED", B, C, False,
     "a field takes a number that an earlier field (now gone) used with another name or type"),
    ("FIELD_RESERVED_REUSED", B, C, False,
     "a field takes a number or name the old version reserved"),
    ("FIELD_RENAMED", C, B, False, "a field keeps its number under another name"),
    ("FIELD_TYPE_CHANGED", B, B, False, "a field's type changed"),
    ("FIELD_LABEL_CHANGED", B, B, False,
     "a field changed between optional, required and repeated"),
    ("FIELD_PACKED_CHANGED", C, C, False,
     "a repeated field's packing changed (decoders accept both forms)"),
    ("FIELD_DEFAULT_CHANGED", B, C, False,
     "a field's default changed: an absent value reads differently"),
    ("FIELD_ONEOF_CHANGED", B, B, False, "a field moved into, out of or between oneofs"),
    ("RESERVED_NO_DELETE", C, C, False, "a reserved number or name was released"),
    ("ENUM_ADDED", C, C, True, "an enum was added"),
    ("ENUM_NO_DELETE", C, B, False,
     "an enum was removed (fields that held it are reported on their own)"),
    ("ENUM_VALUE_ADDED", C, C, True,
     "an enum value was added (old peers read it as unknown)"),
    ("ENUM_VALUE_NO_DELETE", B, B, False,
     "an enum value was removed: old peers still send it"),
    ("ENUM_VALUE_NUMBER_CHANGED", B, C, False, "an enum value keeps its name under another number"),
    ("ENUM_VALUE_NUMBER_REUSED", B, C, False,
     "an enum value takes a number an earlier value (now gone) had under another name"),
    ("ENUM_VALUE_RESERVED_REUSED", B, C, False,
     "an enum value takes a number or name the old version reserved"),
    ("ENUM_VALUE_RENAMED", C, B, False, "an enum value keeps its number under another name"),
    # -- frame specs ---------------------------------------------------------------------------
    ("FRAME_STRUCT_ADDED", C, C, True, "a struct was added"),
    ("FRAME_STRUCT_NO_DELETE", C, B, False,
     "a struct was removed (fields that held it are reported on their own)"),
    ("FRAME_FIELD_ADDED", B, C, False, "a field was added to a layout"),
    ("FRAME_FIELD_NO_DELETE", B, B, False, "a field was removed from a layout"),
    ("FRAME_FIELD_REORDERED", B, C, False, "the fields of a layout are in another order"),
    ("FRAME_FIELD_WIDTH_CHANGED", B, C, False, "an integer field's width changed"),
    ("FRAME_FIELD_BYTE_ORDER_CHANGED", B, C, False, "an integer field's byte order changed"),
    ("FRAME_FIELD_TYPE_CHANGED", B, B, False,
     "a field's kind, signedness, encoding or held struct/message changed"),
    ("FRAME_CONST_CHANGED", B, C, False, "a constant (a magic number) changed"),
    ("FRAME_SIZE_CHANGED", B, C, False,
     "what bounds a field's bytes (size, size_of, prefix, length, terminator) changed"),
    ("FRAME_COUNT_CHANGED", B, C, False,
     "what counts an array's elements (or the terminator ending it) changed"),
    ("FRAME_CHECKSUM_CHANGED", B, C, False, "a checksum's algorithm or coverage changed"),
    ("FRAME_CONDITION_CHANGED", B, C, False, "when a field is present changed"),
    ("FRAME_VALUE_CHANGED", B, C, False, "how a computed or derived field is worked out changed"),
    ("FRAME_DEFAULT_CHANGED", B, C, False, "what an absent field reads as changed"),
    ("FRAME_COMPRESSION_CHANGED", B, C, False, "a field's compression changed"),
    ("FRAME_ARGS_CHANGED", B, C, False, "the values passed to a held struct's params changed"),
    ("FRAME_TRAILING_CHANGED", B, C, False, "what trailing bytes after a struct mean changed"),
    ("FRAME_PARAMS_CHANGED", C, B, False, "a struct's params changed"),
    ("FRAME_MAX_SIZE_CHANGED", B, C, False, "the largest frame a peer accepts changed"),
    ("FRAME_ALLOWED_VALUES_CHANGED", B, C, False,
     "the values an integer or the element counts a list allows (min, max, nonzero, "
     "min_items, max_items) changed"),
    ("DISPATCH_CODE_ADDED", C, C, True, "a command code was added"),
    ("DISPATCH_CODE_NO_DELETE", B, B, False, "a command code was removed"),
    ("DISPATCH_CODE_REASSIGNED", B, C, False, "a command keeps its name under another code"),
    ("DISPATCH_COMMAND_RENAMED", C, B, False, "a command code keeps its value under another name"),
    ("DISPATCH_LAYOUT_CHANGED", B, B, False, "the layout a command code selects changed"),
    ("INTERACTION_ADDED", C, C, True, "a request/answer interaction was added"),
    ("INTERACTION_NO_DELETE", C, B, False,
     "a request/answer interaction was removed (its method is gone)"),
    ("INTERACTION_RESPONSE_CHANGED", B, B, False, "a request is answered by another command"),
    ("INTERACTION_ERRORS_REMOVED", B, C, False,
     "a request's error answers lost one: old peers still send it"),
    ("INTERACTION_ERRORS_ADDED", C, C, True, "a request's error answers gained one"),
    ("INTERACTION_CORRELATION_CHANGED", B, C, False,
     "the fields matching answers to requests changed"),
    ("INTERACTION_METHOD_RENAMED", C, B, False, "a request's generated method was renamed"),
    ("INTERACTION_ARGS_CHANGED", C, B, False, "a request method's frame arguments changed"),
    ("INTERACTION_ANSWERED_CHANGED", B, B, False,
     "when a request is answered (its when:) changed: one side waits for what the other "
     "never sends, and the method's return type changes"),
    ("INTERACTION_CHOICES_CHANGED", B, B, False,
     "the answers a request's fields choose between changed"),
    ("INTERACTION_STREAM_CHANGED", B, B, False,
     "a request became, or stopped being, answered by a stream (until:)"),
    ("INTERACTION_ALLOCATE_CHANGED", C, B, False,
     "a request's id became, or stopped being, the caller's (allocate: false)"),
    ("INTERACTION_ALLOCATOR_CHANGED", C, C, False,
     "the allocated field, its first id or skipping 0 changed (another field breaks source)"),
    ("INTERACTION_DIRECTION_CHANGED", B, C, False,
     "a command became, or stopped being, one-way or server-pushed"),
    ("MACHINE_ADDED", C, C, True, "a state machine was added"),
    ("MACHINE_NO_DELETE", C, B, False, "a state machine was removed"),
    ("MACHINE_INITIAL_CHANGED", B, C, False, "a machine starts in another state"),
    ("MACHINE_KEY_CHANGED", B, C, False, "a machine is keyed by another field"),
    ("MACHINE_STATE_ADDED", C, C, True, "a machine state was added"),
    ("MACHINE_STATE_NO_DELETE", B, B, False, "a machine state was removed"),
    ("MACHINE_TRANSITION_ADDED", C, C, True,
     "a transition was added (the new peer accepts more)"),
    ("MACHINE_TRANSITION_NO_DELETE", B, C, False,
     "a transition was removed: what old peers do is now rejected"),
    # -- the lock file -------------------------------------------------------------------------
    ("FRAME_LAYOUT_CHANGED_SINCE_LOCK", B, C, False,
     "a struct's layout differs from the fingerprint in the lock file"),
)


def change(rule: str, protocol: str, element: str, message: str, *, old: str | None = None,
           new: str | None = None, wire: str | None = None, source: str | None = None,
           notes: tuple[str, ...] = ()) -> Change:
    """A ``Change`` of ``rule``, classified as the rule says unless ``wire``/``source``
    refine it."""
    r = RULES[rule]
    w, s = wire or r.wire, source or r.source
    additive = r.additive and w == COMPATIBLE and s == COMPATIBLE
    return Change(rule=rule, element=element, message=message, wire=w, source=s,
                  additive=additive, protocol=protocol, old=old, new=new, notes=notes)
