"""Which of TubeMQ's structs the compiled frame codec takes, and, for the others, the operations
whose words it lacks (issue #21's TubeMQ rows): the map that each step teaching the C codec a
word for TubeMQ updates, so a step that moves a struct onto C (or off it) shows here."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.generated.tubemq import frames as tubemq
from protoframe.generator.layout_plan import SpecPlans
from protoframe.runtime.codec import compiled_frames
from tests.support.compiled_pins import check_running, check_tables, check_words, spec_plans

ROOT = Path(__file__).resolve().parents[2]

# struct -> (field name, word) of each operation the C codec does not know; () when compiled.
UNKNOWN_TO_C: dict[str, tuple[tuple[str, str], ...]] = {
    "RpcRequest": (),
    "RpcResponse": (),
    "RpcContent": (),
    "Frame": (),
}


@pytest.fixture(scope="module")
def plans() -> SpecPlans:
    return spec_plans(ROOT / "specs", "tubemq")


def test_the_operations_keeping_each_tubemq_struct_on_the_python_codec(plans: SpecPlans) -> None:
    check_words(plans, UNKNOWN_TO_C, every_struct=True)


def test_the_generated_tables_are_those_of_the_compiled_structs(plans: SpecPlans) -> None:
    check_tables(plans, ROOT / "generated" / "tubemq" / "frames.py")


@pytest.mark.skipif(
    not compiled_frames.available(),
    reason="runtime.codec._framecodec is not built or PROTOFRAME_PURE_PYTHON is set")
def test_the_compiled_codec_runs_exactly_the_compiled_structs(plans: SpecPlans) -> None:
    check_running(plans, tubemq)
