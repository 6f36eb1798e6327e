"""``[tool.protoframe.diff]``: which changes fail ``protoframe diff`` and which are ignored.

```toml
[tool.protoframe.diff]
fail-on = ["wire", "source"]     # the axes whose breaking changes fail the run (default both)
ignore = ["FIELD_RENAMED", "pulsar.proto.CommandNewTxn.*"]   # rule ids or elements (globs)
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from protoframe.generator.diff.rules import BREAKING, RULES, Change
from protoframe.generator.errors import SpecError, SpecErrors

AXES = ("wire", "source")
KEYS = ("fail-on", "ignore")


@dataclass(frozen=True)
class DiffSettings:
    fail_on: frozenset[str] = frozenset(AXES)
    ignore: tuple[str, ...] = ()

    def ignored(self, c: Change) -> bool:
        names = (c.rule, c.element, f"{c.protocol}:{c.element}")
        return any(fnmatchcase(name, pattern) for pattern in self.ignore for name in names)

    def fails(self, c: Change) -> bool:
        return not self.ignored(c) and (
            ("wire" in self.fail_on and c.wire == BREAKING)
            or ("source" in self.fail_on and c.source == BREAKING))


def load_diff_settings(source: Path | None) -> DiffSettings:
    """The ``diff`` table of the settings file (``source``: as ``config.Settings`` found it)."""
    if source is None:
        return DiffSettings()
    data = tomllib.loads(source.read_text(encoding="utf-8"))
    table = data.get("tool", {}).get("protoframe", {}) if source.name == "pyproject.toml" \
        else data
    diff = table.get("diff", {}) if isinstance(table, dict) else {}
    shown = source.name
    if not isinstance(diff, dict):
        raise SpecErrors([SpecError("[tool.protoframe.diff] must be a table", shown)])
    errors = [SpecError(f"unknown diff setting {k!r} (known: {', '.join(KEYS)})", shown)
              for k in diff if k not in KEYS]
    fail_on = diff.get("fail-on", list(AXES))
    if not isinstance(fail_on, list) or not set(fail_on) <= set(AXES):
        errors.append(SpecError(f"diff.fail-on must be a list of: {', '.join(AXES)}", shown))
        fail_on = list(AXES)
    ignore = diff.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(x, str) for x in ignore):
        errors.append(SpecError("diff.ignore must be a list of rule ids or elements", shown))
        ignore = []
    unknown = [x for x in ignore if x.isupper() and "." not in x and not any(
        fnmatchcase(r, x) for r in RULES)]
    errors += [SpecError(f"diff.ignore: no rule matches {x!r}", shown) for x in unknown]
    if errors:
        raise SpecErrors(errors)
    return DiffSettings(frozenset(fail_on), tuple(ignore))
