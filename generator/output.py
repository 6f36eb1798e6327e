"""Writes generated files atomically, or compares them with what is on disk."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

GENERATED_MARK = "DO NOT EDIT"


def stale_files(out_dir: Path, files: dict[str, str], protocols: list[str]) -> list[str]:
    """Paths (relative to ``out_dir``) that differ from ``files``, are missing, or are extra."""
    stale = []
    for rel, text in sorted(files.items()):
        path = out_dir / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    for rel in sorted(_owned_files(out_dir, protocols)):
        if rel not in files:
            stale.append(rel)
    return stale


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


def stale_docs(docs_dir: Path, docs: dict[str, str], protocols: list[str]) -> list[str]:
    """Generated reference pages (``<protocol>.md``) that differ from ``docs`` or are missing."""
    stale = []
    for rel, text in sorted(docs.items()):
        path = docs_dir / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    for protocol in protocols:
        rel = f"{protocol}.md"
        if rel not in docs and (docs_dir / rel).is_file() and _is_generated(docs_dir / rel):
            stale.append(rel)
    return stale


def write_docs(docs_dir: Path, docs: dict[str, str], protocols: list[str]) -> list[str]:
    """Make the generated reference pages match ``docs``; return the paths that changed."""
    changed = stale_docs(docs_dir, docs, protocols)
    for rel in changed:
        target = docs_dir / rel
        if rel not in docs:
            target.unlink()
        else:
            _atomic_write(target, docs[rel])
    return changed


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


def write_files(out_dir: Path, files: dict[str, str], protocols: list[str]) -> list[str]:
    """Make ``out_dir`` match ``files``; return the paths that changed.

    Every new file is first written next to its target and then renamed over it, so a reader
    never sees half a file; files this generator wrote before and no longer produces go.
    """
    changed = stale_files(out_dir, files, protocols)
    for rel in changed:
        target = out_dir / rel
        if rel not in files:
            target.unlink()
            continue
        _atomic_write(target, files[rel])
    return changed
