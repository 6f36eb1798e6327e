"""The compiled fast path of the generated protobuf codecs, and how it is switched on.

Every generated message has a straight-line Python ``encode`` / ``decode`` / ``decode_from``:
that code is the reference. Each generated module ends with a layout table per message (field
number, type, how the field is held, the slot or key holding it, and the message class or enum
table it refers to), passed to :func:`install_layouts`. When the C extension
``runtime.codec._wirecodec`` is built (``pip install`` compiles it; it is optional),
``install_layouts`` puts a compiled codec driven by that table in place of the three methods.

The compiled codec handles well-formed input and plain values. On anything else (truncated or
malformed bytes, invalid UTF-8, a missing required field, a value out of its field's range, a
value of an unusual type, a group) it leaves the whole message to the Python code, so errors,
their types and their messages are the Python codec's. ``tests/runtime/test_compiled.py`` checks
that both give the same bytes, values and errors.

The same table gives the class a compiled constructor: ``Cls(**kwargs)`` fills the instance's
slots in C exactly as the generated ``__init__`` would (the keywords are the attribute names of
the class's ``FIELD_NAMES``). It too is a fast path: positional arguments, a keyword that is
not a field, a missing required keyword, a repeated value that is neither a list nor None, or
a class whose ``__init__``, ``__new__``, ``__setattr__`` or slots changed after install go
through ``type.__call__`` and the Python ``__init__``, which raises its own errors. Subclasses
always take that path, and so do classes with an implicit-presence enum field whose default
member cannot be the keyword's default (its keyword defaults to None, which ``__init__``
replaces). ``tests/runtime/test_compiled_constructors.py`` and
``tests/runtime/test_compiled_pool.py`` check both build the same instances and raise the same
errors.

Freed instances of a compiled class (up to a few per class) are kept and handed out again by
the decoder and the constructor, every slot filled anew, so a message is rarely an allocation.

Generated enums have :class:`ProtoEnumType` as their metaclass, for faster member access with
the extension (see there).

Set ``PROTOFRAME_PURE_PYTHON=1`` in the environment to keep the Python codec and constructors
everywhere. Without switching, :func:`python_function` (or ``__wrapped__`` on ``Cls.encode`` and
on the class's ``decode`` / ``decode_from`` descriptors) gives the Python code a compiled method
stands in for.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

from protoframe.runtime.codec import vocabulary

_wirecodec: ModuleType | None
try:
    from protoframe.runtime.codec import _wirecodec
except ImportError:  # not built: no C compiler at install time, or a source checkout
    _wirecodec = None

# One field of a layout table: (number, kind, mode, storage, extra), and for the modes
# "implicit", "oneof" and "map" a sixth item (see runtime.codec.vocabulary).
#   kind, mode: words of runtime.codec.vocabulary's FIELD_KINDS and FIELD_MODES
#   storage: the slot's name, or the key in the present dict
#   extra: the message class, the number -> member dict of an enum, or None
FieldLayout: TypeAlias = tuple[int, str, str, str, object] | tuple[
    int, str, str, str, object, object]
# (message class, name of its present-fields slot or None, its fields in number order)
MessageLayout: TypeAlias = tuple[type, str | None, tuple[FieldLayout, ...]]

KINDS = vocabulary.KINDS
MODES = vocabulary.MODES
if _wirecodec is not None:
    vocabulary.check_built(_wirecodec.__name__, getattr(_wirecodec, "VOCABULARY", None),
                           ("FIELD_KINDS", "FIELD_MODES"))

_METHODS = ("encode", "decode", "decode_from")

# class -> its Python methods, for pure_python().
_python_methods: dict[type, tuple[Any, Any, Any]] = {}
# class -> the compiled methods install_layouts() put in their place.
_compiled_methods: dict[type, tuple[Any, Any, Any]] = {}
# class -> the codec whose compiled constructor install_layouts() gave it.
_constructors: dict[type, Any] = {}
# (table, key, Python method, compiled method): entries of a generated module's tables of
# methods, bound when the module ran (before the compiled codec came in), that
# register_table_entry() pointed at the compiled methods.
_table_entries: list[tuple[dict[Any, Any], Any, Any, Any]] = []
# class -> its layout table, as install_layouts() was given it (read by runtime.spark.columnar).
_layouts: dict[type, tuple[FieldLayout, ...]] = {}
# class -> (attribute name, generated property, compiled accessor standing in for it).
_accessors: dict[type, list[tuple[str, property, Any]]] = {}


def available() -> bool:
    """Whether the C extension is built and not switched off by PROTOFRAME_PURE_PYTHON."""
    return _wirecodec is not None and not os.environ.get("PROTOFRAME_PURE_PYTHON")


def describe() -> str:
    """Which protobuf codec runs, for benchmark headers."""
    if _wirecodec is None:
        return "Python (runtime.codec._wirecodec is not built)"
    if not available():
        return "Python (PROTOFRAME_PURE_PYTHON is set)"
    return "compiled (runtime.codec._wirecodec)"


class ProtoEnumType(enum.EnumType):
    """The metaclass of generated enums: Python 3.11's ``enum.EnumType``, with faster member
    access.

    On CPython 3.11 ``EnumType`` defines ``__getattr__``, which sends every attribute lookup on
    an enum class (``CompressionType.LZ4``) through CPython's generic hook: about 80 ns, where
    a plain class attribute takes 10 ns. Members are class attributes anyway, so with the C
    extension the classes of this metaclass look a name up as ``type`` does and call
    ``__getattr__`` only when that finds nothing, as the hook would. Nothing else differs, and
    without the extension (or inside :func:`pure_python`) it is 3.11's ``EnumType``.

    Python 3.12 dropped ``EnumType.__getattr__``; this metaclass keeps it, so that generated
    enums behave alike on every version: a name found in ``_member_map_`` only is still the
    member, and a name that is not there raises ``AttributeError(name)``.
    """

    # Hidden from type checkers, for which every attribute of an enum class would exist.
    if sys.version_info >= (3, 12) and not TYPE_CHECKING:

        def __getattr__(cls, name):
            # As in 3.11's enum.py.
            if len(name) > 4 and name[:2] == name[-2:] == "__" and name[2] != "_" \
                    and name[-3] != "_":
                raise AttributeError(name)
            try:
                return cls._member_map_[name]
            except KeyError:
                raise AttributeError(name) from None


def install_layouts(layouts: Iterable[MessageLayout]) -> None:
    """Give each message class of a generated module the compiled codec and constructor, when
    the extension is available.

    Called once, at the end of the module, with the generator's layout tables, which
    :func:`layout` hands out afterwards (with or without the extension).
    """
    layouts = tuple(layouts)
    for cls, _, fields in layouts:
        _layouts[cls] = fields
    if not available():
        return
    assert _wirecodec is not None
    for cls, present_slot, fields in layouts:
        table = tuple(_c_row(field) for field in fields)
        python = tuple(cls.__dict__[name] for name in _METHODS)
        decode_from: Callable[..., Any] = python[2].__func__
        codec = _wirecodec.Codec(cls, table, present_slot, python[0], decode_from)
        compiled = (codec,
                    _wirecodec.ClassMethod(cls, codec.own_decode, codec.decode,
                                           python[1].__func__),
                    _wirecodec.ClassMethod(cls, codec.own_decode_from, codec.decode_from,
                                           decode_from))
        register(cls, python, compiled)
        _install_accessors(cls, present_slot, fields)
        keywords = _keywords(cls, fields)
        if keywords is not None and codec.install_constructor(keywords, cls.__dict__["__init__"]):
            register_constructor(cls, codec)


def layout(cls: type) -> tuple[FieldLayout, ...] | None:
    """The layout table ``install_layouts`` was given for ``cls``, or None."""
    return _layouts.get(cls)


def _c_row(field: FieldLayout) -> tuple[object, ...]:
    """A layout row as the C codec takes it: words as numbers, a map's key kind too."""
    number, kind, mode, storage, extra, *aux = field
    if mode == "map":
        key: tuple[str, object, object] = aux[0]  # type: ignore[assignment]
        aux = [(KINDS[key[0]], *key[1:])]
    return (number, KINDS[kind], MODES[mode], storage, extra, *aux)


def _keywords(cls: type, fields: tuple[FieldLayout, ...]) -> tuple[str, ...] | None:
    """The ``__init__`` keyword of each field of a layout table, from ``cls.FIELD_NAMES``
    (rows of attribute name, storage, proto name); None if a field is not there."""
    by_storage = {storage: name for name, storage, _ in getattr(cls, "FIELD_NAMES", ())}
    if "__init__" not in cls.__dict__ or any(f[3] not in by_storage for f in fields):
        return None
    return tuple(by_storage[f[3]] for f in fields)


def _install_accessors(cls: type, present_slot: str | None,
                       fields: tuple[FieldLayout, ...]) -> None:
    """Put a compiled accessor in place of each generated property of an optional field (the
    slot's value, or the field's default when it is None) and of a sparse field (its entry in
    the present dict, or None), where the property is found to do just that."""
    assert _wirecodec is not None
    names = {storage: name for name, storage, _ in getattr(cls, "FIELD_NAMES", ())}
    installed: list[tuple[str, property, Any]] = []
    for _, _, mode, storage, *_ in fields:
        name = names.get(storage)
        if name is None:
            continue
        prop = cls.__dict__.get(name)
        if type(prop) is not property or prop.fget is None or prop.fset is None:
            continue
        if mode == "optional" and name != storage:
            found = _probe_optional(cls, prop, storage)
            if found is None:
                continue
            accessor = _wirecodec.Accessor(cls, prop, name, storage, None, found[0])
        elif mode == "sparse" and present_slot is not None:
            if not _probe_sparse(cls, prop, present_slot, storage):
                continue
            accessor = _wirecodec.Accessor(cls, prop, name, present_slot, storage, None)
        else:
            continue
        installed.append((name, prop, accessor))
        setattr(cls, name, accessor)
    if installed:
        _accessors[cls] = installed


# What a probe stores, to see it come back; a fresh object no generated code can know.
_Marker = type("_Marker", (), {"__slots__": ()})


def _probe_optional(cls: type, prop: property, storage: str) -> tuple[object] | None:
    """(default,) if ``prop`` reads ``storage`` as the generated property of an optional field
    does (the value, or a constant when it is None) and its setter stores into it; else None."""
    member = cls.__dict__.get(storage)
    if member is None or not hasattr(member, "__set__"):
        return None
    try:
        probe: Any = object.__new__(cls)
        member.__set__(probe, None)
        default = prop.fget(probe)  # type: ignore[misc]
        if prop.fget(probe) is not default or default is None:  # type: ignore[misc]
            return None
        # Only values that cannot change are shared by every read.
        if not isinstance(default, (int, float, str, bytes, enum.Enum)):
            return None
        marker = _Marker()
        member.__set__(probe, marker)
        if prop.fget(probe) is not marker:  # type: ignore[misc]
            return None
        other = _Marker()
        prop.fset(probe, other)  # type: ignore[misc]
        if member.__get__(probe, cls) is not other:
            return None
    except Exception:  # noqa: BLE001 (not the generated shape: the property stays)
        return None
    return (default,)


def _probe_sparse(cls: type, prop: property, present_slot: str, key: str) -> bool:
    """Whether ``prop`` is the generated property of a sparse field: ``present.get(key)``, and a
    setter that pops the key for None and stores anything else under it."""
    member = cls.__dict__.get(present_slot)
    if member is None or not hasattr(member, "__set__"):
        return False
    try:
        probe: Any = object.__new__(cls)
        present: dict[str, object] = {}
        member.__set__(probe, present)
        if prop.fget(probe) is not None:  # type: ignore[misc]
            return False
        marker = _Marker()
        present[key] = marker
        if prop.fget(probe) is not marker:  # type: ignore[misc]
            return False
        other = _Marker()
        prop.fset(probe, other)  # type: ignore[misc]
        if present != {key: other} or member.__get__(probe, cls) is not present:
            return False
        prop.fset(probe, None)  # type: ignore[misc]
        prop.fset(probe, None)  # type: ignore[misc]
        if present:
            return False
    except Exception:  # noqa: BLE001 (not the generated shape: the property stays)
        return False
    return True


def register(cls: type, python: tuple[Any, Any, Any], compiled: tuple[Any, Any, Any]) -> None:
    """Put ``compiled`` (encode, decode, decode_from) in place of ``python`` on ``cls``, and
    let :func:`pure_python` swap them back (``runtime.codec.compiled_frames`` uses this too)."""
    _python_methods[cls] = python
    _compiled_methods[cls] = compiled
    _set_methods(cls, compiled)


def register_table_entry(table: dict[Any, Any], key: Any, method: Any) -> None:
    """Put the compiled ``method`` in ``table[key]``, and let :func:`pure_python` put the
    Python one back (``runtime.codec.compiled_frames`` uses this)."""
    _table_entries.append((table, key, table[key], method))
    table[key] = method


def register_constructor(cls: type, codec: Any) -> None:
    """Let :func:`pure_python` switch ``codec``'s installed constructor for ``cls`` off and on
    (``codec`` has ``enable_constructor`` and ``constructor_enabled``)."""
    _constructors[cls] = codec


def python_function(cls: type, name: str) -> Callable[..., Any]:
    """The generated Python function behind ``cls.encode``, ``cls.decode`` or
    ``cls.decode_from``, whether or not the compiled codec stands in for it: the code to step
    through in a debugger (``decode`` and ``decode_from`` take the class first).

    The compiled ``encode`` carries it as ``__wrapped__`` too, and so does the class's
    ``decode`` descriptor (``inspect.getattr_static(cls, "decode").__wrapped__``); what
    ``cls.decode`` hands out is a builtin method, which can carry no attribute.
    """
    index = _METHODS.index(name)
    for klass in cls.__mro__:
        python = _python_methods.get(klass)
        method = python[index] if python is not None else klass.__dict__.get(name)
        if method is not None:
            function: Callable[..., Any] = getattr(method, "__func__", method)
            return function
    raise AttributeError(f"{cls.__name__} has no {name}")


def is_compiled(cls: type) -> bool:
    """Whether ``cls`` currently runs the compiled codec."""
    compiled = _compiled_methods.get(cls)
    return compiled is not None and cls.__dict__["encode"] is compiled[0]


def has_compiled_constructor(cls: type) -> bool:
    """Whether ``cls(**kwargs)`` currently runs the compiled constructor."""
    codec = _constructors.get(cls)
    return codec is not None and bool(codec.constructor_enabled)


@contextmanager
def pure_python() -> Iterator[None]:
    """Run the generated Python codec and ``__init__`` of every message, and plain
    ``EnumType`` member access, inside the block (for tests and benchmarks that compare the
    two); not thread-safe."""
    _use_compiled(False)
    try:
        yield
    finally:
        _use_compiled(True)


def _use_compiled(on: bool) -> None:
    # A function of its own, so that no loop variable keeps a class alive while the
    # pure_python() block runs (reference-count tests watch the classes).
    for cls, methods in (_compiled_methods if on else _python_methods).items():
        _set_methods(cls, methods)
    for codec in _constructors.values():
        codec.enable_constructor(on)
    for table, key, python, method in _table_entries:
        table[key] = method if on else python
    for cls, accessors in _accessors.items():
        for name, prop, accessor in accessors:
            setattr(cls, name, accessor if on else prop)
    _set_enum_access(on)


def _set_enum_access(fast: bool) -> None:
    if available():
        assert _wirecodec is not None
        _wirecodec.set_class_getattr(ProtoEnumType, fast)


def _set_methods(cls: type, methods: tuple[Any, Any, Any]) -> None:
    for name, method in zip(_METHODS, methods, strict=True):
        setattr(cls, name, method)


_set_enum_access(True)
