"""The Pulsar client's modules import one another one way: no cycles, none hidden behind
``TYPE_CHECKING`` (the connection knows producers and consumers only as protocols, they know
the client only as a ``Session``).

The embedded broker (``clients/pulsar/broker``) is a program of its own, checked on its own: no
cycle and no ``TYPE_CHECKING`` import inside it either (a subscription knows its topic as an
``EntryLog``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

PULSAR = ROOT / "clients" / "pulsar"
PACKAGE = "protoframe.clients.pulsar"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PULSAR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _client_files() -> list[Path]:
    return sorted(p for p in PULSAR.rglob("*.py") if "broker" not in p.relative_to(PULSAR).parts)


def _broker_files() -> list[Path]:
    return sorted((PULSAR / "broker").rglob("*.py"))


def _modules(files: list[Path] | None = None) -> dict[str, Path]:
    return {_module_name(p): p for p in (_client_files() if files is None else files)}


def _imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The modules of this package that ``path`` imports anywhere (TYPE_CHECKING blocks and
    function bodies included): ``from pkg import mod`` counts as ``pkg.mod``."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _graph(files: list[Path] | None = None) -> dict[str, set[str]]:
    known = _modules(files)
    graph = {name: _imports(path, name, known) for name, path in known.items()}
    # A package's __init__ re-exports its modules; a module importing a sibling does not go
    # through it, so the edges into a package's own __init__ from inside it are not cycles.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(f"{t}.")}
    return graph


def test_no_import_cycles_in_the_pulsar_client() -> None:
    assert _cycle(_graph()) is None, f"import cycle: {' -> '.join(_cycle(_graph()) or [])}"


def test_no_import_cycles_in_the_broker() -> None:
    graph = _graph(_broker_files())
    assert f"{PACKAGE}.broker.subscriptions" in graph[f"{PACKAGE}.broker.topics"]
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_type_checking_imports_in_the_pulsar_client() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in _client_files()
                 if "TYPE_CHECKING" in p.read_text()]
    assert offenders == []


def test_no_type_checking_imports_in_the_broker() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in _broker_files()
                 if "TYPE_CHECKING" in p.read_text()]
    assert offenders == []


def test_the_connection_and_the_handles_do_not_know_the_client() -> None:
    graph = _graph()
    assert not {f"{PACKAGE}.consumer", f"{PACKAGE}.producer", f"{PACKAGE}.client"} & \
        graph[f"{PACKAGE}.connection"]
    for name, imports in graph.items():
        if name.startswith((f"{PACKAGE}.consumer", f"{PACKAGE}.producer")):
            assert f"{PACKAGE}.client" not in imports, name
