"""A project's settings: ``[tool.protoframe]`` in ``pyproject.toml``, or ``protoframe.toml``.

The settings file is looked for in the working directory and then in each directory above it,
as ruff and mypy look for theirs; the directory holding it is the *project root*. Paths in it are
relative to that root; paths given on the command line are relative to the working directory,
and override the file. Without a settings file the working directory is the root and the
defaults below apply.

```toml
[tool.protoframe]
spec-dir = "specs"                   # one sub-directory per protocol
out = "src/myapp/proto"              # the generated package
docs-out = "docs/protocols"          # reference pages (with "docs" in outputs)
outputs = ["bindings", "frames", "spark", "docs"]
protocols = ["kv"]                   # only these (default: every protocol in spec-dir)
docs-changes-against = "v1.0"        # reference pages gain "Changes since v1.0" (git revision)
```
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from protoframe.generator.errors import SpecError, SpecErrors

PYPROJECT = "pyproject.toml"
PROTOFRAME_TOML = "protoframe.toml"

# What each output is: protobuf bindings (one module per .proto), the frame codecs with their
# state machines and typed request methods (frames.py, machines.py, client.py), the Spark
# schemas and row conversions (spark.py, the only modules that import pyspark and pyarrow) and
# a reference page per protocol.
OUTPUTS = ("bindings", "frames", "spark", "docs")
DEFAULT_OUTPUTS = ("bindings", "frames")
# An output that imports another's modules needs it.
NEEDS = {"frames": "bindings", "spark": "frames"}
DEFAULTS = {"spec-dir": "specs", "out": "generated", "docs-out": "docs/protocols"}
KEYS = ("spec-dir", "out", "docs-out", "outputs", "protocols", "docs-changes-against")
# Sub-tables other commands read: [tool.protoframe.diff] (protoframe.generator.diff.settings).
TABLES = ("diff",)
Position = tuple[str, int, int]  # file, line, column (0: unknown) of a setting


@dataclass(frozen=True)
class Settings:
    """Where a run reads and writes, all paths absolute; ``source`` is the settings file."""

    root: Path
    source: Path | None
    spec_dir: Path
    out: Path
    docs_out: Path | None  # None: no reference pages
    outputs: frozenset[str]
    protocols: tuple[str, ...] | None
    # A git revision: each reference page gains a section listing what `protoframe diff`
    # finds since it. Only on request, so that pages never churn by default.
    docs_changes_against: str | None = None

    def display(self, path: Path) -> str:
        """``path`` as headers and messages name it: relative to the project root, POSIX."""
        return relative_to_root(path, self.root)


def relative_to_root(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (with ``..`` when outside it), in POSIX spelling."""
    rel = os.path.relpath(path.resolve(), root.resolve())
    return Path(rel).as_posix()


def find_settings_file(start: Path) -> Path | None:
    """The nearest ``protoframe.toml``, or ``pyproject.toml`` with ``[tool.protoframe]``."""
    for directory in (start, *start.parents):
        candidate = directory / PROTOFRAME_TOML
        if candidate.is_file():
            return candidate
        candidate = directory / PYPROJECT
        if candidate.is_file() and _has_protoframe_table(candidate):
            return candidate
    return None


def _has_protoframe_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        # Broken TOML that has our table: take it, so that the error is reported.
        return re.search(r"^\s*\[\s*tool\s*\.\s*protoframe\s*\]", text, re.M) is not None
    tool = data.get("tool")
    return isinstance(tool, dict) and "protoframe" in tool


@dataclass(frozen=True)
class Overrides:
    """What the command line says; None where it says nothing."""

    config: Path | None = None
    spec_dir: Path | None = None
    out: Path | None = None
    docs_out: Path | None = None
    outputs: Sequence[str] | None = None
    protocols: Sequence[str] | None = None
    docs_changes_against: str | None = None


def load_settings(cwd: Path, overrides: Overrides) -> Settings:
    """The run's settings: the file's, with the command line's on top; errors are positioned."""
    source = overrides.config if overrides.config is not None else find_settings_file(cwd)
    if overrides.config is not None and not overrides.config.is_file():
        raise SpecErrors([SpecError("settings file does not exist", str(overrides.config))])
    table: Mapping[str, object] = {}
    root = cwd
    if source is not None:
        source = source if source.is_absolute() else cwd / source
        root = source.parent
        table = _read_table(source)
    display = source.name if source is not None else ""
    errors: list[SpecError] = []

    def where(key: str) -> Position:
        assert source is not None
        return _locate_key(source, key)

    for key in table:
        if key not in KEYS and key not in TABLES:
            errors.append(SpecError(f"unknown setting {key!r} (known: {', '.join(KEYS)})",
                                    *where(key)))
    paths: dict[str, Path | None] = {}
    for key in ("spec-dir", "out", "docs-out"):
        value = table.get(key)
        if value is None:
            paths[key] = None
        elif isinstance(value, str) and value:
            paths[key] = root / value
        else:
            errors.append(SpecError(f"{key!r} must be a non-empty string (a path relative to "
                                    f"{display})", *where(key)))
            paths[key] = None
    outputs = _string_list(table, "outputs", where, errors)
    protocols = _string_list(table, "protocols", where, errors)
    changes_against = table.get("docs-changes-against")
    if changes_against is not None and not (isinstance(changes_against, str)
                                            and changes_against):
        errors.append(SpecError("'docs-changes-against' must be a non-empty string (a git "
                                "revision)", *where("docs-changes-against")))
        changes_against = None
    if errors:
        raise SpecErrors(errors)
    if overrides.outputs is not None:
        outputs = list(overrides.outputs)
    if overrides.docs_out is not None:
        # Naming a docs directory on the command line asks for the pages.
        outputs = [*(outputs or DEFAULT_OUTPUTS), "docs"]
    chosen = _check_outputs(outputs if outputs is not None else list(DEFAULT_OUTPUTS),
                            where("outputs") if "outputs" in table and overrides.outputs is None
                            else ("command line", 0, 0))

    def pick(key: str, override: Path | None) -> Path:
        if override is not None:
            return override if override.is_absolute() else cwd / override
        configured = paths[key]
        return configured if configured is not None else root / DEFAULTS[key]

    docs_out = pick("docs-out", overrides.docs_out) if "docs" in chosen else None
    selected = overrides.protocols if overrides.protocols else protocols
    return Settings(root=root, source=source, spec_dir=pick("spec-dir", overrides.spec_dir),
                    out=pick("out", overrides.out), docs_out=docs_out, outputs=chosen,
                    protocols=tuple(selected) if selected else None,
                    docs_changes_against=overrides.docs_changes_against
                    or (str(changes_against) if changes_against is not None else None))


def _read_table(source: Path) -> Mapping[str, object]:
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        # tomllib says "... (at line L, column C)"; turn that into a position.
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line, column = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        raise SpecErrors([SpecError(f"not valid TOML: {message}", _shown(source), line,
                                    column)]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecErrors([SpecError(f"cannot read settings: {exc}", _shown(source))]) from None
    if source.name == PYPROJECT:
        tool = data.get("tool", {})
        table = tool.get("protoframe", {}) if isinstance(tool, dict) else {}
        if not isinstance(table, dict):
            raise SpecErrors([SpecError("[tool.protoframe] must be a table",
                                        *_locate_key(source, "protoframe"))])
        return table
    return data


def _string_list(table: Mapping[str, object], key: str, where: Callable[[str], Position],
                 errors: list[SpecError]) -> list[str] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(SpecError(f"{key!r} must be a list of strings", *where(key)))
        return None
    return [str(v) for v in value]


def _check_outputs(outputs: list[str], where: Position) -> frozenset[str]:
    errors = [SpecError(f"unknown output {name!r} (known: {', '.join(OUTPUTS)})", *where)
              for name in outputs if name not in OUTPUTS]
    chosen = frozenset(outputs)
    for name, needed in NEEDS.items():
        if name in chosen and needed not in chosen:
            errors.append(SpecError(f"output {name!r} needs {needed!r}: its modules import "
                                    f"those of {needed!r}", *where))
    if not chosen & {"bindings", "docs"} and not errors:
        errors.append(SpecError("no outputs selected", *where))
    if errors:
        raise SpecErrors(errors)
    return chosen


def _locate_key(source: Path, key: str) -> Position:
    """Where ``key =`` is in the settings file (tomllib keeps no positions)."""
    shown = _shown(source)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return shown, 0, 0
    pyproject = source.name == PYPROJECT
    in_table = not pyproject
    pattern = re.compile(rf"^(\s*)[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            # In pyproject.toml only [tool.protoframe] is ours; protoframe.toml has no tables.
            in_table = pyproject and stripped.replace(" ", "") == "[tool.protoframe]"
            if in_table and key == "protoframe":
                return shown, number, 1
            continue
        match = pattern.match(line)
        if in_table and match:
            return shown, number, len(match.group(1)) + 1
    return shown, 0, 0


def _shown(path: Path) -> str:
    """How messages name a file: relative to the working directory when under it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)
