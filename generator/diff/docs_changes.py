"""The "Changes since REF" section of the reference pages: ``protoframe diff --against REF``'s
changes, grouped and ordered as its report lists them, one Markdown list item each."""

from __future__ import annotations

import tempfile
from pathlib import Path

from protoframe.generator.diff.compare import compare_trees
from protoframe.generator.diff.report import HEADINGS, counts_line, grouped
from protoframe.generator.diff.rules import Change
from protoframe.generator.diff.settings import DiffSettings
from protoframe.generator.diff.tree import extract_revision, load_tree
from protoframe.generator.docs_view import ChangesSection


def changes_against_revision(spec_dir: Path, shown: str, ref: str,
                             protocols: list[str] | None) -> list[Change]:
    """Every change from ``spec_dir`` at git revision ``ref`` to the working tree; old
    positions read ``REF:<shown>/...``."""
    new = load_tree(spec_dir, shown, protocols)
    with tempfile.TemporaryDirectory(prefix="protoframe-diff-") as tmp:
        old_dir = extract_revision(spec_dir, ref, Path(tmp))
        old = load_tree(old_dir, f"{ref}:{shown}", protocols)
    return compare_trees(old, new)


def changes_sections(changes: list[Change], ref: str, protocols: list[str],
                     settings: DiffSettings) -> dict[str, ChangesSection]:
    """One section per protocol in ``protocols`` (a protocol without changes says so)."""
    return {name: _section([c for c in changes if c.protocol == name], ref, settings)
            for name in protocols}


def _section(changes: list[Change], ref: str, settings: DiffSettings) -> ChangesSection:
    intro = (f"What `protoframe diff --against {ref}` reports for this protocol, by the rules "
             "and classification of [docs/diff.md](../diff.md): "
             f"{counts_line(changes, settings)}. Positions are `file:line:column` in the old "
             "and the new version (`-` where the element does not exist).")
    if not any(not settings.ignored(c) for c in changes):
        intro += f"\n\nNothing changed since `{ref}`."
    groups = []
    for severity, group in grouped(changes, settings):
        _, _, meaning = HEADINGS[severity].partition(": ")
        groups.append((severity, meaning[:1].upper() + meaning[1:] + "." if meaning else "",
                       [_item(c) for c in group]))
    return ChangesSection(title=f"Changes since {ref}", intro=intro, groups=groups)


def _item(c: Change) -> str:
    text = (f"`{c.element}`: {c.message} (`{c.rule}`; wire {c.wire}, source {c.source}; "
            f"old `{c.old or '-'}`, new `{c.new or '-'}`)")
    return " ".join(" ".join([text, *(f"Note: {note}" for note in c.notes)]).split())
