"""Which structs of the example protocols (examples/: MariaDB, AMQP, WebSocket) the compiled
frame codec takes, and, for the others, the operations whose words it lacks (issue #21's rows
for the examples): the map that each step teaching the C codec a word updates, so a step that
moves a struct onto C (or off it) shows here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench import frames_examples  # noqa: F401  (puts the examples' packages on sys.path)
from protoframe.generator.layout_plan import SpecPlans
from protoframe.runtime.codec import compiled_frames
from tests.support.compiled_pins import check_running, check_tables, check_words, spec_plans

ROOT = Path(__file__).resolve().parents[2]

# example -> (its generated frames module, struct -> (field name, word) of each operation the
# C codec does not know, for the structs it does not take)
UNKNOWN_TO_C: dict[str, tuple[str, dict[str, tuple[tuple[str, str], ...]]]] = {
    "mariadb": ("mariadb_example.proto.mariadb.frames", {}),
    "amqp": ("amqp_client.proto.amqp.frames", {}),
    "websocket": ("websocket_app.proto.websocket.frames", {}),
}
# Known words, but kept off the C codec all the same: none now (a struct with no fields, as
# AMQP's VoidValue, has a table of no rows).
KNOWN_BUT_OFF: dict[str, frozenset[str]] = {
    "mariadb": frozenset(),
    "amqp": frozenset(),
    "websocket": frozenset(),
}


def _plans(example: str) -> SpecPlans:
    return spec_plans(ROOT / "examples" / example / "protocols", example, "protocols")


@pytest.mark.parametrize("example", sorted(UNKNOWN_TO_C))
def test_the_operations_keeping_each_example_struct_on_the_python_codec(example: str) -> None:
    check_words(_plans(example), UNKNOWN_TO_C[example][1], known_but_off=KNOWN_BUT_OFF[example],
                every_struct=False)


@pytest.mark.parametrize("example", sorted(UNKNOWN_TO_C))
def test_the_generated_tables_are_those_of_the_compiled_structs(example: str) -> None:
    module = UNKNOWN_TO_C[example][0]
    source = ROOT / "examples" / example / "src" / f"{module.replace('.', '/')}.py"
    check_tables(_plans(example), source)


@pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set")
@pytest.mark.parametrize("example", sorted(UNKNOWN_TO_C))
def test_the_compiled_codec_runs_exactly_the_compiled_structs(example: str) -> None:
    frames: Any = sys.modules[UNKNOWN_TO_C[example][0]]
    check_running(_plans(example), frames)
