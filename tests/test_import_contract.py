"""The import contracts of pyproject.toml ([tool.importlinter]) hold, and they catch what they
forbid: each wrong-way import below, added to a copy of the package, makes ``lint-imports``
fail naming the contract it breaks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.examples import sweep

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "protoframe"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# (file of the copied package, import line added to it, name of the contract it breaks)
WRONG_WAY = [
    ("runtime/codec/__init__.py", "import protoframe.clients",
     "runtime never imports generated, clients, pipeline or generator"),
    ("runtime/engine/__init__.py", "import protoframe.generated.pulsar.frames",
     "runtime never imports generated, clients, pipeline or generator"),
    ("runtime/codec/__init__.py", "import protoframe.runtime.io.connection",
     "runtime layers: io | spark -> engine -> codec -> errors"),
    ("runtime/errors.py", "import protoframe.runtime.codec.protowire",
     "runtime layers: io | spark -> engine -> codec -> errors"),
    ("runtime/io/__init__.py", "import protoframe.runtime.spark.rows",
     "runtime layers: io | spark -> engine -> codec -> errors"),
    ("runtime/spark/__init__.py", "import protoframe.runtime.engine.machine",
     "runtime.spark uses only codec and errors"),
    ("generated/__init__.py", "import protoframe.pipeline",
     "generated never imports clients, pipeline or generator"),
    ("clients/__init__.py", "import protoframe.pipeline.queries",
     "clients never import pipeline or generator"),
    ("generator/__init__.py", "import protoframe.clients",
     "generator never imports clients or pipeline"),
    ("pipeline/pulsar_reading.py", "import protoframe.pipeline.pulsar_source",
     "no import cycles between the modules of runtime or pipeline"),
]


def _python_sources(directory: str, names: list[str]) -> list[str]:
    """copytree's ignore: keep folders and Python files (all that lint-imports reads)."""
    return [n for n in names if n == "__pycache__"
            or (not n.endswith(".py") and not os.path.isdir(os.path.join(directory, n)))]


@pytest.fixture(scope="module")
def copy_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package (its linked folders copied as real ones) and of pyproject.toml."""
    root = tmp_path_factory.mktemp("contract")
    shutil.copytree(PACKAGE, root / "protoframe", symlinks=False, ignore=_python_sources)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on the ``protoframe`` under ``root`` (first on the path, so the copy is
    analysed rather than the installed package)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=240)


@pytest.fixture
def injected(copy_root: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The copy with one import added to one file, put back afterwards."""
    relative, line = request.param
    target = copy_root / "protoframe" / relative
    original = target.read_text()
    target.write_text(f"{original}\n{line}  # a wrong-way import added by the test\n")
    try:
        yield copy_root
    finally:
        target.write_text(original)


def test_the_repository_keeps_every_contract() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_copy_keeps_every_contract(copy_root: Path) -> None:
    """The copy alone passes, so the failures below come from the added imports."""
    result = lint_imports(copy_root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("injected", "contract"),
                         sweep([((path, line), contract) for path, line, contract in WRONG_WAY]),
                         indirect=["injected"], ids=[f"{p}:{c}" for p, _, c in WRONG_WAY])
def test_a_wrong_way_import_breaks_its_contract(injected: Path, contract: str) -> None:
    result = lint_imports(injected)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout, result.stdout + result.stderr
