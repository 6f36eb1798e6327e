"""The compiled fast path of the generated protobuf codecs, and how it is switched on.

Every generated message has a straight-line Python ``encode`` / ``decode`` / ``decode_from``:
that code is the reference. Each generated module ends with a layout table per message (field
number, type, how the field is held, the slot or key holding it, and the message class or enum
table it refers to), passed to :func:`install_layouts`. When the C extension ``runtime._wirecodec``
is built (``pip install`` compiles it; it is optional), ``install_layouts`` puts a compiled codec
driven by that table in place of the three methods.

The compiled codec handles well-formed input and plain values. On anything else (truncated or
malformed bytes, invalid UTF-8, a missing required field, a value out of its field's range, a
value of an unusual type, a group) it leaves the whole message to the Python code, so errors,
their types and their messages are the Python codec's. ``tests/test_compiled_codec.py`` checks
that both give the same bytes, values and errors.

Set ``PROTOFRAME_PURE_PYTHON=1`` in the environment to keep the Python codec everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TypeAlias

_wirecodec: ModuleType | None
try:
    from runtime import _wirecodec
except ImportError:  # not built: no C compiler at install time, or a source checkout
    _wirecodec = None

# One field of a layout table: (number, kind, mode, storage, extra).
#   kind: a protobuf scalar type name, "enum", "open_enum" (proto3: unknown numbers are kept
#         as ints) or "message"
#   mode: "required", "optional" (None is unset), "repeated", "packed" (repeated, written
#         packed) or "sparse" (an optional message kept in the class's dict of present fields)
#   storage: the slot's name, or the key in the present dict
#   extra: the message class, the number -> member dict of an enum, or None
FieldLayout: TypeAlias = tuple[int, str, str, str, object]
# (message class, name of its present-fields slot or None, its fields in number order)
MessageLayout: TypeAlias = tuple[type, str | None, tuple[FieldLayout, ...]]

KINDS: dict[str, int] = {
    name: code
    for code, name in enumerate(
        ("int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "enum", "fixed32",
         "sfixed32", "fixed64", "sfixed64", "float", "double", "string", "bytes", "message",
         "open_enum"),
        start=1,
    )
}
MODES: dict[str, int] = {
    name: code
    for code, name in enumerate(("required", "optional", "repeated", "packed", "sparse"))
}

_METHODS = ("encode", "decode", "decode_from")

# class -> its Python methods, for pure_python().
_python_methods: dict[type, tuple[Any, Any, Any]] = {}
# class -> the compiled methods install_layouts() put in their place.
_compiled_methods: dict[type, tuple[Any, Any, Any]] = {}


def available() -> bool:
    """Whether the C extension is built and not switched off by PROTOFRAME_PURE_PYTHON."""
    return _wirecodec is not None and not os.environ.get("PROTOFRAME_PURE_PYTHON")


def describe() -> str:
    """Which protobuf codec runs, for benchmark headers."""
    if _wirecodec is None:
        return "Python (runtime._wirecodec is not built)"
    if not available():
        return "Python (PROTOFRAME_PURE_PYTHON is set)"
    return "compiled (runtime._wirecodec)"


def install_layouts(layouts: Iterable[MessageLayout]) -> None:
    """Give each message class of a generated module the compiled codec, when it is available.

    Called once, at the end of the module, with the generator's layout tables.
    """
    if not available():
        return
    assert _wirecodec is not None
    for cls, present_slot, fields in layouts:
        table = tuple((number, KINDS[kind], MODES[mode], storage, extra)
                      for number, kind, mode, storage, extra in fields)
        python = tuple(cls.__dict__[name] for name in _METHODS)
        decode_from: Callable[..., Any] = python[2].__func__
        codec = _wirecodec.Codec(cls, table, present_slot, python[0], decode_from)
        compiled = (codec, _wirecodec.ClassMethod(cls, codec.own_decode, codec.decode),
                    _wirecodec.ClassMethod(cls, codec.own_decode_from, codec.decode_from))
        register(cls, python, compiled)


def register(cls: type, python: tuple[Any, Any, Any], compiled: tuple[Any, Any, Any]) -> None:
    """Put ``compiled`` (encode, decode, decode_from) in place of ``python`` on ``cls``, and
    let :func:`pure_python` swap them back (``runtime.compiled_frames`` uses this too)."""
    _python_methods[cls] = python
    _compiled_methods[cls] = compiled
    _set_methods(cls, compiled)


def is_compiled(cls: type) -> bool:
    """Whether ``cls`` currently runs the compiled codec."""
    compiled = _compiled_methods.get(cls)
    return compiled is not None and cls.__dict__["encode"] is compiled[0]


@contextmanager
def pure_python() -> Iterator[None]:
    """Run the generated Python codec of every message inside the block (for tests and
    benchmarks that compare the two); not thread-safe."""
    for cls, python in _python_methods.items():
        _set_methods(cls, python)
    try:
        yield
    finally:
        for cls, compiled in _compiled_methods.items():
            _set_methods(cls, compiled)


def _set_methods(cls: type, methods: tuple[Any, Any, Any]) -> None:
    for name, method in zip(_METHODS, methods, strict=True):
        setattr(cls, name, method)
