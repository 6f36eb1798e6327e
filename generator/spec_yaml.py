"""YAML loading that remembers where every key and value came from.

JSON Schema and semantic checks report problems by path (``frame.fields[2].size``); this
module turns such a path back into ``file:line:column`` so the user sees the offending key
or value in their own file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from protoframe.generator.errors import SpecError


@dataclass(frozen=True, slots=True)
class Mark:
    """A 1-based line and column in a spec file."""

    line: int
    column: int


class LocDict(dict[Any, Any]):
    """A mapping from a spec, with the position of each key and each value."""

    key_marks: dict[Any, Mark]
    value_marks: dict[Any, Mark]
    mark: Mark


class LocList(list[Any]):
    """A sequence from a spec, with the position of each item."""

    item_marks: list[Mark]
    mark: Mark


def _mark(node: yaml.Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LocDict:
    out = LocDict()
    out.key_marks, out.value_marks, out.mark = {}, {}, _mark(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | bool):
            raise _BadKey("mapping keys must be plain scalars", _mark(key_node))
        if key in out:
            raise _DuplicateKey(str(key), _mark(key_node))
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_marks[key] = _mark(key_node)
        out.value_marks[key] = _mark(value_node)
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LocList:
    out = LocList(loader.construct_object(child, deep=True) for child in node.value)
    out.item_marks = [_mark(child) for child in node.value]
    out.mark = _mark(node)
    return out


class _BadKey(Exception):
    def __init__(self, message: str, mark: Mark) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


class _DuplicateKey(_BadKey):
    def __init__(self, key: str, mark: Mark) -> None:
        super().__init__(f"duplicate key {key!r}", mark)


# YAML 1.1 reads on/off/yes/no as booleans, which would turn a key like `on:` into True.
# Specs follow YAML 1.2 here: only true and false are booleans.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"),
                              list("tf"))
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_spec(path: Path, display: str) -> LocDict:
    """Parse one YAML spec file; syntax errors become ``SpecError`` with their position."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", display) from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except _BadKey as exc:
        raise SpecError(exc.message, display, exc.mark.line, exc.mark.column) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise SpecError(f"invalid YAML: {exc.problem}", display, line, col) from None
    if not isinstance(data, LocDict):
        raise SpecError("a spec must be a mapping at the top level", display, 1, 1)
    return data


def locate(root: LocDict, path: list[str | int], key: bool = False) -> Mark:
    """Position of the value (or, with ``key``, of the key) at ``path`` inside ``root``."""
    node: Any = root
    mark = root.mark
    for step in path:
        if isinstance(node, LocDict) and not isinstance(step, bool) and step in node:
            mark = node.key_marks[step] if key and step == path[-1] else node.value_marks[step]
            node = node[step]
        elif isinstance(node, LocList) and isinstance(step, int) and step < len(node):
            mark = node.item_marks[step]
            node = node[step]
        else:
            break
    return mark
