"""What the agreement tests of the compiled frame codec's ops (tests/runtime/test_compiled_*.py)
share at their head: the mark skipping a file when the frame extension is not there, and the
example protocols' generated frames modules, as ``bench.frames_examples`` imports them from
each example's ``src/`` (they are user projects, not packages of protoframe)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench import frames_examples  # noqa: F401  (puts the examples' packages on sys.path)
from protoframe.runtime.codec import compiled_frames
from tests.support.generate import generate_text

# Each file of agreement tests sets ``pytestmark = needs_framecodec``: without the extension
# (no C compiler at install time) or with PROTOFRAME_PURE_PYTHON there is nothing to agree.
needs_framecodec = pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set",
)

mariadb: Any = sys.modules["mariadb_example.proto.mariadb.frames"]
amqp: Any = sys.modules["amqp_client.proto.amqp.frames"]
websocket: Any = sys.modules["websocket_app.proto.websocket.frames"]


# A struct no compiled codec takes: its list has a bound on its items, a word (array_limited)
# the C codec lacks. The tests of what a Python-only struct keeps (its own methods, the
# dataclass constructor) generate it, as every struct of the repository's protocols is on C.
PYTHON_ONLY_SPEC = """\
protocol: pyonly
doc: A struct the compiled frame codec does not take.
byte_order: big
frame:
  name: Bounded
  doc: A list of at most two items.
  fields:
    - {name: size, type: u16, size_of: rest}
    - {name: items, type: array, of: u8, until_end: true, max_items: 2}
"""


def python_only_struct(tmp: Path) -> Any:
    """The generated Python-only struct of ``PYTHON_ONLY_SPEC``, generated under ``tmp``."""
    return generate_text(tmp, "pyonly", PYTHON_ONLY_SPEC, "pyonly_pkg").Bounded
