"""What the agreement tests of the compiled frame codec's ops (tests/runtime/test_compiled_*.py)
share at their head: the mark skipping a file when the frame extension is not there, and the
example protocols' generated frames modules, as ``bench.frames_examples`` imports them from
each example's ``src/`` (they are user projects, not packages of protoframe)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from bench import frames_examples  # noqa: F401  (puts the examples' packages on sys.path)
from protoframe.runtime.codec import compiled_frames

# Each file of agreement tests sets ``pytestmark = needs_framecodec``: without the extension
# (no C compiler at install time) or with PROTOFRAME_PURE_PYTHON there is nothing to agree.
needs_framecodec = pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)

mariadb: Any = sys.modules["mariadb_example.proto.mariadb.frames"]
amqp: Any = sys.modules["amqp_client.proto.amqp.frames"]
websocket: Any = sys.modules["websocket_app.proto.websocket.frames"]

