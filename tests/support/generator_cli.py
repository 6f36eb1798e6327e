"""The generator's command line run as a user runs it, on a project made in a temporary folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "protoframe", *args], cwd=cwd,
                          capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def make_specs(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp / "specs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp
