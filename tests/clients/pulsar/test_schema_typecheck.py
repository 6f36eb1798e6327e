"""mypy --strict infers typed producers, consumers and messages from their schema."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # runs mypy --strict as a subprocess

CASES = Path(__file__).resolve().parent / "typecheck"

EXPECTED = {
    "schema_ok.py": [],
    "bad_send_text.py": ['Argument 1 to "send" of "Producer" has incompatible type "str"; '
                         'expected "OrderPlaced"'],
    "bad_missing_field.py": ['"OrderPlaced" has no attribute "missing_field"'],
    "bad_untyped_send.py": ['Argument 1 to "send" of "Producer" has incompatible type "str"; '
                            'expected "bytes"'],
}


def test_schemas_type_check() -> None:
    # One mypy run for every case (each run costs seconds); errors are told apart by file.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
         "--config-file", str(ROOT / "pyproject.toml"), *(str(CASES / c) for c in EXPECTED)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    errors: dict[str, list[str]] = {case: [] for case in EXPECTED}
    for line in result.stdout.splitlines():
        m = re.match(r".*typecheck/(\w+\.py):\d+: error: (.*)", line)
        if m:
            errors[m[1]].append(m[2])
    for case, expected in EXPECTED.items():
        assert len(errors[case]) == len(expected), (case, result.stdout)
        for want, got in zip(expected, errors[case], strict=True):
            assert want in got, (case, result.stdout)
