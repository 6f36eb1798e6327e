"""The generated bindings type-check a real application and reject misuse under mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.generate import generate_package
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


# An application reading tests/data/interact's streamed QUERY as it arrives. It imports a
# package generated into a temporary directory, so it lives here and not in typecheck/ (the
# repository's own mypy run would not find that package).
STREAM_APP = '''\
"""Reads a streamed answer as it arrives; must pass mypy --strict."""

from __future__ import annotations

from contextlib import aclosing

from gen_stream_types.interact import frames
from gen_stream_types.interact.client import InteractRequests


async def total(requests: InteractRequests, rows: int) -> int:
    out = 0
    async with aclosing(requests.query_iter(rows, 0, timeout=5.0, max_buffered=16)) as stream:
        async for body in stream:
            if isinstance(body, frames.Row):
                out += body.value
            else:
                done: frames.Done = body
                assert done.count == rows
    return out


async def first_rows(requests: InteractRequests) -> list[int]:
    got: list[int] = []
    async for body in requests.query_iter(10, 0):
        if isinstance(body, frames.Done) or len(got) == 3:
            break
        got.append(body.value)
    listed: list[frames.Row | frames.Done] = await requests.query(2, 0)
    return got + [len(listed)]
'''

# The stream's bodies are the union of its answers: the last one (DONE) has no value.
STREAM_MISUSE = '''\
from __future__ import annotations

from gen_stream_types.interact.client import InteractRequests


async def total(requests: InteractRequests) -> int:
    return sum([body.value async for body in requests.query_iter(3, 0)])
'''


def test_a_streamed_answers_iterator_passes_mypy_strict_and_is_typed(tmp_path: Path) -> None:
    package = generate_package(tmp_path, "interact", package="gen_stream_types")
    (tmp_path / "stream_app.py").write_text(STREAM_APP)
    (tmp_path / "stream_misuse.py").write_text(STREAM_MISUSE)
    result = mypy(tmp_path / "stream_app.py")
    assert result.returncode == 0, result.stdout
    result = mypy(package / "interact" / "client.py")
    assert result.returncode == 0, result.stdout
    result = mypy(tmp_path / "stream_misuse.py")
    assert result.returncode == 1, result.stdout
    assert 'Item "Done" of "Row | Done" has no attribute "value"' in result.stdout
