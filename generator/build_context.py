"""What every part of the frame-model builder shares: the spec, its errors and lookups.

The builder is split by concern (``struct_builder``, ``route_builder``,
``interaction_builder``); each adds its methods to this state, and ``frame_model`` puts them
together.
"""

from __future__ import annotations

from typing import Any

from protoframe.generator.errors import SpecError
from protoframe.generator.expr import Expr, ExprError, parse
from protoframe.generator.frame_bits import FrameEnum
from protoframe.generator.frame_ir import StructDef
from protoframe.generator.ir import MessageType, Protocol, SourceLocation
from protoframe.generator.spec_yaml import LocDict, locate

PathT = list[str | int]


class BuildContext:
    def __init__(self, root: LocDict, display: str, protocol: Protocol) -> None:
        self.root = root
        self.display = display
        self.protocol = protocol
        self.errors: list[SpecError] = []
        self.byte_order: str = root.get("byte_order", "big")
        self.structs: dict[str, StructDef] = {}
        self.missing_reported: set[tuple[int, str]] = set()
        self.unresolved: set[str] = set()  # commands of routes or cases that did not resolve
        self.messages: dict[str, MessageType] = {}
        self.frame_enums: dict[str, FrameEnum] = {}  # the spec's ``enums:``, by name
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

