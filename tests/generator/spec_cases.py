"""The bad-spec cases shared by the CLI's error tests (``test_spec_errors``) and the validation
pass's (``test_spec_validation``): a tiny .proto and a good spec beside it, each file of
tests/data/bad_specs with the line, column and message its error must have, and how a
position is found in the YAML text.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.paths import DATA

BAD_SPECS = DATA / "bad_specs"

MINI_PROTO = """\
syntax = "proto2";
package mini;

message Hello {
  required uint64 request_id = 1;
  optional string client = 2;
}
message Welcome { required uint64 request_id = 1; }
message Ping {}
message Pong {}

// The BaseCommand-like envelope: type selects the field with the same number.
message Envelope {
  enum Type {
    HELLO = 2;
    WELCOME = 3;
    PING = 4;
    PONG = 5;
  }
  required Type type = 1;
  optional Hello hello = 2;
  optional Welcome welcome = 3;
  optional Ping ping = 4;
  optional Pong pong = 5;
}
"""

GOOD_SPEC = """\
protocol: mini
proto: [mini.proto]
structs:
  Payload:
    fields:
      - {name: magic, type: u16, const: 0x0e01}
      - {name: data, type: bytes, size: rest}
frame:
  name: Frame
  fields:
    - {name: total_size, type: u32, size_of: rest}
    - {name: command_size, type: u32, size_of: command}
    - name: command
      type: proto
      message: Envelope
      size: command_size
      dispatch: {on: type, by: field_number}
    - {name: payload, type: struct, struct: Payload, when_remaining: true}
interactions:
  allocate: request_id
  requests:
    - {request: HELLO, response: WELCOME, correlate: [request_id]}
    - {request: PING, response: PONG}
machines:
  connection:
    initial: idle
    states: [idle, ready, closed]
    transitions:
      - {from: idle, send: HELLO, to: ready}
      - {from: ready, receive: PING, to: ready}
      - {from: [idle, ready], event: close, to: closed}
"""


@dataclass(frozen=True)
class Case:
    file: str
    line_has: str  # a substring identifying the line the error must point at
    token: str  # the error's column is where this starts on that line
    message: str  # a fragment the message must contain

    @property
    def id(self) -> str:
        return self.file.removesuffix(".yaml")


def position(text: str, line_has: str, token: str) -> tuple[int, int]:
    """1-based (line, column) of ``token`` on the only line containing ``line_has``."""
    lines = [i for i, line in enumerate(text.splitlines()) if line_has in line]
    assert len(lines) == 1, f"{line_has!r} is on lines {[i + 1 for i in lines]}"
    line = text.splitlines()[lines[0]]
    column = line.index(token, line.index(line_has) if token in line_has else 0)
    return lines[0] + 1, column + 1


CASES = [
    Case("unknown_field_type.yaml", "name: total_size", "u128", "'u128' is not one of"),
    Case("unknown_proto_message.yaml", "message: Envelop", "Envelop",
         "unknown proto message 'Envelop'"),
    Case("size_of_nothing.yaml", "size_of: nonexistent", "nonexistent",
         "size_of: 'nonexistent' is not a field after 'length'"),
    Case("size_names_later_field.yaml", "name: body,", "body_size",
         "size: 'body_size' does not name a field before 'body'"),
    Case("duplicate_dispatch_value.yaml", '"0x01": Close', '"0x01"',
         "dispatch value 1 is duplicated"),
    Case("duplicate_dispatch_key.yaml", "0x10: Close", "0x10", "duplicate key '16'"),
    Case("keyword_identifier.yaml", "name: class", "class", "invalid identifier 'class'"),
    Case("invalid_identifier.yaml", "name: 1abc", "1abc", "'1abc' is not a valid identifier"),
    Case("unknown_key.yaml", "sizeof: command", "sizeof", "unknown key 'sizeof'"),
    Case("order_on_an_array.yaml", "name: ids", "little",
         "order: needs an integer or float field, not array"),
    Case("unknown_struct.yaml", "struct: Paylod", "Paylod", "unknown struct 'Paylod'"),
    Case("machine_unknown_state.yaml", "to: gone", "gone", "unknown state 'gone'"),
    Case("interaction_unknown_command.yaml", "response: HELO", "HELO",
         "unknown command 'HELO'"),
    Case("correlation_not_on_command.yaml", "request: PING", "request_id",
         "correlation field 'request_id' is not a field of PING"),
    Case("yaml_syntax_error.yaml", "name: Frame: Envelope", ": Envelope",
         "invalid YAML: mapping values are not allowed here"),
    # The missing "}" is on the line before; the parser notices at the next "{".
    Case("yaml_unclosed_flow.yaml", "name: command_size", "{",
         "invalid YAML: expected ',' or '}', but got '{'"),
    Case("duplicate_key.yaml", "message: Ping", "message", "duplicate key 'message'"),
    # A varint size of the rest is inserted once the rest is encoded (it once was refused
    # outright, and before that an uncaught KeyError from the emitter).
    Case("varint_size_of_rest_checksummed.yaml", "name: total_size", "rest",
         "checksum 'crc' covers 'total_size', a varint size of the rest"),
    Case("max_bytes_not_varint.yaml", "name: total_size", "4}",
         "max_bytes: needs a varint field"),
    Case("includes_on_varint.yaml", "name: total_size", "self}",
         "includes: needs a fixed-width integer"),
    Case("lenenc_frame_length.yaml", "name: total_size", "total_size",
         "the frame's length 'total_size' is a length-encoded integer"),
    Case("first_unknown_length.yaml", "to_server: Hello", "Hello",
         "first: cannot tell the length of Hello from its first bytes"),
    Case("first_with_envelope_machines.yaml", "first:", "first",
         "first: with machines or interactions needs a frame whose commands a switch names"),
    Case("first_command_taken.yaml", "to_server: Start", "Start",
         "first: Start is the command START, which the frame's switch names too"),
    Case("delimiter_not_a_byte.yaml", "delimiter:", '"',
         "delimiter: each character is one byte"),
    # Once a frames.py that failed mypy --strict (found by tests/generator/test_spec_fuzz.py).
    Case("field_hides_a_type.yaml", "name: bytes", "bytes",
         "field name 'bytes' would hide the type bytes"),
    # The checks below were once made by the emitters (so whether a spec was rejected could
    # depend on which outputs were asked for); frame_checks makes them before any output.
    Case("expression_path_unknown_field.yaml", "name: extra", "extra",
         "'command.pingg.x == 1': Envelope has no field 'pingg'"),
    Case("computed_before_known.yaml", "name: echo", "echo",
         "'later' is computed where encoding cannot know it yet"),
    Case("size_of_cannot_measure.yaml", "name: n,", "n,",
         "size_of cannot measure 'm', whose type is int"),
    Case("checksum_not_integer.yaml", "name: crc,", "bytes",
         "a checksum field must be a fixed-width integer (u8 to u64)"),
    Case("size_not_integer.yaml", "name: data,", "label}",
         "size: 'label' is not an integer field"),
    Case("struct_contains_itself.yaml", "  Payload:", "Payload",
         "struct Payload contains itself"),
    Case("spark_name_collision.yaml", "  Hello:", "Hello",
         "frame struct Hello and message mini.Hello would have the same name 'Hello'"),
    Case("machines_without_commands.yaml", "name: Frame", "name",
         "machines and interactions need a frame with a dispatch or switch field"),
    Case("guard_unknown_name.yaml", "request_idd", "{",
         "guard names 'request_idd', which is neither a field of HELLO"),
    # Once positioned at the frame, whatever the cause; now at the field that is the cause.
    Case("frame_length_after_variable_field.yaml", "name: tag", "tag",
         "'tag' has no fixed size and comes before any size_of field"),
    Case("frame_length_not_at_end.yaml", "name: total_size", "total_size",
         "'total_size' measures 'command', not the end of the frame"),
    Case("names_per_direction_one_layout.yaml", "1: {to_server: OPEN", "{to_server",
         "names: a name per direction needs case 1 to have a different layout each way"),
    Case("names_per_direction_same_name.yaml", "2: {to_server: SHUT", "{to_server",
         "command name 'SHUT' is used twice"),
    Case("case_key_char_two_bytes.yaml", "\"'OP'\": Open", "\"'OP'\"",
         "switch case: character literal 'OP' holds 2 characters; it stands for one byte"),
    Case("case_key_char_not_ascii.yaml", "\"'é'\": Open", "\"'é'\"",
         "character literal 'é' is not ASCII: write its byte escaped ('\\xNN')"),
    Case("expression_char_unknown_escape.yaml", "name: mark", "\"'\\\\q'\"",
         "character literal '\\q' has an unknown escape"),
    Case("names_unknown_case.yaml", "names: {1: OPEN", "3: SHUT", "names: no case has the "
         "value 3"),

    Case("answered_when_unknown_field.yaml", "request: HELLO", '"qos',
         "when: 'qos' is not a field of HELLO nor a data field of the frame"),
    Case("one_way_request.yaml", "one_way:", "HELLO",
         "HELLO is a request, so it cannot be one-way too"),
    Case("allocate_opt_out_without_allocate.yaml", "request: HELLO", "false",
         "allocate: false, but the interactions allocate no field"),
    Case("allocate_negative_start.yaml", "start: -1", "-1", "-1 is less than the minimum"),
    Case("chosen_answer_unknown_field.yaml", "command: WELCOME", '"lvl',
         "when: 'lvl' is not a field of HELLO nor a data field of the frame"),
    Case("chosen_answer_unknown_command.yaml", "command: WELCOM,", "WELCOM,",
         "unknown command 'WELCOM'"),
    Case("stream_until_unknown_command.yaml", "until: [PONG, DONE]", "DONE",
         "unknown command 'DONE'"),

    Case("terminator_with_prefix.yaml", "name: label", "0}",
         "terminator: cannot be combined with prefix: the terminator is what bounds the field"),
    Case("terminator_not_bytes.yaml", "name: line", "CRLF",
         "terminator: 'CRLF' is not bytes: write an integer, a character literal"),
    Case("terminator_measured.yaml", "name: label", "0}",
         "terminator: 'label' is measured by 'n' too"),
    Case("list_terminator_too_big.yaml", "name: ids", "256",
         "terminator: 256 does not fit the list's elements (0 to 255)"),
    Case("const_wrong_length.yaml", "name: proto_name", "MQTT",
         "const: the constant is 4 bytes, but length: is 3"),
    Case("const_holds_terminator.yaml", "name: plugin", "'\"a",
         "const: the constant holds its terminator b'\\x00'"),
    Case("range_outside_type.yaml", "name: qos", "300",
         "max: 300 is outside what a u8 holds (0 to 255)"),
    Case("range_empty.yaml", "name: qos", "1}", "max: 1 is below min: 5, so no value is allowed"),
    Case("range_on_size.yaml", "name: n,", "1}",
         "min: cannot be combined with size_of: it bounds a stored value"),
    Case("range_on_bytes.yaml", "name: data", "true", "nonzero: needs an integer or varint field"),
    Case("range_on_lenenc.yaml", "name: rows", "100",
         "max: bounds on a length-encoded or max_bytes: varint are not in the language yet"),
    Case("max_items_below_min.yaml", "name: ids", "2}", "max_items: 2 is below min_items: 3"),
    Case("list_terminator_empty_element.yaml", "name: items", "0,",
         "terminator: an element of Maybe can take no bytes at all"),
    Case("range_on_measuring_size.yaml", "name: n,", "10}",
         "max: 'n' is a size the encoder computes; bound the field it measures instead"),
    Case("range_on_switch_key.yaml", "name: op,", "true}",
         "nonzero: 'op' is a switch key, whose values are its cases"),
    Case("range_default_outside.yaml", "name: qos", "5}",
         "default: 5 is not a value the field allows"),
    Case("case_key_bad_named_by_machine.yaml", "\"'OP'\": Open", "\"'OP'\"",
         "character literal 'OP' holds 2 characters"),
    Case("case_value_duplicated_named_by_machine.yaml", "\"'C'\": Open", "\"'C'\"",
         "dispatch value 67 is duplicated (also CLOSE)"),
    Case("case_struct_in_two_cases.yaml", "3: {to_client: Open}", "Open}",
         "struct 'Open' is already the layout of case 2"),
    Case("stream_iterator_method_taken.yaml", "method: ping_iter", "ping_iter",
         "the method 'ping_iter' is the iterator method of PING's streamed answer"),
    Case("bits_widths_do_not_add_up.yaml", "        bits:", "bits",
         "bits: the widths add up to 9, but a u8 has 8 bits"),
    Case("switch_case_param_without_arg.yaml", "{name: body, type: switch", "{name: body",
         "switch case Open needs args for wide"),
    Case("mask_key_after_payload.yaml", "name: payload", "key}",
         "mask: 'key' does not name a field before 'payload'"),
    Case("mask_with_prefix.yaml", "name: payload", "key}",
         "mask: cannot be combined with prefix"),
    Case("require_names_a_computed_field.yaml", "total_size < 100", '"',
         "require: 'total_size' is computed, not stored"),
]


MACHINE_CASES = [
    pytest.param(
        Case("machine_duplicate_state.yaml", "states: [idle, ready, idle]", "idle]",
             "duplicate state 'idle'"),
        id="machine_duplicate_state",
    ),
    pytest.param(
        Case("machine_states_differ_in_case.yaml", "states: [idle, ready, Idle]", "Idle",
             "Idle"),
        id="machine_states_differ_in_case",
    ),
]
