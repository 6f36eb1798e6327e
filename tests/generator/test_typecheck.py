"""The generated bindings type-check a real application and reject misuse under mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # runs mypy --strict as a subprocess per case

CASES = Path(__file__).resolve().parent / "typecheck"


def mypy(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
         "--config-file", str(ROOT / "pyproject.toml"), str(path)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )


@pytest.mark.parametrize("case", ["app_ok.py", "pulsar_app_ok.py", "hooks_ok.py"])
def test_application_passes_mypy_strict(case: str) -> None:
    result = mypy(CASES / case)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("bad_uint64_str.py", '"producer_id" to "CommandSend" has incompatible type "str"'),
        ("bad_misspelled_field.py", '"CommandSend" has no attribute "sequenceid"'),
        ("bad_missing_required.py", 'Missing named argument "messagePermits"'),
        ("bad_wrong_enum.py", 'Argument "subType" to "CommandSubscribe" has incompatible type'),
        # BaseCommand takes its sub-commands as **_fields typed by a TypedDict: still exact.
        ("bad_envelope_keyword.py", 'Unexpected keyword argument "flwo" for "BaseCommand"'),
        ("bad_envelope_type.py",
         'Argument "send" to "BaseCommand" has incompatible type "CommandFlow"'),
        # Hooks are declared on the generated PulsarHooks: a hook object's are checked.
        ("bad_hook_signature.py",
         'Argument 1 of "on_send_receipt" is incompatible with supertype'),
    ],
)
def test_misuse_fails_mypy(case: str, expected: str) -> None:
    result = mypy(CASES / case)
    assert result.returncode == 1, result.stdout
    assert expected in result.stdout
