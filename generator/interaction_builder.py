"""Interactions (requests, one-way and server-push commands) and state machines."""

from __future__ import annotations

import keyword
import re

from protoframe.generator.build_context import PathT
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    ProtoField,
    StructDef,
    StructField,
    SwitchField,
)
from protoframe.generator.route_builder import RouteBuilder
from protoframe.generator.spec_ir import CommandInfo, Machine, Request, Transition
from protoframe.generator.spec_yaml import LocDict


class InteractionBuilder(RouteBuilder):
    def requests(self, raw: LocDict, commands: dict[str, CommandInfo],
                 frame: StructDef) -> list[Request]:
        frame_data = {f.name for f in frame.data_fields
                      if not isinstance(f, SwitchField | ProtoField | StructField | BlocksField
                                        | ArrayField)}
        frame_fields_all = {f.name for f in frame.data_fields}
        out: list[Request] = []
        named: list[PathT] = []  # where each of out's method names is set (or its item)
        for i, item in enumerate(raw.get("requests", [])):
            path: PathT = ["interactions", "requests", i]
            raw_response = item["response"]
            chosen = isinstance(raw_response, list)
            responses = [c["command"] for c in raw_response] if chosen else [raw_response]
            names = [item["request"], *responses, *item.get("errors", [])]
            keys: list[str | tuple[str | int, ...]] = ["request"]
            keys += [("response", j, "command") for j in range(len(responses))] if chosen \
                else ["response"]
            keys += [("errors", j) for j in range(len(names) - len(keys))]
            raw_until = item.get("until", [])
            until = [raw_until] if isinstance(raw_until, str) else list(raw_until)
            names += until
            keys += [("until",)] if isinstance(raw_until, str) else \
                [("until", j) for j in range(len(until))]
            if until and chosen:
                self.error("until: a streamed answer cannot also be chosen by a response list",
                           [*path, "until"])
            ok = True
            for name, key in zip(names, keys, strict=True):
                if name not in commands:
                    kpath = [*path, *key] if isinstance(key, tuple) else [*path, key]
                    if name not in self.unresolved:
                        self.error(f"unknown command {name!r}", kpath)
                    ok = False
            if not ok:
                continue
            correlate = list(item.get("correlate", []))
            on_frame: list[str] = []
            for j, cname in enumerate(correlate):
                if all(cname in _fields_of(commands[n], k == 0)
                       for k, n in enumerate(names)):
                    continue
                if cname in frame_data:
                    on_frame.append(cname)
                    continue
                bad = next(n for k, n in enumerate(names)
                           if cname not in _fields_of(commands[n], k == 0))
                self.error(f"correlation field {cname!r} is not a field of {bad} nor a data "
                           f"field of {frame.name}", [*path, "correlate", j])
            method = item.get("method") or _method_name(commands[item["request"]])
            frame_fields = list(item.get("frame_fields", []))
            for j, fname in enumerate(frame_fields):
                if fname not in frame_fields_all:
                    self.error(f"frame_fields: {fname!r} is not a data field of the frame",
                               [*path, "frame_fields", j])
            request = commands[item["request"]]
            when = self._request_expr(item, request, frame_data, [*path, "when"])
            choices: list[tuple[str, Expr]] = []
            for j, c in enumerate(raw_response if chosen else []):
                guard = self._request_expr(c, request, frame_data, [*path, "response", j, "when"])
                if guard is not None:
                    choices.append((c["command"], guard))
            named.append([*path, "method"] if "method" in item else path)
            out.append(Request(item["request"], responses[0], list(item.get("errors", [])),
                               correlate, method, on_frame, frame_fields, when,
                               item.get("allocate", True), choices, until))
        methods = [r.method for r in out]
        for i, r in enumerate(out):
            if methods.count(r.method) > 1 and methods.index(r.method) != i:
                self.error(f"two requests generate the method {r.method!r}; set method:",
                           ["interactions", "requests", i])
        # A streamed request's iterator method (``<method>_iter``) is taken too.
        iters = {r.iter_method: r for r in out if r.iter_method is not None}
        for r, where in zip(out, named, strict=True):
            if (streamed := iters.get(r.method)) is not None:
                self.error(f"the method {r.method!r} is the iterator method of "
                           f"{streamed.request}'s streamed answer; set method: to another "
                           "name", where)
        return out

    def check_allocate_opt_outs(self, raw: LocDict, allocate: str | None) -> None:
        """``allocate: false`` on a request opts out of a numbering the spec must declare."""
        for i, item in enumerate(raw.get("requests", [])):
            if "allocate" in item and allocate is None:
                self.error("allocate: false, but the interactions allocate no field",
                           ["interactions", "requests", i, "allocate"])

    def _request_expr(self, item: LocDict, request: CommandInfo, frame_data: set[str],
                      path: PathT) -> Expr | None:
        """A ``when:`` of a request or of one of its answers: an expression over the fields
        the request itself carries (``path`` is the ``when`` key's)."""
        if "when" not in item:
            return None
        when = self.expr(item["when"], path)
        if when is None:
            return None
        fields = _fields_of(request, True) | frame_data
        for name in when.names:
            if name not in fields:
                self.error(f"when: {name!r} is not a field of {request.name} nor a data field "
                           "of the frame", path)
        return when

    def command_list(self, raw: LocDict, key: str, commands: dict[str, CommandInfo]) \
            -> list[str]:
        out = []
        requests = {r["request"] for r in raw.get("requests", [])}
        for i, name in enumerate(raw.get(key, [])):
            if name not in commands:
                if name not in self.unresolved:
                    self.error(f"unknown command {name!r}", ["interactions", key, i])
            elif key == "one_way" and name in requests:
                # Its pending entries would wait for an answer the peer never sends.
                self.error(f"{name} is a request, so it cannot be one-way too; give the request "
                           "when: to say when it is answered", ["interactions", key, i])
            else:
                out.append(name)
        return out

    def machine(self, name: str, raw: LocDict, commands: dict[str, CommandInfo]) -> Machine:
        path: PathT = ["machines", name]
        states = list(raw["states"])
        members: dict[str, str] = {}
        for i, state in enumerate(states):
            # States become enum members in upper case, so `idle` and `Idle` collide too.
            other = members.get(state.upper())
            if other is not None:
                what = f"duplicate state {state!r}" if other == state else \
                    f"state {state!r} clashes with {other!r} (both become {state.upper()})"
                self.error(what, [*path, "states", i])
            members.setdefault(state.upper(), state)
        if raw["initial"] not in states:
            self.error(f"initial state {raw['initial']!r} is not in states", [*path, "initial"])
        key = raw.get("key")
        transitions: list[Transition] = []
        for i, t in enumerate(raw["transitions"]):
            tpath = [*path, "transitions", i]
            sources = [t["from"]] if isinstance(t["from"], str) else list(t["from"])
            for j, s in enumerate(sources):
                if s not in states:
                    spath = [*tpath, "from"] if isinstance(t["from"], str) else \
                        [*tpath, "from", j]
                    self.error(f"unknown state {s!r}", spath)
            if t["to"] not in states:
                self.error(f"unknown state {t['to']!r}", [*tpath, "to"])
            for direction in ("send", "receive"):
                if direction in t and t[direction] not in commands and \
                        t[direction] not in self.unresolved:
                    self.error(f"unknown command {t[direction]!r}", [*tpath, direction])
            when = self.expr(t["when"], [*tpath, "when"]) if "when" in t else None
            transitions.append(Transition(sources, t["to"], t.get("send"), t.get("receive"),
                                          t.get("event"), when, self.loc(tpath)))
        if key is not None:
            creating = [t.send for t in transitions if t.send and raw["initial"] in t.sources]
            for cmd in creating:
                if cmd in commands and key not in commands[cmd].body_fields:
                    self.error(f"key {key!r} is not a field of {cmd}, which creates a "
                               f"{name}", [*path, "key"])
        return Machine(name, raw.get("doc", ""), key, raw["initial"], states, transitions)


def _fields_of(info: CommandInfo, sent: bool) -> set[str]:
    """Data fields of a command's body in one direction (to the server when ``sent``)."""
    if info.case is not None:
        struct = info.layout(sent) or info.layouts[0]
        return {f.name for f in struct.data_fields}
    return set(info.body_fields)


def _method_name(info: CommandInfo) -> str:
    if info.routed is not None:
        base = info.name.lower()
    elif info.proto is not None:
        base = info.proto.field.proto_name
    else:
        base = info.name
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower()
    return s + "_" if keyword.iskeyword(s) else s

