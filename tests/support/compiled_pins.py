"""The checks of the tests that pin, struct by struct, which of a protocol's structs the compiled
frame codec takes (tests/generator/test_*_compiled.py): the words that keep the others off, the
tables the generator wrote, and what the running codec took."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from protoframe.generator.build import load_frame_specs
from protoframe.generator.layout_plan import SpecPlans, plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec import compiled

# (field name, word) of each operation of a struct the C codec does not know.
Words = tuple[tuple[str, str], ...]


def spec_plans(specs: Path, protocol: str, relative: str = "specs") -> SpecPlans:
    """The layout plans of the one frame spec of ``protocol`` under ``specs``."""
    [spec] = load_frame_specs(specs, relative, load_protocol(specs, protocol, relative))
    return plan_spec(spec)


def check_words(plans: SpecPlans, unknown_to_c: Mapping[str, Words], *,
                known_but_off: frozenset[str] = frozenset(), every_struct: bool) -> None:
    """Each plan's unknown words are those pinned (none for a struct not named when not
    ``every_struct``), and a plan is compiled exactly when it has none and is not pinned as
    kept off with known words (a struct with no fields has no table to run)."""
    names = [plan.name for plan in plans]
    if every_struct:
        assert names == list(unknown_to_c)
    else:
        assert set(unknown_to_c) | known_but_off <= set(names)
    for plan in plans:
        got = tuple((getattr(op, "name", ""), op.word) for op in plan.unknown_to_c)
        assert got == unknown_to_c.get(plan.name, ()), plan.name
        expected = not got and plan.name not in known_but_off
        assert plan.compiled == expected, plan.name


def check_tables(plans: SpecPlans, frames_py: Path) -> None:
    """The generated module has a table for exactly the compiled structs."""
    text = frames_py.read_text()
    at = text.find("install_frame_layouts((")
    tables = text[at:] if at >= 0 else ""  # a module with no compiled struct has no tables
    for plan in plans:
        assert (f"    ({plan.name}, " in tables) == plan.compiled, plan.name


def check_running(plans: SpecPlans, frames: ModuleType) -> None:
    """The imported module's classes run the compiled codec exactly where planned."""
    for plan in plans:
        assert compiled.is_compiled(getattr(frames, plan.name)) == plan.compiled, plan.name
