"""``protoframe init NAME``: a new protocol directory with a starter spec that generates cleanly.

The starter is a complete small protocol (a framed request/response exchange carrying one
protobuf message), commented so that each line says which part of the spec language it uses;
a user edits it into their own protocol rather than starting from an empty file.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from protoframe.generator.errors import SpecError, SpecErrors

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

PROTO = """\
// Protobuf messages of the {name} protocol, carried inside its frames ({name}.yaml).
// Every .proto file in this directory is compiled; each becomes a module of the generated
// package ({name}.proto -> {module}.py).
syntax = "proto3";

package {name};

// Sent by a client with each ECHO request.
message EchoRequest {{
  string text = 1;
  repeated string tags = 2;
}}
"""

SPEC = """\
# How frames of the {name} protocol are laid out on the wire, which commands answer which,
# and the state machine they drive. The language is described in protoframe's
# docs/spec-language.md; `protoframe generate` turns this file into frames.py (typed frames
# and a stream decoder), machines.py (sans-IO state machines) and client.py (one typed
# coroutine per request).
protocol: {name}
doc: A starter protocol, made by `protoframe init {name}`; describe yours here.
byte_order: big            # of every fixed-width integer below
max_frame_size: 1048576    # a decoder refuses larger frames from their header
proto: [{name}.proto]

structs:
  Hello:
    doc: The first frame a client sends.
    fields:
      - {{name: version, type: u8}}
      - {{name: client, type: string, prefix: u8}}      # UTF-8, its length in one byte
  Welcome:
    fields:
      - {{name: version, type: u8}}
  Echo:
    doc: A request, answered by ECHOED with the same request id.
    fields:
      - {{name: request_id, type: u32}}
      - {{name: body, type: proto, message: EchoRequest}}  # runs to the end of the frame
  Echoed:
    fields:
      - {{name: request_id, type: u32}}
      - {{name: text, type: string, prefix: u16}}
  Failure:
    fields:
      - {{name: request_id, type: u32}}
      - {{name: code, type: u16}}
      - {{name: message, type: string, prefix: u16}}

frame:
  name: Packet
  fields:
    - {{name: magic, type: u16, const: 0x5046}}      # a frame that does not start so is refused
    - {{name: length, type: u32, size_of: rest}}     # the number of bytes after this field
    - {{name: op, type: u8}}
    - name: body
      type: switch                                   # op chooses the body's layout
      on: op
      cases:
        0x01: Hello
        0x02: {{to_client: Welcome}}                  # only ever sent by the server
        0x03: Echo
        0x04: {{to_client: Echoed}}
        0x05: {{to_client: Failure}}

interactions:
  allocate: request_id                               # the client numbers its requests
  requests:
    - {{request: HELLO, response: WELCOME, errors: [FAILURE]}}
    - {{request: ECHO, response: ECHOED, errors: [FAILURE], correlate: [request_id]}}

machines:
  connection:
    doc: A handshake, then any number of echoes.
    initial: idle
    states: [idle, greeting, ready, closed]
    transitions:
      - {{from: idle, send: HELLO, to: greeting}}
      - {{from: greeting, receive: WELCOME, to: ready}}
      - {{from: greeting, receive: FAILURE, to: closed}}
      - {{from: ready, send: ECHO, to: ready}}
      - {{from: ready, receive: ECHOED, to: ready}}
      - {{from: ready, receive: FAILURE, to: ready}}
"""


def scaffold(spec_dir: Path, name: str) -> list[Path]:
    """Write ``spec_dir/name/{name}.proto`` and ``{name}.yaml``; return their paths.

    Refuses a name that is not a lower-case Python identifier, and a directory that exists.
    """
    if not _NAME.match(name) or keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise SpecErrors([SpecError(
            f"not a protocol name: {name!r} (use a lower-case Python identifier such as "
            "'kv' or 'my_proto': it names the generated package)")])
    target = spec_dir / name
    if target.exists():
        raise SpecErrors([SpecError(f"{target} exists already; protoframe init writes only a "
                                    "new protocol directory")])
    target.mkdir(parents=True)
    proto = target / f"{name}.proto"
    proto.write_text(PROTO.format(name=name, module=name), encoding="utf-8")
    spec = target / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name), encoding="utf-8")
    return [proto, spec]
