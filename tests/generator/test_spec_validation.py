"""The validation pass alone rejects every bad spec, and no emitter can report a spec error.

``test_spec_errors.py`` (beside this file) runs each bad spec through the CLI; here the same
specs go only through loading and validation (``load_protocol`` and
``build.load_frame_specs``), with no emitter in the path, to prove that rejecting a spec never
depends on building an output.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from protoframe.generator.build import load_frame_specs
from protoframe.generator.errors import SpecError, SpecErrors
from protoframe.generator.proto_model import load_protocol
from tests.generator.spec_cases import (
    BAD_SPECS,
    CASES,
    GOOD_SPEC,
    MACHINE_CASES,
    MINI_PROTO,
    Case,
    position,
)
from tests.support.paths import ROOT

GENERATOR = ROOT / "generator"
EMITTERS = sorted({*GENERATOR.glob("*_view.py"), *GENERATOR.glob("machines_*.py"),
                   GENERATOR / "frame_layouts.py", GENERATOR / "container_decode.py",
                   GENERATOR / "layout_plan.py", GENERATOR / "layout_ops.py",
                   *GENERATOR.glob("docs_*.py"), *GENERATOR.glob("spark_*.py"),
                   *(GENERATOR / f"frame_{m}.py" for m in ("emit", "decoder", "encoder", "length",
                                                         "values")),
                   *(GENERATOR / f"proto_{m}.py" for m in ("emit", "decoder", "encoder")),
                   GENERATOR / "codewriter.py", GENERATOR / "linefit.py",
                   GENERATOR / "render.py"})
ALL_CASES = [*CASES, *(p.values[0] for p in MACHINE_CASES)]


def validate(tmp_path: Path, name: str, text: str) -> list[SpecError]:
    """The errors validation finds in one spec next to the mini .proto ([] if it passes)."""
    protocol_dir = tmp_path / "mini"
    protocol_dir.mkdir()
    (protocol_dir / "mini.proto").write_text(MINI_PROTO)
    (protocol_dir / name).write_text(text)
    try:
        protocol = load_protocol(tmp_path, "mini", "specs")
        load_frame_specs(tmp_path, "specs", protocol)
    except SpecErrors as exc:
        return exc.errors
    except SpecError as exc:
        return [exc]
    finally:
        shutil.rmtree(protocol_dir)
    return []


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_validation_alone_rejects_bad_spec(tmp_path: Path, case: Case) -> None:
    text = (BAD_SPECS / case.file).read_text()
    errors = validate(tmp_path, case.file, text)
    assert errors, f"{case.file} passed validation"
    line, column = position(text, case.line_has, case.token)
    assert (errors[0].path, errors[0].line, errors[0].column) == (
        f"specs/mini/{case.file}", line, column), str(errors[0])
    assert case.message in errors[0].message


def test_validation_accepts_the_good_spec(tmp_path: Path) -> None:
    assert validate(tmp_path, "mini.yaml", GOOD_SPEC) == []


@pytest.mark.parametrize("module", EMITTERS, ids=lambda p: p.stem)
def test_emitters_never_raise_spec_errors(module: Path) -> None:
    """An emitter that meets a bad spec is a protoframe bug (GeneratorBug), never a SpecError:
    every rule an emitter relies on is checked by frame_model / frame_checks first."""
    tree = ast.parse(module.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert not {"SpecError", "SpecErrors"} & (names | imported), module.name
