"""What ``first:`` adds to ``machines.py`` in a spec with machines or interactions: the first
message of each direction is a command of its own (``first_rules.add_first_commands``), so
``command_of`` names it, ``receive_data`` returns it before any frame, and ``send`` takes it,
as the first thing this side sends and only then (a ``FirstGate`` of the runtime checks it).
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.codewriter import Imports, q
from protoframe.generator.spec_ir import FrameSpec

FIRST_GATE = "protoframe.runtime.engine.first_gate"


def first_structs(spec: FrameSpec) -> list[str]:
    """The first messages' classes that are commands, in the order of ``spec.commands``."""
    return [info.body_type for info in spec.commands.values() if info.first is not None]


def received_type(spec: FrameSpec) -> str:
    """What a protocol receives and sends: the frame, or the frame or a first message."""
    return " | ".join(f"frames.{name}" for name in [spec.frame.name, *first_structs(spec)])


def first_naming(spec: FrameSpec) -> list[str]:
    """``command_of``'s lines naming a first message, whose body is the message itself."""
    out: list[str] = []
    for name, info in spec.commands.items():
        if info.first is not None:
            out += [f"if isinstance(frame, frames.{info.body_type}):",
                    f"    return {q(name)}, frame"]
    return out


def first_lines(spec: FrameSpec, imports: Imports,
                fitted: Callable[[list[str], int], list[str]]) -> dict[str, list[str]]:
    """The protocol's lines for its first message: the gate ``__init__`` makes, its check in
    ``send`` before the machines' and its note after they let the message go (all empty
    without one)."""
    by_direction = {info.first: info.body_type for info in spec.commands.values()
                    if info.first is not None}
    if not by_direction:
        return {"first_init": [], "first_send": [], "first_sent": []}
    imports.use(FIRST_GATE, "FirstGate")

    def of(direction: str) -> str:
        found = by_direction.get(direction)
        return f"frames.{found}" if found is not None else "None"

    firsts = ", ".join(f"frames.{s}" for s in by_direction.values())
    return {
        "first_init": fitted([
            "# What this side sends first, before any frame and only then.",
            f"self.first = FirstGate({of('to_client')} if server else {of('to_server')}, "
            f"({firsts}{',' if len(by_direction) == 1 else ''}))"], 2),
        "first_send": fitted(["self.first.check(name, frame)"], 2),
        "first_sent": fitted(["self.first.sent(frame)"], 2),
    }
