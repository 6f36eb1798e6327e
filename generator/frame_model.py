"""Builds the frame IR from a YAML spec: schema validation, then name resolution and checks.

The builder is split by concern: ``build_context`` (shared state, lookups),
``struct_builder`` (structs and fields), ``route_builder`` (commands and ``commands:``
routes), ``interaction_builder`` (requests and machines); ``_Builder`` here runs them in
order. Every problem is collected as a ``SpecError`` pointing at the offending key or value, so one
run reports all of them; nothing is generated while any remain.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from protoframe.generator.build_context import PathT
from protoframe.generator.errors import SpecError, SpecErrors
from protoframe.generator.first_rules import (
    add_first_commands,
    check_first_requests,
    read_delimiter,
    read_first,
)
from protoframe.generator.frame_checks import check_frame_spec
from protoframe.generator.frame_enums import spec_enums
from protoframe.generator.frame_ir import StructDef
from protoframe.generator.interaction_builder import InteractionBuilder
from protoframe.generator.ir import EnumType, Protocol
from protoframe.generator.naming import name_frame_spec
from protoframe.generator.require_rules import read_requires
from protoframe.generator.spec_ir import FrameSpec
from protoframe.generator.spec_yaml import LocDict, LocList, load_spec, locate


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
    name_frame_spec(spec)
    return spec


def _schema_errors(root: LocDict, display: str) -> list[SpecError]:
    validator = jsonschema.Draft202012Validator(spec_schema())
    out: list[SpecError] = []
    for error in sorted(validator.iter_errors(root), key=lambda e: list(map(str, e.path))):
        error = _within_object_form(error)
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


def _within_object_form(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a mapping that fits none of a key's forms (a name, or a mapping of options such as
    ``allocate: {field, start}``), the mistake inside the mapping form, at its own position,
    rather than "not valid under any of the given schemas" at the whole value."""
    if error.validator != "oneOf" or not isinstance(error.instance, dict) or \
            {"send", "receive", "event"} & set(error.instance):
        return error
    inside = [e for e in error.context or () if e.validator != "type"]
    return inside[0] if len(inside) == 1 else error


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


class _Builder(InteractionBuilder):
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
                                           trailing=body.get("trailing", "error"),
                                           delimiter=read_delimiter(self, body,
                                                                    ["structs", name]),
                                           requires=read_requires(self, body,
                                                                  ["structs", name]))
        self.frame_enums = spec_enums(self, root.get("enums", LocDict()))
        frame_raw = root["frame"]
        frame_name = frame_raw["name"]
        if frame_name in self.structs:
            self.error(f"frame name {frame_name!r} is also a struct name", ["frame", "name"])
        if "params" in frame_raw:
            self.error("the frame cannot take params (nothing holds it)", ["frame", "params"],
                       key=True)
        frame = StructDef(frame_name, frame_raw.get("doc", ""), [], self.loc(["frame"]),
                          is_frame=True, trailing=frame_raw.get("trailing", "error"),
                          delimiter=read_delimiter(self, frame_raw, ["frame"]),
                          requires=read_requires(self, frame_raw, ["frame"]))
        self.structs[frame_name] = frame
        for name, body in raw_structs.items():
            self.structs[name].fields = self.fields(body["fields"], ["structs", name, "fields"])
        frame.fields = self.fields(frame_raw["fields"], ["frame", "fields"])
        for struct in self.structs.values():
            self.resolve_struct(struct, struct.is_frame)
        for struct in self.structs.values():
            self.check_uses(struct)
        first = read_first(self, root.get("first"), frame)
        commands = self.commands(frame)
        routes = self.routes(root.get("commands", LocList()), frame, commands)
        if "machines" in root or "interactions" in root:
            add_first_commands(self, first, frame, commands, "commands" in root)
        interactions = root.get("interactions", LocDict())
        requests = self.requests(interactions, commands, frame)
        check_first_requests(self, requests, commands)
        one_way = self.command_list(interactions, "one_way", commands)
        server_push = self.command_list(interactions, "server_push", commands)
        allocate_raw = interactions.get("allocate")
        allocate = allocate_raw["field"] if isinstance(allocate_raw, dict) else allocate_raw
        allocate_options = allocate_raw if isinstance(allocate_raw, dict) else {}
        self.check_allocate_opt_outs(interactions, allocate)
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
            protocol_version=self.version_enum(root.get("protocol_version")),
            allocate_start=allocate_options.get("start", 0),
            allocate_skip_zero=allocate_options.get("skip_zero", False),
            frame_enums=list(self.frame_enums.values()),
            first=first,
        )

    def version_enum(self, name: str | None) -> EnumType | None:
        """The enum ``protocol_version:`` names, among the protocol's .proto files."""
        if name is None:
            return None
        found = [enum for proto in self.protocol.files for enum in proto.all_enums()
                 if name in (enum.full_name, enum.py_path) or enum.full_name.endswith("." + name)]
        if not found:
            self.error(f"unknown proto enum {name!r} (not in this protocol's .proto files)",
                       ["protocol_version"])
            return None
        if len(found) > 1:
            self.error(f"proto enum name {name!r} is ambiguous: "
                       f"{', '.join(e.full_name for e in found)}", ["protocol_version"])
            return None
        if not found[0].values:
            self.error(f"proto enum {name!r} has no values", ["protocol_version"])
            return None
        return found[0]
