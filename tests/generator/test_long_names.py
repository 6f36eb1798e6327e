"""Test specs with every protobuf name made long still generate modules that compile, fit and
type-check: a long message or field name once made spark.py fail to compile (a schema's
``_SPARK_<key> = StructType([`` wrapped as ``= (`` / ``StructType([`` / ``)``), which stopped
generation with a GeneratorBug; the protobuf modules' oneof docstrings ran past the line limit,
and a proto3 map of an open enum failed ``mypy --strict`` whatever its names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from protoframe.generator.build import generate
from protoframe.generator.linefit import LIMIT, fit_line
from protoframe.generator.output import write_files
from tests.support.paths import DATA, ROOT

# Protobuf-only test specs with nested, sparse, map and oneof messages.
SPECS = ["mapsoneofs", "proto3", "sparse", "nested"]
LONG_TYPE = "WithAVeryLongProtobufMessageNameForFitting"
LONG_FIELD = "_with_a_rather_long_field_name_for_fitting"


def _uncommented(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def lengthen(text: str, types: set[str]) -> str:
    """A .proto's text with each of ``types`` and each field and oneof name made long."""
    text = _uncommented(text)
    for name in sorted(types, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){name}\b(?!\s*=)", name + LONG_TYPE, text)
        text = re.sub(rf"\.{name}\b", f".{name}{LONG_TYPE}", text)

    def field(m: re.Match[str]) -> str:
        name = m.group(2)
        return m.group(1) + (name if name.isupper() else name + LONG_FIELD) + m.group(3)

    text = re.sub(r"(\s)(\w+)(\s*=\s*\d+\s*[;\[])", field, text)  # enum values stay
    return re.sub(r"\boneof\s+(\w+)", lambda m: f"oneof {m.group(1)}{LONG_FIELD}", text)


def long_copy(spec_dir: Path, protocol: str) -> None:
    """``tests/data/<protocol>`` as ``spec_dir/<protocol>`` with every name made long."""
    protos = sorted((DATA / protocol).glob("*.proto"))
    types = {n for p in protos
             for n in re.findall(r"\b(?:message|enum)\s+(\w+)", _uncommented(p.read_text()))}
    (spec_dir / protocol).mkdir(parents=True)
    for p in protos:
        (spec_dir / protocol / p.name).write_text(lengthen(p.read_text(), types))


def test_the_copies_are_long() -> None:
    text = lengthen("message Leaf {\n  string label = 1; // a comment\n}\n", {"Leaf"})
    assert text == f"message Leaf{LONG_TYPE} {{\n  string label{LONG_FIELD} = 1; \n}}\n"


@pytest.fixture(scope="module")
def long_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every spec of SPECS, renamed long, generated into one package each."""
    tmp = tmp_path_factory.mktemp("long")
    for protocol in SPECS:
        long_copy(tmp / "specs", protocol)
        out = generate(tmp / "specs", "specs", [protocol])  # a GeneratorBug fails here
        write_files(tmp / f"long_{protocol}", out.files, out.protocols)
    return tmp


@pytest.mark.parametrize("protocol", SPECS)
def test_long_names_generate_modules_that_compile_and_fit(long_package: Path,
                                                          protocol: str) -> None:
    modules = sorted((long_package / f"long_{protocol}" / protocol).glob("*.py"))
    assert {m.name for m in modules} >= {"spark.py", "__init__.py"}
    for module in modules:
        text = module.read_text()
        compile(text, str(module), "exec", dont_inherit=True)
        assert LONG_TYPE in text or module.name == "__init__.py"
    # Nothing is over the limit that the lint does not accept: what no rule can shorten is
    # marked so, and a line that is one long name (a dotted path in a docstring) is let be.
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "E501",
         "--line-length", str(LIMIT), str(long_package / f"long_{protocol}")],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert lint.returncode == 0, lint.stdout


@pytest.mark.slow
def test_long_names_pass_mypy_strict(long_package: Path) -> None:
    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--config-file", str(ROOT / "pyproject.toml"),
         *(str(long_package / f"long_{p}") for p in SPECS)],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert mypy.returncode == 0, mypy.stdout


SCHEMA_HEAD = ("_SPARK_OuterWithAVeryLongProtobufMessageNameForFitting_"
               "HolderWithAVeryLongProtobufMessageNameForFitting = StructType([")


@pytest.mark.parametrize("head", [
    SCHEMA_HEAD,  # a schema constant: its fields follow on lines of their own
    "    value = sparse3.OuterWithAVeryLongProtobufMessageNameForFitting."
    "HolderWithAVeryLongProtobufMessageNameForFitting(",  # a call whose arguments follow
])
def test_a_long_line_that_opens_a_statement_continued_below_stays_whole(head: str) -> None:
    # Wrapped as `x = (` / `StructType([` / `)` once: the `)` then closed nothing of its own.
    assert fit_line(head) == [head]
    compile("\n".join([*fit_line(head.lstrip()), "    1,", "])" if "[" in head else ")"]),
            "x.py", "exec")


def test_a_long_line_closing_a_statement_opened_above_is_not_given_brackets() -> None:
    tail = "    " + "x" * 60 + ", " + "y" * 60 + "]) + extra"
    assert fit_line(tail) == [tail]
