"""Builds the frame IR from a YAML spec: schema validation, then name resolution and checks.

Every problem is collected as a ``SpecError`` pointing at the offending key or value, so one
run reports all of them; nothing is generated while any remain.
"""

from __future__ import annotations

import json
import keyword
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from protoframe.generator.errors import SpecError, SpecErrors
from protoframe.generator.expr import Expr, ExprError, parse
from protoframe.generator.frame_checks import check_frame_spec
from protoframe.generator.frame_ir import (
    INT_TYPES,
    Assignment,
    BuildLeaf,
    BuildNode,
    Case,
    Checksum,
    CommandInfo,
    Compression,
    FrameField,
    FramePath,
    FrameSpec,
    Machine,
    Param,
    PathStep,
    ProtoCommand,
    Request,
    Route,
    RoutedCommand,
    StructDef,
    Transition,
)
from protoframe.generator.ir import Field, Label, MessageType, Presence, Protocol, SourceLocation
from protoframe.generator.spec_yaml import LocDict, LocList, load_spec, locate

PathT = list[str | int]


@cache
def spec_schema() -> dict[str, Any]:
    """The JSON Schema every spec is validated against (shipped with the generator)."""
    text = resources.files("protoframe.generator").joinpath("spec_schema.json").read_text(
        encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def load_frame_spec(path: Path, display: str, protocol: Protocol) -> FrameSpec:
    """Load, validate and resolve one spec file against the protocol's protobuf IR."""
    root = load_spec(path, display)
    errors = _schema_errors(root, display)
    if errors:
        raise SpecErrors(errors)
    builder = _Builder(root, display, protocol)
    spec = builder.build()
    if builder.errors:
        raise SpecErrors(builder.errors)
    errors = check_frame_spec(spec)
    if errors:
        raise SpecErrors(errors)
    return spec


def _schema_errors(root: LocDict, display: str) -> list[SpecError]:
    validator = jsonschema.Draft202012Validator(spec_schema())
    out: list[SpecError] = []
    for error in sorted(validator.iter_errors(root), key=lambda e: list(map(str, e.path))):
        path: PathT = list(error.absolute_path)
        message = _schema_message(error)
        if error.validator == "additionalProperties":
            extra = re.findall(r"'([^']+)' was unexpected", error.message)
            node = _node_at(root, path)
            if extra and isinstance(node, LocDict):
                for key in extra:
                    mark = node.key_marks.get(key, node.mark)
                    out.append(SpecError(f"unknown key {key!r}", display, mark.line,
                                         mark.column))
                continue
        mark = locate(root, path)
        out.append(SpecError(message, display, mark.line, mark.column))
    return out


def _schema_message(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "spec"
    if error.validator == "enum":
        values: Any = error.validator_value
        allowed = ", ".join(str(v) for v in values)
        return f"{where}: {error.instance!r} is not one of: {allowed}"
    if error.validator == "pattern":
        return f"{where}: {error.instance!r} is not a valid identifier"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "oneOf" and isinstance(error.instance, dict) and \
            {"send", "receive", "event"} & set(error.instance):
        return f"{where}: a transition needs exactly one of send, receive or event"
    return f"{where}: {error.message}"


def _node_at(root: LocDict, path: PathT) -> Any:
    node: Any = root
    for step in path:
        node = node[step]
    return node


class _Builder:
    def __init__(self, root: LocDict, display: str, protocol: Protocol) -> None:
        self.root = root
        self.display = display
        self.protocol = protocol
        self.errors: list[SpecError] = []
        self.byte_order: str = root.get("byte_order", "big")
        self.structs: dict[str, StructDef] = {}
        self.missing_reported: set[tuple[int, str]] = set()
        self.unresolved: set[str] = set()  # commands of routes that did not resolve
        self.messages: dict[str, MessageType] = {}
        self.proto_modules: dict[str, str] = {}
        for proto in protocol.files:
            for msg in proto.all_messages():
                self.proto_modules[msg.full_name] = proto.module
                self.messages.setdefault(msg.full_name, msg)
                self.messages.setdefault(msg.py_path, msg)
            for enum in proto.all_enums():
                self.proto_modules[enum.full_name] = proto.module

    # -- helpers -----------------------------------------------------------------------------
    def loc(self, path: PathT, key: bool = False) -> SourceLocation:
        mark = locate(self.root, path, key)
        return SourceLocation(self.display, mark.line, mark.column)

    def error(self, message: str, path: PathT, key: bool = False) -> None:
        loc = self.loc(path, key)
        self.errors.append(SpecError(message, self.display, loc.line, loc.column))

    def expr(self, text: Any, path: PathT) -> Expr | None:
        try:
            return parse(text)
        except ExprError as exc:
            self.error(str(exc), path)
            return None

    # -- top level ----------------------------------------------------------------------------
    def build(self) -> FrameSpec:
        root = self.root
        known = {Path(f.path).name for f in self.protocol.files}
        for i, name in enumerate(root.get("proto", [])):
            if name not in known:
                self.error(f"proto file {name!r} is not in the protocol directory", ["proto", i])
        raw_structs: LocDict = root.get("structs", LocDict())
        for name, body in raw_structs.items():
            self.structs[name] = StructDef(name, body.get("doc", ""), [],
                                           self.loc(["structs", name], key=True),
                                           params=self.params(body, ["structs", name]),
                                           trailing=body.get("trailing", "error"))
        frame_raw = root["frame"]
        frame_name = frame_raw["name"]
        if frame_name in self.structs:
            self.error(f"frame name {frame_name!r} is also a struct name", ["frame", "name"])
        if "params" in frame_raw:
            self.error("the frame cannot take params (nothing holds it)", ["frame", "params"],
                       key=True)
        frame = StructDef(frame_name, frame_raw.get("doc", ""), [], self.loc(["frame"]),
                          is_frame=True, trailing=frame_raw.get("trailing", "error"))
        self.structs[frame_name] = frame
        for name, body in raw_structs.items():
            self.structs[name].fields = self.fields(body["fields"], ["structs", name, "fields"])
        frame.fields = self.fields(frame_raw["fields"], ["frame", "fields"])
        for struct in self.structs.values():
            self.resolve_struct(struct, struct.is_frame)
        for struct in self.structs.values():
            self.check_uses(struct)
        commands = self.commands(frame)
        routes = self.routes(root.get("commands", LocList()), frame, commands)
        interactions = root.get("interactions", LocDict())
        requests = self.requests(interactions, commands, frame)
        one_way = self.command_list(interactions, "one_way", commands)
        server_push = self.command_list(interactions, "server_push", commands)
        allocate = interactions.get("allocate")
        machines = [self.machine(name, body, commands)
                    for name, body in root.get("machines", LocDict()).items()]
        return FrameSpec(
            protocol=root["protocol"],
            doc=root.get("doc", ""),
            path=self.display,
            byte_order=self.byte_order,
            max_frame_size=root.get("max_frame_size", 16 * 1024 * 1024),
            structs=[s for s in self.structs.values() if not s.is_frame],
            frame=frame,
            commands=commands,
            allocate=allocate,
            requests=requests,
            one_way=one_way,
            server_push=server_push,
            machines=machines,
            proto_modules=self.proto_modules,
            routes=routes,
        )

    # -- fields -------------------------------------------------------------------------------
    def type_names(self) -> set[str]:
        """The struct and frame type names the spec declares."""
        structs = self.root.get("structs", LocDict())
        frame = self.root.get("frame", LocDict())
        names = set(structs) if isinstance(structs, dict) else set()
        if isinstance(frame, dict) and isinstance(frame.get("name"), str):
            names.add(frame["name"])
        return names

    def params(self, body: LocDict, path: PathT) -> list[Param]:
        out: list[Param] = []
        for name, kind in body.get("params", LocDict()).items():
            ppath = [*path, "params", name]
            if keyword.iskeyword(name) or name.startswith("_") or name in _RESERVED_PARAMS:
                self.error(f"invalid param name {name!r}: a Python keyword, a private name or "
                           "a name the generated methods use", ppath, key=True)
            out.append(Param(name, "bool" if kind == "bool" else "int", self.loc(ppath, True)))
        return out

    def fields(self, raw: LocList, path: PathT) -> list[FrameField]:
        out: list[FrameField] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            fpath = [*path, i]
            name = item["name"]
            if keyword.iskeyword(name) or name.startswith("_"):
                self.error(f"invalid identifier {name!r}: a Python keyword or private name",
                           [*fpath, "name"])
            elif name in _ANNOTATION_NAMES or name in self.type_names():
                # A class attribute of that name would be what mypy sees in the annotations
                # of the class's other fields and methods.
                self.error(f"field name {name!r} would hide the type {name} in the generated "
                           "class's annotations; choose another name", [*fpath, "name"])
            if name in seen:
                self.error(f"duplicate field name {name!r}", [*fpath, "name"])
            seen.add(name)
            out.append(self.field(item, fpath))
        return out

    def field(self, item: LocDict, path: PathT) -> FrameField:
        kind = item["type"]
        f = FrameField(name=item["name"], kind=kind, doc=item.get("doc", ""),
                       location=self.loc([*path, "name"]))
        if kind in INT_TYPES:
            f.kind = "int"
            f.width, f.signed = INT_TYPES[kind]
            f.order = item.get("order", self.byte_order)
        f.const = item.get("const")
        if "value" in item:
            f.value = self.expr(item["value"], [*path, "value"])
        if "derive" in item:
            f.derive = self.expr(item["derive"], [*path, "derive"])
            if kind not in INT_TYPES and kind not in ("varint", "bool"):
                self.error("derive: needs an integer or bool field", [*path, "derive"])
            clash = [k for k in ("when", "when_peek", "when_remaining", "const", "size_of",
                                 "checksum") if k in item]
            if clash:
                self.error(f"derive: cannot be combined with {', '.join(clash)}",
                           [*path, "derive"])
        size_of = item.get("size_of")
        if isinstance(size_of, dict):
            f.size_range = (size_of["from"], size_of["to"])
            size_of = None
        f.size_of = size_of
        f.count_of = item.get("count_of")
        if "checksum" in item:
            f.checksum = Checksum(item["checksum"]["algorithm"], item["checksum"]["from"])
        if "when" in item:
            f.when = self.expr(item["when"], [*path, "when"])
        if "when_peek" in item:
            f.when_peek = (item["when_peek"]["type"], item["when_peek"]["equals"])
            if f.const is not None and (f.kind != "int" or f.when_peek != (kind, f.const)):
                self.error("a constant with when_peek is a marker: it must peek its own type "
                           "and value", [*path, "when_peek"])
        f.when_remaining = bool(item.get("when_remaining", False))
        f.default = item.get("default")
        f.length = item.get("length")
        f.size = item.get("size")
        f.prefix = item.get("prefix")
        f.encoding = item.get("encoding", "utf8")
        if "compression" in item:
            c = item["compression"]
            f.compression = Compression(c["codec"], c.get("uncompressed_size"))
        if kind == "proto":
            name = item.get("message")
            if name is None:
                self.error("a proto field needs message: <MessageName>", [*path, "type"])
            else:
                f.message = self.lookup_message(name, [*path, "message"])
            if "dispatch" in item and f.message is not None:
                self.proto_dispatch(f, item["dispatch"], [*path, "dispatch"])
        if kind == "struct":
            f.struct = self.lookup_struct(item.get("struct"), [*path, "struct"])
        if kind == "array":
            if "of" not in item:
                self.error("an array needs of: <Struct or type>", [*path, "type"])
            else:
                f.element = self.element(item["of"], [*path, "of"])
            if "count" in item:
                f.count = self.expr(item["count"], [*path, "count"])
            f.until_end = bool(item.get("until_end", False))
        if "args" in item:
            for name, text in item["args"].items():
                arg = self.expr(text, [*path, "args", name])
                if arg is not None:
                    f.args[name] = arg
        if kind == "switch":
            f.switch_on = item.get("on")
            if f.switch_on is None or "cases" not in item:
                self.error("a switch needs on: <field> and cases", [*path, "type"])
            else:
                f.cases = self.cases(item["cases"], item.get("names", LocDict()),
                                     [*path, "cases"])
        if kind == "blocks":
            f.struct = self.lookup_struct(item.get("struct"), [*path, "struct"])
            f.block_count = item.get("block_count", "u32")
            f.block_length = item.get("block_length", "u32")
            f.block_size = item.get("block_size", 8192)
            f.max_blocks = item.get("max_blocks")
        return f

    def element(self, of: str, path: PathT) -> FrameField:
        loc = self.loc(path)
        if of in INT_TYPES:
            width, signed = INT_TYPES[of]
            return FrameField(name="item", kind="int", doc="", location=loc, width=width,
                              signed=signed, order=self.byte_order)
        if of in ("varint", "bool", "uuid"):
            return FrameField(name="item", kind=of, doc="", location=loc)
        struct = self.lookup_struct(of, path)
        return FrameField(name="item", kind="struct", doc="", location=loc, struct=struct)

    def lookup_struct(self, name: str | None, path: PathT) -> StructDef | None:
        if name is None:
            self.error("struct name missing", path)
            return None
        struct = self.structs.get(name)
        if struct is None:
            self.error(f"unknown struct {name!r}", path)
        return struct

    def lookup_message(self, name: str, path: PathT) -> MessageType | None:
        msg = self.messages.get(name)
        if msg is None:
            for full, candidate in self.messages.items():
                if full.endswith("." + name):
                    return candidate
            self.error(f"unknown proto message {name!r} (not in this protocol's .proto files)",
                       path)
        return msg

    def proto_dispatch(self, f: FrameField, raw: LocDict, path: PathT) -> None:
        assert f.message is not None
        on = next((x for x in f.message.fields if x.proto_name == raw["on"]), None)
        if on is None or on.type.kind != "enum" or on.type.enum is None:
            self.error(f"{f.message.proto_name} has no enum field {raw['on']!r} to dispatch on",
                       [*path, "on"])
            return
        f.dispatch_on = on
        by_number = {x.number: x for x in f.message.fields}
        for value in on.type.enum.values:
            target = by_number.get(value.number)
            if target is None or target.type.kind != "message" or target.type.message is None:
                self.error(f"dispatch: {on.type.enum.proto_name}.{value.proto_name} = "
                           f"{value.number} has no message field numbered {value.number} in "
                           f"{f.message.proto_name}", [*path, "on"])
                continue
            f.commands.append(ProtoCommand(value.proto_name, value.number, value.py_name,
                                           target, target.type.message))

    def cases(self, raw: LocDict, names: LocDict, path: PathT) -> list[Case]:
        out: list[Case] = []
        seen_values: dict[int, str] = {}
        seen_names: set[str] = set()
        for key, target in raw.items():
            cpath = [*path, key]
            try:
                value = int(str(key), 0)
            except ValueError:
                self.error(f"switch case {key!r} is not an integer", cpath, key=True)
                continue
            if value in seen_values:
                self.error(f"dispatch value {value} is duplicated (also {seen_values[value]})",
                           cpath, key=True)
                continue
            if isinstance(target, str):
                to_server = to_client = self.lookup_struct(target, cpath)
                default_name = target
            else:
                to_server = self.lookup_struct(target["to_server"], [*cpath, "to_server"]) \
                    if "to_server" in target else None
                to_client = self.lookup_struct(target["to_client"], [*cpath, "to_client"]) \
                    if "to_client" in target else None
                default_name = (target.get("to_server") or target.get("to_client"))
            name = names.get(key) or _upper_snake(default_name)
            if name in seen_names:
                self.error(f"command name {name!r} is used by two cases", cpath, key=True)
            seen_names.add(name)
            seen_values[value] = name
            out.append(Case(value, name, to_server, to_client))
        return out

    # -- references inside a struct -----------------------------------------------------------
    def resolve_struct(self, struct: StructDef, is_frame: bool) -> None:
        path: PathT = ["frame"] if is_frame else ["structs", struct.name]
        names = [f.name for f in struct.fields]
        params = [p.name for p in struct.params]
        for p in struct.params:
            if p.name in names:
                self.error(f"param {p.name!r} has the name of a field", [*path, "params", p.name],
                           key=True)
        for i, f in enumerate(struct.fields):
            fpath = [*path, "fields", i]
            earlier = names[:i]
            later = names[i + 1 :]
            if f.size_range is not None:
                self.resolve_range(struct, f, later, fpath)
            if f.size_of is not None and f.size_of != "rest":
                if f.size_of not in later:
                    self.error(f"size_of: {f.size_of!r} is not a field after {f.name!r}",
                               [*fpath, "size_of"])
                else:
                    target = struct.field(f.size_of)
                    assert target is not None
                    if target.size not in (None, f.name):
                        self.error(f"{target.name} is sized by {target.size!r}, not {f.name!r}",
                                   [*fpath, "size_of"])
                    target.size = f.name
            if f.size_of is not None and f.kind not in ("int", "varint"):
                self.error("a size field must be an integer", [*fpath, "type"])
            elif f.size_of == "rest" and f.kind == "varint":
                # The size of the rest is patched in after the rest is encoded, in place.
                self.error("size_of: rest needs a fixed-width integer (u8 to u64), since it is "
                           "filled in after what follows is encoded", [*fpath, "type"])
            if f.count_of is not None:
                target = struct.field(f.count_of)
                if target is None or target.kind != "array" or f.count_of not in later:
                    self.error(f"count_of: {f.count_of!r} is not an array after {f.name!r}",
                               [*fpath, "count_of"])
                else:
                    target.count = parse(f.name)
                    target.count_from_field = True
            if f.kind == "string" and f.length is None and f.size is None and f.prefix is None:
                self.error("a string needs prefix: <u8|u16|u32|varint>, size: <field|rest> or "
                           "a size_of field before it", [*fpath, "type"])
            if f.kind == "bytes" and f.length is None and f.size is None and f.prefix is None:
                self.error("bytes need length: N, prefix: <type>, size: <field|rest> or a "
                           "size_of field before them", [*fpath, "type"])
            if f.kind == "array" and f.count is None and not f.until_end and \
                    "count" not in self.raw_field(path, i):
                self.error("an array needs count: <expression>, a count_of field or "
                           "until_end: true", [*fpath, "type"])
            if f.checksum is not None and f.checksum.start not in later:
                self.error(f"checksum from: {f.checksum.start!r} is not a field after "
                           f"{f.name!r}", [*fpath, "checksum", "from"])
            if f.switch_on is not None:
                key = struct.field(f.switch_on)
                if key is None or f.switch_on not in earlier or key.kind not in ("int",
                                                                                 "varint"):
                    self.error(f"switch on: {f.switch_on!r} is not an integer field before "
                               f"{f.name!r}", [*fpath, "on"])
                else:
                    key.is_switch_key = True
            if f.when_remaining and any(not g.optional and not g.computed
                                        for g in struct.fields[i + 1 :]):
                self.error("when_remaining fields must come after every required field",
                           [*fpath, "when_remaining"])
            exprs: list[tuple[Expr | None, PathT]] = [
                (f.when, ["when"]), (f.count, ["count"]), (f.value, ["value"]),
                (f.derive, ["derive"])]
            exprs += [(e, ["args", n]) for n, e in f.args.items()]
            for expr, key_path in exprs:
                if expr is None:
                    continue
                key_name = key_path[0]
                for name in expr.names:
                    if name in params or name in earlier:
                        continue
                    if key_name == "value" and name in names:
                        continue
                    if key_name == "args" and name == "_index" and f.kind == "array":
                        continue
                    self.error(f"{key_name}: {name!r} does not name a field before "
                               f"{f.name!r} or a param", [*fpath, *key_path])
            if f.derive is not None and not f.computed:
                feeds = [g.name for g in struct.fields
                         if g.value is not None and f.name in g.value.names]
                if not feeds:
                    self.error(f"{f.name!r} is derived on decode but no value: expression puts "
                               "it on the wire", [*fpath, "derive"])
            if f.size is not None and f.size != "rest":
                self.resolve_size(struct, f, earlier, fpath)
            if f.compression is not None:
                for ref, key_name in ((f.compression.codec, "codec"),
                                      (f.compression.uncompressed_size, "uncompressed_size")):
                    if ref is not None and not self.ref_ok(struct, ref, earlier):
                        self.error(f"compression {key_name}: {ref!r} does not name a field "
                                   f"decoded before {f.name!r}",
                                   [*fpath, "compression", key_name])

    def raw_field(self, path: PathT, i: int) -> LocDict:
        node: Any = self.root
        for step in [*path, "fields", i]:
            node = node[step]
        assert isinstance(node, LocDict)
        return node

    def resolve_range(self, struct: StructDef, f: FrameField, later: list[str],
                      fpath: PathT) -> None:
        assert f.size_range is not None
        start, stop = f.size_range
        for key, name in (("from", start), ("to", stop)):
            if name not in later:
                self.error(f"size_of {key}: {name!r} is not a field after {f.name!r}",
                           [*fpath, "size_of", key])
                return
        if later.index(start) > later.index(stop):
            self.error(f"size_of: {start!r} comes after {stop!r}", [*fpath, "size_of"])
        if f.kind != "int":
            self.error("a size_of range is patched after encoding, so it needs a fixed-width "
                       "integer", [*fpath, "type"])
        if f.optional:
            self.error("a size_of range cannot be optional", [*fpath, "size_of"])

    def check_uses(self, struct: StructDef) -> None:
        """Args match the params of the struct each field holds; ``trailing: ignore`` fits."""
        path: PathT = ["frame"] if struct.is_frame else ["structs", struct.name]
        for i, f in enumerate(struct.fields):
            fpath = [*path, "fields", i]
            held = f.element.struct if f.element is not None else f.struct
            if held is not None:
                wanted = {p.name for p in held.params}
                for name in f.args:
                    if name not in wanted:
                        self.error(f"{held.name} has no param {name!r}", [*fpath, "args", name],
                                   key=True)
                missing = sorted(wanted - set(f.args))
                if missing:
                    self.error(f"{held.name} needs args for {', '.join(missing)}", fpath)
            elif f.args:
                self.error("args: only apply to a field holding a struct", [*fpath, "args"],
                           key=True)
            if not struct.is_frame and any(c.directional for c in f.cases):
                self.error("cases with to_server/to_client layouts are only possible in the "
                           "frame, whose decoder knows the direction", [*fpath, "cases"])
            for case in f.cases:
                for target in case.structs:
                    if target.params:
                        self.error(f"switch case {target.name} takes params, which a switch "
                                   "cannot pass", [*fpath, "cases"])
            bounded = bool(f.size or f.prefix or f.length) or f.kind == "blocks"
            last = i == len(struct.fields) - 1
            ignoring = [t for t in ([held] if held is not None else []) +
                        [t for c in f.cases for t in c.structs] if t.trailing == "ignore"]
            if ignoring and not bounded and (not last or f.kind == "array"):
                self.error(f"{ignoring[0].name} ignores trailing bytes, so unsized it would "
                           f"swallow what follows {f.name!r}", fpath)

    def resolve_size(self, struct: StructDef, f: FrameField, earlier: list[str],
                     fpath: PathT) -> None:
        assert f.size is not None
        head = f.size.split(".")[0]
        if head not in earlier:
            self.error(f"size: {f.size!r} does not name a field before {f.name!r} "
                       "(a size must come before what it measures)", [*fpath, "size"])
            return
        if "." in f.size:
            if not self.ref_ok(struct, f.size, earlier):
                self.error(f"size: {f.size!r} is not an integer field of {head!r}",
                           [*fpath, "size"])
            return
        target = struct.field(head)
        assert target is not None
        if target.kind not in ("int", "varint"):
            self.error(f"size: {head!r} is not an integer field", [*fpath, "size"])
            return
        names = [g.name for g in struct.fields]
        if target.size_of not in (None, f.name) and (target.size_of == "rest"
                                                      or target.size_of in names):
            # A size_of that names nothing was reported already; one mistake, one error.
            self.error(f"{head!r} measures {target.size_of!r}, not {f.name!r}", [*fpath, "size"])
        target.size_of = f.name
        f.size_field = target

    def ref_ok(self, struct: StructDef, ref: str, earlier: list[str]) -> bool:
        """Whether a dotted reference names a field decoded earlier (through proto fields)."""
        parts = ref.split(".")
        if parts[0] not in earlier:
            return False
        f = struct.field(parts[0])
        assert f is not None
        if len(parts) == 1:
            return True
        msg = f.message
        for i, part in enumerate(parts[1:], start=1):
            if msg is None:
                return False
            pf: Field | None = next((x for x in msg.fields if x.proto_name == part), None)
            if pf is None or pf.label is Label.REPEATED:
                return False
            if i < len(parts) - 1:
                msg = pf.type.message
        return True

    # -- commands, interactions, machines -----------------------------------------------------
    def commands(self, frame: StructDef) -> dict[str, CommandInfo]:
        out: dict[str, CommandInfo] = {}
        for f in frame.fields:
            for pc in f.commands:
                msg = pc.message
                out[pc.name] = CommandInfo(
                    name=pc.name, value=pc.value, body_type=msg.py_path,
                    body_fields={x.proto_name: x.py_name for x in msg.fields}, proto=pc)
            for case in f.cases:
                struct = case.structs[0]
                out[case.name] = CommandInfo(
                    name=case.name, value=case.value, body_type=struct.name,
                    body_fields={x.name: x.name for x in struct.data_fields}, case=case)
        return out

    # -- commands named inside the frame (routes) -------------------------------------------------
    def routes(self, raw: LocList, frame: StructDef,
               commands: dict[str, CommandInfo]) -> list[Route]:
        if not raw:
            return []
        if commands:
            self.error("commands: the frame's own dispatch or switch field already names "
                       "its commands", ["commands"], key=True)
            return []
        out: list[Route] = []
        for i, item in enumerate(raw):
            route = self.route(i, item, frame, commands)
            if route is None:
                # Its commands exist, just not resolved: uses of them are not errors too.
                names = [item.get("name")] + [v.get("name") for v in
                                              item.get("values", LocDict()).values()]
                self.unresolved.update(n for n in names if n)
                continue
            if out and not out[-1].part.optional:
                self.error(f"this route is never used: {out[-1].part.text!r} of the route "
                           "before it is always present", ["commands", i, "in"])
            out.append(route)
        return out

    def route(self, i: int, item: LocDict, frame: StructDef,
              commands: dict[str, CommandInfo]) -> Route | None:
        path: PathT = ["commands", i]
        part = self.frame_path(frame, None, item["in"], [*path, "in"])
        if part is None:
            return None
        if part.struct is None and part.message is None:
            self.error(f"in: {part.text!r} is not a struct or protobuf message field",
                       [*path, "in"])
            return None
        has_on, has_name = "on" in item, "name" in item
        if has_on == has_name:
            self.error("a route needs either on: with values:, or name: (one command)",
                       [*path, "on"] if has_on else [*path, "in"], key=has_on)
            return None
        on = payload = None
        errors_before = len(self.errors)
        if has_on:
            on = self.frame_path(part.struct, part.message, item["on"], [*path, "on"])
            if on is not None and not _is_integer(on):
                self.error(f"on: {item['on']!r} is not an integer or enum field",
                           [*path, "on"])
                on = None
            if on is not None and on.optional:
                self.error(f"on: {item['on']!r} may be absent; the value naming the command "
                           "must always be there", [*path, "on"])
                on = None
        if "payload" in item:
            payload = self.frame_path(part.struct, part.message, item["payload"],
                                      [*path, "payload"])
            if payload is not None and not _is_bytes(payload):
                self.error(f"payload: {item['payload']!r} is not a bytes field",
                           [*path, "payload"])
                payload = None
            elif payload is not None and payload.optional:
                self.error(f"payload: {item['payload']!r} may be absent", [*path, "payload"])
                payload = None
        sets = self.assignments(frame, item.get("set", LocDict()), [*path, "set"])
        route = Route(i, part, on, payload, sets, [], self.loc(path))
        if len(self.errors) > errors_before:
            return None  # one mistake, one error: no frame building on a broken route
        spots: list[PathT] = []  # where each command is declared
        if has_name:
            spots.append([*path, "name"])
            route.commands.append(RoutedCommand(item["name"], None, None, [],
                                                self.loc([*path, "name"])))
        for key, value in item.get("values", LocDict()).items():
            vpath = [*path, "values", key]
            try:
                number = int(str(key), 0)
            except ValueError:
                self.error(f"value {key!r} is not an integer", vpath, key=True)
                continue
            if any(c.value == number for c in route.commands):
                self.error(f"value {number} is duplicated", vpath, key=True)
                continue
            message = None
            if "message" in value:
                if "payload" not in item:
                    self.error("message: names the body's message in a payload; this route "
                               "has no payload:, so the body is the part itself",
                               [*vpath, "message"])
                else:
                    message = self.lookup_message(value["message"], [*vpath, "message"])
            elif "payload" in item:
                self.error(f"{value['name']}: a route with a payload needs message: <Name> "
                           "for each value", [*vpath, "name"])
            spots.append([*vpath, "name"])
            route.commands.append(RoutedCommand(
                value["name"], number, message,
                self.assignments(frame, value.get("set", LocDict()), [*vpath, "set"]),
                self.loc([*vpath, "name"])))
        values_ok = len(self.errors) == errors_before
        for cmd, cpath in zip(route.commands, spots, strict=True):
            if cmd.name in commands:
                self.error(f"command name {cmd.name!r} is used twice", cpath)
                continue
            if values_ok:
                self.build_frame(route, cmd, frame, cpath)
            message = cmd.message or part.message
            body_type = message.py_path if message is not None else part.struct.name \
                if part.struct is not None else ""
            body_fields = {x.proto_name: x.py_name for x in message.fields} \
                if message is not None else \
                {x.name: x.name for x in part.struct.data_fields} if part.struct else {}
            commands[cmd.name] = CommandInfo(
                name=cmd.name, value=cmd.value if cmd.value is not None else 0,
                body_type=body_type, body_fields=body_fields, route=route, routed=cmd)
        return route

    def frame_path(self, struct: StructDef | None, message: MessageType | None, text: str,
                   path: PathT) -> FramePath | None:
        """Resolve a dotted path from a struct or message, through struct, blocks and
        protobuf message fields, to any data field."""
        steps: list[PathStep] = []
        parts = text.split(".")
        for n, name in enumerate(parts):
            where = ".".join(parts[:n]) or (struct.name if struct else
                                            message.proto_name if message else "")
            if struct is not None:
                f = struct.field(name)
                if f is None or f.computed:
                    self.error(f"{text!r}: {name!r} is not a data field of {struct.name}", path)
                    return None
                optional = f.optional and f.default is None and not f.marker
                steps.append(PathStep(name, name, optional, frame_field=f))
                struct, message = (f.struct if f.kind in ("struct", "blocks") else None,
                                   f.message if f.kind == "proto" else None)
                if f.kind in ("array", "switch") and n < len(parts) - 1:
                    self.error(f"{text!r}: a path cannot go through the {f.kind} {name!r}",
                               path)
                    return None
            elif message is not None:
                pf = next((x for x in message.fields if x.proto_name == name), None)
                if pf is None:
                    self.error(f"{text!r}: {message.proto_name} has no field {name!r}", path)
                    return None
                if pf.label is Label.REPEATED:
                    self.error(f"{text!r}: {name!r} is a repeated field", path)
                    return None
                optional = pf.type.kind == "message" and pf.presence is not Presence.REQUIRED
                steps.append(PathStep(name, pf.py_name, optional, proto_field=pf))
                struct, message = None, pf.type.message
            else:
                self.error(f"{text!r}: {where!r} has no fields", path)
                return None
        return FramePath(text, steps, struct, message)

    def assignments(self, frame: StructDef, raw: LocDict, path: PathT) -> list[Assignment]:
        out: list[Assignment] = []
        for key, value in raw.items():
            apath = [*path, key]
            target = self.frame_path(frame, None, key, apath)
            if target is None:
                continue
            enum = None
            last = target.last
            pf, ff = last.proto_field, last.frame_field
            if pf is not None and pf.type.kind == "enum" and pf.type.enum is not None:
                member = next((v for v in pf.type.enum.values if v.proto_name == value), None)
                if member is None:
                    self.error(f"set: {value!r} is not a value of {pf.type.enum.proto_name}",
                               apath)
                    continue
                enum = (pf.type.enum, member)
            elif not _value_fits(pf.type.kind if pf is not None else
                                 ff.kind if ff is not None else "", value):
                self.error(f"set: {value!r} does not fit {key!r}", apath)
                continue
            out.append(Assignment(target, value, enum, self.loc(apath)))
        return out

    def build_frame(self, route: Route, cmd: RoutedCommand, frame: StructDef,
                    path: PathT) -> None:
        """Work out how a sender builds the frame of ``cmd``, or report what is missing."""
        root = BuildNode(frame, None)
        leaves: list[tuple[list[PathStep], BuildLeaf, str]] = []
        for a in [*route.sets, *cmd.sets]:
            leaves.append((a.path.steps, BuildLeaf("const", assignment=a), a.path.text))
        if route.payload is not None:
            if route.on is not None:
                leaves.append(([*route.part.steps, *route.on.steps], BuildLeaf("on"),
                               f"{route.part.text}.{route.on.text}"))
            leaves.append(([*route.part.steps, *route.payload.steps], BuildLeaf("payload"),
                           f"{route.part.text}.{route.payload.text}"))
        else:
            leaves.append((route.part.steps, BuildLeaf("body"), route.part.text))
        ok = True
        for steps, leaf, text in leaves:
            if not self.place(root, steps, leaf):
                self.error(f"{cmd.name}: {text!r} is set twice, or inside a value that is "
                           "set whole (the command's body, or another set: path)", path)
                ok = False
        if ok and self.complete(root, route, cmd, path, ""):
            cmd.build = root
            cmd.params = [f for f in frame.data_fields
                          if any(leaf.param is f for _, leaf in root.values
                                 if isinstance(leaf, BuildLeaf))]

    def place(self, node: BuildNode, steps: list[PathStep], leaf: BuildLeaf) -> bool:
        attr = steps[0].attr
        existing = next((v for a, v in node.values if a == attr), None)
        if len(steps) == 1:
            if existing is not None:
                return False
            node.values.append((attr, leaf))
            return True
        if isinstance(existing, BuildLeaf):
            return False
        if existing is None:
            f = steps[0].frame_field
            pf = steps[0].proto_field
            struct = f.struct if f is not None else None
            message = f.message if f is not None else pf.type.message if pf else None
            existing = BuildNode(struct, message)
            node.values.append((attr, existing))
        return self.place(existing, steps[1:], leaf)

    def complete(self, node: BuildNode, route: Route, cmd: RoutedCommand, path: PathT,
                 where: str) -> bool:
        """Fill in params (frame fields) and check every required field has a value."""
        ok = True
        given = {a for a, _ in node.values}

        def missing(name: str, what: str) -> None:
            # Reported once per route: usually every value of the route lacks it.
            if (route.index, where + name) not in self.missing_reported:
                self.missing_reported.add((route.index, where + name))
                self.error(f"{cmd.name}: a sender cannot build the frame without "
                           f"{where}{name}{what}; give it a value with set:", path)

        if node.struct is not None:
            order = [f.name for f in node.struct.data_fields]
            for f in node.struct.data_fields:
                if f.name in given or f.optional or f.marker:
                    continue
                if node.struct.is_frame and f.kind not in ("struct", "blocks", "proto"):
                    node.values.append((f.name, BuildLeaf("param", param=f)))
                    continue
                if f.kind in ("struct", "blocks", "proto"):
                    # Built from nothing but its own required fields, which must be set.
                    node.values.append((f.name, BuildNode(f.struct, f.message)))
                    continue
                missing(f.name, "")
                ok = False
        elif node.message is not None:
            order = [f.py_name for f in node.message.fields]
            for pf in node.message.fields:
                if pf.presence is Presence.REQUIRED and pf.py_name not in given:
                    if pf.type.message is not None:
                        node.values.append((pf.py_name, BuildNode(None, pf.type.message)))
                        continue
                    missing(pf.proto_name, " (required)")
                    ok = False
        else:
            order = []
        node.values.sort(key=lambda av: order.index(av[0]) if av[0] in order else len(order))
        for attr, value in node.values:
            if isinstance(value, BuildNode):
                ok = self.complete(value, route, cmd, path, f"{where}{attr}.") and ok
        return ok

    def requests(self, raw: LocDict, commands: dict[str, CommandInfo],
                 frame: StructDef) -> list[Request]:
        frame_data = {f.name for f in frame.data_fields
                      if f.kind not in ("switch", "proto", "struct", "blocks", "array")}
        frame_fields_all = {f.name for f in frame.data_fields}
        out: list[Request] = []
        for i, item in enumerate(raw.get("requests", [])):
            path: PathT = ["interactions", "requests", i]
            names = [item["request"], item["response"], *item.get("errors", [])]
            keys = ["request", "response"] + [("errors", j) for j in range(len(names) - 2)]
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
            out.append(Request(item["request"], item["response"], list(item.get("errors", [])),
                               correlate, method, on_frame, frame_fields))
        methods = [r.method for r in out]
        for i, r in enumerate(out):
            if methods.count(r.method) > 1 and methods.index(r.method) != i:
                self.error(f"two requests generate the method {r.method!r}; set method:",
                           ["interactions", "requests", i])
        return out

    def command_list(self, raw: LocDict, key: str, commands: dict[str, CommandInfo]) \
            -> list[str]:
        out = []
        for i, name in enumerate(raw.get(key, [])):
            if name not in commands:
                if name not in self.unresolved:
                    self.error(f"unknown command {name!r}", ["interactions", key, i])
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


# Names the generated encode/decode methods use for their own parameters and locals.
# Types that generated frame classes name in their annotations (field types, method
# signatures): a field of the same name would hide them inside the class body.
_ANNOTATION_NAMES = frozenset({"int", "str", "bytes", "bool", "bytearray", "memoryview", "list",
                               "dict", "tuple", "float", "Self", "UUID", "Any", "Callable"})

_RESERVED_PARAMS = {"self", "cls", "buf", "pos", "end", "out", "data", "to_server", "obj",
                    "item", "bad", "vend", "content", "parts", "used", "n", "cases", "exc",
                    "decode_body", "view", "block", "actual", "max_size", "i", "frame"}


def _fields_of(info: CommandInfo, sent: bool) -> set[str]:
    """Data fields of a command's body in one direction (to the server when ``sent``)."""
    if info.case is not None:
        struct = (info.case.to_server if sent else info.case.to_client) or info.case.structs[0]
        return {f.name for f in struct.data_fields}
    return set(info.body_fields)


_INTEGER_KINDS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                            "fixed64", "sfixed32", "sfixed64", "enum", "int", "varint"})


def _is_integer(p: FramePath) -> bool:
    last = p.last
    if last.proto_field is not None:
        return last.proto_field.type.kind in _INTEGER_KINDS
    return last.frame_field is not None and last.frame_field.kind in ("int", "varint")


def _is_bytes(p: FramePath) -> bool:
    last = p.last
    if last.proto_field is not None:
        return last.proto_field.type.kind == "bytes"
    return last.frame_field is not None and last.frame_field.kind == "bytes"


def _value_fits(kind: str, value: object) -> bool:
    """Whether a ``set:`` value suits a field of this kind (a protobuf or frame type)."""
    if kind in _INTEGER_KINDS:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return kind == "string" and isinstance(value, str)


def _upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def _method_name(info: CommandInfo) -> str:
    if info.routed is not None:
        base = info.name.lower()
    elif info.proto is not None:
        base = info.proto.field.proto_name
    else:
        base = info.name
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower()
    return s + "_" if keyword.iskeyword(s) else s
