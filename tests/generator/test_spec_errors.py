"""Broken frame specs are reported as ``file:line:column: message`` by the CLI, and nothing is
written.

Each file in tests/data/bad_specs is a spec with one mistake (its first line says which). It is
placed in a fresh protocol directory next to a tiny .proto and run through ``protoframe
generate`` (in this process). The expected position is computed from the YAML text itself: the
line containing ``line_has`` and the column where ``token`` starts on it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.generator.spec_cases import (
    BAD_SPECS,
    CASES,
    GOOD_SPEC,
    MACHINE_CASES,
    MINI_PROTO,
    Case,
    position,
)
from tests.support.generator_cli import run_cli


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    display: str  # how the CLI names the spec file
    out: Path
    cwd: Path


def run_generator(tmp_path: Path, spec_name: str, spec_text: str) -> Run:
    protocol = tmp_path / "specs" / "mini"
    protocol.mkdir(parents=True)
    (protocol / "mini.proto").write_text(MINI_PROTO)
    (protocol / spec_name).write_text(spec_text)
    out = tmp_path / "out"
    result = run_cli("generate", "--spec-dir", str(tmp_path / "specs"), "--out", str(out),
                     cwd=tmp_path)
    return Run(result.returncode, result.stdout, result.stderr,
               f"specs/mini/{spec_name}", out, tmp_path)


def error_lines(run: Run) -> list[str]:
    return [line.removeprefix("error: ") for line in run.stderr.splitlines()
            if line.startswith("error: ")]


def assert_rejected(run: Run) -> None:
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "wrote" not in run.stdout
    # Nothing anywhere: not the --out directory, nor the default one, nor documentation.
    assert sorted(p.name for p in run.cwd.iterdir()) == ["specs"]


def test_every_bad_spec_file_has_a_case() -> None:
    on_disk = {p.name for p in BAD_SPECS.glob("*.yaml")}
    machine_cases = [c for param in MACHINE_CASES for c in param.values if isinstance(c, Case)]
    covered = {c.file for c in CASES} | {c.file for c in machine_cases} | {
        "size_of_forward_reference_in_frame.yaml"}
    assert on_disk == covered


def test_good_spec_generates(tmp_path: Path) -> None:
    """The baseline the bad specs are variations of is itself valid."""
    run = run_generator(tmp_path, "mini.yaml", GOOD_SPEC)
    assert run.returncode == 0, run.stderr
    assert (run.out / "mini" / "frames.py").is_file()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_spec_reports_position(tmp_path: Path, case: Case) -> None:
    text = (BAD_SPECS / case.file).read_text()
    run = run_generator(tmp_path, case.file, text)
    assert_rejected(run)
    line, column = position(text, case.line_has, case.token)
    errors = error_lines(run)
    assert errors, run.stderr
    prefix = f"{run.display}:{line}:{column}: "
    assert errors[0].startswith(prefix), f"expected {prefix}...\n{run.stderr}"
    assert case.message in errors[0], run.stderr
    # One mistake, one error.
    assert len(errors) == 1, run.stderr


def test_size_of_nothing_in_the_frame_points_at_the_value(tmp_path: Path) -> None:
    text = (BAD_SPECS / "size_of_forward_reference_in_frame.yaml").read_text()
    run = run_generator(tmp_path, "spec.yaml", text)
    assert_rejected(run)
    line, column = position(text, "size_of: nonexistent", "nonexistent")
    errors = error_lines(run)
    assert errors[0] == (f"{run.display}:{line}:{column}: size_of: 'nonexistent' is not a "
                         "field after 'command_size'")


def test_size_of_nothing_in_the_frame_is_one_error(tmp_path: Path) -> None:
    text = (BAD_SPECS / "size_of_forward_reference_in_frame.yaml").read_text()
    run = run_generator(tmp_path, "spec.yaml", text)
    assert_rejected(run)
    assert len(error_lines(run)) == 1, run.stderr


@pytest.mark.parametrize("case", MACHINE_CASES)
def test_bad_machine_spec_reports_position(tmp_path: Path, case: Case) -> None:
    text = (BAD_SPECS / case.file).read_text()
    run = run_generator(tmp_path, case.file, text)
    assert_rejected(run)
    line, column = position(text, case.line_has, case.token)
    errors = error_lines(run)
    assert errors and errors[0].startswith(f"{run.display}:{line}:{column}: "), run.stderr
    assert case.message in errors[0]


def test_all_errors_of_one_spec_are_reported_together(tmp_path: Path) -> None:
    text = GOOD_SPEC.replace("to: ready}\n      - {from: ready, receive: PING",
                             "to: readdy}\n      - {from: ready, receive: PINGG")
    text = text.replace("response: PONG}", "response: PONGG}")
    run = run_generator(tmp_path, "mini.yaml", text)
    assert_rejected(run)
    errors = error_lines(run)
    expected = [
        (position(text, "response: PONGG", "PONGG"), "unknown command 'PONGG'"),
        (position(text, "to: readdy", "readdy"), "unknown state 'readdy'"),
        (position(text, "receive: PINGG", "PINGG"), "unknown command 'PINGG'"),
    ]
    for (line, column), message in expected:
        assert any(e.startswith(f"{run.display}:{line}:{column}: ") and message in e
                   for e in errors), (line, column, message, run.stderr)
    assert len(errors) == 3, run.stderr
    assert "3 error(s); nothing was generated" in run.stderr


def test_bad_spec_leaves_existing_output_untouched(tmp_path: Path) -> None:
    good = run_generator(tmp_path, "mini.yaml", GOOD_SPEC)
    assert good.returncode == 0, good.stderr
    before = {p: p.read_bytes() for p in good.out.rglob("*") if p.is_file()}
    spec = tmp_path / "specs" / "mini" / "mini.yaml"
    spec.write_text(GOOD_SPEC.replace("struct: Payload", "struct: Paylod"))
    result = run_cli("generate", "--spec-dir", str(tmp_path / "specs"), "--out", str(good.out),
                     cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown struct 'Paylod'" in result.stderr
    assert {p: p.read_bytes() for p in good.out.rglob("*") if p.is_file()} == before
    shutil.rmtree(good.out)


# -- commands named inside the frame (commands: routes) -------------------------------------------

ROUTED_PROTO = """\
syntax = "proto2";
package rpcmini;

message Header { required int32 flag = 1; optional int32 service = 2; }
message Call {
  enum Status { OK = 0; FAILED = 1; }
  required int32 method = 1;
  optional bytes args = 2;
  optional Status status = 3;
}
message Hello { required string name = 1; }
message Welcome { required uint64 session = 1; }
message Failure { required string reason = 1; }
"""

ROUTED_SPEC = """\
protocol: rpcmini
structs:
  Request:
    fields:
      - {name: call, type: proto, message: Call, prefix: varint}
  Content:
    fields:
      - {name: header, type: proto, message: Header, prefix: varint}
      - {name: request, type: struct, struct: Request, when: "header.flag == 0"}
      - {name: failure, type: proto, message: Failure, prefix: varint, when: "header.flag == 2"}
frame:
  name: Frame
  fields:
    - {name: serial, type: u32}
    - {name: content, type: blocks, struct: Content}
commands:
  - in: content.request
    on: call.method
    payload: call.args
    set: {content.header.flag: 0, content.request.call.status: OK}
    values:
      1: {name: HELLO, message: Hello, set: {content.header.service: 7}}
      2: {name: WELCOME, message: Welcome}
  - in: content.failure
    name: FAILURE
    set: {content.header.flag: 2}
interactions:
  allocate: serial
  requests:
    - {request: HELLO, response: WELCOME, errors: [FAILURE], correlate: [serial]}
"""


def run_routed(tmp_path: Path, spec_text: str) -> Run:
    protocol = tmp_path / "specs" / "rpcmini"
    protocol.mkdir(parents=True)
    (protocol / "rpcmini.proto").write_text(ROUTED_PROTO)
    (protocol / "rpcmini.yaml").write_text(spec_text)
    result = run_cli("generate", "--spec-dir", str(tmp_path / "specs"), "--out",
                     str(tmp_path / "out"), cwd=tmp_path)
    return Run(result.returncode, result.stdout, result.stderr,
               "specs/rpcmini/rpcmini.yaml", tmp_path / "out",
               tmp_path)


def test_good_routed_spec_generates(tmp_path: Path) -> None:
    run = run_routed(tmp_path, ROUTED_SPEC)
    assert run.returncode == 0, run.stderr
    machines = (run.out / "rpcmini" / "machines.py").read_text()
    assert "def frame_of_hello(body: rpcmini.Hello, *, serial: int) -> frames.Frame:" in machines
    assert "header=rpcmini.Header(flag=0, service=7)" in machines
    assert "call=rpcmini.Call(method=1, args=body.encode(), status=rpcmini.Call.Status.OK)" \
        in machines
    client = (run.out / "rpcmini" / "client.py").read_text()
    assert "async def hello(" in client and "request: rpcmini.Hello," in client


@dataclass(frozen=True)
class RoutedCase:
    id: str
    old: str  # replaced in ROUTED_SPEC by new
    new: str
    line_has: str
    token: str
    message: str


ROUTED_CASES = [
    RoutedCase("unknown_part", "in: content.request\n", "in: content.requst\n",
               "in: content.requst", "content.requst",
               "'requst' is not a data field of Content"),
    RoutedCase("unknown_on_field", "on: call.method", "on: call.methd", "on: call.methd",
               "call.methd", "Call has no field 'methd'"),
    RoutedCase("on_not_an_integer", "on: call.method", "on: call.args", "on: call.args",
               "call.args", "not an integer or enum field"),
    RoutedCase("payload_not_bytes", "payload: call.args", "payload: call.status",
               "payload: call.status", "call.status", "not a bytes field"),
    RoutedCase("value_without_message", "2: {name: WELCOME, message: Welcome}",
               "2: {name: WELCOME}", "2: {name: WELCOME}", "WELCOME",
               "a route with a payload needs message:"),
    RoutedCase("message_without_payload", "    name: FAILURE\n",
               "    name: FAILURE\n    values: {3: {name: OTHER, message: Hello}}\n",
               "  - in: content.failure", "in", "'on' is a dependency of 'values'"),
    RoutedCase("command_named_twice", "      2: {name: WELCOME, message: Welcome}\n",
               "      2: {name: WELCOME, message: Welcome}\n"
               "      3: {name: HELLO, message: Hello}\n",
               "3: {name: HELLO", "HELLO", "command name 'HELLO' is used twice"),
    RoutedCase("required_field_not_set", "set: {content.header.flag: 0, ", "set: {",
               "1: {name: HELLO", "HELLO",
               "a sender cannot build the frame without content.header.flag"),
    RoutedCase("set_value_of_wrong_type", "set: {content.header.flag: 2}",
               'set: {content.header.flag: "two"}', 'flag: "two"', '"two"',
               "set: 'two' does not fit 'content.header.flag'"),
    RoutedCase("set_character_of_two_bytes", "set: {content.header.flag: 2}",
               "set: {content.header.flag: \"'ab'\"}", "flag: \"'ab'\"", "\"'ab'\"",
               "set: character literal 'ab' holds 2 characters"),
    RoutedCase("value_character_not_ascii", "2: {name: WELCOME", "\"'é'\": {name: WELCOME",
               "\"'é'\"", "\"'é'\"", "values: character literal 'é' is not ASCII"),
    RoutedCase("set_unknown_enum_value", "content.request.call.status: OK",
               "content.request.call.status: FINE", "status: FINE", "FINE",
               "'FINE' is not a value of Status"),
    RoutedCase("name_and_on", "    name: FAILURE\n",
               "    name: FAILURE\n    on: reason\n    values: {3: {name: OTHER}}\n",
               "    on: reason", "on", "a route needs either on: with values:, or name:"),
    RoutedCase("route_never_used", "  - in: content.request\n",
               "  - in: content\n    name: ANY\n  - in: content.request\n",
               "  - in: content.request", "content.request", "this route is never used"),
    RoutedCase("set_inside_the_body", "set: {content.header.flag: 2}",
               "set: {content.header.flag: 2, content.failure.reason: x}", "name: FAILURE",
               "FAILURE", "'content.failure' is set twice, or inside a value that is set whole"),
]


@pytest.mark.parametrize("case", ROUTED_CASES, ids=lambda c: c.id)
def test_bad_route_reports_position(tmp_path: Path, case: RoutedCase) -> None:
    assert case.old in ROUTED_SPEC, case.old
    text = ROUTED_SPEC.replace(case.old, case.new, 1)
    run = run_routed(tmp_path, text)
    assert_rejected(run)
    line, column = position(text, case.line_has, case.token)
    errors = error_lines(run)
    assert errors, run.stderr
    prefix = f"{run.display}:{line}:{column}: "
    assert errors[0].startswith(prefix), f"expected {prefix}...\n{run.stderr}"
    assert case.message in errors[0], run.stderr
    assert len(errors) == 1, run.stderr


def test_routes_cannot_join_a_dispatching_frame(tmp_path: Path) -> None:
    text = GOOD_SPEC.replace("interactions:\n", "commands:\n  - {in: payload, name: RAW}\n"
                             "interactions:\n", 1)
    run = run_generator(tmp_path, "mini.yaml", text)
    assert_rejected(run)
    line, column = position(text, "commands:", "commands")
    errors = error_lines(run)
    assert errors[0].startswith(f"{run.display}:{line}:{column}: "), run.stderr
    assert "already names its commands" in errors[0]
