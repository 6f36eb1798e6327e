"""Which of TANK's structs the compiled frame codec takes, and, for the others, the operations
whose words it lacks (issue #21's TANK rows): the map that each step teaching the C codec a word
for TANK updates, so a step that moves a struct onto C (or off it) shows here."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.generated.tank import frames as tank
from protoframe.generator.layout_plan import SpecPlans
from protoframe.runtime.codec import compiled_frames
from tests.support.compiled_pins import check_running, check_tables, check_words, spec_plans

ROOT = Path(__file__).resolve().parents[2]

# struct -> (field name, word) of each operation the C codec does not know; () when compiled.
UNKNOWN_TO_C: dict[str, tuple[tuple[str, str], ...]] = {
    "Message": (),
    "MessageSet": (),
    "Bundle": (),
    "BundleEntry": (),
    "Chunk": (),
    "ProducePartition": (),
    "ProduceTopic": (),
    "ProduceRequest": (),
    "ProduceWithSeqnumRequest": (),
    "ProduceStatus": (),
    "ProduceResponse": (),
    "ConsumePartition": (),
    "ConsumeTopic": (),
    "ConsumeRequest": (),
    "ConsumePartitionResult": (),
    "ConsumeTopicResult": (),
    "ConsumeResponse": (),
    "Ping": (),
    "Frame": (),
}
# Known words, but kept off the C codec all the same: none (Ping, with no fields, has a table
# of no rows).
NOT_COMPILED_WITH_KNOWN_WORDS: frozenset[str] = frozenset()


@pytest.fixture(scope="module")
def plans() -> SpecPlans:
    return spec_plans(ROOT / "specs", "tank")


def test_the_operations_keeping_each_tank_struct_on_the_python_codec(plans: SpecPlans) -> None:
    check_words(plans, UNKNOWN_TO_C, known_but_off=NOT_COMPILED_WITH_KNOWN_WORDS,
                every_struct=True)


def test_the_generated_tables_are_those_of_the_compiled_structs(plans: SpecPlans) -> None:
    check_tables(plans, ROOT / "generated" / "tank" / "frames.py")


@pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set")
def test_the_compiled_codec_runs_exactly_the_compiled_structs(plans: SpecPlans) -> None:
    check_running(plans, tank)
