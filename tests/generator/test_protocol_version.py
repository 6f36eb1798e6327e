"""``protocol_version:`` in a spec: commands.py exports the newest value of the named enum, so
the Pulsar client's CONNECT and the broker's limit follow the schema they were generated from
(upstream's older schemas in ../shared/reference/pulsar/history/)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tests.support.generator_cli import make_specs, run_cli
from tests.support.paths import ROOT

HISTORY = ROOT.parent / "shared" / "reference" / "pulsar" / "history"
needs_history = pytest.mark.skipif(
    not HISTORY.is_dir(),
    reason="../shared/reference/pulsar/history is not present; the upstream schemas are shared "
    "reference data")


def constant(module: Path, name: str) -> object:
    """The value a module's top-level ``name: ... = <literal>`` sets, read without importing."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == name and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{module} sets no {name}")


def pulsar_project(tmp: Path, proto: Path) -> Path:
    spec = tmp / "specs" / "pulsar"
    spec.mkdir(parents=True)
    shutil.copy(ROOT / "specs" / "pulsar" / "pulsar.yaml", spec)
    shutil.copy(proto, spec / "PulsarApi.proto")
    return tmp


def test_the_current_schema_gives_version_21() -> None:
    assert constant(ROOT / "generated" / "pulsar" / "commands.py", "PROTOCOL_VERSION") == 21


@needs_history
@pytest.mark.parametrize(("name", "version"), [("PulsarApi.v19-2022.proto", 19)])
def test_an_older_schema_gives_its_own_newest_version(tmp_path: Path, name: str,
                                                      version: int) -> None:
    project = pulsar_project(tmp_path, HISTORY / name)
    result = run_cli("generate", cwd=project)
    assert result.returncode == 0, result.stderr
    assert constant(project / "generated" / "pulsar" / "commands.py",
                    "PROTOCOL_VERSION") == version


def test_the_version_enum_must_exist(tmp_path: Path) -> None:
    make_specs(tmp_path, {"p/p.proto": 'syntax = "proto2";\nenum Versions { V1 = 1; V3 = 3; }\n'
                                       "message Cmd { required int32 type = 1; }\n"})
    spec = ("protocol: p\nproto: [p.proto]\nprotocol_version: {}\n"
            "frame:\n  name: Frame\n  fields:\n"
            "    - {{name: size, type: u32, size_of: command}}\n"
            "    - {{name: command, type: proto, message: Cmd, size: size}}\n")
    (tmp_path / "specs" / "p" / "p.yaml").write_text(spec.format("Nope"))
    result = run_cli("generate", cwd=tmp_path)
    assert result.returncode == 2
    assert "error: specs/p/p.yaml:3:19: unknown proto enum 'Nope'" in result.stderr, \
        result.stderr
    (tmp_path / "specs" / "p" / "p.yaml").write_text(spec.format("Versions"))
    result = run_cli("generate", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert constant(tmp_path / "generated" / "p" / "commands.py", "PROTOCOL_VERSION") == 3
