"""Plans and writes the generated files, touching only files protoframe wrote itself.

A file is protoframe's when its first line carries ``DO NOT EDIT`` (every generated module and
page has that header). Everything else in the output directories is the user's: it is never
overwritten or removed, and a generated file that would land on one is an error instead.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

GENERATED_MARK = "DO NOT EDIT"


class OutputConflict(Exception):
    """A generated file would replace a file that protoframe did not write."""

    def __init__(self, path: Path) -> None:
        super().__init__("refusing to overwrite a file protoframe did not write (its first "
                         f"line has no {GENERATED_MARK!r}): move it away or choose another "
                         "output directory")
        self.path = path


@dataclass(frozen=True)
class Change:
    """One file to write (``text``) or to remove (``text`` is None)."""

    path: Path
    text: str | None


def plan_files(out_dir: Path, files: dict[str, str], protocols: list[str],
               optional: frozenset[str] = frozenset()) -> list[Change]:
    """What makes ``out_dir`` match ``files``: stale or missing files, and leftovers.

    ``optional`` files (the package's own ``__init__.py`` and ``py.typed``) are written only
    where there is none yet or, for one of protoframe's, where it differs: a user's own
    ``__init__.py`` stays as it is.
    """
    changes = []
    for rel, text in sorted(files.items()):
        path = out_dir / rel
        if not path.is_file():
            changes.append(Change(path, text))
            continue
        if rel in optional and (not text or not _is_generated(path)):
            continue
        if path.read_text(encoding="utf-8") != text:
            if not _is_generated(path):
                raise OutputConflict(path)
            changes.append(Change(path, text))
    for rel in sorted(_owned_files(out_dir, protocols)):
        if rel not in files:
            changes.append(Change(out_dir / rel, None))
    return changes


def plan_docs(docs_dir: Path, docs: dict[str, str], protocols: list[str]) -> list[Change]:
    """The same for the reference pages (``<protocol>.md``) in ``docs_dir``."""
    changes = []
    for rel, text in sorted(docs.items()):
        path = docs_dir / rel
        if not path.is_file():
            changes.append(Change(path, text))
        elif path.read_text(encoding="utf-8") != text:
            if not _is_generated(path):
                raise OutputConflict(path)
            changes.append(Change(path, text))
    for protocol in protocols:
        path = docs_dir / f"{protocol}.md"
        if f"{protocol}.md" not in docs and path.is_file() and _is_generated(path):
            changes.append(Change(path, None))
    return changes


def write_plan(changes: list[Change]) -> None:
    """Carry out ``changes``: each file is written next to its target, then renamed over it,
    so a reader never sees half a file."""
    for change in changes:
        if change.text is None:
            change.path.unlink()
        else:
            _atomic_write(change.path, change.text)


def stale_files(out_dir: Path, files: dict[str, str], protocols: list[str]) -> list[str]:
    """Paths (relative to ``out_dir``) that differ from ``files``, are missing, or are extra."""
    return [c.path.relative_to(out_dir).as_posix()
            for c in plan_files(out_dir, files, protocols)]


def write_files(out_dir: Path, files: dict[str, str], protocols: list[str]) -> list[str]:
    """Make ``out_dir`` match ``files``; return the paths (relative to it) that changed."""
    changes = plan_files(out_dir, files, protocols)
    write_plan(changes)
    return [c.path.relative_to(out_dir).as_posix() for c in changes]


def _owned_files(out_dir: Path, protocols: list[str]) -> list[str]:
    """Files under the protocols' output directories that the generator wrote earlier."""
    owned = []
    for protocol in protocols:
        base = out_dir / protocol
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.name == "py.typed" or _is_generated(path):
                owned.append(path.relative_to(out_dir).as_posix())
    return owned


def _atomic_write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _is_generated(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as fh:
            return GENERATED_MARK in fh.readline()
    except (OSError, UnicodeDecodeError):
        return False


def write_docs(docs_dir: Path, docs: dict[str, str], protocols: list[str]) -> list[str]:
    """Make the reference pages in ``docs_dir`` match ``docs``; return those that changed."""
    changes = plan_docs(docs_dir, docs, protocols)
    write_plan(changes)
    return [c.path.relative_to(docs_dir).as_posix() for c in changes]
