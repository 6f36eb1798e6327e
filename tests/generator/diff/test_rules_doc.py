"""docs/diff.md lists every rule with the classification the code gives it."""

from __future__ import annotations

import re

from protoframe.generator.diff.rules import RULES
from tests.support.paths import ROOT


def test_every_rule_is_documented_as_classified() -> None:
    text = (ROOT / "docs" / "diff.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Z_]+)` \| (\w+) \| (\w+)( · additive)? \|", text, re.M)
    documented = {rule: (wire, source, bool(additive)) for rule, wire, source, additive in rows}
    assert documented == {r.id: (r.wire, r.source, r.additive) for r in RULES.values()}
