"""The mutation suite: each single edit of a real spec produces exactly its expected changes.

The edits (``mutations``) cover every rule at least once; the edits that change nothing a
peer or the generated code can see (reordering, comments, whitespace, YAML quoting) must
produce no change at all.
"""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import pytest

from protoframe.generator.diff.rules import RULES
from protoframe.generator.diff.tree import ProtocolSnapshot
from tests.generator.diff.mutations import (
    PROTO_EDITS,
    PROTO_NON_CHANGES,
    YAML_EDITS,
    YAML_NON_CHANGES,
    Edit,
)
from tests.generator.diff.support import SPECS, diff, load, summary
from tests.support.examples import sweep

# Rules whose proof is elsewhere: a whole protocol appearing or going (test_cli) and the
# lock-file check of a layout (test_lock).
PROVED_ELSEWHERE = {"PROTOCOL_ADDED", "PROTOCOL_NO_DELETE", "FRAME_LAYOUT_CHANGED_SINCE_LOCK"}


def _apply(text: str, replacements: tuple[tuple[str, str], ...], what: str) -> str:
    for old, new in replacements:
        assert text.count(old) == 1, f"{what}: {old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    return text


def _tree(root: Path, e: Edit, changed: bool) -> Path:
    """A spec directory with ``e``'s protocol, its base applied (and the edit when
    ``changed``). Proto edits leave the frame spec out: it is only loaded to be compared."""
    target = root / "specs" / e.protocol
    keep = shutil.ignore_patterns("*.yaml") if e.file.endswith(".proto") else None
    shutil.copytree(SPECS / e.protocol, target, ignore=keep)
    path = target / e.file
    text = _apply(path.read_text(encoding="utf-8"), e.base, f"{e.id} (base)")
    if changed:
        text = _apply(text, e.replace, e.id)
        for name, content in e.files:
            (target / name).write_text(content, encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    return root / "specs"


_BASELINES: dict[tuple[str, str, tuple[tuple[str, str], ...]], ProtocolSnapshot] = {}


def _baseline(tmp: Path, e: Edit) -> ProtocolSnapshot:
    """The unchanged version, loaded once for all edits sharing protocol, kind and base."""
    key = (e.protocol, Path(e.file).suffix, e.base)
    if key not in _BASELINES:
        _BASELINES[key] = load(_tree(tmp, e, changed=False), e.protocol)
    return _BASELINES[key]


def _run(tmp_path_factory: pytest.TempPathFactory, e: Edit) -> set[tuple[str, str, str, str]]:
    old = _baseline(tmp_path_factory.mktemp("old"), e)
    new = load(_tree(tmp_path_factory.mktemp("new"), e, changed=True), e.protocol)
    return summary(diff(old, new))


@pytest.mark.parametrize("e", sweep(PROTO_EDITS + YAML_EDITS), ids=lambda e: f"{e.protocol}-{e.id}")
def test_edit_produces_exactly_its_changes(tmp_path_factory: pytest.TempPathFactory,
                                           e: Edit) -> None:
    assert _run(tmp_path_factory, e) == set(e.expected)


def _together(edits: list[Edit]) -> Edit:
    """The edits of one file applied one after the other, as a single edit."""
    first = edits[0]
    assert all((e.protocol, e.file) == (first.protocol, first.file) for e in edits)
    return Edit("+".join(e.id for e in edits), first.protocol, first.file,
                tuple(r for e in edits for r in e.replace), frozenset())


def _non_changes() -> list[Edit]:
    files: dict[tuple[str, str], list[Edit]] = {}
    for e in PROTO_NON_CHANGES + YAML_NON_CHANGES:
        files.setdefault((e.protocol, e.file), []).append(e)
    return [_together(edits) for edits in files.values()]


# Each file's non-changes are applied together (one load per file rather than one per edit):
# a set of edits that each change nothing changes nothing, and any change they did make would
# be reported under the element it touched.
@pytest.mark.parametrize("e", _non_changes(), ids=lambda e: f"{e.protocol}-{e.id}")
def test_edits_that_change_nothing_report_nothing(tmp_path_factory: pytest.TempPathFactory,
                                                  e: Edit) -> None:
    assert _run(tmp_path_factory, e) == set()


@cache
def _covered() -> set[str]:
    return {rule for e in PROTO_EDITS + YAML_EDITS for rule, *_ in e.expected}


def test_every_rule_has_an_edit() -> None:
    assert set(RULES) - PROVED_ELSEWHERE <= _covered()
    assert PROVED_ELSEWHERE <= set(RULES)


def test_each_protocol_spec_is_mutated() -> None:
    protocols = {e.protocol for e in YAML_EDITS}
    assert protocols == {"pulsar", "tank", "tubemq", "pravega"}
    assert {e.protocol for e in PROTO_EDITS} == {"pulsar"}
