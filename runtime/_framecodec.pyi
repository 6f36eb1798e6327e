"""Type stub of the C extension runtime/_framecodec.c (see runtime/compiled_frames.py)."""

from collections.abc import Callable
from typing import Any

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
        /,
    ) -> None: ...
    def __call__(self, value: Any, /) -> bytes: ...
    def decode(self, cls: type, data: bytes | bytearray | memoryview, /) -> Any: ...
    def decode_from(self, cls: type, buf: bytes, pos: int, end: int, /) -> Any: ...
    def own_decode(self, data: bytes | bytearray | memoryview, /) -> Any: ...
    def own_decode_from(self, buf: bytes, pos: int, end: int, /) -> Any: ...
