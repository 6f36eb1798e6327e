"""``const:`` on strings and bytes: AMQP's protocol header, MQTT's protocol name (a u16-prefixed
string) and MySQL's auth plugin name (a C string), written on encode, checked all at once on
decode, never stored; against bytes packed by hand with ``struct``."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.layout_ops import ConstBytes, FixedLength, Prefix
from protoframe.runtime.errors import BadMagicError, DecodeError
from tests.generator.test_layout_plan import plans
from tests.support.generate import generate_text, write_spec
from tests.support.paths import ROOT

SPEC = """\
protocol: cb
doc: Constant strings and bytes.
byte_order: big
structs:
  AmqpHeader:
    doc: AMQP 0-9-1's protocol header, "AMQP" then 0 0 9 1.
    fields:
      - {name: protocol, type: bytes, const: '"AMQP"'}
      - {name: version, type: bytes, const: "0x00000901"}
  Connect:
    doc: The start of MQTT 3.1.1's CONNECT variable header.
    fields:
      - {name: protocol_name, type: string, prefix: u16, const: MQTT}
      - {name: level, type: u8}
      - {name: flags, type: u8}
      - {name: keep_alive, type: u16}
  AuthSwitch:
    doc: The end of MySQL's handshake, its auth plugin name a C string.
    fields:
      - {name: status, type: u8}
      - {name: plugin, type: string, const: mysql_native_password, terminator: 0}
      - {name: java, type: string, encoding: mutf8, length: 4, const: "a\\0b"}
frame:
  name: Packet
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: kind, type: u8}
    - {name: body, type: switch, on: kind, cases: {1: AmqpHeader, 2: Connect, 3: AuthSwitch}}
"""


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("const_bytes"), "cb", SPEC, "cb_pkg")


def frame(kind: int, body: bytes) -> bytes:
    return struct.pack(">IB", len(body) + 1, kind) + body


AMQP = b"AMQP" + struct.pack(">BBBB", 0, 0, 9, 1)
PLUGIN = b"mysql_native_password\0" + b"a\xc0\x80b"


def connect(level: int, flags: int, keep_alive: int) -> bytes:
    return struct.pack(">H", 4) + b"MQTT" + struct.pack(">BBH", level, flags, keep_alive)


def test_the_constants_are_written_and_not_stored(frames: ModuleType) -> None:
    assert frames.Packet(body=frames.AmqpHeader()).encode() == frame(1, AMQP)
    assert frames.Packet(body=frames.Connect(level=4, flags=2, keep_alive=60)).encode() == \
        frame(2, connect(4, 2, 60))
    assert frames.Packet(body=frames.AuthSwitch(status=0xFE)).encode() == \
        frame(3, b"\xfe" + PLUGIN)
    assert [f.name for f in dataclasses.fields(frames.AuthSwitch)] == ["status"]
    assert [f.name for f in dataclasses.fields(frames.AmqpHeader)] == []


def test_the_constants_are_checked_on_decode(frames: ModuleType) -> None:
    assert frames.Packet.decode(frame(1, AMQP)).body == frames.AmqpHeader()
    assert frames.Packet.decode(frame(2, connect(4, 2, 60))).body == frames.Connect(
        level=4, flags=2, keep_alive=60)
    assert frames.Packet.decode(frame(3, b"\x01" + PLUGIN)).body == frames.AuthSwitch(status=1)


@pytest.mark.parametrize(("kind", "body", "where"), [
    (1, b"AMQX" + AMQP[4:], "AmqpHeader.protocol"),
    (1, b"AMQP" + struct.pack(">BBBB", 0, 0, 8, 0), "AmqpHeader.version"),
    (1, b"HTTP/1.1", "AmqpHeader.protocol"),
    (2, struct.pack(">H", 6) + b"MQIsdp" + bytes(4), "Connect.protocol_name"),  # MQTT 3.1's
    (2, struct.pack(">H", 4) + b"mqtt" + bytes(4), "Connect.protocol_name"),
    (3, b"\x01mysql_old_password\0\0\0\0" + PLUGIN[-4:], "AuthSwitch.plugin"),
    (3, b"\x01mysql_native_password!" + PLUGIN[-4:], "AuthSwitch.plugin"),
    (3, b"\x01" + PLUGIN[:-4] + b"a\0\0b", "AuthSwitch.java"),
])
def test_a_wrong_constant_is_bad_magic(frames: ModuleType, kind: int, body: bytes,
                                       where: str) -> None:
    with pytest.raises(BadMagicError, match=where):
        frames.Packet.decode(frame(kind, body))


def test_a_cut_constant_is_a_decode_error(frames: ModuleType) -> None:
    for kind, body in ((1, AMQP), (2, connect(4, 0, 0)), (3, b"\0" + PLUGIN)):
        for cut in range(len(body)):
            with pytest.raises(DecodeError):
                frames.Packet.decode(frame(kind, body[:cut]))


@settings(max_examples=150, deadline=None)
@given(level=st.integers(0, 255), flags=st.integers(0, 255), keep_alive=st.integers(0, 65535),
       status=st.integers(0, 255))
def test_round_trips(frames: ModuleType, level: int, flags: int, keep_alive: int,
                     status: int) -> None:
    for value, wire in (
            (frames.Connect(level=level, flags=flags, keep_alive=keep_alive),
             frame(2, connect(level, flags, keep_alive))),
            (frames.AuthSwitch(status=status), frame(3, bytes([status]) + PLUGIN))):
        packet = frames.Packet(body=value)
        assert packet.encode() == wire
        assert frames.Packet.decode(wire) == packet


def test_the_plan_holds_the_whole_wire_form(tmp_path: Path) -> None:
    p = plans(tmp_path, SPEC.replace("protocol: cb", "protocol: mini\nproto: [mini.proto]"))
    name = p["Connect"].op("protocol_name")
    assert isinstance(name, Prefix) and isinstance(name.inner, ConstBytes)
    assert name.inner.wire == b"\x00\x04MQTT"
    magic = p["AmqpHeader"].op("protocol")
    assert isinstance(magic, FixedLength) and magic.length == 4
    plugin = p["AuthSwitch"].op("plugin")
    assert isinstance(plugin, ConstBytes) and plugin.wire == b"mysql_native_password\0"
    assert p["AmqpHeader"].compiled  # constant bytes are a row of the C codec (const_bytes)


def test_constants_have_no_spark_column(tmp_path: Path) -> None:
    out = generate(write_spec(tmp_path, "cb", SPEC), "specs", ["cb"])
    spark = out.files["cb/spark.py"]
    assert 'StructField("level", ' in spark and 'StructField("status", ' in spark
    assert not any(f'"{name}"' in spark for name in ("protocol", "protocol_name", "plugin"))


def test_the_generated_module_passes_ruff(frames: ModuleType) -> None:
    assert frames.__file__ is not None
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
         str(ROOT / "pyproject.toml"), frames.__file__],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_generated_package_type_checks(frames: ModuleType) -> None:
    assert frames.__file__ is not None
    package = Path(frames.__file__).parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file",
         str(ROOT / "pyproject.toml"), str(package)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
