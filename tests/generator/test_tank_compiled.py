"""Which of TANK's structs the compiled frame codec takes, and, for the others, the operations
whose words it lacks (issue #21's TANK rows): the map that each step teaching the C codec a word
for TANK updates, so a step that moves a struct onto C (or off it) shows here."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.generated.tank import frames as tank
from protoframe.generator.build import load_frame_specs
from protoframe.generator.layout_plan import SpecPlans, plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec import compiled, compiled_frames

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
    "ConsumeTopicResult": (("unknown", "marker"), ("partitions", "condition_other")),
    "ConsumeResponse": (("header_length", "size_range"), ("topics", "array")),
    "Ping": (),
    "Frame": (),
}
# Known words, but kept off the C codec all the same: Ping has no fields, so no table to run.
NOT_COMPILED_WITH_KNOWN_WORDS = frozenset({"Ping"})


@pytest.fixture(scope="module")
def plans() -> SpecPlans:
    specs = ROOT / "specs"
    [spec] = load_frame_specs(specs, "specs", load_protocol(specs, "tank", "specs"))
    return plan_spec(spec)


def test_the_operations_keeping_each_tank_struct_on_the_python_codec(plans: SpecPlans) -> None:
    assert [plan.name for plan in plans] == list(UNKNOWN_TO_C)
    for plan in plans:
        got = tuple((getattr(op, "name", ""), op.word) for op in plan.unknown_to_c)
        assert got == UNKNOWN_TO_C[plan.name], plan.name
        expected = not UNKNOWN_TO_C[plan.name] and plan.name not in NOT_COMPILED_WITH_KNOWN_WORDS
        assert plan.compiled == expected, plan.name


def test_the_generated_tables_are_those_of_the_compiled_structs(plans: SpecPlans) -> None:
    text = (ROOT / "generated" / "tank" / "frames.py").read_text()
    tables = text[text.index("install_frame_layouts(("):]
    for plan in plans:
        assert (f"    ({plan.name}, " in tables) == plan.compiled, plan.name


@pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set")
def test_the_compiled_codec_runs_exactly_the_compiled_structs(plans: SpecPlans) -> None:
    for plan in plans:
        assert compiled.is_compiled(getattr(tank, plan.name)) == plan.compiled, plan.name
