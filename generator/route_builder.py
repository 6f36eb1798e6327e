"""Commands: those the frame's own fields name, and those named inside it (``commands:``
routes), with how a sender builds each routed command's frame."""

from __future__ import annotations

from protoframe.generator.build_context import PathT
from protoframe.generator.errors import SpecError
from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    VarintField,
    nested_message,
    nested_struct,
)
from protoframe.generator.ir import Label, MessageType, Presence
from protoframe.generator.literals import LiteralError, char_code, integer, is_char_literal
from protoframe.generator.route_values import check, target_kind
from protoframe.generator.spec_ir import (
    Assignment,
    BuildLeaf,
    BuildNode,
    CommandInfo,
    FramePath,
    PathStep,
    Route,
    RoutedCommand,
)
from protoframe.generator.spec_yaml import LocDict, LocList
from protoframe.generator.struct_builder import StructBuilder


class RouteBuilder(StructBuilder):
    # -- commands, interactions, machines -----------------------------------------------------
    def commands(self, frame: StructDef) -> dict[str, CommandInfo]:
        out: dict[str, CommandInfo] = {}
        for f in frame.fields:
            for pc in f.commands if isinstance(f, ProtoField) else []:
                msg = pc.message
                out[pc.name] = CommandInfo(
                    name=pc.name, value=pc.value, body_type=msg.py_path,
                    body_fields={x.proto_name: x.py_name for x in msg.fields}, proto=pc)
            for case in f.cases if isinstance(f, SwitchField) else []:
                for name, direction in case.commands:
                    struct = case.layouts(direction)[0]
                    out[name] = CommandInfo(
                        name=name, value=case.value, body_type=struct.name,
                        body_fields={x.name: x.name for x in struct.data_fields}, case=case,
                        direction=direction)
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
                number = integer(key)
            except LiteralError as exc:
                self.error(f"values: {exc}" if is_char_literal(str(key)) else
                           f"value {key!r} is not an integer", vpath, key=True)
                self.unresolved.add(value["name"])  # one mistake, one error
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
                struct, message = nested_struct(f), nested_message(f)
                if isinstance(f, ArrayField | SwitchField) and n < len(parts) - 1:
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
            if isinstance(value, dict):
                expr = self.expr(value["expr"], [*apath, "expr"])
                if expr is None:
                    continue
                a = Assignment(target, expr.text, None, self.loc([*apath, "expr"]), expr)
                if target_kind(a) not in ("int", "bool", "str"):
                    self.error(f"set: {key!r} takes a constant (an expression can fill an "
                               "integer, bool or string field)", [*apath, "expr"])
                    continue
                out.append(a)
                continue
            if isinstance(value, str) and is_char_literal(value) and _is_integer(target) and \
                    not (pf is not None and pf.type.kind == "enum"):
                try:
                    value = char_code(value)
                except LiteralError as exc:
                    self.error(f"set: {exc}", apath)
                    continue
            if pf is not None and pf.type.kind == "enum" and pf.type.enum is not None:
                member = next((v for v in pf.type.enum.values if v.proto_name == value), None)
                if member is None:
                    self.error(f"set: {value!r} is not a value of {pf.type.enum.proto_name}",
                               apath)
                    continue
                enum = (pf.type.enum, member)
            elif not (_value_fits(pf.type.kind, value) if pf is not None else
                      ff is not None and _value_fits_field(ff, value)):
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
            for a in [*route.sets, *cmd.sets]:
                why = check(a, route, cmd) if a.expr is not None else None
                if why is not None:
                    loc = a.location
                    self.errors.append(SpecError(why, loc.path, loc.line, loc.column))

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
            struct = nested_struct(f) if f is not None else None
            message = nested_message(f) if f is not None else pf.type.message if pf else None
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
                nested = isinstance(f, StructField | BlocksField | ProtoField)
                if node.struct.is_frame and not nested:
                    node.values.append((f.name, BuildLeaf("param", param=f)))
                    continue
                if nested:
                    # Built from nothing but its own required fields, which must be set.
                    node.values.append((f.name, BuildNode(nested_struct(f), nested_message(f))))
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


_INTEGER_KINDS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                            "fixed64", "sfixed32", "sfixed64", "enum", "int", "varint"})


def _is_integer(p: FramePath) -> bool:
    last = p.last
    if last.proto_field is not None:
        return last.proto_field.type.kind in _INTEGER_KINDS
    return isinstance(last.frame_field, IntField | VarintField)


def _is_bytes(p: FramePath) -> bool:
    last = p.last
    if last.proto_field is not None:
        return last.proto_field.type.kind == "bytes"
    return isinstance(last.frame_field, BytesField)


def _value_fits(kind: str, value: object) -> bool:
    """Whether a ``set:`` value suits a field of this kind (a protobuf or frame type)."""
    if kind in _INTEGER_KINDS:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return kind == "string" and isinstance(value, str)


def _value_fits_field(f: FrameField, value: object) -> bool:
    """Whether a ``set:`` value suits a frame field."""
    if isinstance(f, IntField | VarintField):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(f, BoolField):
        return isinstance(value, bool)
    return isinstance(f, StringField) and isinstance(value, str)
