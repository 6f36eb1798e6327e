"""Type stub of the C extension runtime/codec/_wirecodec.c (see runtime/codec/compiled.py)."""

from collections.abc import Callable
from typing import Any

VOCABULARY: dict[str, dict[str, int]]

def set_class_getattr(metaclass: type, on: bool, /) -> None:
    """Plain type attribute lookup (``__getattr__`` only for what it misses) for the classes of
    ``metaclass``, or back to what it had."""

class Codec:
    """The compiled encode/decode of one generated message class."""

    def __init__(
        self,
        cls: type,
        fields: tuple[tuple[int, int, int, str, object], ...],
        present_slot: str | None,
        py_encode: Callable[[Any], bytes],
        py_decode_from: Callable[..., Any],
        /,
    ) -> None: ...
    __wrapped__: Callable[[Any], bytes]

    def __call__(self, message: Any, /) -> bytes: ...
    def decode(self, cls: type, data: bytes | bytearray | memoryview, /) -> Any: ...
    def decode_from(self, cls: type, buf: bytes, pos: int, end: int, /) -> Any: ...
    def own_decode(self, data: bytes | bytearray | memoryview, /) -> Any: ...
    def own_decode_from(self, buf: bytes, pos: int, end: int, /) -> Any: ...
    def install_constructor(
        self, keywords: tuple[str, ...], init: Callable[..., None], /
    ) -> bool: ...
    def enable_constructor(self, on: bool, /) -> None: ...
    @property
    def constructor_enabled(self) -> bool: ...

class ClassMethod:
    """A classmethod with a prepared binding for the class it was made for."""

    __func__: Callable[..., Any]
    __wrapped__: Callable[..., Any] | None

    def __init__(
        self,
        cls: type,
        own: Callable[..., Any],
        general: Callable[..., Any],
        wrapped: Callable[..., Any] | None = None,
        /,
    ) -> None: ...
    def __get__(self, obj: object, owner: type | None = None, /) -> Callable[..., Any]: ...
