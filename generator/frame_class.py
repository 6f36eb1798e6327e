"""The class statements and the stream decoder of a frames module, each line fitted at its depth.

What ``frames.py.j2`` prints around the codec bodies (signatures naming the class and its
params, messages naming it) is built here, where the depth of every line is known, so that a
long struct or frame name is fitted where its line is written. Docstrings are left whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protoframe.generator.linefit import INDENT, Lines

if TYPE_CHECKING:
    from protoframe.generator.frames_view import ClassView, FramesModuleView

ONE, TWO = INDENT, 2 * INDENT


def class_text(c: ClassView) -> str:
    """The dataclass of one struct or of the frame."""
    out = Lines()
    out.code("@dataclass(slots=True, kw_only=True)", f"class {c.name}:")
    out.raw(ONE + c.doc, "")
    out.code(*(f"{ONE}{name}: {ann}" for name, ann in c.fields))
    out.raw("")
    out.code(f"{ONE}def encode(self{c.encode_params}) -> bytes:")
    out.raw(f'{TWO}"""The wire form of this value; sizes, counts and checksums are filled in.',
            "", f"{TWO}Raises ``EncodeError`` (``ValueOutOfRangeError`` for a number its field "
            "cannot hold).", f'{TWO}"""')
    out.code(f"{TWO}out = bytearray()", f"{TWO}try:",
             f"{TWO}{INDENT}self.encode_to(out{c.encode_args})",
             f"{TWO}except struct_error as exc:",
             f'{TWO}{INDENT}raise ValueOutOfRangeError(f"{c.name}: {{exc}}") from None',
             f"{TWO}return bytes(out)")
    out.raw("")
    out.code(f"{ONE}def encode_to(self, out: bytearray{c.encode_params}) -> None:")
    out.raw(f'{TWO}"""Append the wire form of this value to ``out``."""')
    out.code(*(TWO + line for line in c.encode_lines))
    out.raw("")
    out.code(f"{ONE}@classmethod",
             f"{ONE}def decode(cls, data: bytes | bytearray | memoryview{c.decode_kw}) -> Self:")
    out.raw(f'{TWO}"""Decode a buffer holding exactly one value; raises a ``DecodeError`` '
            'subclass."""')
    out.code(f"{TWO}buf = data if type(data) is bytes else bytes(data)",
             f"{TWO}obj, pos = cls.decode_from(buf, 0, len(buf){c.decode_args})",
             f"{TWO}if pos != len(buf):",
             f'{TWO}{INDENT}raise SizeMismatchError(f"{c.name}: {{len(buf) - pos}} bytes after '
             'the value")',
             f"{TWO}return obj")
    out.raw("")
    out.code(f"{ONE}@classmethod",
             f"{ONE}def decode_from(cls, {c.decode_params}) -> tuple[Self, int]:")
    out.raw(f'{TWO}"""Decode from ``buf[pos:end]``; return the value and the position after '
            'it."""')
    out.code(*(TWO + line for line in c.decode_lines))
    if c.run_lines:
        out.raw("")
        out.code(f"{ONE}@classmethod",
                 f"{ONE}def decode_run(cls, buf: bytes, pos: int, end: int) "
                 "-> tuple[list[Self], int]:")
        out.raw(f'{TWO}"""Decode values one after another up to ``end``; return them and the '
                'position after."""')
        for line in c.run_lines:
            out.code(TWO + line) if line else out.raw("")
    for line in c.extra_lines:
        out.code(ONE + line) if line else out.raw("")
    return out.text()


def stream_lines(m: FramesModuleView) -> list[str]:
    """The module's ``StreamDecoder``: the frame class's decoder on a byte stream."""
    out = Lines()
    out.code(f"class StreamDecoder(FrameStream[{m.frame_name}]):")
    out.raw(ONE + m.stream_doc, "")
    out.code(f"{ONE}def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE"
             f"{m.stream_params}) -> None:",
             f"{TWO}def decode(buf: bytes, pos: int, end: int) -> {m.frame_name}:",
             f"{TWO}{INDENT}frame, used = {m.frame_name}.decode_from(buf, pos, end"
             f"{m.stream_args})",
             f"{TWO}{INDENT}if used != end:",
             f'{TWO}{TWO}raise SizeMismatchError(f"{m.frame_name}: {{end - used}} bytes left '
             'in the frame")',
             f"{TWO}{INDENT}return frame")
    out.raw("")
    out.code(f"{TWO}super().__init__({m.stream_length}, decode, max_frame_size)")
    return out.lines
