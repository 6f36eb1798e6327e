"""Spark sessions for tests, skipped (saying how to install Java) where Java 17+ is missing.

The session is the pipeline's own ``local_session``, as users and the benchmark get it; this
module keeps the tests' skipping and clean-up in one place. It imports pyspark: import it only
after ``pytest.importorskip("pyspark")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import pytest
from pyspark.sql import SparkSession

from protoframe.pipeline.spark_session import local_session, require_java


@cache
def java_missing() -> str | None:
    """Why Spark cannot start here (no Java 17+, and how to get it), or None when it can."""
    try:
        require_java()
    except RuntimeError as exc:
        return str(exc)
    return None


def skip_module_without_java() -> None:
    """For modules whose every test needs Java, including the ones without a session."""
    reason = java_missing()
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)


def spark_session(app_name: str) -> Iterator[SparkSession]:
    """The body of the ``spark`` fixture: a local session, stopped after its last test."""
    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    session = local_session(app_name)
    yield session
    session.stop()
