"""Member access on generated enums (runtime.codec.compiled.ProtoEnumType) against plain EnumType.

With the C extension the enums' metaclass looks class attributes up as ``type`` does and calls
its ``__getattr__`` (3.11's ``EnumType.__getattr__``, which ProtoEnumType keeps on 3.12 and
later) only for names that lookup misses; every lookup must give what 3.11's ``enum.EnumType``
gives, value or error, on every Python version.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from protoframe.generated.pravega import controller
from protoframe.generated.pulsar import pulsar_api
from protoframe.generated.tubemq import rpc
from protoframe.runtime.codec import compiled

_fast = pytest.mark.skipif(
    not compiled.available(),
    reason="runtime.codec._wirecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)


def _enums(module: ModuleType) -> Iterator[type[enum.Enum]]:
    def walk(cls: type) -> Iterator[type[enum.Enum]]:
        for value in vars(cls).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                if issubclass(value, enum.Enum):
                    yield value
                else:
                    yield from walk(value)
    for _, value in inspect.getmembers(module, inspect.isclass):
        if value.__module__ == module.__name__:
            if issubclass(value, enum.Enum):
                yield value
            else:
                yield from walk(value)


ENUMS = sorted({e for m in (pulsar_api, controller, rpc) for e in _enums(m)},
               key=lambda e: e.__qualname__)

# Names that are not members: EnumType's and type's attributes, properties of the members'
# class, dunders the __getattr__ hook refuses, and names nothing defines.
OTHER_NAMES = ("name", "value", "_member_map_", "__members__", "__origin__", "__len__", "mro",
               "__name__", "__doc__", "from_bytes", "nope", "__nope__", "_missing_")


def _lookup(cls: type, name: str) -> tuple[str, Any]:
    try:
        return "value", getattr(cls, name)
    except Exception as exc:  # noqa: BLE001 - the exception is the thing compared
        return "raised", (type(exc), str(exc))


def test_every_generated_enum_has_the_metaclass() -> None:
    assert len(ENUMS) > 20
    for cls in ENUMS:
        assert type(cls) is compiled.ProtoEnumType


@_fast
@pytest.mark.parametrize("cls", ENUMS, ids=lambda e: e.__qualname__)
def test_lookups_match_plain_enum_type(cls: type[enum.Enum]) -> None:
    names = [*cls.__members__, *OTHER_NAMES]
    fast = [_lookup(cls, name) for name in names]
    with compiled.pure_python():
        python = [_lookup(cls, name) for name in names]
    assert fast == python
    for member in cls:
        assert getattr(cls, member.name) is member


@_fast
def test_names_only_the_member_map_holds_come_from_getattr() -> None:
    class Colour(enum.IntEnum, metaclass=compiled.ProtoEnumType):
        RED = 1
        GREEN = 2

    # Take GREEN out of the class dict (EnumType forbids `del Colour.GREEN`): only
    # the metaclass's __getattr__, which reads _member_map_, still finds it.
    type.__delattr__(Colour, "GREEN")
    assert "GREEN" not in vars(Colour)
    assert Colour.GREEN is Colour(2)
    with compiled.pure_python():
        assert Colour.GREEN is Colour(2)
    with pytest.raises(AttributeError):
        _ = Colour.BLUE  # type: ignore[attr-defined]
    assert not hasattr(Colour, "__blue__")


@pytest.mark.parametrize("fast", [True, False], ids=["as-installed", "pure-python"])
def test_generated_enums_behave_as_on_python_3_11(fast: bool) -> None:
    """Python 3.12 dropped EnumType.__getattr__; ProtoEnumType keeps it, extension or not."""
    class Colour(enum.IntEnum, metaclass=compiled.ProtoEnumType):
        RED = 1
        GREEN = 2

    type.__delattr__(Colour, "GREEN")
    with contextlib.nullcontext() if fast else compiled.pure_python():
        assert Colour.GREEN is Colour(2)
        for name in ("BLUE", "__blue__"):
            with pytest.raises(AttributeError) as info:
                getattr(Colour, name)
            assert info.value.args == (name,)


@_fast
def test_the_switch_serves_one_metaclass_only() -> None:
    from protoframe.runtime.codec import _wirecodec

    class Other(enum.EnumType):
        pass

    with pytest.raises(ValueError, match="one metaclass"):
        _wirecodec.set_class_getattr(Other, True)
    with pytest.raises(TypeError):
        _wirecodec.set_class_getattr(int, True)
    with pytest.raises(TypeError):
        _wirecodec.set_class_getattr(compiled.ProtoEnumType)  # type: ignore[call-arg]
