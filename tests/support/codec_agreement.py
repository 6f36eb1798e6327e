"""The compiled and Python codecs compared on one call: the same value, or the same error.

The compiled codecs are a fast path; every outcome (a value, or an exception's type and text)
must be the one the generated Python code gives. The agreement tests of each compiled op run
their cases through :func:`same`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protoframe.runtime.codec import compiled


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``("value", repr(result))`` or ``("raised", (type, text))`` of calling ``fn``."""
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
        return "raised", (type(exc), str(exc))
    return "value", repr(value)


def same(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``fn``'s outcome, the same with the compiled codecs as with the Python ones."""
    fast = outcome(fn)
    with compiled.pure_python():
        python = outcome(fn)
    assert fast == python
    return fast


def same_decodes(cls: Any, data: bytes) -> str:
    """Whether ``data`` decodes ("value") or not ("raised") as ``cls``, through ``decode`` and
    ``decode_from``, each the same with both codecs."""
    kind = same(lambda: cls.decode(data))[0]
    same(lambda: cls.decode_from(data, 0, len(data)))
    return kind
