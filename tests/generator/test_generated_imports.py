"""A generated module imports exactly the names its code uses, as the emitters declare them."""

from __future__ import annotations

import ast
import builtins
import shutil
from pathlib import Path

import pytest

from protoframe.generator.build import generate
from tests.support.paths import DATA, ROOT

PROTOWIRE = "protoframe.runtime.codec.protowire"


def _bindings(tmp: Path, protocol: str, files: dict[str, str]) -> dict[str, str]:
    """The generated bindings of ``files`` (name -> .proto text), by module name."""
    spec_dir = tmp / "specs" / protocol
    spec_dir.mkdir(parents=True)
    for name, text in files.items():
        (spec_dir / name).write_text(text)
    out = generate(tmp / "specs", "specs", [protocol], outputs=frozenset({"bindings"}))
    prefix = f"{protocol}/"
    return {rel.removeprefix(prefix).removesuffix(".py"): text
            for rel, text in out.files.items() if rel.startswith(prefix)}


def _imported(source: str, module: str) -> set[str]:
    """The names ``source`` imports from ``module`` (relative ones as written: ``.machines``)."""
    return {alias.asname or alias.name for node in ast.parse(source).body
            if isinstance(node, ast.ImportFrom)
            and "." * node.level + (node.module or "") == module
            for alias in node.names}


def _unbound_and_unused(source: str) -> tuple[set[str], set[str]]:
    """Names the code reads that nothing binds, and imported names the code never reads."""
    tree = ast.parse(source)
    loaded: set[str] = set()
    bound = set(dir(builtins))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return loaded - bound - imported, imported - loaded


PLAIN = """syntax = "proto2";
package imports.test;
message Plain { optional bytes b = 1; }
"""
# Plain plus one zigzag-encoded field: the module needs its encoder and decoder helpers.
ZIGZAG = """syntax = "proto2";
package imports.test;
message Zig { optional bytes b = 1; optional sint64 d = 2; }
"""


def test_a_runtime_name_is_imported_exactly_where_the_code_uses_it(tmp_path: Path) -> None:
    modules = _bindings(tmp_path, "imports", {"plain.proto": PLAIN, "zig.proto": ZIGZAG})
    plain = _imported(modules["plain"], PROTOWIRE)
    zig = _imported(modules["zig"], PROTOWIRE)
    assert zig - plain == {"sint64_bytes", "unzigzag"}
    assert plain - zig == set()
    assert "unzigzag" in modules["zig"].split("__all__")[1]
    assert "unzigzag" not in modules["plain"]
    for name, text in modules.items():
        assert _unbound_and_unused(text) == (set(), set()), name


def test_a_module_of_enums_imports_no_message_machinery(tmp_path: Path) -> None:
    modules = _bindings(tmp_path, "enums", {"colours.proto": (
        'syntax = "proto3";\npackage enums.test;\nenum Colour { RED = 0; GREEN = 1; }\n')})
    text = modules["colours"]
    assert _imported(text, PROTOWIRE) == {"number_table"}
    assert "struct_error" not in text and "ClassVar" not in text
    assert _unbound_and_unused(text) == (set(), set())


@pytest.mark.parametrize("protocol", ["allkinds", "nested", "proto3", "sparse"])
def test_every_name_used_is_imported_and_every_import_used(
        tmp_path: Path, protocol: str) -> None:
    shutil.copytree(DATA / protocol, tmp_path / "specs" / protocol)
    out = generate(tmp_path / "specs", "specs", [protocol], outputs=frozenset({"bindings"}))
    modules = {rel: text for rel, text in out.files.items()
               if rel.startswith(f"{protocol}/") and not rel.endswith("__init__.py")}
    assert modules
    for rel, text in modules.items():
        assert _unbound_and_unused(text) == (set(), set()), rel


@pytest.fixture(scope="module")
def repo_modules() -> dict[str, str]:
    """Every module generated from the repository's own specs, by path."""
    return {rel: text for rel, text in generate(ROOT / "specs", "specs").files.items()
            if rel.endswith(".py")}


PROTOBUF_BINDINGS = {"pulsar/pulsar_api.py", "pravega/controller.py", "tubemq/rpc.py",
                     "tubemq/master_service.py", "tubemq/broker_service.py", "demo/events.py"}


@pytest.mark.parametrize("kind", ["frames", "bindings", "commands", "machines", "client", "spark"])
def test_the_repository_modules_import_what_they_use(
        repo_modules: dict[str, str], kind: str) -> None:
    chosen = PROTOBUF_BINDINGS if kind == "bindings" else {
        rel for rel in repo_modules if rel.endswith(f"/{kind}.py")}
    assert len(chosen) >= 4
    for rel in chosen:
        assert _unbound_and_unused(repo_modules[rel]) == (set(), set()), rel


def test_frames_with_a_checksum_import_its_function(tmp_path: Path) -> None:
    shutil.copytree(DATA / "checksums", tmp_path / "specs" / "checksums")
    out = generate(tmp_path / "specs", "specs", ["checksums"], outputs=frozenset({"frames"}))
    text = out.files["checksums/frames.py"]
    assert _unbound_and_unused(text) == (set(), set())
    # The spec checksums with both algorithms.
    assert _imported(text, "protoframe.runtime.codec.checksums") == {"crc32", "crc32c"}


MACHINE = "protoframe.runtime.engine.machine"


def test_commands_import_what_their_table_names(repo_modules: dict[str, str]) -> None:
    # Routed commands carry body decoders (Callable, Any) from the protobuf modules; a switch
    # names frames' body classes; an envelope its type enum.
    routed, switched, enveloped = (repo_modules[f"{p}/commands.py"]
                                   for p in ("tubemq", "tank", "pulsar"))
    assert _imported(routed, "typing") == {"Any", "NamedTuple"}
    assert _imported(routed, "collections.abc") == {"Callable"}
    assert _imported(routed, ".") == {"broker_service", "master_service"}
    assert _imported(switched, "typing") == {"NamedTuple"}
    assert _imported(switched, ".") == {"frames"}
    assert _imported(enveloped, ".") == {"pulsar_api"}
    for text in (routed, switched, enveloped):
        assert _imported(text, MACHINE) == {"Interaction"}


def test_machines_import_what_their_rules_keys_and_routes_name(
        repo_modules: dict[str, str]) -> None:
    # pulsar: machines with rules and keys; tubemq: routes naming commands, a Command
    # dataclass, frame builders; pravega: a switch and no machines at all.
    pulsar, tubemq, pravega = (repo_modules[f"{p}/machines.py"]
                               for p in ("pulsar", "tubemq", "pravega"))
    skeleton = {"MachineDef", "MachineSet", "ProtocolViolation", "ViolationPolicy",
                "hook_table", "refuse"}
    assert _imported(pulsar, MACHINE) == skeleton | {"NO_KEY", "Direction", "Rule"}
    assert _imported(pulsar, "typing") == {"TYPE_CHECKING", "Any", "Protocol", "cast"}
    assert _imported(pulsar, ".commands") == {"BY_TYPE", "HOOKS", "INTERACTIONS"}
    assert _imported(pulsar, ".") == {"frames", "pulsar_api"}
    assert _imported(pravega, MACHINE) == skeleton
    assert _imported(pravega, "typing") == {"TYPE_CHECKING", "Any", "Protocol"}
    assert _imported(pravega, ".commands") == {"BY_BODY", "HOOKS", "INTERACTIONS"}
    assert "import enum" not in pravega and "import enum" in pulsar
    assert _imported(tubemq, "protoframe.runtime.errors") == {
        "DecodeError", "UnknownCommandError", "UnknownCommandTypeError"}
    assert _imported(tubemq, "collections.abc") == {"Callable", "Hashable"}
    assert _imported(tubemq, "dataclasses") == {"dataclass"}
    assert _imported(tubemq, ".commands") == {"HOOKS", "INTERACTIONS", "ROUTE_0", "ROUTE_1"}
    assert _imported(tubemq, ".") == {"broker_service", "frames", "master_service", "rpc"}
    assert _imported(pravega, "collections.abc") == {"Hashable"}


def test_clients_import_what_their_requests_name(repo_modules: dict[str, str]) -> None:
    pravega, tubemq, tank = (repo_modules[f"{p}/client.py"]
                             for p in ("pravega", "tubemq", "tank"))
    assert _imported(pravega, "uuid") == {"UUID"}
    assert _imported(tank, "uuid") == set()
    # tubemq correlates by frame fields (Command) and builds frames of routed commands.
    from_machines = _imported(tubemq, ".machines")
    builders = {n for n in from_machines if n.startswith("frame_of_")}
    assert from_machines - builders == {"Command", "command_of", "field_of"}
    assert "frame_of_register_c2b" in builders
    assert all(f"= {n}(request" in tubemq for n in builders)
    assert _imported(tank, ".machines") == {"command_of", "field_of"}
    assert _imported(tubemq, ".") == {"broker_service", "frames", "master_service"}
    assert _imported(tank, ".") == {"frames"}


SPARK_ROWS = "protoframe.runtime.spark.rows"
SPARK_TYPES = "pyspark.sql.types"


def test_spark_modules_import_what_their_kinds_name(repo_modules: dict[str, str]) -> None:
    # pulsar has uint64 fields (decimals) and closed enums; pravega uuids, maps and switches;
    # tubemq none of these; demo has no frames.
    pulsar, pravega, tubemq, demo = (repo_modules[f"{p}/spark.py"]
                                     for p in ("pulsar", "pravega", "tubemq", "demo"))
    assert {"DECIMAL_20", "uint64_value", "closed_enum", "unknown_enum"} <= _imported(
        pulsar, SPARK_ROWS)
    assert _imported(pulsar, "decimal") == {"Decimal"}
    assert "DecimalType" in _imported(pulsar, SPARK_TYPES)
    assert _imported(tubemq, "decimal") == set()
    assert "DecimalType" not in _imported(tubemq, SPARK_TYPES)
    assert not {"DECIMAL_20", "uint64_value"} & _imported(tubemq, SPARK_ROWS)
    assert _imported(pravega, "uuid") == {"UUID"}
    assert {"map_items", "map_entries", "list_offsets", "no_alternative", "text_array"} <= (
        _imported(pravega, SPARK_ROWS))
    assert "MapType" in _imported(pravega, SPARK_TYPES)
    assert _imported(pravega, "typing") == {"Any", "TypeAlias"}
    assert _imported(tubemq, "typing") == {"Any"}
    assert _imported(demo, "protoframe.runtime.errors") == set()
    assert _imported(pravega, "protoframe.runtime.errors") == {"ChecksumFailure", "DecodeError"}
    assert _imported(demo, ".") == {"events"}


@pytest.mark.parametrize("protocol", ["allkinds", "checksums", "nested", "proto3", "sparse"])
def test_spark_modules_of_the_test_specs_import_what_they_use(
        tmp_path: Path, protocol: str) -> None:
    shutil.copytree(DATA / protocol, tmp_path / "specs" / protocol)
    out = generate(tmp_path / "specs", "specs", [protocol], outputs=frozenset({"spark"}))
    text = out.files[f"{protocol}/spark.py"]
    assert _unbound_and_unused(text) == (set(), set())
