"""The compiled codecs name the generated Python function they stand in for, so that one can
step through it without switching the compiled codecs off: ``__wrapped__`` on ``Cls.encode``
and on the class's ``decode`` / ``decode_from`` descriptors, and ``compiled.python_function``."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame, Payload
from protoframe.runtime.codec import compiled, compiled_frames
from tests.support.compiled_ops import python_only_struct

pytestmark = pytest.mark.skipif(
    not compiled_frames.available(), reason="the compiled codecs are not built or are off")

METHODS = ("encode", "decode", "decode_from")


def _python_functions(cls: type) -> dict[str, Any]:
    """The class's own Python methods, as the pure-Python mode puts them back."""
    with compiled.pure_python():
        found = {name: inspect.getattr_static(cls, name) for name in METHODS}
    return {name: getattr(m, "__func__", m) for name, m in found.items()}


@pytest.mark.parametrize("cls", [pb.MessageMetadata, pb.KeyValue, pb.BaseCommand, Frame, Payload])
def test_each_compiled_method_names_the_python_function(cls: type) -> None:
    assert compiled.is_compiled(cls)
    python = _python_functions(cls)
    encode: Any = inspect.getattr_static(cls, "encode")
    assert encode.__wrapped__ is python["encode"]
    assert encode is cls.__dict__["encode"] is not python["encode"]
    for name in ("decode", "decode_from"):
        descriptor = inspect.getattr_static(cls, name)
        assert descriptor is not python[name]  # the compiled one is in place
        assert descriptor.__wrapped__ is python[name]
    for name in METHODS:
        assert compiled.python_function(cls, name) is python[name]


def test_the_wrapped_functions_are_the_code_the_compiled_one_agrees_with() -> None:
    message = pb.MessageMetadata(producer_name="p", sequence_id=7, publish_time=9,
                                 properties=[pb.KeyValue(key="k", value="v")])
    data = message.encode()
    bound: Any = message.encode
    assert bound.__wrapped__(message) == data  # through the bound method too
    decode = inspect.getattr_static(pb.MessageMetadata, "decode").__wrapped__
    assert decode(pb.MessageMetadata, data) == message
    decode_from = compiled.python_function(pb.MessageMetadata, "decode_from")
    assert decode_from(pb.MessageMetadata, data, 0, len(data)) == message


def test_the_accessor_works_for_python_only_classes_and_subclasses(
        tmp_path: Path) -> None:
    PythonOnly = python_only_struct(tmp_path)  # noqa: N806 - a class
    assert not compiled.is_compiled(PythonOnly)
    assert compiled.python_function(PythonOnly, "encode") is PythonOnly.__dict__["encode"]
    assert compiled.python_function(PythonOnly, "decode") \
        is PythonOnly.__dict__["decode"].__func__

    class Sub(pb.KeyValue):
        __slots__ = ()

    assert compiled.python_function(Sub, "decode") \
        is compiled.python_function(pb.KeyValue, "decode")
    with pytest.raises(ValueError):
        compiled.python_function(pb.KeyValue, "__init__")


def test_pure_python_leaves_the_same_functions() -> None:
    before = {name: compiled.python_function(Frame, name) for name in METHODS}
    with compiled.pure_python():
        assert {name: compiled.python_function(Frame, name) for name in METHODS} == before
        assert not hasattr(Frame.__dict__["encode"], "__wrapped__")
