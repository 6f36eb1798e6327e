"""The frames module's code for ``first:``: a length probe per first message
(``first_length_to_server`` / ``first_length_to_client``) and a ``StreamDecoder`` that starts in
the handshake state, returning the first message before any frame.
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.codewriter import docstring
from protoframe.generator.delimiter_emit import delimited_length
from protoframe.generator.first_rules import DIRECTIONS, fixed_length
from protoframe.generator.frame_emit import EmitContext
from protoframe.generator.frame_length import length_lines, magic_checks
from protoframe.generator.linefit import INDENT, Lines
from protoframe.generator.runtime_modules import STREAM

ONE, TWO = INDENT, 2 * INDENT
_WHO = {"to_server": "a client", "to_client": "a server"}


@dataclass
class FirstView:
    """What the frames module holds for ``first:``: the probes and the decoder's parts."""

    structs: dict[str, str]  # direction -> the first message's class
    probe_lines: list[str]  # the module-level probe functions, fitted
    # direction -> what the stream decoder finds the first message's length with
    lengths: dict[str, str]
    frame_name: str
    directional: bool  # the frame's own layouts differ by direction

    @property
    def exports(self) -> list[str]:
        return [*self.structs.values(), *(f"first_length_{d}" for d in self.structs)]


def first_view(ctx: EmitContext, frame_name: str, directional: bool) -> FirstView | None:
    """The view of the spec's ``first:``, None when it has none."""
    first = ctx.spec.first
    if not first:
        return None
    out = Lines()
    lengths: dict[str, str] = {}
    for direction in DIRECTIONS:
        if direction not in first:
            continue
        plan = ctx.plans[first[direction].name]
        size = fixed_length(plan.struct)
        delimited = delimited_length(ctx, plan)
        lengths[direction] = delimited[1] if delimited else f"first_length_{direction}"
        if delimited is not None:
            body = delimited[0]
        elif size is not None:
            body = [f"if end - pos < {size}:", "    return None", *magic_checks(ctx, plan, size),
                    f"return {size}"]
        else:
            body = length_lines(ctx, plan)
        out.raw("", "")
        out.code(f"def first_length_{direction}(buf: bytes, pos: int, end: int, limit: int) "
                 "-> int | None:")
        out.raw(ONE + docstring(f"Length of the first message {_WHO[direction]} sends "
                                f"({plan.name}) at ``pos`` once its header is in, else None.",
                                ONE))
        out.code(*(ONE + line for line in body))
    ctx.imports.use(STREAM, "whole_message")
    return FirstView({d: s.name for d, s in first.items()}, out.lines, lengths, frame_name,
                     directional)


def stream_lines(view: FirstView, frame_doc: str, length: str) -> list[str]:
    """The probes, then a ``StreamDecoder`` that decodes the first message of its direction
    before frames (``handshake=False``: frames from the start)."""
    frame = view.frame_name
    types = " | ".join([frame, *sorted(set(view.structs.values()))])
    names = " and ".join(f"{s} ({d})" for d, s in view.structs.items())
    doc = (f"{frame_doc}\n\nThe first message has a layout of its own: ``feed`` returns "
           f"{names} first, then frames; ``to_server=True`` decodes what a client sends. "
           "Pass ``handshake=False`` to start with frames.")
    args = ", to_server=to_server" if view.directional else ""
    out = Lines()
    out.raw(*view.probe_lines[2:] if view.probe_lines[:2] == ["", ""] else view.probe_lines)
    out.raw("", "")
    out.code(f"class StreamDecoder(FrameStream[{types}]):")
    out.raw(ONE + docstring(doc, ONE), "")
    out.code(f"{ONE}def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, "
             "to_server: bool = False, handshake: bool = True) -> None:",
             f"{TWO}def decode(buf: bytes, pos: int, end: int) -> {frame}:",
             f"{TWO}{INDENT}frame, used = {frame}.decode_from(buf, pos, end{args})",
             f"{TWO}{INDENT}if used != end:",
             f'{TWO}{TWO}raise SizeMismatchError(f"{frame}: {{end - used}} bytes left '
             'in the frame")',
             f"{TWO}{INDENT}return frame")
    out.raw("")
    branches = [(d, s) for d, s in view.structs.items()]
    for i, (direction, struct) in enumerate(branches):
        test = "to_server" if direction == "to_server" else "not to_server"
        out.code(f"{TWO}{'if' if i == 0 else 'elif'} handshake and {test}:",
                 f"{TWO}{INDENT}super().__init__({length}, decode, max_frame_size, "
                 f"{view.lengths[direction]}, whole_message({struct}.decode_from, "
                 f'"{struct}"))')
    out.code(f"{TWO}else:", f"{TWO}{INDENT}super().__init__({length}, decode, "
             "max_frame_size)")
    return out.lines
