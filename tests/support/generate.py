"""Generate a test spec directory into a temporary package and import it."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from protoframe.generator.build import generate
from protoframe.generator.output import write_files
from tests.support.paths import DATA


def generate_package(tmp: Path, protocol: str, package: str = "gen_pkg") -> Path:
    """Copy ``tests/data/<protocol>`` into a spec dir under ``tmp`` and generate it there."""
    spec_dir = tmp / "specs"
    shutil.copytree(DATA / protocol, spec_dir / protocol)
    out = generate(spec_dir, "specs", [protocol])
    write_files(tmp / package, out.files, out.protocols)
    return tmp / package


def import_generated(tmp: Path, module: str, package: str = "gen_pkg") -> ModuleType:
    """Import ``<package>.<module>`` from a directory made by ``generate_package``."""
    if str(tmp) not in sys.path:
        sys.path.insert(0, str(tmp))
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
    return importlib.import_module(f"{package}.{module}")


def write_spec(tmp: Path, protocol: str, text: str) -> Path:
    """``text`` as ``specs/<protocol>/<protocol>.yaml`` under ``tmp``; the spec directory."""
    (tmp / "specs" / protocol).mkdir(parents=True)
    (tmp / "specs" / protocol / f"{protocol}.yaml").write_text(text)
    return tmp / "specs"


def generate_text(tmp: Path, protocol: str, text: str, package: str) -> ModuleType:
    """Generate the one-file spec ``text`` into ``tmp/<package>`` and import its frames."""
    out = generate(write_spec(tmp, protocol, text), "specs", [protocol])
    write_files(tmp / package, out.files, out.protocols)
    return import_generated(tmp, f"{protocol}.frames", package)


def assert_type_checks(tmp: Path, *packages: str | Path) -> None:
    """``mypy --strict`` passes on generated ``packages`` (paths, or names under ``tmp``), found
    through ``tmp`` as a project that installed protoframe would find them."""
    targets = [str(p if isinstance(p, Path) else tmp / p) for p in packages]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *targets],
        capture_output=True, text=True, timeout=600,
        env={"MYPYPATH": str(tmp), "PATH": "/usr/bin:/bin"}, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
