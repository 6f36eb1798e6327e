"""What the Spark emitters share: the module's naming context and the line policy.

``SparkContext`` holds what one generated ``spark.py`` names: the public key of each message
and frame struct (``MESSAGES``/``STRUCTS``), the enums whose name tables it prints, the
module's imports (each name declared by the emitter writing it), and which message fields
hold their own holder (written as protobuf bytes, since a Spark schema cannot contain itself).
"""

from __future__ import annotations

import re
import textwrap

from protoframe.generator.codewriter import Imports
from protoframe.generator.frame_checks import structs_of
from protoframe.generator.ir import EnumType, Field, MessageType, Protocol
from protoframe.generator.linefit import fit_expression
from protoframe.generator.naming import spark_message_key, spark_struct_key
from protoframe.generator.runtime_modules import SPARK_ROWS
from protoframe.generator.spec_ir import FrameSpec

SPARK_TYPES = "pyspark.sql.types"

LIMIT = 96  # generated function bodies sit one level (four columns) in; the file limit is 100


def fit_in_body(indent: str, head: str, expr: str, tail: str) -> list[str]:
    """``linefit.fit_expression`` for a line of a function body (``LIMIT`` leaves its indent)."""
    return fit_expression(indent, head, expr, tail, LIMIT)


def comment(text: str) -> list[str]:
    """``text`` as comment lines of at most 100 columns; a name longer than a line (a message's
    full name) is broken after one of its dots, never inside a word."""
    width = LIMIT + 2
    lines: list[str] = []
    for line in textwrap.wrap(text, width=width, break_long_words=False):
        if len(line) <= width:
            lines.append(line)
            continue
        out = ""
        for piece in re.split(r"(?<=\.)(?=.)", line):
            if out and len(out) + len(piece) > width:
                lines.append(out)
                out = ""
            out += piece
        lines.append(out)
    return ["# " + line for line in lines]


def field_message(f: Field) -> MessageType | None:
    t = f.map_value if f.is_map else f.type
    return t.message if t is not None and t.kind == "message" else None


class SparkContext:
    def __init__(self, protocol: Protocol, specs: list[FrameSpec]) -> None:
        self.specs = specs
        self.module_of: dict[str, str] = {}
        self.messages: list[MessageType] = []
        for proto in protocol.files:
            for msg in proto.all_messages():
                self.module_of[msg.full_name] = proto.module
                if not msg.is_map_entry:
                    self.messages.append(msg)
            for enum in proto.all_enums():
                self.module_of[enum.full_name] = proto.module
        # pyspark's types and the rows helpers are listed one per line, however few.
        self.imports = Imports(one_per_line=(SPARK_TYPES, SPARK_ROWS))
        self.enums: dict[str, EnumType] = {}  # enum key -> enum, for the name tables
        self.keys: dict[str, str] = {}  # full name / struct name -> public key
        self.recursive = self._recursive_fields()

    def use(self, module: str, *names: str) -> None:
        for name in names:
            self.imports.use(module, name)

    # -- naming -------------------------------------------------------------------------------

    def ref(self, full_name: str, py_path: str) -> str:
        module = self.module_of[full_name]
        self.imports.use(".", module)
        return f"{module}.{py_path}"

    def enum_key(self, enum: EnumType) -> str:
        key = enum.py_path.replace(".", "_")
        self.enums.setdefault(key, enum)
        return key

    def assign_keys(self) -> None:
        # Distinct by construction: frame_checks.check_protocol rejects a spec where two would
        # collide, before any output is built.
        for m in self.messages:
            self.keys[m.full_name] = spark_message_key(m.py_path)
        for spec in self.specs:
            for s in structs_of(spec):
                self.keys[s.name] = spark_struct_key(s.name)

    # -- recursion ------------------------------------------------------------------------------

    def _recursive_fields(self) -> set[tuple[str, int]]:
        """(message, field number) of message fields whose type contains the holder."""
        edges: dict[str, set[str]] = {}
        for m in self.messages:
            edges[m.full_name] = {t.full_name for t in (field_message(f) for f in m.fields)
                                  if t is not None}

        def reaches(start: str, goal: str) -> bool:
            seen: set[str] = set()
            todo = [start]
            while todo:
                name = todo.pop()
                if name == goal:
                    return True
                if name in seen:
                    continue
                seen.add(name)
                todo.extend(edges.get(name, ()))
            return False

        out: set[tuple[str, int]] = set()
        for m in self.messages:
            for f in m.fields:
                target = field_message(f)
                if target is not None and reaches(target.full_name, m.full_name):
                    out.add((m.full_name, f.number))
        return out
