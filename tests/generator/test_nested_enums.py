"""Enum fields whose enum is nested in a message, and the long lines nested names make.

``tests/data/nested`` declares proto3 fields (implicit presence: the default is an ``__init__``
parameter default, evaluated while the class statement runs) of enums nested in the same
message, in a nested message, in an enclosing message, in a message declared later and in
another file, and proto2 fields with ``[default = X]`` of nested enums. The generated package
must import, type-check, pass ruff, and agree with the official runtime.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protoframe.generator.linefit import fit_line
from tests.support.generate import generate_package, import_generated
from tests.support.paths import DATA, ROOT

pytestmark = pytest.mark.slow  # runs mypy --strict on the generated package


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("nested")
    generate_package(tmp, "nested")
    return tmp


@pytest.fixture(scope="module")
def v3(package: Path) -> Any:
    return import_generated(package, "nested.nested3")


@pytest.fixture(scope="module")
def v2(package: Path) -> Any:
    return import_generated(package, "nested.nested2")


def _official(tmp: Path, name: str) -> ModuleType:
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{DATA / 'nested'}",
                    f"--python_out={tmp}", *[str(p) for p in (DATA / "nested").glob("*.proto")]],
                   check=True)
    sys.path.insert(0, str(tmp))
    try:
        spec = importlib.util.spec_from_file_location(name, tmp / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tmp))
    return module


def test_proto3_defaults_of_nested_enums_are_the_first_members(v3: Any) -> None:
    r, detail = v3.Response, v3.Response.Detail
    assert r().status is r.Status.SUCCESS
    assert r().detail_severity is detail.SeverityLevel.INFORMATIONAL
    assert r().sibling_mode is r.Sibling.Mode.OFF
    assert detail().severity_level_reported_by_the_detail is detail.SeverityLevel.INFORMATIONAL
    # Enums of enclosing and sibling classes, and of a message declared further down.
    assert detail().parent_status is r.Status.SUCCESS
    assert detail.Deeper().grandparent_severity is detail.SeverityLevel.INFORMATIONAL
    assert r.Sibling().cousin_severity is detail.SeverityLevel.INFORMATIONAL
    assert v3.EarlyUser().kind is v3.LateOwner.Kind.KIND_UNSPECIFIED
    late = v3.LateOwner()
    assert (late.kind, late.severity, late.status) == (0, 0, 0)
    base = importlib.import_module(f"{v3.__package__}.nested_base")
    assert late.flavour is base.Envelope.Flavour.PLAIN
    for cls in (r, detail, detail.Deeper, r.Sibling, v3.EarlyUser, v3.LateOwner):
        assert cls().encode() == b"", cls
    # A value given explicitly, including the default's own member, is kept as given.
    assert detail.Deeper(grandparent_severity=detail.SeverityLevel.WARNING).encode() == b"\x08\x01"
    assert v3.EarlyUser(kind=v3.LateOwner.Kind.KIND_A).kind is v3.LateOwner.Kind.KIND_A


def test_proto2_nested_enum_defaults_read_through_properties(v2: Any) -> None:
    outer, inner = v2.Outer, v2.Outer.Inner
    assert outer().level is outer.Level.HIGH and not outer().has_level()
    assert outer().plain is outer.Level.LOW
    assert outer().inner_colour is inner.Colour.BLUE
    assert inner(needed=outer.Level.LOW).colour is inner.Colour.BLUE
    assert inner(needed=outer.Level.LOW).level is outer.Level.HIGH
    assert v2.User().colour is inner.Colour.BLUE
    assert outer().encode() == b""


def test_nested_enums_match_official_runtime(v2: Any, v3: Any, tmp_path: Path) -> None:
    theirs3 = _official(tmp_path, "nested3_pb2")
    theirs2 = _official(tmp_path, "nested2_pb2")
    official = theirs3.LateOwner(kind=1, severity=1, status=1, flavour=1)
    mine = v3.LateOwner(kind=1, severity=1, status=1, flavour=1)
    assert mine.encode() == official.SerializeToString()
    decoded = v3.Response.decode(theirs3.Response(
        detail=theirs3.Response.Detail(parent_status=1)).SerializeToString())
    assert decoded.detail is not None
    assert decoded.detail.parent_status is v3.Response.Status.FAILURE
    assert decoded.detail.severity_level_reported_by_the_detail == 0
    unset = theirs2.Outer()
    assert (unset.level, unset.inner_colour) == (v2.Outer().level, v2.Outer().inner_colour)


def test_generated_package_passes_mypy_strict_and_ruff(package: Path) -> None:
    target = str(package / "gen_pkg" / "nested")
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--config-file", str(ROOT / "pyproject.toml"), target],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert mypy.returncode == 0, mypy.stdout
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), target],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert ruff.returncode == 0, ruff.stdout


def test_long_lines_are_wrapped_as_valid_python(package: Path) -> None:
    text = (package / "gen_pkg" / "nested" / "nested3.py").read_text()
    # A parameter with a wrapped default keeps its comma after the parentheses.
    assert ("severity_level_reported_by_the_detail: Response.Detail.SeverityLevel | int = (\n"
            "                SeverityLevel.INFORMATIONAL\n"
            "            ),\n") in text
    spark = (package / "gen_pkg" / "nested" / "spark.py").read_text()
    # A long full name in MESSAGES: the key alone on its line, the codec below it.
    assert ('    "protoframe.tests.nested.enums.with.a.rather.long.package.name.v1.Response.'
            'Detail":\n        Response_Detail,\n') in spark


def _fit_each(source: str) -> str:
    """``source`` with each of its lines fitted at the depth it is written at."""
    return "\n".join(out for line in source.split("\n") for out in fit_line(line))


def test_wrap_keeps_the_trailing_comma_of_a_parameter() -> None:
    source = ("def f(\n    *,\n    a_parameter_with_a_long_name: some.module.AType | int = "
              "some.module.AType.A_MEMBER_WITH_A_LONG_NAME,\n    b: int = 0,\n) -> None:\n"
              "    pass")
    wrapped = _fit_each(source)
    assert wrapped.splitlines()[2:5] == [
        "    a_parameter_with_a_long_name: some.module.AType | int = (",
        "        some.module.AType.A_MEMBER_WITH_A_LONG_NAME",
        "    ),",
    ]
    compile(wrapped, "wrapped", "exec")
    # A statement-level tuple keeps its commas inside the parentheses.
    tuple_line = "x = " + ", ".join(f"name_{i}" for i in range(14)) + ","
    assert fit_line(tuple_line)[-1] == ")"


def test_wrap_splits_long_dict_entries_and_conditionals() -> None:
    key = "a.rather.long.protobuf.package.name.that.goes.on.Message.Nested.Deeper"
    source = f'TABLE = {{\n    "{key}": Message_Nested_Deeper_With_Some_More,\n}}'
    assert _fit_each(source).splitlines()[1:3] == [
        f'    "{key}":', "        Message_Nested_Deeper_With_Some_More,"]
    line = ("        self.some_field = Outer.Inner.SomeEnumeration.THE_FIRST_MEMBER "
            "if some_field_with_a_long_name is None else some_field_with_a_long_name")
    assert fit_line(line) == [
        "        self.some_field = (",
        "            Outer.Inner.SomeEnumeration.THE_FIRST_MEMBER",
        "            if some_field_with_a_long_name is None",
        "            else some_field_with_a_long_name",
        "        )",
    ]
