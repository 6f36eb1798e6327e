"""What a regeneration changed in the generated API, for ``protoframe generate`` to print.

A new upstream schema can rewrite thousands of generated lines; what a reviewer needs first is
what changed for callers: classes, fields, enum values, methods and functions added, removed,
renamed or retyped. Both versions of each changed module are parsed with ``ast`` and their
public names compared, so formatting, comments and bodies are no change.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from protoframe.generator.output import Change

# One screen: the summary is a pointer into the diff, not the diff.
MAX_LINES = 20


@dataclass(frozen=True)
class Member:
    """One public name of a generated module."""

    kind: str  # class, field, value (of an enum), method, function or constant
    name: str  # dotted inside the module, e.g. "CommandSend.is_chunk"
    # What two members of one kind and scope share when one is the other renamed: the
    # annotation of a field, the value of an enum member, a signature, a class's bases.
    shape: str

    @property
    def scope(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def short(self) -> str:
        return self.name.rpartition(".")[2]


def public_api(source: str) -> dict[str, Member]:
    """The public members of a module's source, by dotted name."""
    members: dict[str, Member] = {}
    _collect(ast.parse(source).body, "", False, members)
    return members


def _public(name: str) -> bool:
    return not name.startswith("_")


def _collect(body: list[ast.stmt], scope: str, in_class: bool,
             members: dict[str, Member]) -> None:
    def add(kind: str, name: str, shape: str) -> None:
        if _public(name):
            full = f"{scope}.{name}" if scope else name
            members[full] = Member(kind, full, shape)

    for node in body:
        if isinstance(node, ast.ClassDef) and _public(node.name):
            add("class", node.name, ", ".join(ast.unparse(b) for b in node.bases))
            _collect(node.body, f"{scope}.{node.name}" if scope else node.name, True, members)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            returns = ast.unparse(node.returns) if node.returns else ""
            if any(d.endswith((".setter", ".deleter")) for d in decorators):
                continue  # the property's getter stands for it
            if "property" in decorators:
                # Optional fields are properties over a private slot: to callers, fields.
                add("field", node.name, returns)
                continue
            args = ast.unparse(node.args)
            add("method" if in_class else "function", node.name,
                f"({args}){' -> ' + returns if returns else ''}")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = ast.unparse(node.annotation)
            if annotation.startswith("ClassVar"):
                continue  # class metadata (FULL_NAME, FIELD_NAMES), not a field
            if in_class:
                add("field", node.target.id, annotation)
            else:
                # A literal constant's value is its API (PROTOCOL_VERSION, a frame size).
                value = node.value
                add("constant", node.target.id, annotation + (
                    f" = {ast.unparse(value)}" if isinstance(value, ast.Constant) else ""))
        elif isinstance(node, ast.Assign) and node.targets and all(
                isinstance(t, ast.Name) for t in node.targets):
            for target in node.targets:
                assert isinstance(target, ast.Name)
                if target.id == "__all__" or target.id.startswith("__"):
                    continue
                if not in_class and target.id in _DATA_CONSTANTS:
                    add("constant", target.id, "")
                    continue
                # In a class, a plain assignment is an enum member (generated classes annotate
                # their fields); its value is what a rename keeps.
                add("value" if in_class else "constant", target.id, ast.unparse(node.value))


# Module constants that are data derived from the rest of the module (the proto file's
# descriptor set follows its messages, whose changes are listed themselves): present or not.
_DATA_CONSTANTS = frozenset({"FILE_DESCRIPTOR_SET"})


def api_changes(old: str, new: str) -> list[str]:
    """The changes from module source ``old`` to ``new``: renames and changes (``~``) first,
    then removals (``-``), then additions (``+``); the members of one kind and scope added or
    removed together share a line."""
    before, after = public_api(old), public_api(new)
    removed = [m for name, m in before.items() if name not in after]
    added = [m for name, m in after.items() if name not in before]
    changed: list[str] = []
    renamed_old, renamed_new = _renames(removed, added)
    gone = {m.name for m in removed if m.kind == "class"} | {m.name for m in added
                                                              if m.kind == "class"}
    # A field's accessors (has_<field>, clear_<field>) come and go with it: its line says it.
    old_fields = {m.name for m in removed if m.kind == "field"}
    new_fields = {m.name for m in added if m.kind == "field"}
    minus: list[Member] = []
    plus: list[Member] = []
    for m in before.values():
        if m.name in renamed_old:
            if not _accessor(m, old_fields):
                changed.append(f"~ {m.kind} {m.name} renamed to {renamed_old[m.name].short}")
        elif m.name not in after:
            if not _inside(m, gone) and not _accessor(m, old_fields):
                minus.append(m)
        elif after[m.name].shape != m.shape and m.kind != "class":
            changed.append(f"~ {m.kind} {m.name}: {_difference(m, after[m.name])}")
    for m in after.values():
        if m.name not in before and m.name not in renamed_new and not _inside(m, gone) \
                and not _accessor(m, new_fields):
            plus.append(m)
    return changed + _grouped("-", minus) + _grouped("+", plus)


def _difference(old: Member, new: Member) -> str:
    """How a member's shape changed, short enough for one line."""
    if old.kind in ("method", "function"):
        was, now = _parameters(old.shape), _parameters(new.shape)
        if was != now:
            parts = [f"parameter {p} removed" for p in was if p not in now]
            parts += [f"parameter {p} added" for p in now if p not in was]
            return ", ".join(parts) or "parameters reordered"
        return "signature changed"
    return f"{_clip(old.shape)} -> {_clip(new.shape)}"


def _parameters(signature: str) -> list[str]:
    """The parameter names of a ``(args) -> returns`` shape."""
    try:
        tree = ast.parse(f"def f{signature.partition(' -> ')[0]}: ...")
    except SyntaxError:
        return []
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    return [n for n in names if n not in ("self", "cls")]


def _grouped(sign: str, members: list[Member]) -> list[str]:
    """One line per kind and scope: ``- field Msg.{a, b}``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for m in members:
        groups.setdefault((m.kind, m.scope), []).append(m.short)
    lines = []
    for (kind, scope), names in groups.items():
        prefix = f"{scope}." if scope else ""
        if len(names) == 1:
            lines.append(f"{sign} {kind} {prefix}{names[0]}")
            continue
        listed = _clip(", ".join(names), 70)
        lines.append(f"{sign} {len(names)} {_plural(kind)} {prefix}{{{listed}}}")
    return lines


def _plural(kind: str) -> str:
    return "classes" if kind == "class" else kind + "s"


def _accessor(member: Member, fields: set[str]) -> bool:
    """Whether ``member`` is a method named for one of ``fields`` of its class."""
    return member.kind == "method" and any(
        member.short.endswith("_" + f.rpartition(".")[2]) and f.rpartition(".")[0] == member.scope
        for f in fields)


def _inside(member: Member, classes: set[str]) -> bool:
    """Whether ``member`` belongs to a class that was itself added or removed (the class's own
    line says it all)."""
    scope = member.scope
    while scope:
        if scope in classes:
            return True
        scope = scope.rpartition(".")[0]
    return False


def _renames(removed: Sequence[Member], added: Sequence[Member]
             ) -> tuple[dict[str, Member], set[str]]:
    """Pairs of a removed and an added member that are one member renamed: the only removed
    and the only added one of their kind, scope and shape."""
    def key(m: Member) -> tuple[str, str, str]:
        return m.kind, m.scope, m.shape

    gone: dict[tuple[str, str, str], list[Member]] = {}
    for m in removed:
        gone.setdefault(key(m), []).append(m)
    new: dict[tuple[str, str, str], list[Member]] = {}
    for m in added:
        new.setdefault(key(m), []).append(m)
    pairs: dict[str, Member] = {}
    for k, olds in gone.items():
        news = new.get(k, [])
        if len(olds) == 1 and len(news) == 1 and k[0] != "class":
            pairs[olds[0].name] = news[0]
    return pairs, {m.name for m in pairs.values()}


def _clip(text: str, limit: int = 50) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summarize(changes: Iterable[Change], display: Callable[[Path], str],
              limit: int = MAX_LINES) -> list[str]:
    """The summary of the planned ``changes`` to generated Python modules, read against the
    files they replace (call it before writing them); empty when no public name changes."""
    body: list[str] = []
    for change in changes:
        if change.path.suffix != ".py":
            continue
        old = change.path.read_text(encoding="utf-8") if change.path.is_file() else None
        if old is None or change.text is None:
            body.append(f"  {'+' if old is None else '-'} module {display(change.path)}")
            continue
        lines = api_changes(old, change.text)
        if lines:
            body.append(f"  {display(change.path)}:")
            body += [f"    {line}" for line in lines]
    if not body:
        return []
    shown = body[:limit]
    if len(body) > limit:
        shown.append(f"  ... and {len(body) - limit} more line(s): see the diff")
    return ["generated API changes:", *shown]
