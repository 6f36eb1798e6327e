"""Compares the frame specs of two versions of a protocol (see ``rules`` for the ids).

Frame layouts are positional: unlike a protobuf field, a field added in the middle of a
struct moves every byte after it, so most layout changes are wire-breaking. The exceptions
are fields without bytes of their own (``derive``), fields appended at the end that are only
read when bytes remain, and appending to a struct whose trailing bytes are ignored.
"""

from __future__ import annotations

from protoframe.generator.diff.frame_snapshot import (
    GROUPS,
    FrameFieldSnap,
    FrameSnapshot,
    MachineSnap,
    RequestSnap,
    StructSnap,
)
from protoframe.generator.diff.rules import BREAKING, COMPATIBLE, Change, change


class FrameComparer:
    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.changes: list[Change] = []

    def add(self, rule: str, element: str, message: str, old: str | None = None,
            new: str | None = None, *, wire: str | None = None,
            source: str | None = None) -> None:
        self.changes.append(change(rule, self.protocol, element, message, old=old, new=new,
                                   wire=wire, source=source))

    def compare(self, old: FrameSnapshot, new: FrameSnapshot) -> list[Change]:
        if old.max_frame_size != new.max_frame_size:
            self.add("FRAME_MAX_SIZE_CHANGED", f"{self.protocol}.max_frame_size",
                     f"max_frame_size changed from {old.max_frame_size} to "
                     f"{new.max_frame_size}", old.location, new.location)
        for name, s in old.structs.items():
            if name not in new.structs:
                self.add("FRAME_STRUCT_NO_DELETE", name, f"struct {name} removed", s.location)
        for name, s in new.structs.items():
            o = old.structs.get(name)
            if o is None:
                self.add("FRAME_STRUCT_ADDED", name, f"struct {name} added", new=s.location)
            else:
                self._struct(o, s)
        self._commands(old, new)
        self._requests(old, new)
        self._machines(old, new)
        return self.changes

    # -- structs ---------------------------------------------------------------------------
    def _struct(self, old: StructSnap, new: StructSnap) -> None:
        name = new.name
        old_fields = {f.name: f for f in old.fields}
        new_fields = {f.name: f for f in new.fields}
        for f in old.fields:
            if f.name not in new_fields:
                self.add("FRAME_FIELD_NO_DELETE", f"{name}.{f.name}",
                         f"field {name}.{f.name} removed", f.location,
                         wire=BREAKING if f.wire else COMPATIBLE,
                         source=BREAKING if f.data else COMPATIBLE)
        for i, f in enumerate(new.fields):
            if f.name not in old_fields:
                self._added(old, new, i, f)
        common_old = [f.name for f in old.fields if f.name in new_fields and f.wire]
        common_new = [f.name for f in new.fields if f.name in old_fields and f.wire]
        if common_old != common_new:
            self.add("FRAME_FIELD_REORDERED", name,
                     f"struct {name}: fields reordered from {', '.join(common_old)} to "
                     f"{', '.join(common_new)}", old.location, new.location)
        for f in new.fields:
            o = old_fields.get(f.name)
            if o is not None:
                self._field(name, o, f)
        if old.trailing != new.trailing:
            self.add("FRAME_TRAILING_CHANGED", name,
                     f"struct {name}: trailing bytes {old.trailing} -> {new.trailing}",
                     old.location, new.location,
                     wire=COMPATIBLE if new.trailing == "ignore" else BREAKING)
        if old.params != new.params:
            self.add("FRAME_PARAMS_CHANGED", name,
                     f"struct {name}: params ({', '.join(old.params)}) -> "
                     f"({', '.join(new.params)})", old.location, new.location)

    def _added(self, old: StructSnap, new: StructSnap, index: int, f: FrameFieldSnap) -> None:
        at_end = all(g.name not in {x.name for x in old.fields} for g in new.fields[index:])
        # Old peers never see bytes of a field that has none, or of one appended at the end
        # that is read only when bytes remain (and new peers read old bytes without it);
        # a struct ignoring its trailing bytes lets old peers skip an appended field.
        readable = not f.wire or (at_end and (f.attrs.get("when_remaining") == "True"
                                              or old.trailing == "ignore" and f.optional))
        self.add("FRAME_FIELD_ADDED", f"{new.name}.{f.name}",
                 f"field {new.name}.{f.name} ({f.attrs['kind']}) added", old.location,
                 f.location, wire=COMPATIBLE if readable else BREAKING,
                 source=BREAKING if f.data and not f.optional else COMPATIBLE)

    def _field(self, struct: str, o: FrameFieldSnap, n: FrameFieldSnap) -> None:
        element = f"{struct}.{n.name}"
        by_rule: dict[str, list[str]] = {}
        for key in sorted(set(o.attrs) | set(n.attrs)):
            a, b = o.attrs.get(key), n.attrs.get(key)
            if a != b:
                by_rule.setdefault(GROUPS[key], []).append(f"{key}: {a or '-'} -> {b or '-'}")
        for rule, diffs in sorted(by_rule.items()):
            source = None
            if rule == "FRAME_FIELD_TYPE_CHANGED" and set(
                    k for k in o.attrs if o.attrs.get(k) != n.attrs.get(k)) <= {"signed"}:
                source = COMPATIBLE  # int either way
            if rule == "FRAME_CONDITION_CHANGED" and n.data and o.optional != n.optional:
                source = BREAKING  # the attribute becomes (or stops being) Optional
            self.add(rule, element, f"field {element}: {'; '.join(diffs)}", o.location,
                     n.location, source=source)
        if o.data != n.data and not by_rule:
            self.add("FRAME_VALUE_CHANGED", element,
                     f"field {element} is {'now' if n.data else 'no longer'} a data field",
                     o.location, n.location, source=BREAKING)

    # -- dispatch --------------------------------------------------------------------------
    def _commands(self, old: FrameSnapshot, new: FrameSnapshot) -> None:
        old_by_value = {c.value: c for c in old.commands.values()}
        new_names = set(new.commands)
        renamed: set[str] = set()
        for name, n in new.commands.items():
            o = old.commands.get(name)
            if o is None:
                prev = old_by_value.get(n.value)
                if prev is not None and prev.name not in new_names:
                    renamed.add(prev.name)
                    self.add("DISPATCH_COMMAND_RENAMED", name,
                             f"command code {n.value} renamed from {prev.name} to {name}",
                             prev.location, n.location)
                    o = prev
                else:
                    self.add("DISPATCH_CODE_ADDED", name,
                             f"command {name} ({n.value}) added", new=n.location)
                    continue
            elif o.value != n.value:
                self.add("DISPATCH_CODE_REASSIGNED", name,
                         f"command {name} code changed from {o.value} to {n.value}",
                         o.location, n.location)
            if o.layout != n.layout:
                self.add("DISPATCH_LAYOUT_CHANGED", name,
                         f"command {name} selects {n.layout} instead of {o.layout}",
                         o.location, n.location)
        for name, o in old.commands.items():
            if name not in new_names and name not in renamed:
                self.add("DISPATCH_CODE_NO_DELETE", name, f"command {name} ({o.value}) removed",
                         o.location)

    # -- interactions ----------------------------------------------------------------------
    def _requests(self, old: FrameSnapshot, new: FrameSnapshot) -> None:
        for name, o in old.requests.items():
            if name not in new.requests:
                self.add("INTERACTION_NO_DELETE", name,
                         f"request {name} -> {o.response} removed", o.location)
        for name, n in new.requests.items():
            r = old.requests.get(name)
            if r is None:
                self.add("INTERACTION_ADDED", name, f"request {name} -> {n.response} added",
                         new=n.location)
            else:
                self._request(r, n)
        if old.allocator != new.allocator:
            (field_a, start_a, skip_a), (field_b, start_b, skip_b) = old.allocator, new.allocator
            # Ids are the requester's to choose and the answer only echoes them, so the wire
            # holds; another field is another parameter of every request method.
            self.add("INTERACTION_ALLOCATOR_CHANGED", f"{self.protocol}.allocate",
                     f"requests number {field_b or 'nothing'} from {start_b}"
                     f"{' skipping 0' if skip_b else ''} instead of {field_a or 'nothing'} "
                     f"from {start_a}{' skipping 0' if skip_a else ''}",
                     old.location, new.location,
                     source=BREAKING if field_a != field_b else None)
        for name in sorted(set(old.directions) | set(new.directions)):
            a, b = old.directions.get(name, ""), new.directions.get(name, "")
            if a != b:
                self.add("INTERACTION_DIRECTION_CHANGED", name,
                         f"command {name}: {a or 'no direction'} -> {b or 'no direction'}",
                         old.location, new.location)

    def _request(self, o: RequestSnap, n: RequestSnap) -> None:
        name, where = n.request, (o.location, n.location)
        if o.response != n.response:
            self.add("INTERACTION_RESPONSE_CHANGED", name,
                     f"request {name} answered by {n.response} instead of {o.response}", *where)
        gone = sorted(set(o.errors) - set(n.errors))
        if gone:
            self.add("INTERACTION_ERRORS_REMOVED", name,
                     f"request {name} no longer answered by {', '.join(gone)}", *where)
        added = sorted(set(n.errors) - set(o.errors))
        if added:
            self.add("INTERACTION_ERRORS_ADDED", name,
                     f"request {name} may be answered by {', '.join(added)}", *where)
        if o.correlate != n.correlate:
            self.add("INTERACTION_CORRELATION_CHANGED", name,
                     f"request {name} correlated by ({', '.join(n.correlate)}) instead of "
                     f"({', '.join(o.correlate)})", *where)
        if o.method != n.method:
            self.add("INTERACTION_METHOD_RENAMED", name,
                     f"request {name}: method {o.method}() renamed to {n.method}()", *where)
        if o.frame_fields != n.frame_fields:
            self.add("INTERACTION_ARGS_CHANGED", name,
                     f"request {name}: frame arguments ({', '.join(o.frame_fields)}) -> "
                     f"({', '.join(n.frame_fields)})", *where)
        if o.answered != n.answered:
            self.add("INTERACTION_ANSWERED_CHANGED", name,
                     f"request {name} answered {_when(n.answered)} instead of "
                     f"{_when(o.answered)}", *where)
        if o.choices != n.choices:
            self.add("INTERACTION_CHOICES_CHANGED", name,
                     f"request {name} answered by {_listed(n.choices)} instead of "
                     f"{_listed(o.choices)}", *where)
        if o.until != n.until:
            self.add("INTERACTION_STREAM_CHANGED", name,
                     f"request {name} answered {_stream(n.until)} instead of "
                     f"{_stream(o.until)}", *where)
        if o.allocate != n.allocate:
            ids = {True: "allocated", False: "the caller's"}
            self.add("INTERACTION_ALLOCATE_CHANGED", name,
                     f"request {name}: its id is {ids[n.allocate]} instead of "
                     f"{ids[o.allocate]}", *where)

    # -- machines --------------------------------------------------------------------------
    def _machines(self, old: FrameSnapshot, new: FrameSnapshot) -> None:
        for name, o in old.machines.items():
            if name not in new.machines:
                self.add("MACHINE_NO_DELETE", name, f"machine {name} removed", o.location)
        for name, n in new.machines.items():
            m = old.machines.get(name)
            if m is None:
                self.add("MACHINE_ADDED", name, f"machine {name} added", new=n.location)
            else:
                self._machine(m, n)

    def _machine(self, o: MachineSnap, n: MachineSnap) -> None:
        name, where = n.name, (o.location, n.location)
        if o.initial != n.initial:
            self.add("MACHINE_INITIAL_CHANGED", name,
                     f"machine {name} starts in {n.initial} instead of {o.initial}", *where)
        if o.key != n.key:
            self.add("MACHINE_KEY_CHANGED", name,
                     f"machine {name} keyed by {n.key} instead of {o.key}", *where)
        for state, loc in o.states.items():
            if state not in n.states:
                self.add("MACHINE_STATE_NO_DELETE", f"{name}.{state}",
                         f"machine {name}: state {state} removed", loc)
        for state, loc in n.states.items():
            if state not in o.states:
                self.add("MACHINE_STATE_ADDED", f"{name}.{state}",
                         f"machine {name}: state {state} added", new=loc)
        for t, loc in o.transitions.items():
            if t not in n.transitions:
                self.add("MACHINE_TRANSITION_NO_DELETE", f"{name}: {t}",
                         f"machine {name}: transition {t} removed", loc)
        for t, loc in n.transitions.items():
            if t not in o.transitions:
                self.add("MACHINE_TRANSITION_ADDED", f"{name}: {t}",
                         f"machine {name}: transition {t} added", new=loc)


def _when(text: str) -> str:
    return f"when {text}" if text else "always"


def _listed(choices: tuple[str, ...]) -> str:
    return "; ".join(choices) if choices else "its one response"


def _stream(until: tuple[str, ...]) -> str:
    return f"by a stream until {', '.join(until)}" if until else "by one message"
