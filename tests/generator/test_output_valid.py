"""Generated code always compiles and type-checks, or generation fails: seeded regressions.

Each spec here once produced a module with a SyntaxError, one that failed ``mypy --strict``,
or a traceback from inside the generator, while generation reported success (or crashed).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protoframe.generator import build, render
from protoframe.generator.build import generate
from protoframe.generator.cli import EXIT_GENERATOR_BUG, main
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.linefit import fit_line
from protoframe.generator.output import write_files
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # runs mypy --strict on generated modules

# A long frame name makes the switch's decoder table's annotation longer than a line; the
# wrapper once broke the line at the value's opening brace: `= (\n{\n)`.
LONG_NAMES = """\
protocol: pg
structs:
  Query:
    fields:
      - {name: sql, type: string, prefix: u32}
  Lists:
    fields:
      - {name: n_codes, type: u8, count_of: codes}
      - {name: codes, type: array, of: u16}
      - {name: n_queries, type: u8, count_of: queries}
      - {name: queries, type: array, of: Query}
  Inner:
    fields:
      - {name: sub, type: u8}
      - name: payload
        type: switch
        on: sub
        cases:
          1: Query
          2: Lists
frame:
  name: PostgresFrontendMessageWithAVeryLongName
  fields:
    - {name: tag, type: u8}
    - {name: length, type: u32, size_of: rest}
    - name: body
      type: switch
      on: tag
      cases:
        0x51: Query
        0x4c: Lists
        0x49: Inner
"""


def generate_into(tmp_path: Path, spec: str) -> Path:
    (tmp_path / "specs" / "pg").mkdir(parents=True)
    (tmp_path / "specs" / "pg" / "pg.yaml").write_text(spec)
    out = generate(tmp_path / "specs", "specs", ["pg"])
    write_files(tmp_path / "pgpkg", out.files, out.protocols)
    return tmp_path / "pgpkg"


def test_long_names_nested_switches_and_two_arrays_compile_type_check_and_round_trip(
        tmp_path: Path) -> None:
    package = generate_into(tmp_path, LONG_NAMES)
    frames = (package / "pg" / "frames.py").read_text()
    # Every line fits but an error message, which is one literal however long (the line says
    # so to the lint): it sits alone on its line, nothing else can be shortened.
    long = [line for line in frames.splitlines() if len(line) > 100]
    assert all(re.fullmatch(r'\s*f?"[^"]*",?  # noqa: E501', line) for line in long), long
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--config-file", str(ROOT / "pyproject.toml"), str(package)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert mypy.returncode == 0, mypy.stdout
    code = (
        "from pgpkg.pg import frames as f\n"
        "values = [f.PostgresFrontendMessageWithAVeryLongName(body=f.Lists(\n"
        "              codes=[1, 65535], queries=[f.Query(sql='select 1'), f.Query(sql='')])),\n"
        "          f.PostgresFrontendMessageWithAVeryLongName(body=f.Inner(\n"
        "              payload=f.Lists(codes=[], queries=[f.Query(sql='x')])))]\n"
        "data = b''.join(v.encode() for v in values)\n"
        "assert f.StreamDecoder().feed(data) == values\n"
        "print('ok')\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=False,
                         env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert ran.stdout == "ok\n", ran.stderr


def test_wrapping_a_line_that_opens_a_value_breaks_inside_the_annotation() -> None:
    line = ("_DECODERS: dict[int, Callable[[bytes, int, int], "
            "tuple[SomeVeryMuchLongerFrameNameWithMoreBody, int]]] = {")
    wrapped = "\n".join([*fit_line(line), "    1: A.decode_from,", "}"])
    compile(wrapped, "x.py", "exec")
    assert wrapped.splitlines()[:4] == [
        "_DECODERS: dict[",
        "    int,",
        "    Callable[[bytes, int, int], tuple[SomeVeryMuchLongerFrameNameWithMoreBody, int]],",
        "] = {",
    ]


def test_a_wrap_that_would_unbalance_brackets_keeps_the_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from protoframe.generator import linefit

    line = "x = call(" + ", ".join(f"argument_{i}" for i in range(12)) + ")"
    assert len(line) > 100 and fit_line(line) != [line]
    # A rule that loses a bracket (as the one for `= {` once did) leaves the line alone.
    monkeypatch.setattr(linefit, "_wrap_line", lambda text, limit: ["x = call(", "    a,"])
    assert fit_line(line) == [line]


def test_output_that_does_not_compile_is_a_bug_exit_3_and_nothing_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "specs" / "pg").mkdir(parents=True)
    (tmp_path / "specs" / "pg" / "pg.yaml").write_text(LONG_NAMES)
    real = render.render

    def broken(env: Any, template: str, **context: object) -> str:
        out = real(env, template, **context)
        return out.replace("class Query:", "class Query(:", 1) if "class Query:" in out else out

    monkeypatch.setattr(build, "render", broken)
    with pytest.raises(GeneratorBug) as info:
        generate(tmp_path / "specs", "specs", ["pg"])
    assert info.value.source == "specs/pg/pg.yaml"
    assert "the generated pg/frames.py does not compile" in info.value.message
    monkeypatch.chdir(tmp_path)
    assert main(["generate"]) == EXIT_GENERATOR_BUG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["specs"]


# Found by tests/generator/test_spec_fuzz.py: the row conversion of an array in spark.py is a
# long list comprehension, which the wrapper once gave a trailing comma (`[x for y in z,]`),
# then split at the empty `()` it ends with.
COMPREHENSION = """\
protocol: fz
structs:
  AVeryLongStructNameForFuzzingTheWrapper0:
    fields:
    - {name: pos, type: u8, count_of: struct_error}
    - {name: struct_error, type: array, of: u64}
frame:
  name: Frame
  fields:
  - {name: length, type: u32, size_of: rest}
  - {name: op, type: u8}
  - name: body
    type: switch
    'on': op
    cases:
      1: AVeryLongStructNameForFuzzingTheWrapper0
"""


def test_a_long_comprehension_breaks_before_its_for(tmp_path: Path) -> None:
    (tmp_path / "specs" / "fz").mkdir(parents=True)
    (tmp_path / "specs" / "fz" / "fz.yaml").write_text(COMPREHENSION)
    spark = generate(tmp_path / "specs", "specs", ["fz"]).files["fz/spark.py"]
    assert ('                uint64_value(y, "AVeryLongStructNameForFuzzingTheWrapper0.'
            'struct_error")\n                for y in v_struct_error or ()\n') in spark


@pytest.mark.parametrize(("line", "comma"), [
    ("x = call(" + "a" * 100 + ")", True),            # a call's one argument
    ("x = [" + "a" * 100 + "]", True),                # a list display
    ("x = table[" + "a" * 100 + "]", False),          # a subscript: the key would change
    ("x = y or (" + "a" * 100 + ")", False),          # parentheses: a tuple would appear
    ("x = f([a for a in " + "b" * 100 + "])", False),  # a comprehension
])
def test_one_long_element_gets_a_comma_only_where_it_means_nothing(line: str,
                                                                   comma: bool) -> None:
    wrapped = "\n".join(fit_line(line))
    assert ast.dump(ast.parse(wrapped)) == ast.dump(ast.parse(line))  # the same program
    assert any(x.endswith(("a,", "b,")) for x in wrapped.splitlines()) is comma, wrapped


def test_a_comprehension_over_pairs_is_not_cut_at_its_targets_comma() -> None:
    # A long map field's Spark row function once came out as `... for k,` / `y in ...`.
    line = ("        return {k: uint64_value(y, 'Maps.a_long_map_field_name') for k, y in "
            "x_a_rather_long_map_field_name_of_fixed64_keys.items()}")
    wrapped = "\n".join(fit_line(line))
    assert ast.dump(ast.parse(wrapped.strip())) == ast.dump(ast.parse(line.strip()))
    assert all(len(x) <= 100 for x in wrapped.splitlines()), wrapped


def test_long_map_fields_generate_compiling_modules(tmp_path: Path) -> None:
    spec = tmp_path / "specs" / "longmaps"
    spec.mkdir(parents=True)
    (spec / "longmaps.proto").write_text(LONG_MAPS)
    files = generate(tmp_path / "specs", "specs", ["longmaps"]).files
    for rel, text in files.items():
        if rel.endswith(".py"):
            compile(text, rel, "exec")
    assert "fixed_sixty_four_to_fixed_sixty_four_entries" in files["longmaps/spark.py"]


LONG_MAPS = """\
syntax = "proto3";
package longmaps;

enum Tint {
    TINT_NONE = 0;
    TINT_RED = 1;
}

message LongMaps {
    map<fixed64, fixed64> fixed_sixty_four_to_fixed_sixty_four_entries = 1;
    map<string, Tint> a_rather_long_enum_valued_map_field_name_called_tints = 2;
}
"""
