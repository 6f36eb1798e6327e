"""Type stub of the C extension runtime/codec/_framecodec.c (see codec/compiled_frames.py)."""

from collections.abc import Callable
from typing import Any

# 1 when the protobuf codec's C API was found: a frame's protobuf parts are then written and
# read in place, without calling their classes' methods.
HAS_WIRE_API: int
# The most rows a table may have, as it was compiled (vocabulary.FRAME_MAX_ROWS).
MAX_ROWS: int
# The layout tables' numbering it was compiled with (runtime/codec/vocabulary.py).
VOCABULARY: dict[str, dict[str, int]]

class FrameCodec:
    """The compiled encode/decode of one generated frame struct."""

    def __init__(
        self,
        cls: type,
        rows: tuple[tuple[Any, ...], ...],
        check_end: bool,
        py_encode: Callable[..., bytes],
        py_decode: Callable[..., Any],
        py_decode_from: Callable[..., Any],
        nparams: int = 0,
        /,
    ) -> None: ...
    __wrapped__: Callable[..., bytes]

    def __call__(self, value: Any, /) -> bytes: ...
    def decode(self, cls: type, data: bytes | bytearray | memoryview, /) -> Any: ...
    def decode_from(self, cls: type, buf: bytes, pos: int, end: int, /) -> Any: ...
    def own_decode(self, data: bytes | bytearray | memoryview, /) -> Any: ...
    def own_decode_from(self, buf: bytes, pos: int, end: int, /) -> Any: ...
    def install_constructor(self, init: Callable[..., None], /) -> bool: ...
    def enable_constructor(self, on: bool, /) -> None: ...
    @property
    def constructor_enabled(self) -> bool: ...
