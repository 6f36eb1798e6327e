"""Which of Pravega's structs stay off the compiled frame codec, and the operations whose words
it lacks that keep them off (issue #21's Pravega rows); every struct not named here is
compiled. Each step teaching the C codec a word for Pravega updates this map, so a step that
moves a struct onto C (or off it) shows here."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.generated.pravega import frames as pravega
from protoframe.generator.build import load_frame_specs
from protoframe.generator.layout_plan import SpecPlans, plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec import compiled, compiled_frames

ROOT = Path(__file__).resolve().parents[2]

# struct -> (field name, word) of each operation the C codec does not know, for the structs
# the compiled codec does not take.
UNKNOWN_TO_C: dict[str, tuple[tuple[str, str], ...]] = {
    "TableEntriesUpdated": (("updated_versions", "array"),),
}
# Known words, but kept off the C codec all the same: KeepAlive has no fields, so no table to
# run.
NOT_COMPILED_WITH_KNOWN_WORDS = frozenset({"KeepAlive"})


@pytest.fixture(scope="module")
def plans() -> SpecPlans:
    specs = ROOT / "specs"
    [spec] = load_frame_specs(specs, "specs", load_protocol(specs, "pravega", "specs"))
    return plan_spec(spec)


def test_the_operations_keeping_pravega_structs_on_the_python_codec(plans: SpecPlans) -> None:
    names = [plan.name for plan in plans]
    assert set(UNKNOWN_TO_C) | NOT_COMPILED_WITH_KNOWN_WORDS <= set(names)
    for plan in plans:
        got = tuple((getattr(op, "name", ""), op.word) for op in plan.unknown_to_c)
        assert got == UNKNOWN_TO_C.get(plan.name, ()), plan.name
        expected = plan.name not in UNKNOWN_TO_C and plan.name not in NOT_COMPILED_WITH_KNOWN_WORDS
        assert plan.compiled == expected, plan.name


def test_the_generated_tables_are_those_of_the_compiled_structs(plans: SpecPlans) -> None:
    text = (ROOT / "generated" / "pravega" / "frames.py").read_text()
    tables = text[text.index("install_frame_layouts(("):]
    for plan in plans:
        assert (f"    ({plan.name}, " in tables) == plan.compiled, plan.name


@pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set")
def test_the_compiled_codec_runs_exactly_the_compiled_structs(plans: SpecPlans) -> None:
    for plan in plans:
        assert compiled.is_compiled(getattr(pravega, plan.name)) == plan.compiled, plan.name
