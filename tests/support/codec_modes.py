"""Running a test once with each frame and protobuf codec: the compiled one (where it is built)
and the generated Python one (``compiled.pure_python()``), so that the hypothesis round trips
of every protocol prove both (issue #21).

A test takes the ``either_codec`` fixture (found by its name through tests/conftest.py); the
block it runs in is entered once per test, not per hypothesis example, which is why those
tests suppress hypothesis' ``function_scoped_fixture`` health check.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck

from protoframe.runtime.codec import compiled, compiled_frames

CODECS = ("compiled", "python")
# For the settings of a hypothesis test that takes either_codec.
FIXTURE_PER_TEST = (HealthCheck.function_scoped_fixture,)


@pytest.fixture(params=CODECS)
def either_codec(request: pytest.FixtureRequest) -> Iterator[str]:
    """The codec the test runs with: "compiled" (skipped where it is not built) or "python"."""
    if request.param == "python":
        with compiled.pure_python():
            yield "python"
        return
    if not (compiled.available() and compiled_frames.available()):
        pytest.skip("the compiled codec is not built or PROTOFRAME_PURE_PYTHON is set")
    yield "compiled"
