"""The generator's command line run as a user runs it, on a project made in a temporary folder.

``run_cli`` calls the command's ``main`` in this process, in the project's directory, with its
output captured: the same code as the ``protoframe`` script, without a new interpreter's start-up
and imports for each of the many runs the generator tests make. ``run_cli_process`` starts
``python -m protoframe`` for what only a fresh process shows (output that must not depend on the
process: hash seeds, import state) and for how the script itself behaves.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

from protoframe.generator.cli import main
from tests.support.paths import ROOT


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(["protoframe", *args], code, out.getvalue(),
                                       err.getvalue())


def run_cli_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "protoframe", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def make_specs(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp / "specs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp
