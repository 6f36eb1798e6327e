"""How changes are shown: grouped by severity for a reviewer, or JSON for tools."""

from __future__ import annotations

import json

from protoframe.generator.diff.rules import SEVERITIES, Change
from protoframe.generator.diff.settings import DiffSettings

HEADINGS = {
    "wire-breaking": "wire-breaking: peers on the old version misread or reject what the new "
                     "one sends (or the reverse)",
    "source-breaking": "source-breaking: peers still understand each other, but code "
                       "written against the old generated API no longer type-checks",
    "compatible": "compatible: changed, breaking neither peers nor code",
    "additive": "additive",
}


def _position(where: str | None) -> tuple[str, int, int]:
    file, _, rest = (where or "").partition(":")
    numbers = [int(x) for x in rest.split(":") if x.isdigit()] + [0, 0]
    return file, numbers[0], numbers[1]


def _sorted(changes: list[Change]) -> list[Change]:
    return sorted(changes, key=lambda c: (SEVERITIES.index(c.severity), c.protocol,
                                          _position(c.new or c.old), c.rule, c.element))


def grouped(changes: list[Change], settings: DiffSettings) -> list[tuple[str, list[Change]]]:
    """The changes ``settings`` does not ignore, by severity (most severe first, empty
    severities left out), each group in a stable order: what every report lists."""
    shown = _sorted([c for c in changes if not settings.ignored(c)])
    groups = [(s, [c for c in shown if c.severity == s]) for s in SEVERITIES]
    return [(s, group) for s, group in groups if group]


def counts_line(changes: list[Change], settings: DiffSettings) -> str:
    """``N wire-breaking, N source-breaking, N compatible, N additive (N ignored)``."""
    shown = [c for c in changes if not settings.ignored(c)]
    ignored = len(changes) - len(shown)
    counts = {s: sum(1 for c in shown if c.severity == s) for s in SEVERITIES}
    return (", ".join(f"{n} {s}" for s, n in counts.items())
            + (f" ({ignored} ignored)" if ignored else ""))


def text_report(changes: list[Change], settings: DiffSettings) -> str:
    lines = ["protoframe diff: " + counts_line(changes, settings)]
    for severity, group in grouped(changes, settings):
        lines += ["", f"{HEADINGS[severity]}:"]
        for c in group:
            axes = f"wire {c.wire}, source {c.source}"
            lines.append(f"  {c.protocol}: {c.rule}: {c.message} [{axes}] "
                         f"(old {c.old or '-'}, new {c.new or '-'})")
            lines += [f"      note: {note}" for note in c.notes]
    failing = sum(1 for c in changes if settings.fails(c))
    lines += ["", f"{failing} breaking change(s) fail this check (fail-on: "
                  f"{', '.join(sorted(settings.fail_on)) or 'nothing'})" if failing
              else "nothing that fails this check"]
    return "\n".join(lines) + "\n"


def json_report(changes: list[Change], settings: DiffSettings) -> str:
    return json.dumps({
        "changes": [dict(c.as_json(), ignored=settings.ignored(c), fails=settings.fails(c))
                    for c in _sorted(changes)],
        "failing": sum(1 for c in changes if settings.fails(c)),
    }, indent=1) + "\n"
